/* Idempotency keys of job submission (store_idempotency.h). */
#include "store_idempotency.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_internal.h"

int nvd_store_idem_get(nvd_store *s, const char *principal, const char *key, int64_t since,
                       int64_t *ret_job, char body_sha256[65])
{
    sqlite3_stmt *st = store_stmt(s, "SELECT job_id, body_sha256 FROM idempotency_keys "
                                     "WHERE principal = ?1 AND key = ?2 AND created_at >= ?3");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, principal);
    store_bind_text(st, 2, key);
    sqlite3_bind_int64(st, 3, since);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW    ? 0
            : rc == SQLITE_DONE ? -ENOENT
                                : store_err(s, rc, "idempotency key");
    if (r == 0) {
        *ret_job = sqlite3_column_int64(st, 0);
        const char *h = (const char *)sqlite3_column_text(st, 1);
        snprintf(body_sha256, 65, "%s", h ? h : "");
    }
    sqlite3_reset(st);
    return r;
}

static int step_done(nvd_store *s, sqlite3_stmt *st, const char *what)
{
    if (!st)
        return -EIO;
    int r = store_err(s, sqlite3_step(st), what);
    sqlite3_reset(st);
    return r;
}

int nvd_store_idem_put(nvd_store *s, const char *principal, const char *key,
                       const char *body_sha256, int64_t job_id, int64_t now, int64_t since,
                       int64_t max_keys)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "DELETE FROM idempotency_keys WHERE created_at < ?1 OR "
                                     "(principal = ?2 AND key = ?3)");
    if (st) {
        sqlite3_bind_int64(st, 1, since);
        store_bind_text(st, 2, principal);
        store_bind_text(st, 3, key);
    }
    r = step_done(s, st, "expire idempotency keys");
    if (r == 0) {
        st = store_stmt(s, "INSERT INTO idempotency_keys (principal, key, body_sha256, job_id, "
                           "created_at) VALUES (?1, ?2, ?3, ?4, ?5)");
        if (st) {
            store_bind_text(st, 1, principal);
            store_bind_text(st, 2, key);
            store_bind_text(st, 3, body_sha256);
            sqlite3_bind_int64(st, 4, job_id);
            sqlite3_bind_int64(st, 5, now);
        }
        r = step_done(s, st, "idempotency key");
    }
    if (r == 0) {
        /* ids grow with each insert: at most max_keys rows have an id in
         * (newest - max_keys, newest], so this keeps the newest max_keys. */
        int64_t newest = sqlite3_last_insert_rowid(s->db);
        st = store_stmt(s, "DELETE FROM idempotency_keys WHERE id <= ?1");
        if (st)
            sqlite3_bind_int64(st, 1, newest - max_keys);
        r = step_done(s, st, "bound idempotency keys");
    }
    return store_write_end(s, r);
}

int nvd_store_idem_count(nvd_store *s, int64_t *ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT COUNT(*) FROM idempotency_keys");
    if (!st)
        return -EIO;
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : store_err(s, rc, "count idempotency keys");
    if (r == 0)
        *ret = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return r;
}
