/* The head and tail of a kind's result, the verdict, summary and cases they
 * are made of, and a failed case handed to on_failure (job.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

typedef struct tally {
    int64_t passed, failed, errors;
} tally;

static tally count(const nvw_job_base *b)
{
    tally t = {0, 0, 0};
    for (int64_t i = 0; i < b->n_cases; i++) {
        const char *v = json_string_value(json_object_get(b->cases[i], "verdict"));
        t.passed += v && !strcmp(v, "passed");
        t.failed += v && !strcmp(v, "failed");
        t.errors += !v || !strcmp(v, "error");
    }
    return t;
}

static const char *verdict_of(tally t)
{
    return t.failed ? "failed" : t.errors ? "error" : "passed";
}

const char *nvw_result_verdict(const nvw_job_base *b)
{
    return verdict_of(count(b));
}

json_t *nvw_result_summary(const nvw_job_base *b)
{
    tally t = count(b);
    return json_pack("{s:I, s:I, s:I, s:I}", "cases", (json_int_t)b->n_cases, "passed",
                     (json_int_t)t.passed, "failed", (json_int_t)t.failed, "errors",
                     (json_int_t)t.errors);
}

json_t *nvw_result_cases(const nvw_job_base *b)
{
    json_t *cases = json_array();
    for (int64_t i = 0; cases && i < b->n_cases; i++)
        if (json_array_append(cases, b->cases[i])) {
            json_decref(cases);
            cases = NULL;
        }
    return cases;
}

json_t *nvw_result_open(const nvw_job_base *b, const char *kind, const char *graph_hash,
                        uint64_t seed)
{
    return nvw_result_open_keyed(b, kind, "graph_hash", graph_hash, seed);
}

json_t *nvw_result_open_keyed(const nvw_job_base *b, const char *kind, const char *key,
                              const char *value, uint64_t seed)
{
    const json_t *d = b->describe, *build = json_object_get(b->spec_json, "build");
    /* s*: a NULL value leaves its key out (jansson >= 2.11) */
    return json_pack("{s:s, s:s, s:s, s:s*, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:I}", "verdict",
                     nvw_result_verdict(b), "kind", kind, "op", kind, key, value, "backend",
                     b->backend_spec, "device", json_object_get(d, "device"), "mode",
                     json_object_get(d, "mode"), "contract", json_object_get(d, "contract"),
                     "backend_build", json_object_get(d, "build"), "build",
                     build ? build : json_object_get(d, "build"), "seed", (json_int_t)seed);
}

json_t *nvw_result_close(const nvw_job_base *b, json_t *r)
{
    json_t *cases = nvw_result_cases(b), *sum = nvw_result_summary(b);
    const char *name = json_string_value(json_object_get(b->spec_json, "name"));
    if (!r || !cases || !sum) {
        json_decref(cases);
        json_decref(sum);
        json_decref(r);
        return NULL;
    }
    /* json_object_set_new takes the value even when it fails */
    if (json_object_set_new(r, "summary", sum) | json_object_set_new(r, "cases", cases) ||
        (name && json_object_set_new(r, "name", json_string(name)))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

int nvw_store_failure(nvw_job_base *b, json_t *cj, int case_index, const json_t *manifest, int n,
                      const char *const *names, const nv_tensor *const *tensors)
{
    const nvw_run_opts *o = b->opts;
    if (!o || !o->on_failure)
        return 0;
    nvw_failure f = {.case_index = case_index,
                     .case_json = cj,
                     .manifest = manifest,
                     .n_tensors = n,
                     .names = names,
                     .tensors = tensors};
    char *id = NULL;
    pthread_mutex_lock(&b->lock);
    int r = o->on_failure(o->ud, &f, &id);
    pthread_mutex_unlock(&b->lock);
    int stored = r >= 0 && id;
    if (stored && json_object_set_new(cj, "artifact", json_string(id)))
        stored = -ENOMEM;
    free(id);
    return stored;
}
