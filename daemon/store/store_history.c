/* History of a test across builds and the flaky cases (store_history.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_history.h"
#include "store_internal.h"

/* One build's matching cases, summarised while they are read. */
typedef struct build_walk {
    bool grad;           /* gradient cases: worst by headroom */
    int64_t rows, cases; /* rows read in all (across builds), this build's cases */
    int64_t failed, worst_id, worst_job;
    int worst_rank;      /* 1 failed or error, 0 passed; -1 none yet */
    double worst_metric; /* -INFINITY for a null metric */
    json_t *verdict, *max_ulp, *headroom;
} build_walk;

static void walk_reset(build_walk *w)
{
    w->cases = w->failed = w->worst_id = w->worst_job = 0;
    w->worst_rank = -1;
    w->worst_metric = -INFINITY;
    json_decref(w->verdict);
    json_decref(w->max_ulp);
    json_decref(w->headroom);
    w->verdict = w->max_ulp = w->headroom = NULL;
}

/* Columns: 0 id, 1 job_id, 2 verdict, 3 max_ulp, 4 headroom. */
static int case_row(sqlite3_stmt *st, void *ud)
{
    build_walk *w = ud;
    if (++w->rows > NVD_HISTORY_MAX_ROWS)
        return -E2BIG;
    w->cases++;
    const char *v = (const char *)sqlite3_column_text(st, 2);
    int rank = v && strcmp(v, "passed") ? 1 : 0;
    w->failed += rank;
    int mc = w->grad ? 4 : 3;
    double metric =
        sqlite3_column_type(st, mc) == SQLITE_NULL ? -INFINITY : sqlite3_column_double(st, mc);
    /* Rows come newest case first: a tie keeps the newer one. */
    if (rank < w->worst_rank || (rank == w->worst_rank && metric <= w->worst_metric))
        return 0;
    json_decref(w->verdict);
    json_decref(w->max_ulp);
    json_decref(w->headroom);
    w->verdict = json_string(rank ? "failed" : "passed");
    w->max_ulp = store_col_real(st, 3);
    w->headroom = store_col_real(st, 4);
    w->worst_rank = rank;
    w->worst_metric = metric;
    w->worst_id = sqlite3_column_int64(st, 0);
    w->worst_job = sqlite3_column_int64(st, 1);
    return w->verdict && w->max_ulp && w->headroom ? 0 : -ENOMEM;
}

static const char CASES_SQL[] =
    "SELECT c.id, c.job_id, c.verdict, c.max_ulp, CASE WHEN j.kind = 'gradient' THEN "
    "(SELECT max(json_extract(d.value, '$.headroom')) FROM json_each(c.data, '$.checks.device') "
    "d) ELSE json_extract(c.data, '$.headroom') END "
    "FROM jobs j JOIN cases c ON c.job_id = j.id WHERE j.build_hash = ?1 AND j.kind = ?2 AND "
    "(CASE WHEN ?2 = 'fused' THEN json_extract(j.spec, '$.name') = ?3 ELSE j.op = ?3 AND "
    "c.op = ?3 END) AND c.dtype = ?4 AND (?5 IS NULL OR json(c.shape) = json(?5)) AND "
    "(?6 IS NULL OR c.layout = ?6) AND (?7 IS NULL OR c.input = ?7) AND "
    "(?8 IS NULL OR COALESCE(j.device, j.leased_by) = ?8) ORDER BY c.id DESC";

static const char TOL_SQL[] =
    "SELECT COALESCE(json_extract(data, '$.tolerance'), (SELECT json_extract(d.value, "
    "'$.tolerance') FROM json_each(data, '$.checks.device') d WHERE json_extract(d.value, "
    "'$.tolerance') IS NOT NULL LIMIT 1)) FROM cases WHERE id = ?1";

/* The walk over build hash: its point appended to points when it has a case. */
static int build_point(nvd_store *s, const nvd_history_filter *f, const char *kind,
                       sqlite3_stmt *bst, build_walk *w, json_t *points)
{
    sqlite3_stmt *st = store_stmt(s, CASES_SQL);
    if (!st)
        return -EIO;
    const char *hash = (const char *)sqlite3_column_text(bst, 0);
    store_bind_text(st, 1, hash);
    store_bind_text(st, 2, kind);
    store_bind_text(st, 3, f->op);
    store_bind_text(st, 4, f->dtype);
    store_bind_text(st, 5, f->shape);
    store_bind_text(st, 6, f->layout);
    store_bind_text(st, 7, f->input);
    store_bind_text(st, 8, f->device);
    walk_reset(w);
    int r = store_each_row(s, st, "history cases", case_row, w);
    sqlite3_reset(st);
    if (r < 0 || w->cases == 0)
        return r;
    json_t *tol = NULL;
    st = store_stmt(s, TOL_SQL);
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, w->worst_id);
    int rc = sqlite3_step(st);
    tol = rc == SQLITE_ROW ? store_col_json(st, 0) : json_null();
    sqlite3_reset(st);
    json_t *p = json_pack("{ss so sO sO sO sI sI sI sI so}", "build_id", hash, "identity",
                          store_col_json(bst, 1), "verdict", w->verdict, "max_ulp", w->max_ulp,
                          "headroom", w->headroom, "cases", (json_int_t)w->cases, "failed",
                          (json_int_t)w->failed, "case_id", (json_int_t)w->worst_id, "job_id",
                          (json_int_t)w->worst_job, "tolerance", tol ? tol : json_null());
    return p && json_array_append_new(points, p) == 0 ? 0 : -ENOMEM;
}

