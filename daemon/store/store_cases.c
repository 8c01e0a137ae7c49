/* Results (cases), cancel and lease expiry. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/util/util.h"
#include "store_internal.h"

static const char *verdict_of(const json_t *c)
{
    const char *v = json_string_value(json_object_get(c, "verdict"));
    if (v && (!strcmp(v, "passed") || !strcmp(v, "failed") || !strcmp(v, "error")))
        return v;
    return "error";
}

static void bind_real(sqlite3_stmt *st, int i, const json_t *v)
{
    if (json_is_number(v) && isfinite(json_number_value(v)))
        sqlite3_bind_double(st, i, json_number_value(v));
    else
        sqlite3_bind_null(st, i);
}

static int insert_case(nvd_store *s, int64_t job, int attempt, int64_t idx, const json_t *c)
{
    static const char sql[] =
        "INSERT OR IGNORE INTO cases (job_id, idx, verdict, op, dtype, input, layout, shape, "
        "max_ulp, max_abs, max_rel, mismatches, failure_class, tolerance_version, attempt, data) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";
    char *data = json_dumps(c, JSON_COMPACT);
    char *shape = json_object_get(c, "shape")
                      ? json_dumps(json_object_get(c, "shape"), JSON_COMPACT | JSON_ENCODE_ANY)
                      : NULL;
    int r = -ENOMEM;
    if (!data)
        goto out;
    sqlite3_stmt *st = store_stmt(s, sql);
    if (!st) {
        r = -EIO;
        goto out;
    }
    sqlite3_bind_int64(st, 1, job);
    sqlite3_bind_int64(st, 2, idx);
    store_bind_text(st, 3, verdict_of(c));
    store_bind_text(st, 4, json_string_value(json_object_get(c, "op")));
    store_bind_text(st, 5, json_string_value(json_object_get(c, "dtype")));
    store_bind_text(st, 6, json_string_value(json_object_get(c, "input")));
    store_bind_text(st, 7, json_string_value(json_object_get(c, "layout")));
    store_bind_text(st, 8, shape);
    bind_real(st, 9, json_object_get(c, "max_ulp"));
    bind_real(st, 10, json_object_get(c, "max_abs"));
    bind_real(st, 11, json_object_get(c, "max_rel"));
    const json_t *mm = json_object_get(c, "mismatches");
    if (json_is_integer(mm))
        sqlite3_bind_int64(st, 12, json_integer_value(mm));
    store_bind_text(st, 13, json_string_value(json_object_get(c, "failure_class")));
    const json_t *tv = json_object_get(json_object_get(c, "tolerance"), "version");
    if (json_is_integer(tv))
        sqlite3_bind_int64(st, 14, json_integer_value(tv));
    sqlite3_bind_int(st, 15, attempt);
    store_bind_text(st, 16, data);
    r = store_err(s, sqlite3_step(st), "insert case");
    sqlite3_reset(st);
out:
    free(data);
    free(shape);
    return r;
}

static int count_cases(nvd_store *s, int64_t job, int64_t n[3])
{
    sqlite3_stmt *st = store_stmt(s, "SELECT verdict, COUNT(*) FROM cases WHERE job_id = ?1 "
                                     "GROUP BY verdict");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, job);
    n[0] = n[1] = n[2] = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        int k = !strcmp(v, "passed") ? 0 : !strcmp(v, "failed") ? 1 : 2;
        n[k] = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : store_err(s, rc, "count cases");
}

static int finish_locked(nvd_store *s, int64_t id, const char *token, const json_t *result,
                         int64_t now)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT attempt FROM jobs WHERE id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    int attempt = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_reset(st);
    const json_t *cases = json_object_get(result, "cases");
    size_t i;
    const json_t *c;
    int r = 0;
    json_array_foreach(cases, i, c)
    {
        if (!json_is_object(c))
            continue;
        const json_t *ix = json_object_get(c, "index");
        int64_t idx = json_is_integer(ix) ? json_integer_value(ix) : (int64_t)i;
        r = insert_case(s, id, attempt, idx, c);
        if (r < 0)
            return r;
    }
    int64_t n[3];
    r = count_cases(s, id, n);
    if (r < 0)
        return r;
    const char *verdict = json_string_value(json_object_get(result, "verdict"));
    if (!verdict || (strcmp(verdict, "passed") && strcmp(verdict, "failed")))
        verdict = "error";
    json_t *summary = json_deep_copy(result);
    if (!summary)
        return -ENOMEM;
    json_object_del(summary, "cases");
    char *sj = json_dumps(summary, JSON_COMPACT);
    json_decref(summary);
    if (!sj)
        return -ENOMEM;
    st = store_stmt(s, "UPDATE jobs SET state = ?2, finished_at = ?3, finish_token = ?4, "
                       "lease_expires = NULL, cases_total = ?5, cases_done = ?5, "
                       "cases_passed = ?6, cases_failed = ?7, error = ?8, result = ?9 "
                       "WHERE id = ?1");
    if (!st) {
        free(sj);
        return -EIO;
    }
    sqlite3_bind_int64(st, 1, id);
    store_bind_text(st, 2, verdict);
    sqlite3_bind_int64(st, 3, now);
    store_bind_text(st, 4, token);
    sqlite3_bind_int64(st, 5, n[0] + n[1] + n[2]);
    sqlite3_bind_int64(st, 6, n[0]);
    sqlite3_bind_int64(st, 7, n[1] + n[2]);
    store_bind_text(st, 8, json_string_value(json_object_get(result, "error")));
    store_bind_text(st, 9, sj);
    r = store_err(s, sqlite3_step(st), "finish job");
    sqlite3_reset(st);
    free(sj);
    return r;
}

int nvd_store_job_finish(nvd_store *s, int64_t id, const char *token, const json_t *result,
                         int64_t now, bool *ret_dup)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    char state[16];
    char *live = NULL, *fin = NULL;
    r = store_lease_of(s, id, state, &live, &fin);
    if (r < 0)
        goto out;
    bool dup = store_same(fin, token);
    if (dup) {
        *ret_dup = true;
        goto out;
    }
    if (!store_same(live, token))
        r = -ESTALE;
    else if (!strcmp(state, "cancelled"))
        r = -ECANCELED;
    else if (strcmp(state, "leased") && strcmp(state, "running"))
        r = -ESTALE;
    else
        r = finish_locked(s, id, token, result, now);
    if (r == 0)
        *ret_dup = false;
out:
    free(live);
    free(fin);
    return store_write_end(s, r);
}

int nvd_store_job_cancel(nvd_store *s, int64_t id, int64_t now)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, "UPDATE jobs SET state = 'cancelled', finished_at = ?2, "
                                     "lease_expires = NULL WHERE id = ?1 AND state IN "
                                     "('queued','leased','running')");
    if (!st) {
        r = -EIO;
        goto out;
    }
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, now);
    r = store_err(s, sqlite3_step(st), "cancel");
    sqlite3_reset(st);
    if (r == 0 && sqlite3_changes(s->db) == 0) {
        st = store_stmt(s, "SELECT 1 FROM jobs WHERE id = ?1");
        if (!st) {
            r = -EIO;
            goto out;
        }
        sqlite3_bind_int64(st, 1, id);
        r = sqlite3_step(st) == SQLITE_ROW ? -EALREADY : -ENOENT;
        sqlite3_reset(st);
    }
out:
    return store_write_end(s, r);
}

static int expire_one(nvd_store *s, int64_t id, int attempt, int max, const char *dev, int64_t now,
                      bool *ret_errored)
{
    sqlite3_stmt *st;
    if (attempt >= max) {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "lease expired on attempt %d of %d (the worker for device '%s' stopped "
                 "heartbeating)",
                 attempt, max, dev ? dev : "?");
        st = store_stmt(s, "UPDATE jobs SET state = 'error', error = ?2, finished_at = ?3, "
                           "lease_expires = NULL WHERE id = ?1");
        if (!st)
            return -EIO;
        store_bind_text(st, 2, msg);
        sqlite3_bind_int64(st, 3, now);
        *ret_errored = true;
    } else {
        st = store_stmt(s, "UPDATE jobs SET state = 'queued', lease_token = NULL, "
                           "lease_expires = NULL, cases_done = 0 WHERE id = ?1");
        if (!st)
            return -EIO;
        *ret_errored = false;
    }
    sqlite3_bind_int64(st, 1, id);
    int r = store_err(s, sqlite3_step(st), "expire lease");
    sqlite3_reset(st);
    return r;
}

int nvd_store_leases_expire(nvd_store *s, int64_t now, int *ret_requeued, int *ret_errored)
{
    enum { BATCH = 256 };
    struct {
        int64_t id;
        int attempt, max;
        char dev[128];
    } rows[BATCH];
    int n = 0, requeued = 0, errored = 0;
    sqlite3_stmt *st = store_stmt(s, "SELECT id, attempt, max_attempts, leased_by FROM jobs "
                                     "WHERE state IN ('leased','running') AND lease_expires < ?1 "
                                     "LIMIT 256");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, now);
    int rc;
    while (n < BATCH && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rows[n].id = sqlite3_column_int64(st, 0);
        rows[n].attempt = sqlite3_column_int(st, 1);
        rows[n].max = sqlite3_column_int(st, 2);
        const char *d = (const char *)sqlite3_column_text(st, 3);
        snprintf(rows[n].dev, sizeof(rows[n].dev), "%s", d ? d : "?");
        n++;
    }
    sqlite3_reset(st);
    if (n == 0)
        goto done;
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    for (int i = 0; i < n && r == 0; i++) {
        bool err = false;
        r = expire_one(s, rows[i].id, rows[i].attempt, rows[i].max, rows[i].dev, now, &err);
        if (r == 0) {
            errored += err;
            requeued += !err;
        }
    }
    r = store_write_end(s, r);
    if (r < 0)
        return r;
done:
    if (ret_requeued)
        *ret_requeued = requeued;
    if (ret_errored)
        *ret_errored = errored;
    return 0;
}

int nvd_store_next_expiry(nvd_store *s, int64_t *ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT MIN(lease_expires) FROM jobs "
                                     "WHERE state IN ('leased','running')");
    if (!st)
        return -EIO;
    int rc = sqlite3_step(st);
    *ret = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? 0 : store_err(s, rc, "next expiry");
}

#define CASE_SELECT                                                                                \
    "SELECT c.id, c.job_id, c.idx, c.tolerance_version, c.data, j.build_hash, j.leased_by "        \
    "FROM cases c JOIN jobs j ON j.id = c.job_id "

/* The keys a case gets over its stored JSON (column 4 of CASE_SELECT). */
static const store_col case_cols[] = {
    {"id", 0, STORE_INT},
    {"job_id", 1, STORE_INT},
    {"index", 2, STORE_INT},
    {"tolerance_version", 3, STORE_INT_NULL},
    {"build_id", 5, STORE_STR},
    {"device", 6, STORE_STR},
    {NULL, 0, 0},
};

