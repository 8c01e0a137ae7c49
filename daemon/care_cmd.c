#include "care_cmd.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/store/store_care.h"
#include "daemon/util/util.h"

/* The data dir's database, which must exist: backup and prune never create one
 * (a wrong --data-dir would otherwise back up an empty new store). */
static int open_existing(const nvd_config *cfg, bool read_only, nvd_store **ret)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/numvald.db", cfg->data_dir) >= (int)sizeof(path)) {
        fprintf(stderr, "numvald: data dir path is too long\n");
        return -ENAMETOOLONG;
    }
    if (access(path, F_OK) < 0) {
        fprintf(stderr, "numvald: no database at '%s' (check --data-dir / [server] data_dir): %s\n",
                path, strerror(errno));
        return -ENOENT;
    }
    nvd_store_opts o = {.read_only = read_only, .sync_full = cfg->sync_full};
    char *err = NULL;
    int r = nvd_store_open(path, &o, ret, &err);
    if (r < 0) {
        fprintf(stderr, "numvald: %s\n", err ? err : strerror(-r));
        free(err);
    }
    return r;
}

/* A reader of a WAL database creates db-wal and db-shm when they are missing (a
 * stopped numvald removed them), and as a reader it cannot remove them again: made
 * by another user (root), they would keep numvald from opening its own store. */
static int check_owner(const nvd_config *cfg)
{
    char db[PATH_MAX], shm[PATH_MAX + 8];
    snprintf(db, sizeof(db), "%s/numvald.db", cfg->data_dir);
    snprintf(shm, sizeof(shm), "%s-shm", db);
    struct stat st;
    if (stat(db, &st) < 0 || st.st_uid == geteuid() || access(shm, F_OK) == 0)
        return 0;
    struct passwd *pw = getpwuid(st.st_uid);
    fprintf(stderr,
            "numvald: '%s' belongs to %s and numvald is not running (no -shm file): run the "
            "backup as that user (sudo -u %s numvald ... backup FILE), so the WAL files SQLite "
            "creates stay the store owner's\n",
            db, pw ? pw->pw_name : "another user", pw ? pw->pw_name : "OWNER");
    return -EPERM;
}

int nvd_backup_cmd(const nvd_config *cfg, const char *dest)
{
    nvd_store *s = NULL;
    if (check_owner(cfg) < 0)
        return 2;
    /* Read-only: in WAL mode a reader neither blocks numvald's writes nor is
     * blocked by them, and the backup reads one snapshot (store_care.h). */
    if (open_existing(cfg, true, &s) < 0)
        return 1;
    nvd_backup_stats st = {0};
    char *err = NULL;
    int r = nvd_store_backup(s, dest, &st, &err);
    nvd_store_free(s);
    if (r < 0) {
        fprintf(stderr, "numvald: %s\n", err ? err : strerror(-r));
        free(err);
        return r == -EEXIST ? 2 : 1;
    }
    printf("backup: %s: %lld pages, %lld bytes\n", dest, (long long)st.pages, (long long)st.bytes);
    return 0;
}

int nvd_prune_cmd(const nvd_config *cfg, bool dry_run)
{
    nvd_prune_policy p = {.case_days = cfg->retention_case_days,
                          .artifact_days = cfg->retention_artifact_days,
                          .dry_run = dry_run};
    if (p.case_days == 0 && p.artifact_days == 0) {
        printf("prune: [retention] case_days and artifact_days are 0 (keep forever): nothing to "
               "prune\n");
        return 0;
    }
    nvd_store *s = NULL;
    if (open_existing(cfg, false, &s) < 0)
        return 1;
    nvd_prune_stats st;
    int r = nvd_store_prune(s, &p, nvd_now_ms(), &st);
    nvd_store_sizes sz = {0};
    if (r == 0)
        r = nvd_store_sizes_get(s, &sz);
    nvd_store_free(s);
    if (r < 0) {
        fprintf(stderr, "numvald: prune failed: %s (what was deleted before stays deleted)\n",
                strerror(-r));
        return 1;
    }
    printf("prune%s: case_days %d, artifact_days %d\n", dry_run ? " (dry run)" : "", p.case_days,
           p.artifact_days);
    printf("%s: cases %lld (%lld bytes) of %lld jobs, artifacts %lld (%lld bytes)\n",
           dry_run ? "would delete" : "deleted", (long long)st.cases, (long long)st.case_bytes,
           (long long)st.jobs, (long long)st.artifacts, (long long)st.artifact_bytes);
    printf("kept: %lld old suite cases, %lld old artifacts (the suite or a kept case uses them)\n",
           (long long)st.kept_suite_cases, (long long)st.kept_artifacts);
    if (dry_run && p.case_days > 0 && p.artifact_days > 0)
        printf("note: artifacts counted as if the cases stayed; a real run also frees the "
               "artifacts only pruned cases named\n");
    printf("store: %lld bytes, %lld free for reuse\n", (long long)sz.file_bytes,
           (long long)sz.free_bytes);
    return 0;
}
