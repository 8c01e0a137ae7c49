/* Store care: online backup (sqlite3_backup_*), retention prune, file sizes. */
#include "store_care.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "store_internal.h"

static int fail(char **ret_err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char **ret_err, int r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (ret_err)
        *ret_err = strdup(buf);
    return r;
}

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The folder of path, for the fsync that makes the rename durable. */
static void dir_of(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    char *sl = strrchr(buf, '/');
    if (!sl)
        snprintf(buf, len, ".");
    else if (sl == buf)
        buf[1] = '\0';
    else
        *sl = '\0';
}

int nvd_store_backup(nvd_store *s, const char *dest, nvd_backup_stats *st, char **ret_err)
{
    struct stat sb;
    if (lstat(dest, &sb) == 0)
        return fail(ret_err, -EEXIST, "backup file '%s' exists; name a new file", dest);
    size_t n = strlen(dest) + 8;
    char *tmp = malloc(n);
    if (!tmp)
        return -ENOMEM;
    snprintf(tmp, n, "%s.tmp", dest);
    unlink(tmp); /* a failed earlier backup's leftover */
    sqlite3 *d = NULL;
    int r = 0, rc = sqlite3_open_v2(tmp, &d, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        r = fail(ret_err, -EIO, "cannot create '%s': %s", tmp,
                 d ? sqlite3_errmsg(d) : sqlite3_errstr(rc));
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(d, "main", s->db, "main");
    if (!b) {
        r = fail(ret_err, -EIO, "cannot start the backup: %s", sqlite3_errmsg(d));
        goto out;
    }
    /* -1: every page in one step, i.e. under one read transaction of the source,
     * a snapshot no concurrent writer changes (WAL). BUSY/LOCKED: a checkpoint or
     * recovery holds the source for a moment; retry for up to 30 s. */
    for (int tries = 0;; tries++) {
        rc = sqlite3_backup_step(b, -1);
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || tries >= 300)
            break;
        sleep_ms(100);
    }
    int64_t pages = sqlite3_backup_pagecount(b);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        r = fail(ret_err, -EIO, "backup failed: %s", sqlite3_errstr(rc));
        goto out;
    }
    /* One self-contained file: rollback journal, not WAL (the source's mode is
     * in the copied header). Then check what was written. */
    char *msg = NULL;
    rc = sqlite3_exec(d, "PRAGMA journal_mode = DELETE", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        r = fail(ret_err, -EIO, "backup: journal_mode: %s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        goto out;
    }
    sqlite3_stmt *q = NULL;
    rc = sqlite3_prepare_v2(d, "PRAGMA quick_check", -1, &q, NULL);
    const char *verdict = NULL;
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        verdict = (const char *)sqlite3_column_text(q, 0);
    if (!verdict || strcmp(verdict, "ok")) {
        r = fail(ret_err, -EIO, "backup copy fails PRAGMA quick_check: %s",
                 verdict ? verdict : sqlite3_errmsg(d));
        sqlite3_finalize(q);
        goto out;
    }
    sqlite3_finalize(q);
    int64_t page_size = 0;
    rc = sqlite3_prepare_v2(d, "PRAGMA page_size", -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        page_size = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    rc = sqlite3_close(d);
    d = NULL;
    if (rc != SQLITE_OK) {
        r = fail(ret_err, -EIO, "cannot close '%s': %s", tmp, sqlite3_errstr(rc));
        goto out;
    }
    char dir[4096];
    dir_of(dest, dir, sizeof(dir));
    if ((r = fsync_path(tmp, O_RDONLY)) < 0 || (rename(tmp, dest) < 0 && (r = -errno)) ||
        (r = fsync_path(dir, O_RDONLY | O_DIRECTORY)) < 0) {
        r = fail(ret_err, r, "cannot write '%s': %s", dest, strerror(-r));
        goto out;
    }
    if (st) {
        st->pages = pages;
        st->bytes = pages * page_size;
    }
out:
    if (d)
        sqlite3_close(d);
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

static int64_t one_int(nvd_store *s, const char *sql, int64_t bind1, int *rc_out)
{
    sqlite3_stmt *st = store_stmt(s, sql);
    int64_t v = 0;
    if (!st) {
        *rc_out = -EIO;
        return 0;
    }
    if (sqlite3_bind_parameter_count(st) >= 1)
        sqlite3_bind_int64(st, 1, bind1);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else
        *rc_out = store_err(s, rc, sql);
    sqlite3_reset(st);
    return v;
}

/* A case is kept when a suite case names it as its origin or an occurrence. */
#define CASE_KEPT                                                                                  \
    "(EXISTS (SELECT 1 FROM suite_cases sc WHERE sc.origin_job = c.job_id AND "                    \
    "sc.origin_case = c.idx) OR EXISTS (SELECT 1 FROM suite_occurrences so WHERE "                 \
    "so.job_id = c.job_id AND so.case_idx = c.idx))"

static int prune_cases(nvd_store *s, const nvd_prune_policy *p, int64_t cutoff, nvd_prune_stats *st)
{
    /* The jobs first (a read), then one short write per job. */
    sqlite3_stmt *jobs = store_stmt(s, "SELECT id FROM jobs WHERE finished_at < ?1 AND "
                                       "EXISTS (SELECT 1 FROM cases WHERE job_id = jobs.id) "
                                       "ORDER BY id");
    if (!jobs)
        return -EIO;
    sqlite3_bind_int64(jobs, 1, cutoff);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(jobs)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t *ni = realloc(ids, cap * sizeof(*ids));
            if (!ni) {
                sqlite3_reset(jobs);
                free(ids);
                return -ENOMEM;
            }
            ids = ni;
        }
        ids[n++] = sqlite3_column_int64(jobs, 0);
    }
    sqlite3_reset(jobs);
    if (rc != SQLITE_DONE) {
        free(ids);
        return store_err(s, rc, "prune: jobs");
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        r = store_write_begin(s);
        if (r < 0)
            break;
        int64_t cnt = one_int(
            s, "SELECT COUNT(*) FROM cases c WHERE c.job_id = ?1 AND NOT " CASE_KEPT, ids[i], &r);
        int64_t bytes = one_int(s,
                                "SELECT COALESCE(SUM(length(c.data)), 0) FROM cases c "
                                "WHERE c.job_id = ?1 AND NOT " CASE_KEPT,
                                ids[i], &r);
        int64_t kept = one_int(s, "SELECT COUNT(*) FROM cases c WHERE c.job_id = ?1 AND " CASE_KEPT,
                               ids[i], &r);
        if (r == 0 && cnt > 0 && !p->dry_run) {
            sqlite3_stmt *del =
                store_stmt(s, "DELETE FROM cases AS c WHERE c.job_id = ?1 AND NOT " CASE_KEPT);
            if (!del) {
                r = -EIO;
            } else {
                sqlite3_bind_int64(del, 1, ids[i]);
                rc = sqlite3_step(del);
                sqlite3_reset(del);
                if (rc != SQLITE_DONE)
                    r = store_err(s, rc, "prune: delete cases");
            }
        }
        r = store_write_end(s, r);
        if (r == 0) {
            st->jobs += cnt > 0;
            st->cases += cnt;
            st->case_bytes += bytes;
            st->kept_suite_cases += kept;
        }
    }
    free(ids);
    return r;
}

