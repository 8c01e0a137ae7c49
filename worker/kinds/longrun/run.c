/* Long-run jobs (longrun.h): the job skeleton of worker/runner/job.h with the
 * long-run kind's steps: refuse a backend without backward ops, run every seed
 * on the host reference and on the device (one backend context per thread),
 * then judge (judge.c) and assemble the result. */
#include "longrun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longrun_internal.h"
#include "worker/runner/case_pool.h"
#include "worker/runner/err.h"
#include "worker/runner/job.h"

typedef struct lr_ctx {
    nvw_job_base b;     /* spec, backend, describe(), options */
    nv_longrun_spec *s; /* owned; job.s points at it */
    nvw_lr_job job;
    const json_t *saved;
    json_t *policy; /* the AMP policy (the spec's or the shipped default) */
    nvw_amp amp;
    nvw_data data;
} lr_ctx;

static int lr_parse(void *job, char **ret_ptr, char **ret_msg)
{
    lr_ctx *c = job;
    int r = nv_longrun_parse(c->b.spec_json, &c->s, ret_ptr, ret_msg);
    c->job.s = c->s;
    return r;
}

static int lr_check(void *job, char **ret_err)
{
    const lr_ctx *c = job;
    if (!c->b.table->backward)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' has no backward entry: a long-run job trains through "
                           "the backend's backward ops",
                           c->b.backend_spec);
    if (c->job.s->driven && !c->b.table->train)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "not offered: backend '%s' has no train entry (device-driven "
                           "training, backend ABI version 3)",
                           c->b.backend_spec);
    return 0;
}

static int lr_setup(void *job, char **ret_err)
{
    lr_ctx *c = job;
    if (json_is_true(json_object_get(c->b.describe, "inference_only")))
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' declares itself inference-only: a long-run job needs "
                           "its backward ops",
                           c->b.backend_spec);
    c->saved = json_object_get(c->b.describe, "saved");
    const nv_longrun_spec *s = c->job.s;
    c->policy = s->policy ? json_incref(s->policy) : json_loads(nvw_amp_default_json(), 0, NULL);
    if (!c->policy)
        return -ENOMEM;
    if (s->amp) {
        char *msg = NULL;
        if (nvw_amp_parse(c->policy, s->amp_dtype, &c->amp, &msg) < 0) {
            nvw_set_err(ret_err, -EINVAL, "/amp/policy: %s", msg ? msg : "invalid AMP policy");
            free(msg);
            return -EINVAL;
        }
    }
    int r = nvw_data_init(&c->data, s);
    if (r < 0)
        return r;
    c->job.has_repeat = s->deterministic;
    c->job.has_resumed = s->driven && s->checkpoint_at > 0;
    return 0;
}

/* Task k of the pool: 0..n-1 reference seeds, n..2n-1 device seeds, 2n the
 * repeat (when deterministic), then the resumed run (device-driven with a
 * checkpoint). Only device tasks use the backend context. */
static bool task_needs_ctx(void *ud, int64_t k)
{
    const lr_ctx *c = ud;
    return k >= c->job.s->n_seeds;
}

static int run_task(void *ud, void *dev_ctx, int64_t k, char *err, size_t errlen)
{
    lr_ctx *c = ud;
    const nv_longrun_spec *s = c->job.s;
    int n = s->n_seeds;
    nvw_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.host = k < n;
    bool resumed = k == 2 * n + (c->job.has_repeat ? 1 : 0);
    nvw_run *out = k < n       ? &c->job.ref[k]
                   : k < 2 * n ? &c->job.dev[k - n]
                   : resumed   ? &c->job.resumed
                               : &c->job.repeat;
    uint64_t seed = s->seeds[k < n ? k : k < 2 * n ? k - n : 0];
    if (!ex.host)
        ex.table = c->b.table, ex.ctx = dev_ctx, ex.saved = c->saved, ex.amp = c->amp;
    nvw_resume rs = {s->checkpoint_at, c->b.table, c->b.options};
    int r = ex.host || !s->driven
                ? nvw_train_run(s, &c->data, &ex, seed, out)
                : nvw_train_driven(s, &c->data, &ex, seed, resumed ? &rs : NULL, out);
    if (r < 0)
        snprintf(err, errlen, "%s run of seed %llu failed at step %lld: %s",
                 ex.host ? "reference" : "device", (unsigned long long)seed,
                 (long long)out->steps_done, out->err);
    return r;
}

