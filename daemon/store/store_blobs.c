/* Artifacts (content-addressed zstd blobs) and tokens. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

int nvd_store_artifact_put(nvd_store *s, const char *sha256, const void *blob, size_t len,
                           int64_t raw_size, int64_t now, bool *ret_existed)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "INSERT OR IGNORE INTO artifacts (sha256, blob, size, "
                                     "raw_size, created_at) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, sha256);
    sqlite3_bind_blob64(st, 2, blob, len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, (int64_t)len);
    sqlite3_bind_int64(st, 4, raw_size);
    sqlite3_bind_int64(st, 5, now);
    r = store_err(s, sqlite3_step(st), "put artifact");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (r == 0)
        *ret_existed = sqlite3_changes(s->db) == 0;
out:
    return store_write_end(s, r);
}

int nvd_store_artifact_get(nvd_store *s, const char *sha256, void **ret_blob, size_t *ret_len)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT blob FROM artifacts WHERE sha256 = ?1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, sha256);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(st, 0);
        void *buf = malloc(n ? n : 1);
        if (!buf) {
            r = -ENOMEM;
        } else {
            if (n)
                memcpy(buf, sqlite3_column_blob(st, 0), n);
            *ret_blob = buf;
            *ret_len = n;
        }
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "get artifact");
    }
    sqlite3_reset(st);
    return r;
}

int nvd_store_artifacts_stats(nvd_store *s, int64_t *ret_count, int64_t *ret_bytes)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM artifacts");
    if (!st)
        return -EIO;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *ret_count = sqlite3_column_int64(st, 0);
        *ret_bytes = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? 0 : store_err(s, rc, "artifact stats");
}

int nvd_store_token_add(nvd_store *s, const char *name, const char *hash, const char *scopes,
                        const char *devices, int64_t now)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "INSERT INTO tokens (name, hash, scopes, created_at, devices) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, name);
    store_bind_text(st, 2, hash);
    store_bind_text(st, 3, scopes);
    sqlite3_bind_int64(st, 4, now);
    if (devices)
        store_bind_text(st, 5, devices);
    else
        sqlite3_bind_null(st, 5);
    r = store_err(s, sqlite3_step(st), "add token");
    sqlite3_reset(st);
out:
    return store_write_end(s, r);
}

int nvd_store_token_find(nvd_store *s, const char *hash, char **ret_name, char **ret_scopes,
                         char **ret_devices)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT name, scopes, devices FROM tokens WHERE hash = ?1 AND "
                                     "revoked_at IS NULL");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, hash);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        bool bound = sqlite3_column_type(st, 2) != SQLITE_NULL;
        char *n = store_col_dup(st, 0), *sc = store_col_dup(st, 1);
        char *dv = bound && ret_devices ? store_col_dup(st, 2) : NULL;
        if (!n || !sc || (bound && ret_devices && !dv)) {
            free(n);
            free(sc);
            free(dv);
            r = -ENOMEM;
        } else {
            *ret_name = n;
            *ret_scopes = sc;
            if (ret_devices)
                *ret_devices = dv;
        }
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "find token");
    }
    sqlite3_reset(st);
    return r;
}

int nvd_store_token_revoke(nvd_store *s, const char *name, int64_t now)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND "
                                     "revoked_at IS NULL");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, name);
    sqlite3_bind_int64(st, 2, now);
    r = store_err(s, sqlite3_step(st), "revoke token");
    sqlite3_reset(st);
    if (r == 0 && sqlite3_changes(s->db) == 0)
        r = -ENOENT;
out:
    return store_write_end(s, r);
}

static const store_col token_cols[] = {
    {"name", 0, STORE_STR},
    {"scopes", 1, STORE_STR},
    {"created_at", 2, STORE_TIME},
    {"revoked_at", 3, STORE_TIME},
    {"devices", 4, STORE_STR}, /* NULL: not bound to devices */
    {NULL, 0, 0},
};

int nvd_store_tokens_list(nvd_store *s, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT name, scopes, created_at, revoked_at, devices "
                                     "FROM tokens ORDER BY id LIMIT 100000");
    if (!st)
        return -EIO;
    int r = store_rows_json(s, st, "list tokens", store_row_cols, token_cols, ret);
    sqlite3_reset(st);
    return r;
}