/* An artifact is kept when the suite uses it (reproducer, origin, occurrence) or
 * a case names it: the cases that existed when prune began (temp.nv_keep_art)
 * or any inserted since (id above the highest one then), so a case that arrives
 * during the prune never loses its artifact. */
#define ART_KEPT                                                                                   \
    "(a.sha256 IN (SELECT artifact FROM suite_cases) OR "                                          \
    "a.sha256 IN (SELECT origin_artifact FROM suite_cases WHERE origin_artifact IS NOT NULL) "     \
    "OR a.sha256 IN (SELECT artifact FROM suite_occurrences WHERE artifact IS NOT NULL) OR "       \
    "a.sha256 IN (SELECT sha FROM temp.nv_keep_art) OR EXISTS (SELECT 1 FROM cases c "             \
    "WHERE c.id > ?2 AND json_extract(c.data, '$.artifact') = a.sha256))"

/* Runs sql (no result rows) on the store's connection; -EIO logged on failure. */
static int exec_sql(nvd_store *s, const char *sql, const char *what)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        nv_log_err("prune: %s: %s", what, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -EIO;
    }
    return 0;
}

/* The artifacts in (lo, hi] of the candidate rowids that nothing keeps. */
#define ART_BATCH                                                                                  \
    "FROM artifacts AS a WHERE a.rowid IN (SELECT rid FROM temp.nv_old_art WHERE rid > ?3 AND "    \
    "rid <= ?4) AND a.created_at < ?1 AND NOT " ART_KEPT

