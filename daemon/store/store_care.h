/* Store care: an online backup, the retention prune and the file sizes /metrics
 * reports (docs/DEPLOY.md "Backup and prune"). */
#ifndef NUMVAL_DAEMON_STORE_CARE_H
#define NUMVAL_DAEMON_STORE_CARE_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

typedef struct nvd_backup_stats {
    int64_t pages, bytes;
} nvd_backup_stats;

/* Copy the database s reads into a new file dest with SQLite's online backup
 * (sqlite3_backup_*): all pages in one step, so one read transaction, which in
 * WAL mode is a consistent snapshot while numvald keeps writing. The copy is
 * written to dest.tmp, fsynced, checked (PRAGMA quick_check) and renamed to
 * dest, in rollback-journal mode so that it is one self-contained file. dest
 * must not exist (-EEXIST). A message goes to *ret_err on failure (malloc'd). */
int nvd_store_backup(nvd_store *s, const char *dest, nvd_backup_stats *st, char **ret_err);

typedef struct nvd_prune_policy {
    int case_days;     /* case rows of jobs finished longer ago; 0: keep forever */
    int artifact_days; /* artifacts stored longer ago; 0: keep forever */
    bool dry_run;      /* count only */
} nvd_prune_policy;

typedef struct nvd_prune_stats {
    int64_t jobs, cases, case_bytes;   /* jobs whose cases went, cases, bytes of their data */
    int64_t artifacts, artifact_bytes; /* artifacts and their compressed bytes */
    int64_t kept_suite_cases;          /* old cases kept as suite origins or occurrences */
    int64_t kept_artifacts;            /* old artifacts kept (suite or a kept case uses them) */
} nvd_prune_stats;

/* Delete what the policy lets go, in short transactions (a serving numvald's
 * writes wait at most one batch). Kept forever: suite cases' reproducers and
 * origin artifacts, the origin and occurrence cases of suite cases, any
 * artifact a kept case names, jobs themselves (their summary and result). */
int nvd_store_prune(nvd_store *s, const nvd_prune_policy *p, int64_t now_ms, nvd_prune_stats *st);

typedef struct nvd_store_sizes {
    int64_t file_bytes; /* page_count * page_size */
    int64_t free_bytes; /* freelist pages: reused by later writes */
    int64_t wal_bytes;  /* the -wal file, -1 when it cannot be read */
} nvd_store_sizes;

int nvd_store_sizes_get(nvd_store *s, nvd_store_sizes *ret);

#endif
