/* Fused jobs (fused.h): the job skeleton of worker/runner/job.h with the fused
 * kind's steps: parse the spec (and hash its graph), refuse a backend without a
 * graph entry, run the cases on a pool of threads (one backend context each,
 * results placed by case index so the output does not depend on the thread
 * count) and build the result. The per-case work is in case.c. */
#include "fused_internal.h"

#include <errno.h>
#include <string.h>

#include "common/sha256.h"
#include "worker/runner/err.h"

static int f_parse(void *job, char **ret_ptr, char **ret_msg)
{
    fjob *j = job;
    int r = nv_fusedspec_parse(j->b.spec_json, &j->s, ret_ptr, ret_msg);
    if (r == 0)
        nv_sha256_hex(j->s->graph_text, strlen(j->s->graph_text), j->graph_hash);
    return r;
}

static int f_check(void *job, char **ret_err)
{
    const fjob *j = job;
    if (!j->b.table->graph)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' has no graph entry (nv_backend.graph is NULL): it cannot "
                           "run fused jobs; op jobs still run on it",
                           j->b.backend_spec);
    return 0;
}

static int f_setup(void *job, char **ret_err)
{
    (void)ret_err;
    fjob *j = job;
    j->b.n_cases = j->s->n_cases;
    return 0;
}

/* Case i of the pool, placed by its index by the skeleton. */
static json_t *f_case(void *job, void *ctx, int64_t i)
{
    return nvw_fused_case(job, ctx, i);
}

static json_t *f_result(void *job)
{
    const fjob *j = job;
    int64_t n = j->s->n_cases, passed = 0, failed = 0, errors = 0;
    json_t *cases = json_array();
    for (int64_t i = 0; cases && i < n; i++) {
        const char *v = json_string_value(json_object_get(j->b.cases[i], "verdict"));
        passed += v && !strcmp(v, "passed");
        failed += v && !strcmp(v, "failed");
        errors += !v || !strcmp(v, "error");
        json_array_append(cases, j->b.cases[i]);
    }
    json_t *build = json_object_get(j->b.spec_json, "build");
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:I, s:{s:I, s:I, s:I, s:I}, "
        "s:o}",
        "verdict",
        failed   ? "failed"
        : errors ? "error"
                 : "passed",
        "kind", "fused", "op", "fused", "graph_hash", j->graph_hash, "backend", j->b.backend_spec,
        "device", json_object_get(j->b.describe, "device"), "mode",
        json_object_get(j->b.describe, "mode"), "contract",
        json_object_get(j->b.describe, "contract"), "backend_build",
        json_object_get(j->b.describe, "build"), "build",
        build ? build : json_object_get(j->b.describe, "build"), "seed", (json_int_t)j->s->seed,
        "summary", "cases", (json_int_t)n, "passed", (json_int_t)passed, "failed",
        (json_int_t)failed, "errors", (json_int_t)errors, "cases", cases);
    const char *name = json_string_value(json_object_get(j->b.spec_json, "name"));
    if (r && name)
        json_object_set_new(r, "name", json_string(name));
    if (r)
        json_object_set_new(r, "intermediate_dtype",
                            json_string(nv_dtype_name(j->s->intermediate)));
    return r;
}

static void f_done(void *job)
{
    nv_fusedspec_free(((fjob *)job)->s);
}

static const nvw_runner fused_runner = {.what = "fused case",
                                        .invalid = "invalid fused job",
                                        .parse = f_parse,
                                        .check = f_check,
                                        .setup = f_setup,
                                        .run_case = f_case,
                                        .result = f_result,
                                        .done = f_done};

int nvw_run_fused(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err)
{
    fjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&fused_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
