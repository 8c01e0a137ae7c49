/* Tolerances, builds, devices, artifacts and tokens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/util/util.h"
#include "store_internal.h"

/* Run a one-row write statement whose bindings the caller already made. */
static int step_write(nvd_store *s, sqlite3_stmt *st, const char *what)
{
    int r = store_err(s, sqlite3_step(st), what);
    sqlite3_reset(st);
    return r;
}

#define TOL_COLS "id, op, dtype, mode, version, metric, reason_code, reason, author, created_at"

/* A tolerance row of TOL_COLS, with its tolerance JSON (column 5) under
 * "tolerance", which also gets the row's reason and version. */
static const store_col tol_cols[] = {
    {"id", 0, STORE_INT},          {"op", 1, STORE_STR},
    {"dtype", 2, STORE_STR},       {"mode", 3, STORE_STR},
    {"version", 4, STORE_INT},     {"reason_code", 6, STORE_STR},
    {"reason", 7, STORE_STR},      {"author", 8, STORE_STR},
    {"created_at", 9, STORE_TIME}, {NULL, 0, 0},
};
static const store_col tol_inner_cols[] = {
    {"reason_code", 6, STORE_STR},
    {"reason", 7, STORE_STR},
    {"version", 4, STORE_INT},
    {NULL, 0, 0},
};

static json_t *tolerance_row(nvd_store *s, sqlite3_stmt *st, const void *arg)
{
    (void)s;
    (void)arg;
    json_t *tol = store_col_json(st, 5);
    if (!json_is_object(tol)) {
        json_decref(tol);
        tol = json_object();
    }
    json_t *row = store_row_object(st, tol_cols);
    if (!tol || !row || store_row_set(tol, st, tol_inner_cols) < 0) {
        json_decref(tol);
        json_decref(row);
        return NULL;
    }
    if (json_object_set_new(row, "tolerance", tol) < 0) {
        json_decref(row);
        return NULL;
    }
    return row;
}

int nvd_store_tolerance_add(nvd_store *s, const nvd_tolerance_new *t, int64_t now, json_t **ret)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(
        s, "INSERT INTO tolerances (op, dtype, mode, version, metric, reason_code, reason, "
           "author, created_at) SELECT ?1, ?2, ?3, COALESCE(MAX(version), 0) + 1, ?4, ?5, ?6, "
           "?7, ?8 FROM tolerances WHERE op = ?1 AND dtype = ?2 RETURNING " TOL_COLS);
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, t->op);
    store_bind_text(st, 2, t->dtype);
    store_bind_text(st, 3, t->mode ? t->mode : "*");
    store_bind_text(st, 4, t->metric_json);
    store_bind_text(st, 5, t->reason_code);
    store_bind_text(st, 6, t->reason);
    store_bind_text(st, 7, t->author ? t->author : "unknown");
    sqlite3_bind_int64(st, 8, now);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        json_t *row = tolerance_row(s, st, NULL);
        sqlite3_step(st);
        if (!row)
            r = -ENOMEM;
        else
            *ret = row;
    } else {
        r = store_err(s, rc, "add tolerance");
        if (r == 0)
            r = -EIO;
    }
    sqlite3_reset(st);
out:
    return store_write_end(s, r);
}

int nvd_store_tolerances_list(nvd_store *s, const char *op, const char *dtype, bool history,
                              json_t **ret)
{
    sqlite3_stmt *st =
        history ? store_stmt(s, "SELECT " TOL_COLS " FROM tolerances WHERE "
                                "(?1 IS NULL OR op = ?1) AND (?2 IS NULL OR dtype = ?2) "
                                "ORDER BY op, dtype, version DESC LIMIT 10000")
                : store_stmt(s, "SELECT " TOL_COLS " FROM tolerances t WHERE "
                                "(?1 IS NULL OR op = ?1) AND (?2 IS NULL OR dtype = ?2) AND "
                                "version = (SELECT MAX(version) FROM tolerances u WHERE "
                                "u.op = t.op AND u.dtype = t.dtype AND u.mode = t.mode) "
                                "ORDER BY op, dtype, mode LIMIT 10000");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, op);
    store_bind_text(st, 2, dtype);
    int r = store_rows_json(s, st, "list tolerances", tolerance_row, NULL, ret);
    sqlite3_reset(st);
    return r;
}

int nvd_store_build_put(nvd_store *s, const char *hash, const char *identity_json, int64_t now)
{
    json_t *id = json_loads(identity_json, 0, NULL);
    int r = store_write_begin(s);
    if (r < 0) {
        json_decref(id);
        return r;
    }
    sqlite3_stmt *st = store_stmt(s, "INSERT OR IGNORE INTO builds (hash, identity, name, "
                                     "version, commit_id, created_at) VALUES (?1,?2,?3,?4,?5,?6)");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, hash);
    store_bind_text(st, 2, identity_json);
    store_bind_text(st, 3, json_string_value(json_object_get(id, "name")));
    store_bind_text(st, 4, json_string_value(json_object_get(id, "version")));
    store_bind_text(st, 5, json_string_value(json_object_get(id, "commit")));
    sqlite3_bind_int64(st, 6, now);
    r = step_write(s, st, "put build");
out:
    json_decref(id);
    return store_write_end(s, r);
}