/* The seeds on a pool (case_pool.h), one thread unless opts ask for more. */
static int lr_run(void *job, char **ret_err)
{
    lr_ctx *c = job;
    const nvw_run_opts *opts = c->b.opts;
    const nv_longrun_spec *s = c->job.s;
    nvw_case_pool_backend be = {c->b.table, c->b.options, c->b.backend_spec, false};
    nvw_case_pool p = {
        .threads = opts && opts->threads > 0 ? opts->threads : 1,
        .n = 2 * s->n_seeds + (s->deterministic ? 1 : 0) + (c->job.has_resumed ? 1 : 0),
        .run_case = run_task,
        .ud = c,
        .needs_ctx = task_needs_ctx,
        .open_ctx = nvw_case_pool_backend_open,
        .close_ctx = nvw_case_pool_backend_close,
        .ctx_ud = &be,
        .progress = opts ? opts->progress : NULL,
        .progress_ud = opts ? opts->ud : NULL,
        .cancel = opts ? opts->cancel : NULL,
    };
    return nvw_case_pool_run(&p, ret_err);
}

static json_t *amp_json(const nv_longrun_spec *s, const json_t *policy)
{
    if (!s->amp)
        return json_pack("{s:b}", "enabled", 0);
    const char *mw = json_string_value(json_object_get(policy, "master_weights"));
    return json_pack("{s:b, s:s, s:I, s:O, s:s}", "enabled", 1, "dtype",
                     nv_dtype_name(s->amp_dtype), "policy_version", (json_int_t)s->policy_version,
                     "policy", policy, "master_weights", mw ? mw : "fp32");
}

static json_t *lr_result(void *job)
{
    lr_ctx *c = job;
    const char *backend_spec = c->b.backend_spec;
    const json_t *spec = c->b.spec_json, *desc = c->b.describe, *policy = c->policy;
    const nv_longrun_spec *s = c->job.s;
    const char *verdict;
    json_t *acc = nvw_lr_judge(&c->job, &verdict);
    double ref_s = 0, dev_s = 0;
    int64_t skipped = 0, nonfinite = 0;
    for (int i = 0; i < s->n_seeds; i++) {
        ref_s += c->job.ref[i].seconds, dev_s += c->job.dev[i].seconds;
        skipped += c->job.dev[i].skipped_steps, nonfinite += c->job.dev[i].nonfinite_total;
    }
    const json_t *build = json_object_get(spec, "build");
    json_t *scaler =
        json_pack("{s:b, s:f, s:f, s:f, s:i, s:I, s:I}", "enabled", s->scaler, "init_scale",
                  s->init_scale, "growth_factor", s->growth, "backoff_factor", s->backoff,
                  "growth_interval", s->growth_interval, "skipped_steps", (json_int_t)skipped,
                  "nonfinite_elements", (json_int_t)nonfinite);
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:o, s:o, s:{s:I, s:i, s:i, s:f, s:o},"
        " s:o, s:o, s:o, s:{s:f, s:f}}",
        "verdict", verdict, "kind", "longrun", "model",
        s->model == NV_LR_MLP   ? "mlp"
        : s->model == NV_LR_CNN ? "cnn"
                                : "transformer",
        "backend", backend_spec, "device", json_object_get(desc, "device"), "mode",
        json_object_get(desc, "mode"), "contract", json_object_get(desc, "contract"), "build",
        build ? build : json_object_get(desc, "build"), "amp", amp_json(s, policy), "grad_scaler",
        scaler, "data", "seed", (json_int_t)s->data_seed, "batch", s->batch, "eval_examples",
        s->eval_examples, "loss_weight", s->loss_weight, "bayes_loss",
        nvw_json_num(c->data.bayes_loss), "acceptance", acc, "curves", nvw_lr_curves(&c->job, 60),
        "series", nvw_lr_series(&c->job), "seconds", "reference", ref_s, "device", dev_s);
    if (r)
        json_object_set_new(r, "steps", json_integer((json_int_t)s->steps));
    return r;
}

static void lr_done(void *job)
{
    lr_ctx *c = job;
    const nv_longrun_spec *s = c->job.s;
    if (s) {
        for (int i = 0; i < s->n_seeds; i++) {
            nvw_run_done(&c->job.ref[i]);
            nvw_run_done(&c->job.dev[i]);
        }
        nvw_run_done(&c->job.repeat);
        nvw_run_done(&c->job.resumed);
    }
    nvw_data_done(&c->data);
    json_decref(c->policy);
    nv_longrun_free(c->s);
}

/* describe() errors name just "backend", as long-run jobs always have. */
static const nvw_runner longrun_runner = {.invalid = "invalid job spec",
                                          .backend_unnamed = true,
                                          .parse = lr_parse,
                                          .check = lr_check,
                                          .setup = lr_setup,
                                          .run = lr_run,
                                          .result = lr_result,
                                          .done = lr_done};

int nvw_run_longrun(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err)
{
    lr_ctx c;
    memset(&c, 0, sizeof c);
    return nvw_runner_run(&longrun_runner, &c.b, &c, spec, backend_spec, opts, ret_result, ret_err);
}
