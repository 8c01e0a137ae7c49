/* Long-run job spec validation (docs/JOBS.md "Long-run jobs"). Every error
 * names the JSON pointer and the offending value; the field checkers and the
 * error record are core/spec/spec_internal.h's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/catalog.h"
#include "longrunspec.h"
#include "spec_internal.h"

bool nv_longrun_is(const json_t *spec)
{
    return nv_spec_kind_of(spec) == NV_SPEC_KIND_LONGRUN;
}

/* The first unknown key of obj, as an error at base. */
static int check_keys(nv_spec_err *e, const json_t *obj, const char *base, const char *const *keys)
{
    const char *k = nv_spec_unknown_key(obj, keys);
    if (!k)
        return 0;
    return nv_spec_fail(e, base, "unknown key '%s'%s%s", k, base[0] ? " in " : "", base);
}

static const char *const top_keys[] = {
    "kind",        "name",       "description", "device",     "priority",      "build",
    "model",       "activation", "sizes",       "data",       "optimizer",     "schedule",
    "steps",       "batch",      "seeds",       "seed",       "n_seeds",       "log_every",
    "loss_weight", "amp",        "grad_scaler", "acceptance", "deterministic",
    "device_training", NULL};

static int parse_model(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    bool relu = false;
    const json_t *mv = json_object_get(j, "model");
    const char *name = mv ? json_string_value(mv) : "mlp";
    if (!name || (strcmp(name, "mlp") && strcmp(name, "transformer") && strcmp(name, "cnn")))
        return nv_spec_fail_value(e, "/model", mv, "must be \"mlp\", \"transformer\" or \"cnn\"");
    bool tr = !strcmp(name, "transformer"), cnn = !strcmp(name, "cnn");
    int r = nv_spec_choice(e, j, "", "activation", "gelu", "relu", &relu);
    if (r)
        return r;
    s->model = tr ? NV_LR_TRANSFORMER : cnn ? NV_LR_CNN : NV_LR_MLP;
    s->relu = relu;
    const json_t *sz = json_object_get(j, "sizes");
    static const char *const keys[] = {"in", "hidden", "classes", "seq", NULL};
    if (sz && (!json_is_object(sz) || check_keys(e, sz, "/sizes", keys)))
        return nv_spec_fail_value(e, "/sizes", sz,
                                  "must be an object with in, hidden, classes, seq");
    int64_t in = 0, hid = 0, cl = 0, seq = 0;
    /* cnn: a 1-channel in x in image, pooled twice by 2 (in a multiple of 4),
     * the teacher reading its in^2 pixels (at most 256) */
    r = nv_spec_int(e, sz, "/sizes", "in", cnn ? 8 : 16, cnn ? 4 : 1, cnn ? 16 : 256, &in);
    r = r ? r : nv_spec_int(e, sz, "/sizes", "hidden", cnn ? 4 : 32, 1, cnn ? 32 : 1024, &hid);
    r = r ? r : nv_spec_int(e, sz, "/sizes", "classes", 4, 2, 1024, &cl);
    r = r ? r : nv_spec_int(e, sz, "/sizes", "seq", 8, 1, 64, &seq);
    if (!r && cnn && in % 4)
        return nv_spec_fail(e, "/sizes/in",
                            "'%lld' is not a multiple of 4: the cnn pools its image twice by 2",
                            (long long)in);
    s->in_dim = (int)in, s->hidden = (int)hid, s->classes = (int)cl, s->seq = (int)seq;
    return r;
}

