/* Daemon-side bisections and the build range they walk (store_bisect.h). */
#include "store_bisect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define RANGE_MAX 10000

/* (created_at, rowid) of build hash: its place in registration order. */
static int place(nvd_store *s, const char *hash, int64_t ret[2])
{
    sqlite3_stmt *st = store_stmt(s, "SELECT created_at, rowid FROM builds WHERE hash = ?1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, hash);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        ret[0] = sqlite3_column_int64(st, 0);
        ret[1] = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "build place");
}

static const store_col range_cols[] = {
    {"id", 0, STORE_STR},
    {"identity", 1, STORE_JSON},
    {"backend", 2, STORE_STR},
    {NULL, 0, 0},
};

int nvd_store_build_range(nvd_store *s, const char *from, const char *to, json_t **ret)
{
    int64_t a[2], b[2];
    int r = place(s, from, a);
    if (r == 0)
        r = place(s, to, b);
    if (r < 0)
        return r;
    if (a[0] > b[0] || (a[0] == b[0] && a[1] >= b[1]))
        return -EINVAL;
    sqlite3_stmt *st = store_stmt(s, "SELECT hash, identity, backend FROM builds "
                                     "WHERE (created_at, rowid) >= (?1, ?2) AND "
                                     "(created_at, rowid) <= (?3, ?4) "
                                     "ORDER BY created_at, rowid LIMIT ?5");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, a[0]);
    sqlite3_bind_int64(st, 2, a[1]);
    sqlite3_bind_int64(st, 3, b[0]);
    sqlite3_bind_int64(st, 4, b[1]);
    sqlite3_bind_int(st, 5, RANGE_MAX + 1);
    json_t *rows = NULL;
    r = store_rows_json(s, st, "build range", store_row_cols, range_cols, &rows);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    if (json_array_size(rows) > RANGE_MAX) {
        json_decref(rows);
        return -E2BIG;
    }
    *ret = rows;
    return 0;
}

int nvd_store_bisect_insert(nvd_store *s, int64_t suite_case, const char *device,
                            const json_t *builds, int lo, int hi, const char *actor, int64_t now,
                            int64_t *ret_id)
{
    char *text = json_dumps(builds, JSON_COMPACT);
    if (!text)
        return -ENOMEM;
    int r = store_write_begin(s);
    if (r < 0) {
        free(text);
        return r;
    }
    sqlite3_stmt *st = store_stmt(s, "INSERT INTO bisections (suite_case, device, builds, lo, hi, "
                                     "state, actor, created_at, updated_at) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?7)");
    if (!st) {
        r = -EIO;
        goto out;
    }
    sqlite3_bind_int64(st, 1, suite_case);
    store_bind_text(st, 2, device);
    store_bind_text(st, 3, text);
    sqlite3_bind_int(st, 4, lo);
    sqlite3_bind_int(st, 5, hi);
    store_bind_text(st, 6, actor);
    sqlite3_bind_int64(st, 7, now);
    r = store_err(s, sqlite3_step(st), "insert bisection");
    sqlite3_reset(st);
    if (r == 0)
        *ret_id = sqlite3_last_insert_rowid(s->db);
out:
    free(text);
    return store_write_end(s, r);
}

static const store_col bisect_cols[] = {
    {"id", 0, STORE_INT},           {"suite_case", 1, STORE_INT},
    {"device", 2, STORE_STR},       {"builds", 3, STORE_JSON},
    {"lo", 4, STORE_INT},           {"hi", 5, STORE_INT},
    {"state", 6, STORE_STR},        {"current_job", 7, STORE_INT_NULL},
    {"probes", 8, STORE_JSON},      {"result", 9, STORE_JSON},
    {"actor", 10, STORE_STR},       {"created_at", 11, STORE_TIME},
    {"updated_at", 12, STORE_TIME}, {NULL, 0, 0},
};

int nvd_store_bisect_get(nvd_store *s, int64_t id, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT id, suite_case, device, builds, lo, hi, state, "
                                     "current_job, probes, result, actor, created_at, "
                                     "updated_at FROM bisections WHERE id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    json_t *rows = NULL;
    int r = store_rows_json(s, st, "get bisection", store_row_cols, bisect_cols, &rows);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row)
        return -ENOENT;
    *ret = row;
    return 0;
}

int nvd_store_bisect_running(nvd_store *s, int limit, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT id FROM bisections INDEXED BY bisections_running "
                                     "WHERE state = 'running' ORDER BY id LIMIT ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int(st, 1, limit);
    static const store_col id_col[] = {{"id", 0, STORE_INT}, {NULL, 0, 0}};
    json_t *rows = NULL;
    int r = store_rows_json(s, st, "running bisections", store_row_cols, id_col, &rows);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < json_array_size(rows); i++)
        json_array_append(ids, json_object_get(json_array_get(rows, i), "id"));
    json_decref(rows);
    if (!ids)
        return -ENOMEM;
    *ret = ids;
    return 0;
}

int nvd_store_bisect_save(nvd_store *s, const json_t *row, int64_t now)
{
    char *probes = json_dumps(json_object_get(row, "probes"), JSON_COMPACT);
    const json_t *res = json_object_get(row, "result");
    char *result = res && !json_is_null(res) ? json_dumps(res, JSON_COMPACT) : NULL;
    int r = probes && (result || !res || json_is_null(res)) ? store_write_begin(s) : -ENOMEM;
    if (r < 0)
        goto done;
    sqlite3_stmt *st = store_stmt(s, "UPDATE bisections SET lo = ?2, hi = ?3, state = ?4, "
                                     "current_job = ?5, probes = ?6, result = ?7, "
                                     "updated_at = ?8 WHERE id = ?1");
    if (!st) {
        r = store_write_end(s, -EIO);
        goto done;
    }
    const json_t *cj = json_object_get(row, "current_job");
    sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(row, "id")));
    sqlite3_bind_int64(st, 2, json_integer_value(json_object_get(row, "lo")));
    sqlite3_bind_int64(st, 3, json_integer_value(json_object_get(row, "hi")));
    store_bind_text(st, 4, json_string_value(json_object_get(row, "state")));
    if (json_is_integer(cj))
        sqlite3_bind_int64(st, 5, json_integer_value(cj));
    store_bind_text(st, 6, probes);
    store_bind_text(st, 7, result);
    sqlite3_bind_int64(st, 8, now);
    r = store_err(s, sqlite3_step(st), "save bisection");
    sqlite3_reset(st);
    r = store_write_end(s, r);
done:
    free(probes);
    free(result);
    return r;
}