static int prune_artifacts(nvd_store *s, const nvd_prune_policy *p, int64_t cutoff,
                           nvd_prune_stats *st)
{
    int r = 0;
    int64_t max_case = one_int(s, "SELECT COALESCE(MAX(id), 0) FROM cases", 0, &r);
    if (r < 0)
        return r;
    /* Two scans, each once: the artifacts cases name, and the old artifacts'
     * rowids (created_at follows the blob in a row, so reading it walks the
     * blob's overflow pages: one pass over the table, not one per batch). */
    r = exec_sql(s,
                 "DROP TABLE IF EXISTS temp.nv_keep_art;"
                 "CREATE TEMP TABLE nv_keep_art (sha TEXT PRIMARY KEY) WITHOUT ROWID;"
                 "INSERT OR IGNORE INTO temp.nv_keep_art SELECT json_extract(data, "
                 "'$.artifact') FROM cases WHERE json_extract(data, '$.artifact') IS NOT NULL;"
                 "DROP TABLE IF EXISTS temp.nv_old_art;"
                 "CREATE TEMP TABLE nv_old_art (rid INTEGER PRIMARY KEY);",
                 "the artifacts cases name");
    if (r == 0) {
        sqlite3_stmt *q =
            store_stmt(s, "INSERT INTO temp.nv_old_art SELECT rowid FROM artifacts WHERE "
                          "created_at < ?1");
        if (!q) {
            r = -EIO;
        } else {
            sqlite3_bind_int64(q, 1, cutoff);
            int rc = sqlite3_step(q);
            sqlite3_reset(q);
            if (rc != SQLITE_DONE)
                r = store_err(s, rc, "prune: old artifacts");
        }
    }
    int64_t n_old = r == 0 ? one_int(s, "SELECT COUNT(*) FROM temp.nv_old_art", 0, &r) : 0;
    /* Batches of 200 rowids (at most 200 x max_artifact_body freed per transaction). */
    for (int64_t lo = 0; r == 0;) {
        int64_t hi = one_int(s,
                             "SELECT COALESCE(MAX(rid), 0) FROM (SELECT rid FROM temp.nv_old_art "
                             "WHERE rid > ?1 ORDER BY rid LIMIT 200)",
                             lo, &r);
        if (r < 0 || hi == 0)
            break;
        r = store_write_begin(s);
        if (r < 0)
            break;
        int64_t cnt = 0, bytes = 0;
        sqlite3_stmt *q = store_stmt(s, "SELECT COUNT(*), COALESCE(SUM(a.size), 0) " ART_BATCH);
        if (!q) {
            r = -EIO;
        } else {
            sqlite3_bind_int64(q, 1, cutoff);
            sqlite3_bind_int64(q, 2, max_case);
            sqlite3_bind_int64(q, 3, lo);
            sqlite3_bind_int64(q, 4, hi);
            int rc = sqlite3_step(q);
            if (rc == SQLITE_ROW) {
                cnt = sqlite3_column_int64(q, 0);
                bytes = sqlite3_column_int64(q, 1);
            } else {
                r = store_err(s, rc, "prune: artifacts");
            }
            sqlite3_reset(q);
        }
        if (r == 0 && cnt > 0 && !p->dry_run) {
            sqlite3_stmt *del = store_stmt(s, "DELETE " ART_BATCH);
            if (!del) {
                r = -EIO;
            } else {
                sqlite3_bind_int64(del, 1, cutoff);
                sqlite3_bind_int64(del, 2, max_case);
                sqlite3_bind_int64(del, 3, lo);
                sqlite3_bind_int64(del, 4, hi);
                int rc = sqlite3_step(del);
                sqlite3_reset(del);
                if (rc != SQLITE_DONE)
                    r = store_err(s, rc, "prune: delete artifacts");
            }
        }
        r = store_write_end(s, r);
        if (r == 0) {
            st->artifacts += cnt;
            st->artifact_bytes += bytes;
        }
        lo = hi;
    }
    if (r == 0)
        st->kept_artifacts = n_old - st->artifacts;
    exec_sql(s, "DROP TABLE IF EXISTS temp.nv_keep_art; DROP TABLE IF EXISTS temp.nv_old_art",
             "temp tables");
    return r;
}

int nvd_store_prune(nvd_store *s, const nvd_prune_policy *p, int64_t now_ms, nvd_prune_stats *st)
{
    memset(st, 0, sizeof(*st));
    int r = 0;
    if (p->case_days > 0)
        r = prune_cases(s, p, now_ms - (int64_t)p->case_days * 86400000, st);
    /* After the cases: artifacts only they named are free to go now. */
    if (r == 0 && p->artifact_days > 0)
        r = prune_artifacts(s, p, now_ms - (int64_t)p->artifact_days * 86400000, st);
    return r;
}

int nvd_store_sizes_get(nvd_store *s, nvd_store_sizes *ret)
{
    int r = 0;
    int64_t pages = one_int(s, "PRAGMA page_count", 0, &r);
    int64_t size = one_int(s, "PRAGMA page_size", 0, &r);
    int64_t free_pages = one_int(s, "PRAGMA freelist_count", 0, &r);
    if (r < 0)
        return r;
    ret->file_bytes = pages * size;
    ret->free_bytes = free_pages * size;
    ret->wal_bytes = -1;
    const char *db = sqlite3_db_filename(s->db, "main");
    if (db && *db) {
        char wal[4096];
        struct stat sb;
        snprintf(wal, sizeof(wal), "%s-wal", db);
        if (stat(wal, &sb) == 0)
            ret->wal_bytes = sb.st_size;
    }
    return 0;
}