static int parse_data(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *d = json_object_get(j, "data");
    static const char *const keys[] = {"seed", "teacher_hidden", "temperature", "eval_examples",
                                       NULL};
    if (d && (!json_is_object(d) || check_keys(e, d, "/data", keys)))
        return nv_spec_fail_value(e, "/data", d,
                                  "must be an object with seed, teacher_hidden, temperature, "
                                  "eval_examples");
    int64_t seed = 0, th = 0, ev = 0;
    int r = nv_spec_int(e, d, "/data", "seed", 1, 0, INT64_MAX, &seed);
    r = r ? r : nv_spec_int(e, d, "/data", "teacher_hidden", 32, 1, 1024, &th);
    r = r ? r : nv_spec_number(e, d, "/data", "temperature", 1.0, 1e-3, 1e3, &s->temperature);
    r = r ? r : nv_spec_int(e, d, "/data", "eval_examples", 512, 8, 65536, &ev);
    s->data_seed = (uint64_t)seed, s->teacher_hidden = (int)th, s->eval_examples = (int)ev;
    return r;
}

static int parse_optim(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *o = json_object_get(j, "optimizer");
    static const char *const keys[] = {"name", "lr",           "beta1",    "beta2",
                                       "eps",  "weight_decay", "momentum", NULL};
    if (o && (!json_is_object(o) || check_keys(e, o, "/optimizer", keys)))
        return nv_spec_fail_value(e, "/optimizer", o,
                                  "must be an object (name, lr, beta1, beta2, eps, "
                                  "weight_decay, momentum)");
    bool sgd = false;
    int r = nv_spec_choice(e, o, "/optimizer", "name", "adamw", "sgd", &sgd);
    s->adamw = !sgd;
    r = r ? r : nv_spec_number(e, o, "/optimizer", "lr", sgd ? 0.1 : 0.01, 1e-12, 10, &s->lr);
    r = r ? r : nv_spec_number(e, o, "/optimizer", "beta1", 0.9, 0, 0.999999, &s->beta1);
    r = r ? r : nv_spec_number(e, o, "/optimizer", "beta2", 0.999, 0, 0.999999999, &s->beta2);
    r = r ? r : nv_spec_number(e, o, "/optimizer", "eps", 1e-8, 1e-30, 1, &s->eps);
    r = r ? r : nv_spec_number(e, o, "/optimizer", "weight_decay", 0, 0, 1, &s->weight_decay);
    r = r ? r : nv_spec_number(e, o, "/optimizer", "momentum", 0.9, 0, 0.999999, &s->momentum);
    const json_t *sc = json_object_get(j, "schedule");
    static const char *const skeys[] = {"name", "warmup", "min_lr_ratio", NULL};
    if (!r && sc && (!json_is_object(sc) || check_keys(e, sc, "/schedule", skeys)))
        return nv_spec_fail_value(e, "/schedule", sc,
                                  "must be an object (name, warmup, min_lr_ratio)");
    int64_t wu = 0;
    r = r ? r : nv_spec_choice(e, sc, "/schedule", "name", "constant", "cosine", &s->cosine);
    r = r ? r : nv_spec_int(e, sc, "/schedule", "warmup", 0, 0, 1000000, &wu);
    r = r ? r : nv_spec_number(e, sc, "/schedule", "min_lr_ratio", 0, 0, 1, &s->min_lr_ratio);
    s->warmup = (int)wu;
    return r;
}

static int parse_seeds(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *sd = json_object_get(j, "seeds");
    if (sd) {
        if (!json_is_array(sd) || json_array_size(sd) < 3 ||
            json_array_size(sd) > NV_LR_MAX_SEEDS) {
            char what[128];
            snprintf(what, sizeof what,
                     "must be an array of 3 to %d seeds (the statistics need at least 3 runs "
                     "per side)",
                     NV_LR_MAX_SEEDS);
            return nv_spec_fail_value(e, "/seeds", sd, what);
        }
        size_t i;
        const json_t *v;
        json_array_foreach(sd, i, v)
        {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                char p[32];
                snprintf(p, sizeof p, "/seeds/%zu", i);
                return nv_spec_fail_value(e, p, v, "must be a non-negative integer seed");
            }
            s->seeds[i] = (uint64_t)json_integer_value(v);
        }
        s->n_seeds = (int)json_array_size(sd);
        return 0;
    }
    int64_t base = 0, n = 0;
    int r = nv_spec_int(e, j, "", "seed", 1, 0, INT64_MAX / 2, &base);
    r = r ? r : nv_spec_int(e, j, "", "n_seeds", 8, 3, NV_LR_MAX_SEEDS, &n);
    for (int i = 0; !r && i < n; i++)
        s->seeds[i] = (uint64_t)base + (uint64_t)i;
    s->n_seeds = (int)n;
    return r;
}