int nvd_store_history(nvd_store *s, const nvd_history_filter *f, json_t **ret, bool *ret_truncated)
{
    const char *kind = f->kind ? f->kind : "op";
    sqlite3_stmt *bst =
        store_stmt(s, "SELECT hash, identity FROM builds ORDER BY created_at DESC, rowid DESC");
    json_t *points = json_array();
    if (!bst || !points) {
        json_decref(points);
        return bst ? -ENOMEM : -EIO;
    }
    build_walk w = {.grad = !strcmp(kind, "gradient")};
    walk_reset(&w);
    bool truncated = false;
    int r = 0, rc = SQLITE_DONE;
    while (r == 0 && (int)json_array_size(points) < f->limit &&
           (rc = sqlite3_step(bst)) == SQLITE_ROW) {
        r = build_point(s, f, kind, bst, &w, points);
        if (r == -E2BIG) {
            truncated = true;
            r = 0;
            break;
        }
    }
    if (r == 0 && !truncated && (int)json_array_size(points) < f->limit && rc != SQLITE_DONE)
        r = store_err(s, rc, "history builds");
    sqlite3_reset(bst);
    walk_reset(&w);
    if (r < 0) {
        json_decref(points);
        return r;
    }
    /* Newest first as read; the API gives oldest first. */
    json_t *out = json_array();
    for (size_t i = json_array_size(points); out && i > 0; i--)
        json_array_append(out, json_array_get(points, i - 1));
    json_decref(points);
    if (!out)
        return -ENOMEM;
    *ret = out;
    *ret_truncated = truncated;
    return 0;
}

static json_t *flaky_row(nvd_store *s, sqlite3_stmt *st, const void *arg)
{
    (void)s;
    (void)arg;
    json_t *rate = store_col_json(st, 9);
    json_int_t runs = json_integer_value(json_object_get(rate, "runs"));
    json_int_t failed = json_integer_value(json_object_get(rate, "failed"));
    return json_pack("{sI sI so so so so so so so so so so}", "case_id",
                     (json_int_t)sqlite3_column_int64(st, 0), "job_id",
                     (json_int_t)sqlite3_column_int64(st, 1), "op", store_col_str(st, 2), "dtype",
                     store_col_str(st, 3), "shape", store_col_json(st, 4), "input",
                     store_col_str(st, 5), "layout", store_col_str(st, 6), "device",
                     store_col_str(st, 7), "signature", store_col_str(st, 8), "repro_rate", rate,
                     "rate", runs > 0 ? json_real((double)failed / (double)runs) : json_null(),
                     "created_at", store_col_time(st, 10));
}

int nvd_store_flaky(nvd_store *s, int limit, json_t **ret)
{
    /* The inner walk reads the failed cases of the newest jobs through
     * cases(job_id, verdict, idx), never a passed case; the outer keeps the
     * flaky ones. */
    sqlite3_stmt *st = store_stmt(
        s, "SELECT c.id, c.job_id, c.op, c.dtype, c.shape, c.input, c.layout, "
           "COALESCE(j.device, j.leased_by), json_extract(c.data, '$.signature.id'), "
           "json_extract(c.data, '$.repro_rate'), COALESCE(j.finished_at, j.created_at) "
           "FROM (SELECT c.id AS cid FROM jobs j JOIN cases c ON c.job_id = j.id AND "
           "c.verdict = 'failed' ORDER BY j.id DESC, c.idx LIMIT ?2) f "
           "JOIN cases c ON c.id = f.cid JOIN jobs j ON j.id = c.job_id "
           "WHERE json_extract(c.data, '$.flaky') = 1 ORDER BY j.id DESC, c.idx LIMIT ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int(st, 1, limit);
    sqlite3_bind_int(st, 2, NVD_FLAKY_SCAN);
    int r = store_rows_json(s, st, "flaky cases", flaky_row, NULL, ret);
    sqlite3_reset(st);
    return r;
}
