/* Build-to-build compare of op, gradient and fused cases (store_suite.h
 * nvd_store_compare). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_contract.h"
#include "store_internal.h"
#include "store_suite.h"

/* Drift: both passed, max ULP at least doubled and grown by at least half an
 * ulp (so 0.5 -> 3 is reported, 0.01 -> 0.03 is noise below the rounding of
 * a correctly rounded result). */
#define DRIFT_FACTOR 2.0
#define DRIFT_MIN_ULP 0.5
#define DRIFT_MIN_HEADROOM 0.25

int nvd_store_build_resolve(nvd_store *s, const char *b, char **ret)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT hash FROM builds WHERE hash = ?1 OR name = ?1 OR "
                                "version = ?1 ORDER BY (hash = ?1) DESC, created_at DESC, "
                                "rowid DESC LIMIT 1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_err(s, rc, "resolve build");
    }
    store_bind_text(st, 1, b);
    rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "build");
    if (r == 0 && !(*ret = store_col_dup(st, 0)))
        r = -ENOMEM;
    sqlite3_finalize(st);
    return r;
}

/* The match of a case: what makes a case of one build the same test as one of
 * another. op: the op, dtypes, shape, layout, input class and attrs; gradient:
 * the same and the check mode; fused: the graph's name and hash, the dtype and
 * the input class. Returns the key (malloc'd) and sets *ret_match. */
static char *match_of(sqlite3_stmt *st, json_t **ret_match)
{
    const char *f[12];
    for (int k = 0; k < 12; k++)
        f[k] = sqlite3_column_text(st, k) ? (const char *)sqlite3_column_text(st, k) : "";
    const char *kind = f[0];
    char *key = NULL;
    json_t *m = NULL;
    if (!strcmp(kind, "fused")) {
        if (asprintf(&key, "fused|%s|%s|%s|%s", f[9], f[10], f[2], f[5]) >= 0)
            m = json_pack("{ss ss ss ss ss}", "kind", kind, "graph", f[9], "graph_hash", f[10],
                          "dtype", f[2], "input", f[5]);
    } else {
        bool grad = !strcmp(kind, "gradient");
        if (asprintf(&key, "%s|%s|%s|%s|%s|%s|%s|%s", kind, f[1], f[2], f[3], f[4], f[5], f[6],
                     grad ? f[11] : "") >= 0) {
            m = json_pack("{ss ss ss so ss ss so}", "kind", kind, "op", f[1], "dtype", f[2],
                          "shape", store_col_json(st, 3), "layout", f[4], "input", f[5], "attrs",
                          store_col_json(st, 6));
            if (m && grad)
                json_object_set_new(m, "mode", json_string(f[11]));
        }
    }
    if (!m) {
        free(key);
        return NULL;
    }
    *ret_match = m;
    return key;
}

typedef struct cases_ctx {
    json_t *map;
    int64_t rows;
} cases_ctx;

/* One row of cases_of into the map under its match key. */
static int case_into(sqlite3_stmt *st, void *ud)
{
    cases_ctx *x = ud;
    if (++x->rows > NVD_COMPARE_MAX_CASES)
        return -E2BIG;
    json_t *m = NULL;
    char *key = match_of(st, &m);
    if (!key)
        return -ENOMEM;
    /* The tolerance the case was judged by (a gradient case: its device check's). */
    json_t *c = json_pack("{so so sI sI so so}", "match", m, "verdict", store_col_str(st, 7),
                          "case_id", (json_int_t)sqlite3_column_int64(st, 12), "job_id",
                          (json_int_t)sqlite3_column_int64(st, 13), "failure_class",
                          store_col_str(st, 14), "tolerance", store_col_json(st, 16));
    int r = c ? 0 : -ENOMEM;
    if (r == 0 && !strcmp((const char *)sqlite3_column_text(st, 0), "gradient"))
        r = json_object_set_new(c, "headroom", store_col_real(st, 15));
    else if (r == 0)
        r = json_object_set_new(c, "max_ulp", store_col_real(st, 8));
    /* later rows replace earlier: newest wins */
    if (r == 0)
        r = json_object_set_new(x->map, key, c);
    else
        json_decref(c);
    free(key);
    return r < 0 ? -ENOMEM : 0;
}