static const store_col build_cols[] = {
    {"id", 0, STORE_STR},
    {"identity", 1, STORE_JSON},
    {"created_at", 2, STORE_TIME},
    {"jobs", 3, STORE_INT},
    {"backend", 4, STORE_STR},
    {NULL, 0, 0},
};

int nvd_store_builds_list(nvd_store *s, int limit, json_t **ret)
{
    sqlite3_stmt *st =
        store_stmt(s, "SELECT b.hash, b.identity, b.created_at, "
                      "(SELECT COUNT(*) FROM jobs j WHERE j.build_hash = b.hash), b.backend "
                      "FROM builds b ORDER BY b.created_at DESC, b.rowid DESC LIMIT ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int(st, 1, limit);
    int r = store_rows_json(s, st, "list builds", store_row_cols, build_cols, ret);
    sqlite3_reset(st);
    return r;
}

int nvd_store_device_declare(nvd_store *s, const char *name, const char *backend, int slots,
                             int64_t now)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(
        s, "INSERT INTO devices (name, backend, slots, local, state, updated_at) "
           "VALUES (?1, ?2, ?3, 1, 'starting', ?4) ON CONFLICT(name) DO UPDATE SET "
           "backend = excluded.backend, slots = excluded.slots, local = 1, state = 'starting', "
           "quarantine_reason = NULL, updated_at = excluded.updated_at");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, name);
    store_bind_text(st, 2, backend);
    sqlite3_bind_int(st, 3, slots);
    sqlite3_bind_int64(st, 4, now);
    r = step_write(s, st, "declare device");
out:
    return store_write_end(s, r);
}

static char *dump_or_null(const json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

int nvd_store_device_seen(nvd_store *s, const char *name, const json_t *describe, int64_t now)
{
    char *d = dump_or_null(describe);
    char *c = dump_or_null(json_object_get(describe, "contract"));
    char *m = dump_or_null(json_object_get(describe, "mode"));
    int r = store_write_begin(s);
    if (r < 0)
        goto out_free;
    sqlite3_stmt *st = store_stmt(
        s, "INSERT INTO devices (name, describe, contract, mode, state, last_seen, updated_at) "
           "VALUES (?1, ?2, ?3, ?4, 'online', ?5, ?5) ON CONFLICT(name) DO UPDATE SET "
           "describe = COALESCE(excluded.describe, describe), "
           "contract = COALESCE(excluded.contract, contract), "
           "mode = COALESCE(excluded.mode, mode), last_seen = excluded.last_seen, "
           "state = CASE WHEN state = 'quarantined' THEN state ELSE 'online' END, "
           "updated_at = excluded.updated_at");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, name);
    store_bind_text(st, 2, d);
    store_bind_text(st, 3, c);
    store_bind_text(st, 4, m);
    sqlite3_bind_int64(st, 5, now);
    r = step_write(s, st, "device seen");
out:
    r = store_write_end(s, r);
out_free:
    free(d);
    free(c);
    free(m);
    return r;
}

int nvd_store_device_state(nvd_store *s, const char *name, const char *state,
                           const char *quarantine_reason, const char *last_crash, int restarts,
                           int64_t now)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "UPDATE devices SET state = ?2, quarantine_reason = ?3, "
                                     "last_crash = COALESCE(?4, last_crash), restarts = ?5, "
                                     "updated_at = ?6 WHERE name = ?1");
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, name);
    store_bind_text(st, 2, state);
    store_bind_text(st, 3, quarantine_reason);
    store_bind_text(st, 4, last_crash);
    sqlite3_bind_int(st, 5, restarts);
    sqlite3_bind_int64(st, 6, now);
    r = step_write(s, st, "device state");
out:
    return store_write_end(s, r);
}

#define DEV_COLS                                                                                   \
    "name, backend, slots, local, contract, describe, mode, state, quarantine_reason, "            \
    "last_crash, restarts, last_seen, updated_at"

static const store_col device_cols[] = {
    {"name", 0, STORE_STR},
    {"backend", 1, STORE_STR},
    {"slots", 2, STORE_INT},
    {"local", 3, STORE_BOOL},
    {"contract", 4, STORE_JSON},
    {"describe", 5, STORE_JSON},
    {"mode", 6, STORE_JSON},
    {"state", 7, STORE_STR},
    {"quarantine_reason", 8, STORE_STR},
    {"last_crash", 9, STORE_STR},
    {"restarts", 10, STORE_INT},
    {"last_seen", 11, STORE_TIME},
    {"updated_at", 12, STORE_TIME},
    {NULL, 0, 0},
};

int nvd_store_device_get(nvd_store *s, const char *name, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT " DEV_COLS " FROM devices WHERE name = ?1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, name);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        json_t *d = store_row_object(st, device_cols);
        if (d)
            *ret = d;
        else
            r = -ENOMEM;
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "get device");
    }
    sqlite3_reset(st);
    return r;
}

int nvd_store_devices_list(nvd_store *s, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT " DEV_COLS " FROM devices ORDER BY name LIMIT 10000");
    if (!st)
        return -EIO;
    int r = store_rows_json(s, st, "list devices", store_row_cols, device_cols, ret);
    sqlite3_reset(st);
    return r;
}
