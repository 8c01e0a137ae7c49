/* The permanent suite and the build compare in SQLite (store_suite.h). These
 * statements run rarely (per failure, per suite job, per listing), so they are
 * prepared per call instead of taking slots in the connection's cache. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"
#include "store_suite.h"

static sqlite3_stmt *prep(nvd_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) {
        store_err(s, rc, "prepare suite statement");
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

/* Step a write statement to completion and finalize it. */
static int run(nvd_store *s, sqlite3_stmt *st, const char *what)
{
    if (!st)
        return -EIO;
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_err(s, rc, what);
}

/* The build hash and device of a job (either may come back NULL). */
static int job_info(nvd_store *s, int64_t job_id, char **ret_build, char **ret_device)
{
    sqlite3_stmt *st = prep(s, "SELECT build_hash, COALESCE(leased_by, device) FROM jobs "
                               "WHERE id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "job info");
    if (r == 0) {
        *ret_build = store_col_dup(st, 0);
        *ret_device = store_col_dup(st, 1);
    }
    sqlite3_finalize(st);
    return r;
}

static int add_occurrence(nvd_store *s, int64_t id, const nvd_suite_new *n, const char *build,
                          int64_t now, bool *ret_added)
{
    sqlite3_stmt *st = prep(s, "INSERT OR IGNORE INTO suite_occurrences (suite_id, job_id, "
                               "case_idx, build_hash, artifact, created_at) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, n->job_id);
    sqlite3_bind_int64(st, 3, n->case_idx);
    store_bind_text(st, 4, build);
    store_bind_text(st, 5, n->artifact);
    sqlite3_bind_int64(st, 6, now);
    int r = run(s, st, "suite occurrence");
    *ret_added = r == 0 && sqlite3_changes(s->db) > 0;
    return r;
}

static int insert_case(nvd_store *s, const nvd_suite_new *n, const char *build, const char *device,
                       int64_t now, int64_t *ret_id)
{
    sqlite3_stmt *st = prep(s, "INSERT INTO suite_cases (signature, signature_json, op, dtype, "
                               "failure_class, artifact, origin_artifact, origin_job, "
                               "origin_case, origin_build, device, created_at, last_seen_at) "
                               "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?12)");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, n->signature);
    store_bind_text(st, 2, n->signature_json);
    store_bind_text(st, 3, n->op);
    store_bind_text(st, 4, n->dtype);
    store_bind_text(st, 5, n->failure_class);
    store_bind_text(st, 6, n->artifact);
    store_bind_text(st, 7, n->origin_artifact);
    sqlite3_bind_int64(st, 8, n->job_id);
    sqlite3_bind_int64(st, 9, n->case_idx);
    store_bind_text(st, 10, build);
    store_bind_text(st, 11, device);
    sqlite3_bind_int64(st, 12, now);
    int r = run(s, st, "promote suite case");
    if (r < 0)
        return r;
    *ret_id = sqlite3_last_insert_rowid(s->db);
    st = prep(s, "INSERT INTO suite_audit (suite_id, action, reason, actor, created_at) "
                 "VALUES (?1, 'promoted', 'new failure signature', 'numvald', ?2)");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, *ret_id);
    sqlite3_bind_int64(st, 2, now);
    return run(s, st, "suite audit");
}

int nvd_store_suite_promote(nvd_store *s, const nvd_suite_new *n, int64_t now, int64_t *ret_id,
                            bool *ret_new)
{
    char *build = NULL, *device = NULL;
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    int64_t id = 0;
    bool created = false, added = false;
    r = job_info(s, n->job_id, &build, &device);
    sqlite3_stmt *st = r == 0 ? prep(s, "SELECT id FROM suite_cases WHERE signature = ?1") : NULL;
    if (r == 0 && !st)
        r = -EIO;
    if (r < 0)
        goto out;
    store_bind_text(st, 1, n->signature);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        id = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE)
        r = store_err(s, rc, "find signature");
    sqlite3_finalize(st);
    if (r == 0 && id == 0) {
        r = insert_case(s, n, build, device, now, &id);
        created = r == 0;
    }
    if (r == 0)
        r = add_occurrence(s, id, n, build, now, &added);
    if (r == 0 && added && !created) {
        st = prep(s, "UPDATE suite_cases SET occurrences = occurrences + 1, last_seen_at = ?2 "
                     "WHERE id = ?1");
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, now);
        }
        r = run(s, st, "count occurrence");
    }
