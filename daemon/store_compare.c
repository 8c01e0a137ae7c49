/* Build-to-build compare of op cases (store_suite.h nvd_store_compare). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"
#include "store_suite.h"

/* Drift: both passed, max ULP at least doubled and grown by at least half an
 * ulp (so 0.5 -> 3 is reported, 0.01 -> 0.03 is noise below the rounding of
 * a correctly rounded result). */
#define DRIFT_FACTOR 2.0
#define DRIFT_MIN_ULP 0.5

/* A build given as its hash, or as a name or version (newest build with it). */
static int resolve(nvd_store *s, const char *b, char **ret)
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

/* {key: case} of the newest case per match key among op jobs of build hash. */
static int cases_of(nvd_store *s, const char *hash, json_t **ret)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT c.op, c.dtype, c.shape, c.layout, c.input, "
        "COALESCE(json_extract(j.spec, '$.attrs'), '{}'), c.verdict, c.max_ulp, c.id, c.job_id, "
        "c.failure_class FROM cases c JOIN jobs j ON j.id = c.job_id "
        "WHERE j.build_hash = ?1 AND j.kind = 'op' ORDER BY c.id",
        -1, &st, NULL);
    json_t *map = json_object();
    if (rc != SQLITE_OK || !map) {
        sqlite3_finalize(st);
        json_decref(map);
        return rc != SQLITE_OK ? store_err(s, rc, "compare") : -ENOMEM;
    }
    store_bind_text(st, 1, hash);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *f[6];
        for (int k = 0; k < 6; k++)
            f[k] = sqlite3_column_text(st, k) ? (const char *)sqlite3_column_text(st, k) : "";
        char *key = NULL;
        if (asprintf(&key, "%s|%s|%s|%s|%s|%s", f[0], f[1], f[2], f[3], f[4], f[5]) < 0)
            break;
        json_t *c = json_pack(
            "{s{ss ss so ss ss so} so so sI sI so}", "match", "op", f[0], "dtype", f[1], "shape",
            store_col_json(st, 2), "layout", f[3], "input", f[4], "attrs", store_col_json(st, 5),
            "verdict", store_col_str(st, 6), "max_ulp", store_col_real(st, 7), "case_id",
            (json_int_t)sqlite3_column_int64(st, 8), "job_id",
            (json_int_t)sqlite3_column_int64(st, 9), "failure_class", store_col_str(st, 10));
        json_object_set_new(map, key, c); /* later rows replace earlier: newest wins */
        free(key);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        json_decref(map);
        return rc == SQLITE_ROW ? -ENOMEM : store_err(s, rc, "compare");
    }
    *ret = map;
    return 0;
}

static json_t *side(const json_t *c)
{
    return json_pack("{sO sO sO sO sO}", "case_id", json_object_get(c, "case_id"), "job_id",
                     json_object_get(c, "job_id"), "verdict", json_object_get(c, "verdict"),
                     "max_ulp", json_object_get(c, "max_ulp"), "failure_class",
                     json_object_get(c, "failure_class"));
}

static const char *verdict(const json_t *c)
{
    const char *v = json_string_value(json_object_get(c, "verdict"));
    return v ? v : "";
}

/* Sort the three lists into the result. */
static json_t *classify(const json_t *base, const json_t *head)
{
    json_t *nf = json_array(), *np = json_array(), *dr = json_array();
    json_int_t matched = 0, only_head = 0;
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
        double bu = json_number_value(json_object_get(b, "max_ulp"));
        double hu = json_number_value(json_object_get(h, "max_ulp"));
        if (bp && !strcmp(verdict(h), "failed")) {
            json_array_append_new(nf, e);
        } else if (!strcmp(verdict(b), "failed") && hp) {
            json_array_append_new(np, e);
        } else if (bp && hp && json_is_number(json_object_get(b, "max_ulp")) &&
                   json_is_number(json_object_get(h, "max_ulp")) && hu >= DRIFT_FACTOR * bu &&
                   hu - bu >= DRIFT_MIN_ULP) {
            json_object_set_new(e, "growth", json_real(bu > 0 ? hu / bu : INFINITY));
            if (bu <= 0)
                json_object_set_new(e, "growth", json_string("inf"));
            json_array_append_new(dr, e);
        } else {
            json_decref(e);
        }
    }
    return json_pack("{so so so s{sI sI sI}}", "newly_failing", nf, "newly_passing", np, "drift",
                     dr, "counts", "matched", matched, "only_in_head", only_head, "only_in_base",
                     (json_int_t)json_object_size(base) - matched);
}

int nvd_store_compare(nvd_store *s, const char *base, const char *head, json_t **ret)
{
    char *bh = NULL, *hh = NULL;
    json_t *bm = NULL, *hm = NULL;
    int r = resolve(s, base, &bh);
    if (r == 0)
        r = resolve(s, head, &hh);
    if (r == 0)
        r = cases_of(s, bh, &bm);
    if (r == 0)
        r = cases_of(s, hh, &hm);
    if (r == 0) {
        json_t *o = classify(bm, hm);
        if (!o) {
            r = -ENOMEM;
        } else {
            json_object_set_new(o, "base", json_string(bh));
            json_object_set_new(o, "head", json_string(hh));
            json_object_set_new(o, "drift_rule",
                                json_string("both passed, head max_ulp >= 2 x base max_ulp and "
                                            ">= base + 0.5"));
            *ret = o;
        }
    }
    free(bh);
    free(hh);
    json_decref(bm);
    json_decref(hm);
    return r;
}
