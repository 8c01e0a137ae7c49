/* Gradient jobs (gradient.h): the job skeleton of worker/runner/job.h with the
 * gradient kind's steps. Cases run on a pool of threads, one backend context
 * each; per case (case.c) the inputs (moved into the op's differentiable
 * domain), the formula check, the device check through nv_backward_call, the
 * determinism check, the double-backward check (nv_double_backward_call) and
 * second order; the result names the failing check, the input, the gradient
 * elements that are off and their values. Setup reads describe()'s
 * gradient_dtype and checks an inference_only declaration by calling backward. */
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

/* The name of an NV_E_* code, NULL for a code the ABI does not define. */
static const char *code_name(int r)
{
    static const char *const names[] = {
        "NV_E_INVALID",          "NV_E_SHAPE", "NV_E_DTYPE", "NV_E_UNSUPPORTED",
        "NV_E_NONDETERMINISTIC", "NV_E_NOMEM", "NV_E_DEVICE"};
    return r <= -1 && r >= -7 ? names[-r - 1] : NULL;
}

/* A device that declares inference_only must refuse backward clearly (an
 * NV_E_* code and a message): backward is called once, on case 0. A clear
 * refusal refuses the job with the device's own words; anything else (it
 * computed gradients, or refused without a code or a message) contradicts its
 * contract: every case carries a failed "contract" check (contract_mismatch)
 * and the job runs, so the gradients it does compute are judged too (a device
 * that refused gets no device check: it would only repeat the refusal). */
static int probe_inference_only(gjob *j, char **ret_err)
{
    const nvw_job_base *b = &j->b;
    const char *op = j->g->base->op->name;
    void *ctx = NULL;
    char err[512] = "", msg[512] = "";
    if (b->table->open(b->options, &ctx, err, sizeof err) != NV_OK)
        return nvw_set_err(ret_err, -ENODEV, "backend '%s' failed to open: %s", b->backend_spec,
                           err);
    int code = NV_OK;
    int r = nvw_grad_probe_backward(j, ctx, &code, msg, sizeof msg);
    b->table->close(ctx);
    if (r < 0)
        return r;
    const char *cn = code_name(code);
    if (code != NV_OK && cn && msg[0])
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' is inference-only (describe: \"inference_only\": true) "
                           "and refuses backward as it declares (%s: '%s'): gradient job for op "
                           "'%s' cannot run; op jobs still run on it",
                           b->backend_spec, cn, msg, op);
    json_t *o = json_pack("{s:b, s:s, s:b, s:i}", "passed", 0, "field", "inference_only",
                          "declared", 1, "backward_returned", code);
    if (!o)
        return -ENOMEM;
    json_object_set_new(
        o, "observed",
        code == NV_OK ? json_string("backward computed gradients although describe() declares "
                                    "\"inference_only\": true")
        : !cn         ? json_sprintf("backward refused with %d, which is no NV_E_* code", code)
                      : json_sprintf("backward refused with %s but without a message", cn));
    if (msg[0])
        json_object_set_new(o, "message", json_string(msg));
    j->contract = o;
    j->contract_refused = code != NV_OK; /* the device checks would only repeat it */
    return 0;
}

/* describe(): the declared gradient dtype; an inference-only device's
 * refusal (probe_inference_only); refuse a backend without a backward entry
 * and, in deterministic mode, ops the backend declares non-deterministic. */
static int g_setup(void *job, char **ret_err)
{
    gjob *j = job;
    const nvw_job_base *b = &j->b;
    const char *op = j->g->base->op->name;
    int r = nvw_grad_dtype_parse(j, b->describe, ret_err);
    if (r < 0)
        return r;
    if (!b->table->backward)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' is inference-only (no backward entry in its table): "
                           "gradient job for op '%s' cannot run; op jobs still run on it",
                           b->backend_spec, op);
    j->saved = json_object_get(json_object_get(b->describe, "saved"), op);
    if (json_is_true(json_object_get(b->describe, "inference_only")) &&
        (r = probe_inference_only(j, ret_err)) < 0)
        return r;
    j->nondeterministic = listed(json_object_get(b->describe, "nondeterministic_ops"), op);
    if (j->nondeterministic && j->g->base->deterministic)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "op '%s' is non-deterministic on backend '%s' (listed in describe's "
                           "\"nondeterministic_ops\", e.g. reduce=random) and the job requires "
                           "\"deterministic\": true; refused instead of run",
                           op, b->backend_spec);
    j->b.n_cases = j->g->base->n_cases;
    return 0;
}

/* Case i of the pool, placed by its index by the skeleton. */
static json_t *g_case(void *job, void *ctx, int64_t i)
{
    return nvw_grad_case(job, ctx, i);
}

/* Not nvw_result_open's head: a gradient result has no "backend_build" or
 * "seed" at the top (each case has its seed); the verdict, summary and cases
 * are the runner's. */
static json_t *g_result(void *job)
{
    const gjob *j = job;
    json_t *build = json_object_get(j->b.spec_json, "build");
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:o, s:o}", "verdict",
        nvw_result_verdict(&j->b), "kind", "gradient", "op", j->g->base->op->name, "backend",
        j->b.backend_spec, "device", json_object_get(j->b.describe, "device"), "mode",
        json_object_get(j->b.describe, "mode"), "contract",
        json_object_get(j->b.describe, "contract"), "build",
        build ? build : json_object_get(j->b.describe, "build"), "summary",
        nvw_result_summary(&j->b), "cases", nvw_result_cases(&j->b));
    if (r)
        json_object_set_new(r, "gradient", nvw_grad_settings(j));
    return r;
}

static void g_done(void *job)
{
    nv_gradspec_free(((gjob *)job)->g);
    json_decref(((gjob *)job)->contract);
}

static const nvw_runner gradient_runner = {.what = "gradient case",
                                           .configures = true,
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
