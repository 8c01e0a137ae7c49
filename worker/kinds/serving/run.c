/* Serving jobs (serving.h): the job skeleton of worker/runner/job.h with the
 * serving kind's steps: parse the spec, run the cases (dtypes x samples) of
 * the job's check on the case pool, build the result. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

static int s_parse(void *job, char **ret_ptr, char **ret_msg)
{
    sjob *j = job;
    return nv_servingspec_parse(j->b.spec_json, &j->s, ret_ptr, ret_msg);
}

static int s_setup(void *job, char **ret_err)
{
    sjob *j = job;
    j->b.n_cases = j->s->n_cases;
    if (!j->s->weights[0])
        return 0;
    char sha[65];
    int r = sv_weights_check(j->s, sha, ret_err);
    if (r == 0) /* what every case then reads (weights.c) */
        memcpy(j->s->weights_sha256, sha, sizeof sha);
    return r;
}

/* The declared accumulator and reduction order for the case dtype
 * (describe()'s contract entry; fp32 when none is declared, as the model kind
 * assumes: docs/MODEL.md "The band"). */
static void declared(scase *c)
{
    const json_t *entry =
        json_object_get(json_object_get(c->j->b.describe, "contract"), nv_dtype_name(c->dt));
    const json_t *acc = json_object_get(json_object_get(entry, "accumulator"), "dtype");
    nv_dtype a = NV_DT_FP32;
    if (!json_is_string(acc) || nv_dtype_from_name(json_string_value(acc), &a) < 0 ||
        !nv_dtype_get(a)->is_float || a == NV_DT_E8M0)
        a = c->dt == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    c->acc_name = nv_dtype_name(a);
    c->u_acc = ldexp(1.0, -(nv_dtype_get(a)->mant_bits + 1));
    const char *order = json_string_value(json_object_get(entry, "reduction_order"));
    c->sequential = order && !strcmp(order, "sequential");
    const json_t *nd = json_object_get(c->j->b.describe, "nondeterministic_ops");
    c->deterministic = json_is_array(nd) && json_array_size(nd) == 0;
}

static json_t *s_case(void *job, void *ctx, int64_t i)
{
    sjob *j = job;
    scase c = {.j = j, .ctx = ctx, .index = i};
    nv_servingspec_case(j->s, i, &c.dt, &c.sample);
    c.cj = json_pack("{sI ss ss sI sI}", "index", (json_int_t)i, "op", "serving", "dtype",
                     nv_dtype_name(c.dt), "sample", (json_int_t)c.sample, "seed",
                     (json_int_t)j->s->seed);
    if (!c.cj)
        return NULL;
    declared(&c);
    c.steps = sv_steps_offered(&c);
    int r =
        json_object_set_new(c.cj, "check", json_string(nv_serving_check_name(j->s->check))) ||
                json_object_set_new(c.cj, "accumulator", json_string(c.acc_name)) ||
                json_object_set_new(c.cj, "device_steps", json_string(c.steps ? "harness" : "ops"))
            ? -ENOMEM
            : 0;
    if (r == 0) {
        switch (j->s->check) {
        case NV_SERVE_PREFILL_DECODE:
            r = sv_check_prefill_decode(&c);
            break;
        case NV_SERVE_LONG_CONTEXT:
            r = sv_check_long_context(&c);
            break;
        case NV_SERVE_BATCH:
            r = sv_check_batch(&c);
            break;
        case NV_SERVE_SUSTAINED:
            r = sv_check_sustained(&c);
            break;
        case NV_SERVE_SAMPLING:
            r = sv_check_sampling(&c);
            break;
        default:
            r = sv_check_paged(&c);
            break;
        }
    }
    if (r == 0 && !json_object_get(c.cj, "verdict"))
        r = sv_verdict(&c, "error", "internal", "the case ended without a verdict");
    /* the checks report a model they could not make as out of memory; a
     * checkpoint that changed since the setup checked it is the other cause */
    char *werr = NULL, sha[65];
    if (r < 0 && j->s->weights[0] && sv_weights_check(j->s, sha, &werr) == -EINVAL)
        r = sv_verdict(&c, "error", "inputs", "%s (changed during the job)", werr);
    free(werr);
    if (r < 0 && sv_verdict(&c, "error", "out_of_memory", "out of memory") < 0) {
        json_decref(c.cj);
        return NULL;
    }
    return c.cj;
}

/* The result: the runner's head with the check where a graph kind has its
 * graph_hash, the decoder's sizes, the runner's tail. */
static json_t *s_result(void *job)
{
    const sjob *j = job;
    const nv_servingspec *s = j->s;
    json_t *r =
        nvw_result_open_keyed(&j->b, "serving", "check", nv_serving_check_name(s->check), s->seed);
    if (r && json_object_set_new(r, "decoder",
                                 json_pack("{s:i, s:i, s:i, s:i, s:i, s:f}", "vocab", s->vocab,
                                           "width", s->width, "heads", s->heads, "layers",
                                           s->layers, "ffn", s->ffn, "rope_base", s->rope_base))) {
        json_decref(r);
        r = NULL;
    }
    return nvw_result_close(&j->b, r);
}

static void s_done(void *job)
{
    free(((sjob *)job)->s);
}

static const nvw_runner serving_runner = {.what = "serving case",
                                          .invalid = "invalid serving job",
                                          .parse = s_parse,
                                          .setup = s_setup,
                                          .run_case = s_case,
                                          .result = s_result,
                                          .done = s_done};

int nvw_run_serving(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err)
{
    sjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&serving_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