out:
    free(build);
    free(device);
    r = store_write_end(s, r);
    if (r == 0) {
        *ret_id = id;
        *ret_new = created;
    }
    return r;
}

int nvd_store_job_finish_then(nvd_store *s, int64_t id, const char *token, const json_t *result,
                              int64_t now, nvd_store_then_fn then, void *ud, bool *ret_dup)
{
    /* The outer write makes the inner ones (finish, each promotion) savepoints of
     * one transaction (store_write_begin nests). */
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    bool dup = false;
    r = nvd_store_job_finish(s, id, token, result, now, &dup);
    if (r == 0 && then)
        r = then(s, ud, dup);
    r = store_write_end(s, r);
    if (r == 0)
        *ret_dup = dup;
    return r;
}

/* {"hash", "name"} of a build hash, or null. */
static json_t *build_json(nvd_store *s, const char *hash)
{
    if (!hash)
        return json_null();
    sqlite3_stmt *st = prep(s, "SELECT name, version FROM builds WHERE hash = ?1");
    json_t *o = json_pack("{ss}", "hash", hash);
    if (st && o) {
        store_bind_text(st, 1, hash);
        if (sqlite3_step(st) == SQLITE_ROW) {
            json_object_set_new(o, "name", store_col_str(st, 0));
            json_object_set_new(o, "version", store_col_str(st, 1));
        }
    }
    sqlite3_finalize(st);
    return o ? o : json_null();
}

#define CASE_COLS                                                                                  \
    "c.id, c.signature, c.signature_json, c.op, c.dtype, c.failure_class, c.artifact, "            \
    "c.origin_artifact, c.origin_job, c.origin_case, c.origin_build, c.device, c.state, "          \
    "c.occurrences, c.created_at, c.last_seen_at, c.retired_at, c.retire_reason, "                 \
    "(SELECT COUNT(*) FROM suite_runs r WHERE r.suite_id = c.id), "                                \
    "(SELECT r.verdict FROM suite_runs r WHERE r.suite_id = c.id ORDER BY r.id DESC LIMIT 1), "    \
    "(SELECT r.build_hash FROM suite_runs r WHERE r.suite_id = c.id AND r.verdict = 'passed' "     \
    " AND r.id > COALESCE((SELECT MAX(f.id) FROM suite_runs f WHERE f.suite_id = c.id "            \
    " AND f.verdict <> 'passed'), 0) ORDER BY r.id LIMIT 1)"

/* A suite case from CASE_COLS, in three runs of columns between the keys that
 * are computed: "kind" and "signature_detail" (column 2), then
 * "first_failing_build" (column 10), then "fixed_in_build" (column 20). */
static const store_col case_head_cols[] = {
    {"id", 0, STORE_INT},
    {"signature", 1, STORE_STR},
    {NULL, 0, 0},
};
static const store_col case_origin_cols[] = {
    {"op", 3, STORE_STR},
    {"dtype", 4, STORE_STR},
    {"failure_class", 5, STORE_STR},
    {"artifact", 6, STORE_STR},
    {"origin_artifact", 7, STORE_STR},
    {"origin_job", 8, STORE_INT},
    {"origin_case", 9, STORE_INT},
    {NULL, 0, 0},
};
static const store_col case_state_cols[] = {
    {"device", 11, STORE_STR},        {"state", 12, STORE_STR},
    {"occurrences", 13, STORE_INT},   {"created_at", 14, STORE_TIME},
    {"last_seen_at", 15, STORE_TIME}, {"retired_at", 16, STORE_TIME},
    {"retire_reason", 17, STORE_STR}, {"runs", 18, STORE_INT},
    {"last_verdict", 19, STORE_STR},  {NULL, 0, 0},
};

