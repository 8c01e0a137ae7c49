/* The promoter (promote.h). */
#include "promote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/store/store_suite.h"
#include "tolerance.h"

static bool hex64(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == 64;
}

/* A failure found under the job's own tolerance ("tolerance" in the spec,
 * source "job") enters the permanent suite only if it also fails under the
 * tolerance that applies to its op and dtype without the job: the stored one
 * for the device's mode, else the shipped default. A tighter demand of the job
 * is the job's business, not a device regression (docs/API.md "Suite").
 * Returns whether c may be promoted; a store error as a negative errno. */
static int eligible(nvd_store *s, int64_t job_id, const json_t *result, const json_t *c)
{
    const json_t *tol = json_object_get(c, "tolerance");
    const char *src = json_string_value(json_object_get(tol, "source"));
    if (!src || strcmp(src, "job"))
        return 1;
    const json_t *sig = json_object_get(c, "signature");
    const char *kind = json_string_value(json_object_get(sig, "kind"));
    bool fused = kind && !strcmp(kind, "fused");
    /* A fused case is judged at its first divergent node: that node's op, in
     * the dtype it was judged in, and its error there. */
    const json_t *fd = json_object_get(c, "first_divergent");
    const json_t *named = fused ? sig : c;
    json_t *view =
        json_pack("{sO? sO? sO? sO?}", "failure_class", json_object_get(c, "failure_class"),
                  "tolerance", tol, "max_ulp", json_object_get(fused ? fd : c, "max_ulp"),
                  "max_abs", json_object_get(fused ? fd : c, "max_abs"));
    if (!view)
        return -ENOMEM;
    json_t *base = NULL;
    int r = nvd_tolerance_current(s, json_string_value(json_object_get(named, "op")),
                                  fused ? NULL : json_object_get(result, "attrs"),
                                  json_string_value(json_object_get(named, "dtype")),
                                  fused ? NULL : json_string_value(json_object_get(c, "out_dtype")),
                                  json_object_get(result, "mode"), &base);
    if (r < 0 && r != -ENOENT) {
        json_decref(view);
        return r;
    }
    char why[300];
    bool ok = nvd_tolerance_fails_under(view, base, why, sizeof why);
    if (!ok)
        nv_log_info("job %lld case %lld: not promoted: judged by the job's own tolerance, and %s",
                    (long long)job_id, (long long)json_integer_value(json_object_get(c, "index")),
                    why);
    json_decref(base);
    json_decref(view);
    return ok;
}

static int promote_case(nvd_store *s, int64_t job_id, const json_t *result, const json_t *c,
                        int64_t now, json_t *new_ids)
{
    const json_t *sig = json_object_get(c, "signature");
    const char *id = json_string_value(json_object_get(sig, "id"));
    const char *art = json_string_value(json_object_get(c, "minimized_artifact"));
    if (!hex64(id) || !hex64(art))
        return 0;
    int ok = eligible(s, job_id, result, c);
    if (ok <= 0)
        return ok;
    json_t *detail = json_deep_copy(sig);
    if (!detail)
        return -ENOMEM;
    json_object_del(detail, "id");
    char *text = json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(detail);
    if (!text)
        return -ENOMEM;
    const char *orig = json_string_value(json_object_get(c, "artifact"));
    /* A fused case's own op is "fused" and its dtype the case's: the suite case
     * is named by what its signature says failed, the first divergent op and
     * the dtype it was judged in (docs/ARTIFACTS.md "Fused reproducers"). */
    const char *kind = json_string_value(json_object_get(sig, "kind"));
    const json_t *named = kind && !strcmp(kind, "fused") ? sig : c;
    /* A model case's op is "model": its reproducer is an op case of the first
     * divergent node, named by the signature's op and dtype the same way. */
    const char *rkind = json_string_value(json_object_get(result, "kind"));
    /* A serving case's op is "serving" too: its reproducer is a serving pair or
     * an op case of the first divergent node's op. */
    if (rkind && (!strcmp(rkind, "model") || !strcmp(rkind, "serving")))
        named = sig;
    nvd_suite_new n = {
        .signature = id,
        .signature_json = text,
        .op = json_string_value(json_object_get(named, "op")),
        .dtype = json_string_value(json_object_get(named, "dtype")),
        .failure_class = json_string_value(json_object_get(sig, "failure_class")),
        .artifact = art,
        .origin_artifact = hex64(orig) ? orig : NULL,
        .job_id = job_id,
        .case_idx = json_integer_value(json_object_get(c, "index")),
    };
    int64_t sid = 0;
    bool created = false;
    int r = nvd_store_suite_promote(s, &n, now, &sid, &created);
    free(text);
    if (r < 0)
        nv_log_warn("job %lld: promoting signature %.12s failed: %s", (long long)job_id, id,
                    strerror(-r));
    else
        nv_log_info("job %lld: signature %.12s %s suite case %lld", (long long)job_id, id,
                    created ? "promoted to new" : "recorded again on", (long long)sid);
    if (r >= 0 && created && new_ids && json_array_append_new(new_ids, json_integer(sid)) < 0)
        r = -ENOMEM;
    return r;
}

int nvd_promote_result(nvd_store *s, int64_t job_id, const json_t *result, int64_t now)
{
    return nvd_promote_result_ids(s, job_id, result, now, NULL);
}

int nvd_promote_result_ids(nvd_store *s, int64_t job_id, const json_t *result, int64_t now,
                           json_t *new_ids)
{
    const char *kind = json_string_value(json_object_get(result, "kind"));
    bool suite = kind && !strcmp(kind, "suite");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(result, "cases"), i, c)
    {
        const json_t *sc = json_object_get(c, "suite_case");
        const char *v = json_string_value(json_object_get(c, "verdict"));
        int r = 0;
        if (suite && json_is_integer(sc) && v) {
            r = nvd_store_suite_run(s, json_integer_value(sc), job_id, v, now);
            if (r < 0)
                nv_log_warn("job %lld: recording suite case %lld failed: %s", (long long)job_id,
                            (long long)json_integer_value(sc), strerror(-r));
        } else if (!suite) {
            r = promote_case(s, job_id, result, c, now, new_ids);
        }
        if (r < 0)
            return r;
    }
    return 0;
}