static int parse_amp(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *a = json_object_get(j, "amp");
    static const char *const keys[] = {"dtype", "policy", "policy_version", "policy_name", NULL};
    if (a && (!json_is_object(a) || check_keys(e, a, "/amp", keys)))
        return nv_spec_fail_value(e, "/amp", a,
                                  "must be an object (dtype, policy, policy_version)");
    const json_t *dt = json_object_get(a, "dtype");
    s->amp = dt != NULL;
    if (dt) {
        const char *n = json_string_value(dt);
        if (!n || nv_dtype_from_name(n, &s->amp_dtype) < 0 || s->amp_dtype == NV_DT_FP64 ||
            !nv_dtype_get(s->amp_dtype)->is_float || s->amp_dtype == NV_DT_E8M0)
            return nv_spec_fail(e, "/amp/dtype",
                                "'%s' is not a low-precision float dtype (bf16, fp16, "
                                "fp32 ...)",
                                n ? n : "(not a string)");
    }
    int64_t pv = 0;
    int r = nv_spec_int(e, a, "/amp", "policy_version", 0, 0, INT64_MAX, &pv);
    s->policy_version = pv;
    const json_t *p = json_object_get(a, "policy");
    if (!r && p) {
        if (!json_is_object(p))
            return nv_spec_fail_value(e, "/amp/policy", p,
                                      "must be an object (low_precision, fp32, promote)");
        static const char *const lists[] = {"low_precision", "fp32", "promote"};
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)p, k, v)
        {
            int li = -1;
            for (int i = 0; i < 3; i++)
                if (strcmp(k, lists[i]) == 0)
                    li = i;
            if (li < 0)
                continue; /* name, version, author, reason ... travel along */
            char ptr[64];
            nv_spec_pointer(ptr, sizeof ptr, "/amp/policy", k);
            if (!json_is_array(v))
                return nv_spec_fail_value(e, ptr, v, "must be an array of op names");
            size_t i;
            const json_t *o;
            json_array_foreach(
                v, i, o) if (!json_is_string(o) ||
                             !nv_op_find(json_string_value(
                                 o))) return nv_spec_fail(e, ptr,
                                                          "'%s' is not an op of the catalog",
                                                          json_is_string(o) ? json_string_value(o)
                                                                            : "(not a string)");
        }
        const char *mw = json_string_value(json_object_get(p, "master_weights"));
        if (json_object_get(p, "master_weights") &&
            (!mw || (strcmp(mw, "fp32") && strcmp(mw, "bf16") && strcmp(mw, "fp16"))))
            return nv_spec_fail(e, "/amp/policy/master_weights", "'%s' is not fp32, bf16 or fp16",
                                mw ? mw : "(not a string)");
        s->policy = json_deep_copy(p);
        if (!s->policy)
            return -ENOMEM;
    }
    return r;
}

