/* Long-run jobs: load the backend, run every seed on the host reference and on
 * the device (one backend context per thread), then judge (worker/kinds/longrun/judge.c)
 * and assemble the result. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/runner/case_pool.h"
#include "worker/kinds/op/op_internal.h"
#include "longrun.h"
#include "longrun_internal.h"

typedef struct lr_ctx {
    nvw_lr_job job;
    const nvw_run_opts *opts;
    const nv_backend *table;
    const char *options;
    const json_t *saved;
    nvw_amp amp;
    nvw_data data;
} lr_ctx;

static void set_err(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char **ret, const char *fmt, ...)
{
    if (!ret || *ret)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(ret, fmt, ap) < 0)
        *ret = NULL;
    va_end(ap);
}

/* Task k of the pool: 0..n-1 reference seeds, n..2n-1 device seeds, 2n the
 * repeat. Only device tasks use the backend context. */
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
    nvw_run *out = k < n ? &c->job.ref[k] : k < 2 * n ? &c->job.dev[k - n] : &c->job.repeat;
    uint64_t seed = s->seeds[k < n ? k : k < 2 * n ? k - n : 0];
    if (!ex.host)
        ex.table = c->table, ex.ctx = dev_ctx, ex.saved = c->saved, ex.amp = c->amp;
    int r = nvw_train_run(s, &c->data, &ex, seed, out);
    if (r < 0)
        snprintf(err, errlen, "%s run of seed %llu failed at step %lld: %s",
                 ex.host ? "reference" : "device", (unsigned long long)seed,
                 (long long)out->steps_done, out->err);
    return r;
}

/* The seeds on a pool (case_pool.h), one thread unless opts ask for more. */
static int run_tasks(lr_ctx *c, const char *backend_spec, char **ret_err)
{
    const nv_longrun_spec *s = c->job.s;
    nvw_case_pool_backend be = {c->table, c->options, backend_spec};
    nvw_case_pool p = {
        .threads = c->opts && c->opts->threads > 0 ? c->opts->threads : 1,
        .n = 2 * s->n_seeds + (s->deterministic ? 1 : 0),
        .run_case = run_task,
        .ud = c,
        .needs_ctx = task_needs_ctx,
        .open_ctx = nvw_case_pool_backend_open,
        .close_ctx = nvw_case_pool_backend_close,
        .ctx_ud = &be,
        .progress = c->opts ? c->opts->progress : NULL,
        .progress_ud = c->opts ? c->opts->ud : NULL,
        .cancel = c->opts ? c->opts->cancel : NULL,
    };
    return nvw_case_pool_run(&p, ret_err);
}

static int read_describe(lr_ctx *c, json_t **ret, char **ret_err)
{
    void *ctx = NULL;
    char err[512] = "";
    if (c->table->open(c->options, &ctx, err, sizeof err) != NV_OK) {
        set_err(ret_err, "backend failed to open: %s", err);
        return -ENODEV;
    }
    const char *text = c->table->describe ? c->table->describe(ctx) : NULL;
    json_t *d = text ? json_loads(text, 0, NULL) : json_object();
    c->table->close(ctx);
    if (!json_is_object(d)) {
        json_decref(d);
        set_err(ret_err, "backend returned an invalid describe() JSON%s", "");
        return -EPROTO;
    }
    *ret = d;
    return 0;
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

static json_t *result_json(lr_ctx *c, const char *backend_spec, const json_t *spec,
                           const json_t *desc, const json_t *policy)
{
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
        s->model == NV_LR_MLP ? "mlp" : "transformer", "backend", backend_spec, "device",
        json_object_get(desc, "device"), "mode", json_object_get(desc, "mode"), "contract",
        json_object_get(desc, "contract"), "build", build ? build : json_object_get(desc, "build"),
        "amp", amp_json(s, policy), "grad_scaler", scaler, "data", "seed", (json_int_t)s->data_seed,
        "batch", s->batch, "eval_examples", s->eval_examples, "loss_weight", s->loss_weight,
        "bayes_loss", nvw_json_num(c->data.bayes_loss), "acceptance", acc, "curves",
        nvw_lr_curves(&c->job, 60), "series", nvw_lr_series(&c->job), "seconds", "reference", ref_s,
        "device", dev_s);
    if (r)
        json_object_set_new(r, "steps", json_integer((json_int_t)s->steps));
    return r;
}

static int setup(lr_ctx *c, nvw_backend **b, const char *backend_spec, json_t **desc,
                 json_t **policy, char **e)
{
    char err[512] = "";
    int r = nvw_backend_load(backend_spec, b, err, sizeof err);
    if (r < 0) {
        set_err(e, "%s", err[0] ? err : "could not load the backend");
        return r == -ENOMEM ? r : -ENODEV;
    }
    c->table = nvw_backend_table(*b);
    c->options = nvw_backend_options(*b);
    if (!c->table->backward) {
        set_err(e,
                "backend '%s' has no backward entry: a long-run job trains through the "
                "backend's backward ops",
                backend_spec);
        return -ENOTSUP;
    }
    if ((r = read_describe(c, desc, e)) < 0)
        return r;
    if (json_is_true(json_object_get(*desc, "inference_only"))) {
        set_err(e,
                "backend '%s' declares itself inference-only: a long-run job needs its "
                "backward ops",
                backend_spec);
        return -ENOTSUP;
    }
    c->saved = json_object_get(*desc, "saved");
    const nv_longrun_spec *s = c->job.s;
    *policy = s->policy ? json_incref(s->policy) : json_loads(nvw_amp_default_json(), 0, NULL);
    if (!*policy)
        return -ENOMEM;
    if (s->amp) {
        char *msg = NULL;
        if (nvw_amp_parse(*policy, s->amp_dtype, &c->amp, &msg) < 0) {
            set_err(e, "/amp/policy: %s", msg ? msg : "invalid AMP policy");
            free(msg);
            return -EINVAL;
        }
    }
    if ((r = nvw_data_init(&c->data, s)) < 0)
        return r;
    return 0;
}

int nvw_run_longrun(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err)
{
    lr_ctx c;
    memset(&c, 0, sizeof c);
    c.opts = opts;
    nv_longrun_spec *s = NULL;
    nvw_backend *b = NULL;
    json_t *desc = NULL, *policy = NULL;
    char *ptr = NULL, *msg = NULL, *e = NULL;
    int r = nv_longrun_parse(spec, &s, &ptr, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            set_err(&e, "%s%s%s", ptr ? ptr : "", ptr && *ptr ? ": " : "",
                    msg ? msg : "invalid job spec");
        goto out;
    }
    c.job.s = s;
    if ((r = setup(&c, &b, backend_spec, &desc, &policy, &e)) < 0)
        goto out;
    c.job.has_repeat = s->deterministic;
    if ((r = run_tasks(&c, backend_spec, &e)) < 0)
        goto out;
    json_t *res = result_json(&c, backend_spec, spec, desc, policy);
    if (!res) {
        r = -ENOMEM;
        goto out;
    }
    *ret_result = res;
out:
    if (r == -ENOMEM)
        set_err(&e, "out of memory%s", "");
    if (r < 0 && ret_err)
        *ret_err = e;
    else
        free(e);
    free(ptr);
    free(msg);
    if (s) {
        for (int i = 0; i < s->n_seeds; i++) {
            nvw_run_done(&c.job.ref[i]);
            nvw_run_done(&c.job.dev[i]);
        }
        nvw_run_done(&c.job.repeat);
    }
    nvw_data_done(&c.data);
    json_decref(desc);
    json_decref(policy);
    nvw_backend_free(b);
    nv_longrun_free(s);
    return r;
}
