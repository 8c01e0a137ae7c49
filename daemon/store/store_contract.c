/* The measured contract of a device: the newest finished contract job's
 * stored result (docs/CONTRACT.md), declared and measured side by side. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_contract.h"
#include "store_internal.h"
#include "store_suite.h"

/* Only the parts of the result a reader of the contract needs: the rest (the
 * probe sections with their evidence) stays behind GET /api/v1/jobs/{id}. The
 * device is the job's own or, for a job any device could claim, the one that
 * ran it; "error" jobs are left out (a probe failed: the contract is partial). */
#define CONTRACT_SQL                                                                               \
    "SELECT id, state, build_hash, finished_at, result -> '$.contract',"                           \
    " result -> '$.measured.contract', result -> '$.judged', result -> '$.mismatches',"            \
    " result -> '$.mode' FROM jobs WHERE kind = 'contract' AND state IN ('passed', 'failed')"      \
    " AND (device = ?1 OR (device IS NULL AND leased_by = ?1))"                                    \
    " AND (?2 IS NULL OR build_hash = ?2) AND result IS NOT NULL ORDER BY id DESC LIMIT 1"

/* A mismatch without its evidence (the job has it): field, declared, measured. */
static json_t *mismatch_fields(json_t *mism)
{
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(mism, i, m)
    {
        json_t *c =
            json_pack("{s:O?, s:O?, s:O?}", "field", json_object_get(m, "field"), "declared",
                      json_object_get(m, "declared"), "measured", json_object_get(m, "measured"));
        if (!out || !c || json_array_append_new(out, c) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

int nvd_store_device_contract(nvd_store *s, const char *device, const char *build, json_t **ret,
                              int *ret_missing)
{
    *ret_missing = 0;
    json_t *dev = NULL;
    int r = nvd_store_device_get(s, device, &dev);
    json_decref(dev);
    if (r == -ENOENT)
        *ret_missing = NVD_CONTRACT_NO_DEVICE;
    if (r < 0)
        return r;
    char *hash = NULL;
    if (build) {
        r = nvd_store_build_resolve(s, build, &hash);
        if (r == -ENOENT)
            *ret_missing = NVD_CONTRACT_NO_BUILD;
        if (r < 0)
            return r;
    }
    sqlite3_stmt *st = store_stmt(s, CONTRACT_SQL);
    if (!st) {
        free(hash);
        return -EIO;
    }
    store_bind_text(st, 1, device);
    store_bind_text(st, 2, hash);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        json_t *mism = store_col_json(st, 7);
        json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o?}", "device",
                              device, "job_id", store_col_int(st, 0), "state", store_col_str(st, 1),
                              "build_id", store_col_str(st, 2), "finished_at",
                              store_col_time(st, 3), "mode", store_col_json(st, 8), "declared",
                              store_col_json(st, 4), "measured", store_col_json(st, 5), "judged",
                              store_col_json(st, 6), "mismatches", mismatch_fields(mism));
        json_decref(mism);
        r = o ? 0 : -ENOMEM;
        if (o)
            *ret = o;
    } else if (rc == SQLITE_DONE) {
        *ret_missing = NVD_CONTRACT_NO_JOB;
        r = -ENOENT;
    } else {
        r = store_err(s, rc, "device contract");
    }
    sqlite3_reset(st);
    free(hash);
    return r;
}

/* ---- build compare: the measured contract of each device, base vs head ---- */

/* Devices compared per build: one row each, so a bound far above a lab's. */
#define CONTRACT_COMPARE_MAX_DEVICES 1000

/* device -> {"job_id", "measured"} of the newest finished contract job of the
 * build on each device (SQLite's max() picks the row of its bare columns). */