static int parse_scaler_acc(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *g = json_object_get(j, "grad_scaler");
    static const char *const keys[] = {"enabled",        "init_scale",      "growth_factor",
                                       "backoff_factor", "growth_interval", NULL};
    if (g && (!json_is_object(g) || check_keys(e, g, "/grad_scaler", keys)))
        return nv_spec_fail_value(e, "/grad_scaler", g,
                                  "must be an object (enabled, init_scale, growth_factor, "
                                  "backoff_factor, growth_interval)");
    bool enabled = true;
    int r = nv_spec_bool(e, g, "/grad_scaler", "enabled", true, &enabled);
    s->scaler = g && enabled;
    int64_t gi = 0;
    r = r ? r
          : nv_spec_number(e, g, "/grad_scaler", "init_scale", 65536, 1e-30, 3.4e38, &s->init_scale);
    r = r ? r : nv_spec_number(e, g, "/grad_scaler", "growth_factor", 2, 1, 1e6, &s->growth);
    r = r ? r : nv_spec_number(e, g, "/grad_scaler", "backoff_factor", 0.5, 1e-6, 1, &s->backoff);
    r = r ? r : nv_spec_int(e, g, "/grad_scaler", "growth_interval", 2000, 1, 1 << 30, &gi);
    s->growth_interval = (int)gi;
    const json_t *a = json_object_get(j, "acceptance");
    static const char *const akeys[] = {"alpha",           "trim", "band_k", "band_floor",
                                        "envelope_margin", NULL};
    if (!r && a && (!json_is_object(a) || check_keys(e, a, "/acceptance", akeys)))
        return nv_spec_fail_value(e, "/acceptance", a,
                                  "must be an object (alpha, trim, band_k, band_floor, "
                                  "envelope_margin)");
    int64_t trim = 0;
    r = r ? r : nv_spec_number(e, a, "/acceptance", "alpha", 0.01, 1e-9, 0.5, &s->alpha);
    r = r ? r : nv_spec_int(e, a, "/acceptance", "trim", 1, 0, 8, &trim);
    r = r ? r : nv_spec_number(e, a, "/acceptance", "band_k", 3, 0, 100, &s->band_k);
    r = r ? r : nv_spec_number(e, a, "/acceptance", "band_floor", 0.01, 0, 1, &s->band_floor);
    r = r ? r
          : nv_spec_number(e, a, "/acceptance", "envelope_margin", 0.05, 0, 10,
                           &s->envelope_margin);
    s->trim = (int)trim;
    if (!r && s->n_seeds <= 2 * s->trim)
        return nv_spec_fail(e, "/acceptance/trim", "'%d' leaves no run of %d seeds after trimming",
                            s->trim, s->n_seeds);
    return r;
}

/* "device_training.distributed": R ranks, each a shard of the batch, whose
 * gradients the device all-reduces (docs/JOBS.md "Distributed gradient
 * reduction"). */
static int parse_distributed(nv_spec_err *e, const json_t *d, nv_longrun_spec *s)
{
    const json_t *o = json_object_get(d, "distributed");
    s->ranks = 1, s->allreduce_dtype = NV_DT_FP32;
    if (!o)
        return 0;
    static const char *const keys[] = {"ranks", "algorithm", "dtype", NULL};
    const char *P = "/device_training/distributed";
    if (!json_is_object(o) || check_keys(e, o, P, keys))
        return nv_spec_fail_value(e, P, o, "must be an object with ranks, algorithm, dtype");
    int64_t ranks = 0;
    int r = nv_spec_int(e, o, P, "ranks", 2, 1, 64, &ranks);
    if (!r && s->batch % ranks)
        return nv_spec_fail(e, "/device_training/distributed/ranks",
                            "'%lld' does not divide the batch (%d): every rank gets an equal "
                            "shard",
                            (long long)ranks, s->batch);
    s->ranks = (int)ranks;
    r = r ? r : nv_spec_choice(e, o, P, "algorithm", "ring", "tree", &s->allreduce_tree);
    const json_t *dt = json_object_get(o, "dtype");
    if (!r && dt) {
        const char *name = json_string_value(dt);
        nv_dtype v;
        if (!name || nv_dtype_from_name(name, &v) < 0 ||
            (v != NV_DT_FP32 && v != NV_DT_BF16 && v != NV_DT_FP16))
            return nv_spec_fail_value(e, "/device_training/distributed/dtype", dt,
                                      "must be \"fp32\", \"bf16\" or \"fp16\"");
        s->allreduce_dtype = v;
    }
    return r;
}

/* "device_training": the device runs whole steps in its own framework
 * (docs/JOBS.md "Device-driven training"); the MLP and the CNN (without
 * dropout or ranks: the MLP's). */