static json_t *case_row(nvd_store *s, sqlite3_stmt *st, const void *arg)
{
    (void)arg;
    char *origin = store_col_dup(st, 10), *fixed = store_col_dup(st, 20);
    json_t *o = store_row_object(st, case_head_cols);
    json_t *detail = store_col_json(st, 2);
    /* The job kind whose failure this is: the signature's own "kind". */
    const char *kind = json_string_value(json_object_get(detail, "kind"));
    bool ok = o && detail && !json_object_set_new(o, "kind", json_string(kind ? kind : "op")) &&
              !json_object_set_new(o, "signature_detail", json_incref(detail)) &&
              !store_row_set(o, st, case_origin_cols) &&
              !json_object_set_new(o, "first_failing_build", build_json(s, origin)) &&
              !store_row_set(o, st, case_state_cols) &&
              !json_object_set_new(o, "fixed_in_build", build_json(s, fixed));
    json_decref(detail);
    free(origin);
    free(fixed);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int nvd_store_suite_list(nvd_store *s, const char *state, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT " CASE_COLS " FROM suite_cases c "
                               "WHERE (?1 IS NULL OR c.state = ?1) ORDER BY c.id");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, state);
    int r = store_rows_json(s, st, "list suite", case_row, NULL, ret);
    sqlite3_finalize(st);
    return r;
}

/* Rows of sql (bound to id) as objects of cols; NULL on error. */
static json_t *rows(nvd_store *s, const char *sql, int64_t id, const store_col *cols)
{
    sqlite3_stmt *st = prep(s, sql);
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, id);
    json_t *a = NULL; /* stays NULL on an error */
    store_rows_json(s, st, "suite case detail", store_row_cols, cols, &a);
    sqlite3_finalize(st);
    return a;
}

int nvd_store_suite_get(nvd_store *s, int64_t id, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT " CASE_COLS " FROM suite_cases c WHERE c.id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    json_t *o = rc == SQLITE_ROW ? case_row(s, st, NULL) : NULL;
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (!o)
        return rc == SQLITE_ROW ? -ENOMEM : store_err(s, rc, "get suite case");
    static const store_col hk[] = {
        {"job_id", 0, STORE_INT_NULL},
        {"build", 1, STORE_STR},
        {"build_name", 2, STORE_STR},
        {"device", 3, STORE_STR},
        {"verdict", 4, STORE_STR},
        {"created_at", 5, STORE_TIME},
        {NULL, 0, 0},
    };
    static const store_col ok[] = {
        {"job_id", 0, STORE_INT_NULL}, {"case", 1, STORE_INT_NULL},   {"build", 2, STORE_STR},
        {"artifact", 3, STORE_STR},    {"created_at", 4, STORE_TIME}, {NULL, 0, 0},
    };
    static const store_col ak[] = {
        {"action", 0, STORE_STR},
        {"reason", 1, STORE_STR},
        {"actor", 2, STORE_STR},
        {"created_at", 3, STORE_TIME},
        {NULL, 0, 0},
    };
    json_object_set_new(o, "history",
                        rows(s,
                             "SELECT r.job_id, r.build_hash, b.name, r.device, r.verdict, "
                             "r.created_at FROM suite_runs r LEFT JOIN builds b ON "
                             "b.hash = r.build_hash WHERE r.suite_id = ?1 ORDER BY r.id",
                             id, hk));
    json_object_set_new(o, "occurrence_list",
                        rows(s,
                             "SELECT job_id, case_idx, build_hash, artifact, created_at FROM "
                             "suite_occurrences WHERE suite_id = ?1 ORDER BY id",
                             id, ok));
    json_object_set_new(o, "audit",
                        rows(s,
                             "SELECT action, reason, actor, created_at FROM suite_audit "
                             "WHERE suite_id = ?1 ORDER BY id",
                             id, ak));
    *ret = o;
    return 0;
}