static int contracts_of(nvd_store *s, const char *hash, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(
        s, "SELECT COALESCE(device, leased_by), max(id), result -> '$.measured.contract' FROM jobs"
           " WHERE kind = 'contract' AND state IN ('passed', 'failed') AND build_hash = ?1"
           " AND result IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT ?2");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, hash);
    sqlite3_bind_int(st, 2, CONTRACT_COMPARE_MAX_DEVICES);
    json_t *out = json_object();
    int rc, r = out ? 0 : -ENOMEM;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *dev = (const char *)sqlite3_column_text(st, 0);
        json_t *e = json_pack("{s:I, s:o}", "job_id", (json_int_t)sqlite3_column_int64(st, 1),
                              "measured", store_col_json(st, 2));
        if (!e)
            r = -ENOMEM;
        else if (dev)
            json_object_set_new(out, dev, e);
        else
            json_decref(e);
    }
    if (r == 0 && rc != SQLITE_DONE)
        r = store_err(s, rc, "compare contracts");
    sqlite3_reset(st);
    if (r < 0)
        json_decref(out);
    else
        *ret = out;
    return r;
}

/* A value both sides measured: absent, null and the undecided words are not
 * a contract to compare (docs/CONTRACT.md "Limits"). */
static bool decided(const json_t *v)
{
    const char *s = json_string_value(v);
    return v && !json_is_null(v) &&
           !(s && (!strcmp(s, "indistinguishable") || !strcmp(s, "not_probed") ||
                   !strcmp(s, "not_offered")));
}

static int add_change(json_t *list, const char *dev, const char *dt, const char *field,
                      const json_t *b, const json_t *h, const json_t *bj, const json_t *hj)
{
    return json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:O, s:O, s:O, s:O}", "device",
                                                 dev, "dtype", dt, "field", field, "base", b,
                                                 "head", h, "base_job", bj, "head_job", hj));
}

/* The fields of one dtype that changed. transcendental_error's max_ulp is a
 * figure, not a category (its growth within a kind is what drift is for):
 * only its kind is compared; conversion_measured_from says where a value came
 * from, not what the device does. */
static int compare_dtype(json_t *list, const char *dev, const char *dt, const json_t *b,
                         const json_t *h, const json_t *bj, const json_t *hj)
{
    const char *key;
    const json_t *bv;
    json_object_foreach((json_t *)b, key, bv)
    {
        const json_t *hv = json_object_get(h, key);
        const char *field = key; /* key itself drives the iteration */
        if (!strcmp(key, "conversion_measured_from"))
            continue;
        if (!strcmp(key, "transcendental_error")) {
            bv = json_object_get(bv, "kind");
            hv = json_object_get(hv, "kind");
            field = "transcendental_error.kind";
        }
        if (decided(bv) && decided(hv) && !json_equal((json_t *)bv, (json_t *)hv) &&
            add_change(list, dev, dt, field, bv, hv, bj, hj) < 0)
            return -ENOMEM;
    }
    return 0;
}

int nvd_store_compare_contracts(nvd_store *s, const char *base_hash, const char *head_hash,
                                json_t **ret_changes, int64_t *ret_devices)
{
    json_t *bm = NULL, *hm = NULL, *list = json_array();
    int r = list ? contracts_of(s, base_hash, &bm) : -ENOMEM;
    if (r == 0)
        r = contracts_of(s, head_hash, &hm);
    int64_t n = 0;
    const char *dev;
    const json_t *be;
    json_object_foreach(r == 0 ? bm : NULL, dev, be)
    {
        const json_t *he = json_object_get(hm, dev);
        if (!he)
            continue;
        n++;
        const json_t *bc = json_object_get(be, "measured"), *hc = json_object_get(he, "measured");
        const char *dt;
        const json_t *bd;
        json_object_foreach((json_t *)bc, dt, bd)
        {
            const json_t *hd = json_object_get(hc, dt);
            if (r == 0 && json_is_object(hd))
                r = compare_dtype(list, dev, dt, bd, hd, json_object_get(be, "job_id"),
                                  json_object_get(he, "job_id"));
        }
    }
    json_decref(bm);
    json_decref(hm);
    if (r < 0) {
        json_decref(list);
        return r;
    }
    *ret_changes = list;
    *ret_devices = n;
    return 0;
}
