/* Gradient jobs (gradient.h): the job skeleton of worker/runner/job.h with the
 * gradient kind's steps. Cases run on a pool of threads, one backend context
 * each; per case (case.c) the inputs (moved into the op's differentiable
 * domain), the formula check, the device check through nv_backward_call, the
 * determinism check and second order; the result names the failing check, the
 * input, the gradient elements that are off and their values. */
#include "gradient.h"

#include <errno.h>
#include <string.h>

#include "gradient_internal.h"
#include "worker/runner/err.h"

static int g_parse(void *job, char **ret_ptr, char **ret_msg)
{
    gjob *j = job;
    return nv_gradspec_parse(j->b.spec_json, &j->g, ret_ptr, ret_msg);
}

static bool listed(const json_t *arr, const char *name)
{
    size_t k;
    json_t *v;
    json_array_foreach(arr, k,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return true;
    return false;
}

/* describe(): refuse inference-only backends and, in deterministic mode,
 * ops the backend declares non-deterministic. */
static int g_setup(void *job, char **ret_err)
{
    gjob *j = job;
    const nvw_job_base *b = &j->b;
    const char *op = j->g->base->op->name;
    if (json_is_true(json_object_get(b->describe, "inference_only")) || !b->table->backward)
        return nvw_set_err(
            ret_err, -ENOTSUP,
            "backend '%s' is inference-only (describe: \"inference_only\": true%s): "
            "it offers no backward, so gradient job for op '%s' cannot run; op jobs still "
            "run on it",
            b->backend_spec, b->table->backward ? "" : ", no backward entry", op);
    j->nondeterministic = listed(json_object_get(b->describe, "nondeterministic_ops"), op);
    if (j->nondeterministic && j->g->base->deterministic)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "op '%s' is non-deterministic on backend '%s' (listed in describe's "
                           "\"nondeterministic_ops\", e.g. reduce=random) and the job requires "
                           "\"deterministic\": true; refused instead of run",
                           op, b->backend_spec);
    j->saved = json_object_get(json_object_get(b->describe, "saved"), op);
    j->b.n_cases = j->g->base->n_cases;
    return 0;
}

/* Case i of the pool, placed by its index by the skeleton. */
static json_t *g_case(void *job, void *ctx, int64_t i)
{
    return nvw_grad_case(job, ctx, i);
}

static json_t *g_result(void *job)
{
    const gjob *j = job;
    int64_t n = j->g->base->n_cases, passed = 0, failed = 0, errors = 0;
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
        "{s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:{s:I, s:I, s:I, s:I}, s:o}", "verdict",
        failed   ? "failed"
        : errors ? "error"
                 : "passed",
        "kind", "gradient", "op", j->g->base->op->name, "backend", j->b.backend_spec, "device",
        json_object_get(j->b.describe, "device"), "mode", json_object_get(j->b.describe, "mode"),
        "contract", json_object_get(j->b.describe, "contract"), "build",
        build ? build : json_object_get(j->b.describe, "build"), "summary", "cases", (json_int_t)n,
        "passed", (json_int_t)passed, "failed", (json_int_t)failed, "errors", (json_int_t)errors,
        "cases", cases);
    if (r)
        json_object_set_new(r, "gradient", nvw_grad_settings(j));
    return r;
}

static void g_done(void *job)
{
    nv_gradspec_free(((gjob *)job)->g);
}

static const nvw_runner gradient_runner = {.what = "gradient case",
                                           .invalid = "invalid gradient job",
                                           .parse = g_parse,
                                           .setup = g_setup,
                                           .run_case = g_case,
                                           .result = g_result,
                                           .done = g_done};

int nvw_run_gradient(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                     json_t **ret_result, char **ret_err)
{
    gjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&gradient_runner, &j.b, &j, spec, backend_spec, opts, ret_result,
                          ret_err);
}
