/* Registered builds: the backend a build names (schema/005_build_backend.sql). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

int nvd_store_build_register(nvd_store *s, const char *hash, const char *identity_json,
                             const char *backend, int64_t now, char **ret_existing)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    char *have = NULL;
    /* The identity row first (as a job naming the build would make it), so a
     * build registered after jobs named it keeps its place in the order. */
    r = nvd_store_build_put(s, hash, identity_json, now);
    if (r < 0)
        goto out;
    r = nvd_store_build_backend(s, hash, &have);
    if (r < 0)
        goto out;
    if (have) {
        /* Results already stored for the build were made with this backend:
         * another one would make them ambiguous. */
        r = strcmp(have, backend) == 0 ? 0 : -EEXIST;
        goto out;
    }
    sqlite3_stmt *st = store_stmt(s, "UPDATE builds SET backend = ?2 WHERE hash = ?1");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, hash);
    store_bind_text(st, 2, backend);
    r = store_err(s, sqlite3_step(st), "register build");
    sqlite3_reset(st);
out:
    r = store_write_end(s, r);
    if (r == -EEXIST && ret_existing) {
        *ret_existing = have;
        have = NULL;
    }
    free(have);
    return r;
}

int nvd_store_build_backend(nvd_store *s, const char *hash, char **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT backend FROM builds WHERE hash = ?1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, hash);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_err(s, rc, "build backend");
    char *b = rc == SQLITE_ROW ? store_col_dup(st, 0) : NULL;
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL && !b)
        r = -ENOMEM;
    sqlite3_reset(st);
    if (r < 0) {
        free(b);
        return r;
    }
    *ret = b;
    return 0;
}

int nvd_store_build_predecessor(nvd_store *s, const char *hash, char **ret)
{
    /* Prepared per call: it runs on the threadpool's read-only connections
     * as well as on the loop's. */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT p.hash FROM builds b JOIN builds p ON "
                                "(p.created_at, p.rowid) < (b.created_at, b.rowid) "
                                "WHERE b.hash = ?1 ORDER BY p.created_at DESC, p.rowid DESC "
                                "LIMIT 1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_err(s, rc, "build predecessor");
    }
    store_bind_text(st, 1, hash);
    rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "predecessor");
    if (r == 0 && !(*ret = store_col_dup(st, 0)))
        r = -ENOMEM;
    sqlite3_finalize(st);
    return r;
}
