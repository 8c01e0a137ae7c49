/* The promoter (promote.h). */
#include "promote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/store/store_suite.h"

static bool hex64(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == 64;
}

static int promote_case(nvd_store *s, int64_t job_id, const json_t *c, int64_t now)
{
    const json_t *sig = json_object_get(c, "signature");
    const char *id = json_string_value(json_object_get(sig, "id"));
    const char *art = json_string_value(json_object_get(c, "minimized_artifact"));
    if (!hex64(id) || !hex64(art))
        return 0;
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
    return r;
}

int nvd_promote_result(nvd_store *s, int64_t job_id, const json_t *result, int64_t now)
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
            r = promote_case(s, job_id, c, now);
        }
        if (r < 0)
            return r;
    }
    return 0;
}