/* {key: case} of the newest case per match among the cases of build hash, of
 * kind (NULL: op, gradient and fused) and op (NULL: any); at most
 * NVD_COMPARE_MAX_CASES cases (-E2BIG past it: the whole map is built in
 * memory on the daemon's loop). */
static int cases_of(nvd_store *s, const char *hash, const char *kind, const char *op, json_t **ret)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT j.kind, c.op, c.dtype, c.shape, c.layout, c.input, "
        "COALESCE(json_extract(j.spec, '$.attrs'), '{}'), c.verdict, c.max_ulp, "
        "json_extract(j.spec, '$.name'), json_extract(c.data, '$.graph_hash'), "
        "json_extract(c.data, '$.mode'), c.id, c.job_id, c.failure_class, "
        "(SELECT max(json_extract(d.value, '$.headroom')) FROM "
        "json_each(c.data, '$.checks.device') d), "
        "COALESCE(json_extract(c.data, '$.tolerance'), (SELECT json_extract(d.value, "
        "'$.tolerance') FROM json_each(c.data, '$.checks.device') d WHERE "
        "json_extract(d.value, '$.tolerance') IS NOT NULL LIMIT 1)) "
        "FROM cases c JOIN jobs j ON j.id = c.job_id WHERE j.build_hash = ?1 AND "
        "j.kind IN ('op', 'gradient', 'fused') AND (?2 IS NULL OR j.kind = ?2) AND "
        "(?3 IS NULL OR c.op = ?3) ORDER BY c.id LIMIT ?4",
        -1, &st, NULL);
    json_t *map = json_object();
    if (rc != SQLITE_OK || !map) {
        sqlite3_finalize(st);
        json_decref(map);
        return rc != SQLITE_OK ? store_err(s, rc, "compare") : -ENOMEM;
    }
    store_bind_text(st, 1, hash);
    store_bind_text(st, 2, kind);
    store_bind_text(st, 3, op);
    sqlite3_bind_int64(st, 4, NVD_COMPARE_MAX_CASES + 1);
    cases_ctx x = {.map = map};
    int r = store_each_row(s, st, "compare", case_into, &x);
    sqlite3_finalize(st);
    if (r < 0) {
        json_decref(map);
        return r;
    }
    *ret = map;
    return 0;
}

static json_t *side(const json_t *c)
{
    const char *metric = json_object_get(c, "headroom") ? "headroom" : "max_ulp";
    return json_pack("{sO sO sO sO sO sO}", "case_id", json_object_get(c, "case_id"), "job_id",
                     json_object_get(c, "job_id"), "verdict", json_object_get(c, "verdict"), metric,
                     json_object_get(c, metric), "failure_class",
                     json_object_get(c, "failure_class"), "tolerance",
                     json_object_get(c, "tolerance"));
}

static const char *verdict(const json_t *c)
{
    const char *v = json_string_value(json_object_get(c, "verdict"));
    return v ? v : "";
}

/* Error growth that still passes: op and fused cases by max ULP (DRIFT_FACTOR
 * and DRIFT_MIN_ULP), gradient cases by headroom, the largest error over the
 * element's allowance (<= 1 passes): doubled and now at least a quarter of the
 * allowance (a doubling of a tiny headroom is rounding noise; emu's correct
 * sigmoid backward sits at 0.12). *ret_growth: head / base. */
static bool drifted(const json_t *b, const json_t *h, double *ret_growth)
{
    bool grad = json_object_get(h, "headroom") != NULL;
    const char *metric = grad ? "headroom" : "max_ulp";
    const json_t *bj = json_object_get(b, metric), *hj = json_object_get(h, metric);
    if (!json_is_number(bj) || !json_is_number(hj))
        return false;
    double bu = json_number_value(bj), hu = json_number_value(hj);
    *ret_growth = bu > 0 ? hu / bu : INFINITY;
    if (grad)
        return hu >= DRIFT_FACTOR * bu && hu >= DRIFT_MIN_HEADROOM;
    return hu >= DRIFT_FACTOR * bu && hu - bu >= DRIFT_MIN_ULP;
}

