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
    "SELECT id, state, build_hash, finished_at, result -> '$.contract',"                         \
    " result -> '$.measured.contract', result -> '$.judged', result -> '$.mismatches',"          \
    " result -> '$.mode' FROM jobs WHERE kind = 'contract' AND state IN ('passed', 'failed')"    \
    " AND (device = ?1 OR (device IS NULL AND leased_by = ?1))"                                   \
    " AND (?2 IS NULL OR build_hash = ?2) AND result IS NOT NULL ORDER BY id DESC LIMIT 1"

/* A mismatch without its evidence (the job has it): field, declared, measured. */
static json_t *mismatch_fields(json_t *mism)
{
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(mism, i, m)
    {
        json_t *c = json_pack("{s:O?, s:O?, s:O?}", "field", json_object_get(m, "field"),
                              "declared", json_object_get(m, "declared"), "measured",
                              json_object_get(m, "measured"));
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
                              device, "job_id", store_col_int(st, 0), "state",
                              store_col_str(st, 1), "build_id", store_col_str(st, 2),
                              "finished_at", store_col_time(st, 3), "mode", store_col_json(st, 8),
                              "declared", store_col_json(st, 4), "measured",
                              store_col_json(st, 5), "judged", store_col_json(st, 6),
                              "mismatches", mismatch_fields(mism));
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