static json_t *case_row(nvd_store *s, sqlite3_stmt *st, const void *arg)
{
    (void)s;
    (void)arg;
    json_t *c = store_col_json(st, 4);
    if (!json_is_object(c)) {
        json_decref(c);
        c = json_object();
    }
    if (c && store_row_set(c, st, case_cols) < 0) {
        json_decref(c);
        return NULL;
    }
    return c;
}

int nvd_store_cases_list(nvd_store *s, const nvd_case_filter *f, json_t **ret, int64_t *ret_next,
                         bool *ret_more)
{
    sqlite3_stmt *st = f->verdict
                           ? store_stmt(s, CASE_SELECT "WHERE c.job_id = ?1 AND c.verdict = ?2 AND "
                                                       "c.idx > ?3 ORDER BY c.idx LIMIT ?4")
                           : store_stmt(s, CASE_SELECT "WHERE c.job_id = ?1 AND c.idx > ?3 "
                                                       "ORDER BY c.idx LIMIT ?4");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, f->job_id);
    if (f->verdict)
        store_bind_text(st, 2, f->verdict);
    sqlite3_bind_int64(st, 3, f->cursor);
    sqlite3_bind_int(st, 4, f->limit + 1);
    json_t *arr = NULL;
    bool more = false;
    int r = store_rows_page(s, st, "list cases", case_row, NULL, f->limit, &arr, &more);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    /* The next page starts after the index of the last case of this one. */
    size_t n = json_array_size(arr);
    *ret = arr;
    *ret_next = n ? json_integer_value(json_object_get(json_array_get(arr, n - 1), "index")) : -1;
    *ret_more = more;
    return 0;
}

int nvd_store_case_get(nvd_store *s, int64_t id, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, CASE_SELECT "WHERE c.id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int r = 0;
    if (rc == SQLITE_ROW) {
        json_t *c = case_row(s, st, NULL);
        if (c)
            *ret = c;
        else
            r = -ENOMEM;
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "get case");
    }
    sqlite3_reset(st);
    return r;
}
