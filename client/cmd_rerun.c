/* numvalctl submit --rerun-failed JOB_ID: the job's spec restricted to its
 * failed cases (docs/CLIENT.md "Rerun failed"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

/* Keep in spec[axis] (an array) the values some failed case has at key; the
 * spec's order is kept. *ret_kept, *ret_total: the counts. An absent axis
 * (a default such as layouts ["contiguous"]) is left absent when every failed
 * case has the default, else set to the values seen. */
static int restrict_axis(json_t *spec, const char *axis, const char *key, const json_t *failed,
                         size_t *ret_kept, size_t *ret_total)
{
    const json_t *vals = json_object_get(spec, axis);
    json_t *seen = json_array(), *kept = json_array();
    if (!seen || !kept) {
        json_decref(seen);
        json_decref(kept);
        return -ENOMEM;
    }
    size_t i;
    const json_t *cs;
    json_array_foreach(failed, i, cs)
    {
        const json_t *v = json_object_get(cs, key);
        if (json_object_get(cs, "expect_error") || !v)
            continue;
        size_t k;
        const json_t *s;
        bool dup = false;
        json_array_foreach(seen, k, s) dup = dup || json_equal((json_t *)s, (json_t *)v);
        if (!dup)
            json_array_append(seen, (json_t *)v);
    }
    if (json_is_array(vals)) {
        json_array_foreach(vals, i, cs)
        {
            size_t k;
            const json_t *s;
            bool hit = false;
            json_array_foreach(seen, k, s) hit = hit || json_equal((json_t *)s, (json_t *)cs);
            if (hit)
                json_array_append(kept, (json_t *)cs);
        }
        *ret_total = json_array_size(vals);
    } else {
        json_array_extend(kept, seen);
        *ret_total = json_array_size(seen);
    }
    *ret_kept = json_array_size(kept);
    int r = 0;
    if (json_array_size(kept) > 0 && (json_is_array(vals) || json_array_size(seen) > 0))
        r = json_object_set(spec, axis, kept) < 0 ? -ENOMEM : 0;
    json_decref(seen);
    json_decref(kept);
    return r;
}

/* Invalid-input cases ("expect_error" on the case) are rerun only for the
 * kinds that failed. */
static int restrict_expect(json_t *spec, const json_t *failed)
{
    json_t *kinds = json_array();
    if (!kinds)
        return -ENOMEM;
    size_t i;
    const json_t *cs;
    json_array_foreach(failed, i, cs)
    {
        const json_t *k = json_object_get(cs, "expect_error");
        size_t j;
        const json_t *s;
        bool dup = false;
        json_array_foreach(kinds, j, s) dup = dup || json_equal((json_t *)s, (json_t *)k);
        if (json_is_string(k) && !dup)
            json_array_append(kinds, (json_t *)k);
    }
    int r = 0;
    if (json_array_size(kinds) == 0)
        json_object_del(spec, "expect_error");
    else
        r = json_object_set(spec, "expect_error", json_pack("{sO}", "case", kinds)) < 0 ? -ENOMEM
                                                                                        : 0;
    json_decref(kinds);
    return r;
}

/* Suite replays: the failed suite cases, by id. */
static json_t *rerun_suite(const json_t *spec, const json_t *failed)
{
    json_t *ids = json_array(), *out = json_object();
    size_t i;
    const json_t *cs;
    json_array_foreach(failed, i, cs) if (json_is_integer(json_object_get(cs, "suite_case")))
        json_array_append(ids, json_object_get(cs, "suite_case"));
    const char *keep[] = {"kind", "device", "priority", "build", "name"};
    for (size_t k = 0; out && k < sizeof keep / sizeof keep[0]; k++)
        if (json_object_get(spec, keep[k]))
            json_object_set(out, keep[k], json_object_get(spec, keep[k]));
    if (out && ids)
        json_object_set_new(out, "filter", json_pack("{sO}", "ids", ids));
    json_decref(ids);
    return out;
}