static int parse_driven(nv_spec_err *e, const json_t *j, nv_longrun_spec *s)
{
    const json_t *d = json_object_get(j, "device_training");
    s->ranks = 1, s->allreduce_dtype = NV_DT_FP32;
    if (!d)
        return 0;
    static const char *const keys[] = {"clip_grad_norm", "dropout", "checkpoint_at",
                                       "distributed", NULL};
    if (!json_is_object(d) || check_keys(e, d, "/device_training", keys))
        return nv_spec_fail_value(
            e, "/device_training", d,
            "must be an object with clip_grad_norm, dropout, checkpoint_at, distributed");
    if (s->model == NV_LR_TRANSFORMER)
        return nv_spec_fail(e, "/device_training",
                            "device-driven training is offered for the \"mlp\" and \"cnn\" "
                            "models only");
    s->driven = true;
    int64_t at = 0;
    int r = nv_spec_number(e, d, "/device_training", "clip_grad_norm", 0, 0, 1e30, &s->clip);
    r = r ? r : nv_spec_number(e, d, "/device_training", "dropout", 0, 0, 0.9, &s->dropout);
    r = r ? r : nv_spec_int(e, d, "/device_training", "checkpoint_at", 0, 0, 1000000, &at);
    if (!r && at >= s->steps)
        return nv_spec_fail(e, "/device_training/checkpoint_at",
                            "'%lld' must be below steps (%lld): the run continues after it",
                            (long long)at, (long long)s->steps);
    s->checkpoint_at = at;
    r = r ? r : parse_distributed(e, d, s);
    if (!r && s->model == NV_LR_CNN && s->dropout > 0)
        return nv_spec_fail(e, "/device_training/dropout",
                            "dropout is offered for the \"mlp\" model only (after its "
                            "activation)");
    if (!r && s->model == NV_LR_CNN && s->ranks > 1)
        return nv_spec_fail(e, "/device_training/distributed",
                            "distributed steps are offered for the \"mlp\" model only");
    return r;
}

static int parse_all(const json_t *j, nv_longrun_spec *s, nv_spec_err *e)
{
    if (!json_is_object(j))
        return nv_spec_fail(e, "", "a job spec must be a JSON object");
    int r = check_keys(e, j, "", top_keys);
    r = r ? r : parse_model(e, j, s);
    r = r ? r : parse_data(e, j, s);
    r = r ? r : parse_optim(e, j, s);
    int64_t steps = 0, batch = 0, le = 0;
    r = r ? r : nv_spec_int(e, j, "", "steps", 200, 1, 1000000, &steps);
    r = r ? r : nv_spec_int(e, j, "", "batch", 64, 1, 65536, &batch);
    r = r ? r : nv_spec_int(e, j, "", "log_every", 10, 1, 1000000, &le);
    s->steps = steps, s->batch = (int)batch, s->log_every = (int)le;
    r = r ? r : nv_spec_number(e, j, "", "loss_weight", 1, 1e-30, 1e30, &s->loss_weight);
    r = r ? r : parse_seeds(e, j, s);
    r = r ? r : parse_amp(e, j, s);
    r = r ? r : parse_scaler_acc(e, j, s);
    r = r ? r : nv_spec_bool(e, j, "", "deterministic", true, &s->deterministic);
    r = r ? r : parse_driven(e, j, s);
    if (!r && (double)s->steps * s->batch * s->n_seeds > 5e8)
        return nv_spec_fail(e, "",
                            "'%lld' steps x '%d' batch x %d seeds is too large for one job; split "
                            "it",
                            (long long)s->steps, s->batch, s->n_seeds);
    return r;
}

int nv_longrun_parse(const json_t *spec, nv_longrun_spec **ret, char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    nv_longrun_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int r = nv_spec_err_finish(&e, parse_all(spec, s, &e), ret_pointer, ret_msg);
    if (r < 0) {
        nv_longrun_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void nv_longrun_free(nv_longrun_spec *s)
{
    if (!s)
        return;
    json_decref(s->policy);
    free(s);
}

int nv_longrun_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_longrun_spec *s = NULL;
    int r = nv_longrun_parse(spec, &s, ret_pointer, ret_msg);
    nv_longrun_free(s);
    return r;
}