/* Append e to list a, or count it past NVD_COMPARE_MAX_LISTED. */
static void add(json_t *a, json_t *e, json_int_t *total)
{
    if (++*total <= NVD_COMPARE_MAX_LISTED)
        json_array_append_new(a, e);
    else
        json_decref(e);
}

/* Sort the three lists into the result. */
static json_t *classify(const json_t *base, const json_t *head)
{
    json_t *nf = json_array(), *np = json_array(), *dr = json_array();
    json_int_t matched = 0, only_head = 0, n[3] = {0, 0, 0};
    const char *key;
    json_t *h;
    json_object_foreach((json_t *)head, key, h)
    {
        const json_t *b = json_object_get(base, key);
        if (!b) {
            only_head++;
            continue;
        }
        matched++;
        json_t *e = json_pack("{sO so so}", "match", json_object_get(h, "match"), "base", side(b),
                              "head", side(h));
        bool bp = !strcmp(verdict(b), "passed"), hp = !strcmp(verdict(h), "passed");
        double growth = 0;
        if (bp && !strcmp(verdict(h), "failed")) {
            add(nf, e, &n[0]);
        } else if (!strcmp(verdict(b), "failed") && hp) {
            add(np, e, &n[1]);
        } else if (bp && hp && drifted(b, h, &growth)) {
            json_object_set_new(e, "growth",
                                isinf(growth) ? json_string("inf") : json_real(growth));
            add(dr, e, &n[2]);
        } else {
            json_decref(e);
        }
    }
    return json_pack("{so so so s{sI sI sI sI sI sI} sb}", "newly_failing", nf, "newly_passing", np,
                     "drift", dr, "counts", "matched", matched, "only_in_head", only_head,
                     "only_in_base", (json_int_t)json_object_size(base) - matched, "newly_failing",
                     n[0], "newly_passing", n[1], "drift", n[2], "truncated",
                     n[0] > NVD_COMPARE_MAX_LISTED || n[1] > NVD_COMPARE_MAX_LISTED ||
                         n[2] > NVD_COMPARE_MAX_LISTED);
}

int nvd_store_compare(nvd_store *s, const char *base, const char *head, const char *kind,
                      const char *op, json_t **ret)
{
    char *bh = NULL, *hh = NULL;
    json_t *bm = NULL, *hm = NULL;
    int r = nvd_store_build_resolve(s, base, &bh);
    if (r == 0)
        r = nvd_store_build_resolve(s, head, &hh);
    if (r == 0)
        r = cases_of(s, bh, kind, op, &bm);
    if (r == 0)
        r = cases_of(s, hh, kind, op, &hm);
    if (r == 0) {
        json_t *o = classify(bm, hm);
        if (!o) {
            r = -ENOMEM;
        } else {
            /* the measured contracts of the devices both builds ran a
             * contract job on: a changed one is a regression of its own
             * (store_contract.c), compared unless the query names a case kind
             * or an op */
            json_t *changes = NULL;
            int64_t devs = 0;
            if (!op && (!kind || !strcmp(kind, "contract")))
                r = nvd_store_compare_contracts(s, bh, hh, &changes, &devs);
            json_object_set_new(o, "contract_changes", changes ? changes : json_array());
            json_t *counts = json_object_get(o, "counts");
            json_object_set_new(counts, "contract_devices", json_integer(devs));
            json_object_set_new(counts, "contract_changed",
                                json_integer((json_int_t)json_array_size(changes)));
            json_object_set_new(o, "base", json_string(bh));
            json_object_set_new(o, "head", json_string(hh));
            json_object_set_new(o, "drift_rule",
                                json_string("both passed; op and fused cases: head max_ulp >= 2 x "
                                            "base max_ulp and >= base + 0.5; gradient cases: "
                                            "head headroom >= 2 x base headroom and >= 0.25"));
            if (r == 0)
                *ret = o;
            else
                json_decref(o);
        }
    }
    free(bh);
    free(hh);
    json_decref(bm);
    json_decref(hm);
    return r;
}