int nvc_rerun_spec(const nvc_conn *c, const char *job_id, json_t **ret)
{
    char *id = nvc_escape(job_id), path[512], *err = NULL;
    if (!id)
        return -ENOMEM;
    snprintf(path, sizeof path, "/api/v1/jobs/%s", id);
    free(id);
    json_t *resp = NULL, *cases = NULL, *failed = json_array(), *spec = NULL;
    int r = nvc_api(c, "GET", path, NULL, &resp, &err);
    if (r < 0) {
        nvc_error("cannot read job '%s': %s", job_id, err ? err : strerror(-r));
        goto out;
    }
    const json_t *job = json_object_get(resp, "job");
    const char *kind = json_string_value(json_object_get(job, "kind"));
    const char *state = json_string_value(json_object_get(job, "state"));
    spec = json_deep_copy(json_object_get(job, "spec"));
    r = -ENOMEM;
    if (!spec || !failed || !kind || !state)
        goto out;
    r = -EINVAL;
    if (strcmp(state, "failed") && strcmp(state, "error")) {
        nvc_error("job %s %s: it has no failed case to rerun", job_id,
                  !strcmp(state, "passed") ? "passed" : "has not finished");
        goto out;
    }
    /* A long run has no cases: its verdict is the whole run's. */
    if (!strcmp(kind, "longrun")) {
        fprintf(stderr, "numvalctl: job %s: a long run is rerun whole\n", job_id);
        r = 0;
        goto out;
    }
    r = nvc_fetch_cases(c, job_id, false, &cases, &err);
    if (r < 0) {
        nvc_error("cannot read the cases of job '%s': %s", job_id, err ? err : strerror(-r));
        goto out;
    }
    size_t i;
    const json_t *cs;
    json_array_foreach(cases, i, cs)
    {
        const char *v = json_string_value(json_object_get(cs, "verdict"));
        if (v && strcmp(v, "passed"))
            json_array_append(failed, (json_t *)cs);
    }
    r = -EINVAL;
    if (json_array_size(failed) == 0) {
        nvc_error("job %s (%s) has no failed case to rerun%s", job_id, state,
                  !strcmp(state, "error") ? json_string_value(json_object_get(job, "error"))
                                                ? ": it ended in error before its cases ran; "
                                                  "submit it again as it is"
                                                : ""
                                          : "");
        goto out;
    }
    if (!strcmp(kind, "suite")) {
        json_t *s = rerun_suite(spec, failed);
        json_decref(spec);
        spec = s;
        r = spec ? 0 : -ENOMEM;
        fprintf(stderr, "numvalctl: job %s: rerunning its %zu failed suite case(s)\n", job_id,
                json_array_size(failed));
        goto out;
    }
    /* The spec cannot list cases: each axis keeps the values the failed cases
     * used, so the rerun is the smallest job of this spec that contains them. */
    static const char *const axes[][2] = {
        {"dtypes", "dtype"}, {"shapes", "shape"}, {"layouts", "layout"}, {"inputs", "input"}};
    bool fused = !strcmp(kind, "fused");
    size_t product = 1, total = 1;
    r = 0;
    for (size_t k = 0; k < 4 && r == 0; k++) {
        if (fused && k != 0 && k != 3)
            continue;
        if (!strcmp(kind, "gradient") && k == 2)
            continue;
        size_t kept = 0, all = 0;
        r = restrict_axis(spec, axes[k][0], axes[k][1], failed, &kept, &all);
        product *= kept ? kept : 1;
        total *= all ? all : 1;
    }
    if (r == 0 && !fused && !strcmp(kind, "op"))
        r = restrict_expect(spec, failed);
    if (r < 0)
        goto out;
    json_int_t samples = json_integer_value(json_object_get(spec, "samples"));
    size_t combos = product * (size_t)(samples > 1 ? samples : 1);
    fprintf(stderr,
            "numvalctl: job %s: %zu of %lld cases failed; rerunning %zu case(s): each axis "
            "restricted to the values the failed cases used%s\n",
            job_id, json_array_size(failed),
            (long long)json_integer_value(json_object_get(job, "cases_total")), combos,
            combos > json_array_size(failed) ? " (a job spec cannot list single cases, so some "
                                               "combinations that passed run again)"
                                             : "");
out:
    if (r == 0)
        *ret = spec;
    else
        json_decref(spec);
    free(err);
    json_decref(resp);
    json_decref(cases);
    json_decref(failed);
    return r;
}