int nvd_store_suite_retire(nvd_store *s, int64_t id, const char *reason, const char *actor,
                           int64_t now, json_t **ret)
{
    if (!reason || !reason[0])
        return -EINVAL;
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = prep(s, "UPDATE suite_cases SET state = 'retired', retired_at = ?2, "
                               "retire_reason = ?3 WHERE id = ?1 AND state = 'active'");
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, now);
        store_bind_text(st, 3, reason);
    }
    r = run(s, st, "retire suite case");
    if (r == 0 && sqlite3_changes(s->db) == 0) {
        json_t *o = NULL;
        r = nvd_store_suite_get(s, id, &o) == -ENOENT ? -ENOENT : -EALREADY;
        json_decref(o);
    }
    if (r == 0) {
        st = prep(s, "INSERT INTO suite_audit (suite_id, action, reason, actor, created_at) "
                     "VALUES (?1, 'retired', ?2, ?3, ?4)");
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            store_bind_text(st, 2, reason);
            store_bind_text(st, 3, actor ? actor : "anonymous");
            sqlite3_bind_int64(st, 4, now);
        }
        r = run(s, st, "suite audit");
    }
    r = store_write_end(s, r);
    return r < 0 ? r : nvd_store_suite_get(s, id, ret);
}

static bool id_listed(const json_t *ids, int64_t id)
{
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        if (json_integer_value(v) == id)
            return true;
    }
    return false;
}

static const store_col active_cols[] = {
    {"suite_case", 0, STORE_INT},
    {"artifact", 1, STORE_STR},
    {"signature", 2, STORE_STR},
    {"kind", 6, STORE_STR},
    {"op", 3, STORE_STR},
    {"dtype", 4, STORE_STR},
    {"failure_class", 5, STORE_STR},
    {NULL, 0, 0},
};

typedef struct active_ctx {
    const json_t *ids; /* NULL: every case */
    json_t *a;
} active_ctx;

static int active_row(sqlite3_stmt *st, void *ud)
{
    active_ctx *x = ud;
    if (x->ids && !id_listed(x->ids, sqlite3_column_int64(st, 0)))
        return 0;
    json_t *o = store_row_object(st, active_cols);
    return o && json_array_append_new(x->a, o) == 0 ? 0 : -ENOMEM;
}

int nvd_store_suite_active(nvd_store *s, const char *kind, const char *op, const char *dtype,
                           const json_t *ids, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT id, artifact, signature, op, dtype, failure_class, k FROM "
                               "(SELECT *, COALESCE(json_extract(signature_json, '$.kind'), 'op') "
                               "AS k FROM suite_cases) WHERE state = 'active' AND (?1 IS NULL OR "
                               "op = ?1) AND (?2 IS NULL OR dtype = ?2) AND (?3 IS NULL OR k = ?3) "
                               "ORDER BY id");
    active_ctx x = {.ids = ids, .a = json_array()};
    if (!st || !x.a) {
        sqlite3_finalize(st);
        json_decref(x.a);
        return st ? -ENOMEM : -EIO;
    }
    store_bind_text(st, 1, op);
    store_bind_text(st, 2, dtype);
    store_bind_text(st, 3, kind);
    int r = store_each_row(s, st, "active suite", active_row, &x);
    sqlite3_finalize(st);
    if (r < 0) {
        json_decref(x.a);
        return r;
    }
    *ret = x.a;
    return 0;
}

int nvd_store_suite_run(nvd_store *s, int64_t id, int64_t job_id, const char *verdict, int64_t now)
{
    char *build = NULL, *device = NULL;
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    r = job_info(s, job_id, &build, &device);
    if (r == 0) {
        sqlite3_stmt *st = prep(s, "INSERT OR IGNORE INTO suite_runs (suite_id, job_id, "
                                   "build_hash, device, verdict, created_at) "
                                   "SELECT ?1, ?2, ?3, ?4, ?5, ?6 "
                                   "WHERE EXISTS (SELECT 1 FROM suite_cases WHERE id = ?1)");
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, job_id);
            store_bind_text(st, 3, build);
            store_bind_text(st, 4, device);
            store_bind_text(st, 5, verdict);
            sqlite3_bind_int64(st, 6, now);
        }
        r = run(s, st, "suite run");
    }
    free(build);
    free(device);
    return store_write_end(s, r);
}
