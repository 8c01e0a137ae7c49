/* Device-driven training (docs/JOBS.md "Device-driven training"): the device
 * runs each whole step in its own framework (nv_backend.train: forward under
 * its autocast, backward, its grad scaler's unscale and inf check, clipping,
 * its optimizer) and returns what it did; numval checks the step against the
 * reference step from the same state: the autocast categories against the AMP
 * policy, the scale against GradScaler's schedule, a non-finite step skipped
 * with nothing updated, the gradient it clipped and used unscaled and equal to
 * the fp64 gradient within the declared precision (rule 5 of the long run),
 * and the optimizer's update against the update rule. The state the device
 * returns becomes the next step's. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_internal.h"
#include "worker/backends/views/views.h"

/* A step's outputs for P parameters: grads, weights, two moments; the mask */
#define NOUT(P) (4 * (P) + 1)
#define INFO_LEN 65536

typedef struct drive {
    const nv_longrun_spec *s;
    const nv_backend *table;
    void *ctx;
    bool own_ctx; /* opened here for the resumed half */
    char *config;
    char info[INFO_LEN];
    char err[512];
    /* GradScaler's reference state, driven by the device's own found_inf */
    double scale;
    int64_t tracker, applied;
} drive;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_tensor(uint64_t h, const nv_tensor *t)
{
    for (int64_t k = 0; t && k < t->numel; k++) {
        double v = t->data[k];
        h = fnv(h, &v, sizeof v);
    }
    return h;
}

static char *config_json(const nv_longrun_spec *s, const nvw_exec *ex, uint64_t seed)
{
    json_t *c = json_pack(
        "{s:s, s:{s:i, s:i, s:i}, s:s, s:f, s:f, s:f, s:I,"
        " s:{s:b, s:s}, s:{s:s, s:f, s:f, s:f, s:f, s:f},"
        " s:{s:b, s:f, s:f, s:f, s:i}}",
        "model", s->model == NV_LR_CNN ? "cnn" : "mlp", "sizes", "in", s->in_dim, "hidden",
        s->hidden, "classes", s->classes,
        "activation", s->relu ? "relu" : "gelu", "dropout", s->dropout, "clip_grad_norm", s->clip,
        "loss_weight", s->loss_weight, "seed", (json_int_t)(seed & 0x7fffffffffffll), "amp",
        "enabled", ex->amp.enabled, "dtype", ex->amp.enabled ? nv_dtype_name(ex->amp.low) : "fp32",
        "optimizer", "name", s->adamw ? "adamw" : "sgd", "beta1", s->beta1, "beta2", s->beta2,
        "eps", s->eps, "weight_decay", s->weight_decay, "momentum", s->momentum, "grad_scaler",
        "enabled", s->scaler, "init_scale", s->init_scale, "growth_factor", s->growth,
        "backoff_factor", s->backoff, "growth_interval", s->growth_interval);
    /* the per-job flag: the device says per step whether it honoured it */
    json_object_set_new(c, "deterministic", json_boolean(s->deterministic));
    if (c && s->ranks > 1)
        json_object_set_new(c, "distributed",
                            json_pack("{s:i, s:s, s:s}", "ranks", s->ranks, "algorithm",
                                      s->allreduce_tree ? "tree" : "ring", "dtype",
                                      nv_dtype_name(s->allreduce_dtype)));
    char *txt = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    return txt;
}

static int call(drive *dv, int action, const char *cfg, int n_in, nv_tensor_view *in, int n_out,
                nv_tensor_view *out)
{
    nv_train_call c = {.action = action,
                       .config_json = cfg,
                       .n_inputs = n_in,
                       .inputs = in,
                       .n_outputs = n_out,
                       .outputs = out,
                       .info = dv->info,
                       .info_len = sizeof dv->info};
    dv->info[0] = 0;
    memset(out, 0, (size_t)n_out * sizeof *out);
    int r = dv->table->train(dv->ctx, &c, dv->err, sizeof dv->err);
    return r == NV_OK ? 0 : r == NV_E_NOMEM ? -ENOMEM : r == NV_E_UNSUPPORTED ? -ENOTSUP : -EIO;
}

static void release(drive *dv, int n, nv_tensor_view *v)
{
    for (int i = 0; i < n; i++)
        if (v[i].data && dv->table->release_tensor)
            dv->table->release_tensor(dv->ctx, &v[i]);
}

static int init_device(drive *dv, const nvw_model *m)
{
    nv_tensor_view in[NVW_MAX_PARAMS];
    nv_tensor_view none;
    int r = 0, n = 0;
    for (; n < m->n_params && r == 0; n++)
        r = nvw_view_from_tensor(m->p[n].w, &in[n]);
    if (r < 0)
        n--;
    r = r < 0 ? r : call(dv, NV_TRAIN_INIT, dv->config, m->n_params, in, 0, &none);
    for (int i = 0; i < n; i++)
        nvw_view_free(&in[i]);
    return r;
}

/* Checkpoint on the device, then a fresh context restores it. */
static int save_restore(drive *dv, const nvw_resume *rs)
{
    nv_tensor_view ck;
    int r = call(dv, NV_TRAIN_SAVE, "{}", 0, NULL, 1, &ck);
    if (r < 0)
        return r;
    size_t n = ck.ndim == 1 && ck.dtype == NV_DT_INT8 ? (size_t)ck.shape[0] : 0;
    uint8_t *bytes = n ? malloc(n) : NULL;
    if (bytes)
        memcpy(bytes, ck.data, n);
    release(dv, 1, &ck);
    if (!bytes) {
        snprintf(dv->err, sizeof dv->err, "the checkpoint is not one int8 tensor of bytes");
        return -EIO;
    }
    void *fresh = NULL;
    r = rs->table->open(rs->options, &fresh, dv->err, sizeof dv->err) == NV_OK ? 0 : -EIO;
    if (r == 0) {
        dv->ctx = fresh, dv->table = rs->table, dv->own_ctx = true;
        nv_tensor_view in = {.dtype = NV_DT_INT8, .ndim = 1, .shape = {(int64_t)n},
                             .strides = {1}, .data = bytes};
        nv_tensor_view none;
        r = call(dv, NV_TRAIN_LOAD, dv->config, 1, &in, 0, &none);
    }
    free(bytes);
    return r;
}

static void fail(nvw_run *run, int64_t t, const char *cls, const char *why)
{
    if (run->fail_class[0])
        return;
    snprintf(run->fail_class, sizeof run->fail_class, "%s", cls);
    snprintf(run->fail_why, sizeof run->fail_why, "step %lld: %.400s", (long long)t, why);
    run->fail_step = t;
}

static double jnum(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double r32(double x)
{
    return (double)(float)x;
}

/* GradScaler's update (torch's _amp_update_scale_: never grows to inf). */
static void scaler_update(drive *dv, bool found_inf)
{
    const nv_longrun_spec *s = dv->s;
    if (!s->scaler)
        return;
    if (found_inf) {
        dv->scale = r32(dv->scale * s->backoff);
        dv->tracker = 0;
    } else if (++dv->tracker == s->growth_interval) {
        double g = r32(dv->scale * s->growth);
        if (isfinite(g))
            dv->scale = g;
        dv->tracker = 0;
    }
}

typedef struct step_out {
    nv_tensor *g[NVW_MAX_PARAMS], *w[NVW_MAX_PARAMS], *m1[NVW_MAX_PARAMS], *m2[NVW_MAX_PARAMS];
    nv_tensor *mask;
    /* distributed: each rank's gradient (rank r, parameter i at r * P + i)
     * and the all-reduced one, both as the ranks' backward left them (scaled) */
    nv_tensor **rg, *red[NVW_MAX_PARAMS];
    int n_rg;
} step_out;

static void step_out_free(step_out *o)
{
    for (int i = 0; i < NVW_MAX_PARAMS; i++)
        nv_tensor_free(o->g[i]), nv_tensor_free(o->w[i]), nv_tensor_free(o->m1[i]),
            nv_tensor_free(o->m2[i]);
    nv_tensor_free(o->mask);
    for (int i = 0; i < o->n_rg; i++)
        nv_tensor_free(o->rg[i]);
    free(o->rg);
    for (int i = 0; i < NVW_MAX_PARAMS; i++)
        nv_tensor_free(o->red[i]);
    memset(o, 0, sizeof *o);
}

static bool same_bits(const nv_tensor *a, const nv_tensor *b)
{
    if (a->numel != b->numel)
        return false;
    for (int64_t k = 0; k < a->numel; k++) /* NaN == NaN here: a bit-level comparison */
        if (memcmp(&a->data[k], &b->data[k], sizeof(double)))
            return false;
    return true;
}

/* The checks of step t whose reply is info/o, the model m still holding the
 * pre-step state. */
static int check_step(drive *dv, nvw_model *m, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                      int64_t t, double lr, const json_t *info, step_out *o, nvw_run *run,
                      nvw_point *pt)
{
    const nv_longrun_spec *s = dv->s;
    char why[400];
    if (!nvw_drive_autocast_ok(&ex->amp, json_object_get(info, "ops"), why, sizeof why))
        fail(run, t, "autocast_category", why);
    const json_t *det = json_object_get(info, "deterministic");
    if (json_is_boolean(det)) {
        run->det_honoured = run->det_honoured != 0 && json_is_true(det) ? 1 : 0;
        if (s->deterministic && !json_is_true(det))
            fail(run, t, "deterministic_not_honoured",
                 "the job demands determinism (\"deterministic\": true, sent in the train "
                 "config) and the device's step answers \"deterministic\": false");
    }
    if (s->ranks > 1) {
        const json_t *rk = json_object_get(info, "ranks");
        json_int_t got = json_is_integer(rk) ? json_integer_value(rk) : -1;
        if (got != s->ranks) {
            snprintf(why, sizeof why,
                     "the device's step answers info.ranks %lld where the job asks %d ranks (a "
                     "backend without distributed steps refuses the config, \"not offered:\")",
                     (long long)got, s->ranks);
            fail(run, t, "allreduce_bound", why);
        } else if (!nvw_allreduce_ok(s, m, o->rg, o->red, run, why, sizeof why))
            fail(run, t, "allreduce_bound", why);
    }
    double scale = jnum(info, "scale"), next = jnum(info, "next_scale");
    bool found_inf = json_is_true(json_object_get(info, "found_inf"));
    int64_t bad = 0;
    for (int i = 0; i < m->n_params; i++)
        for (int64_t k = 0; k < o->g[i]->numel; k++)
            bad += !isfinite(o->g[i]->data[k]);
    pt->scale = scale, pt->nonfinite = bad, pt->skipped = found_inf;
    pt->train_loss = jnum(info, "loss");
    double want = s->scaler ? dv->scale : 1;
    if (scale != want) {
        snprintf(why, sizeof why,
                 "the device scaled the loss by %.9g; GradScaler's schedule (init %g, growth %g "
                 "every %d finite steps, backoff %g) gives %.9g",
                 scale, s->init_scale, s->growth, s->growth_interval, s->backoff, want);
        fail(run, t, "grad_scaler", why);
    }
    if (found_inf != (bad > 0)) {
        snprintf(why, sizeof why,
                 "the device reports found_inf %s but its unscaled gradients hold %lld "
                 "non-finite elements",
                 found_inf ? "true" : "false", (long long)bad);
        fail(run, t, "nonfinite_check", why);
    }
    double scale_before = dv->scale;
    scaler_update(dv, found_inf);
    run->growths += s->scaler && dv->scale > scale_before;
    run->backoffs += s->scaler && dv->scale < scale_before;
    if (s->scaler && next != dv->scale) {
        snprintf(why, sizeof why,
                 "after a %s step the device's scale is %.9g; GradScaler's update gives %.9g",
                 found_inf ? "non-finite" : "finite", next, dv->scale);
        fail(run, t, "grad_scaler", why);
    }
    if (found_inf || bad) {
        bool same = (int64_t)jnum(info, "optimizer_steps") == dv->applied;
        for (int i = 0; i < m->n_params && same; i++) {
            nv_tensor pw = *m->p[i].w;
            same = same_bits(o->w[i], &pw);
            for (int64_t k = 0; same && k < pw.numel; k++)
                same = o->m1[i]->data[k] == m->p[i].m[k] &&
                       (!s->adamw || o->m2[i]->data[k] == m->p[i].v[k]);
        }
        if (!same)
            fail(run, t, "skipped_step_updated",
                 "a step with non-finite gradients must be skipped (GradScaler.step does not "
                 "call the optimizer), but the device's weights, optimizer state or step count "
                 "changed");
        return 0;
    }
    /* The gradient the optimizer used, against the reference of the same
     * weights and batch (and the device's dropout mask). */
    nv_tensor *keep[NVW_MAX_PARAMS];
    for (int i = 0; i < m->n_params; i++)
        keep[i] = m->p[i].g, m->p[i].g = o->g[i];
    m->mask = o->mask;
    double norm64 = NAN;
    int r = nvw_shadow_grads(m, d, ex, seed, t, scale, s->clip, &norm64, pt);
    m->mask = NULL;
    for (int i = 0; i < m->n_params; i++)
        m->p[i].g = keep[i];
    if (r < 0)
        return r;
    double ref = 0, e2 = 0;
    for (int i = 0; i < m->n_params; i++)
        e2 += pt->p_dev_err2[i], ref += pt->p_ref2[i];
    /* A missing or misplaced unscale moves the gradient by the loss scale (or,
     * clipped before unscaling, by up to 1/scale): a relative error of order 1,
     * where bf16 autocast's is about 1e-2 (docs/JOBS.md rule 5); 0.5 separates them. */
    double gn = jnum(info, "grad_norm"), rel = ref > 0 ? sqrt(e2 / ref) : 0;
    if (s->scaler && scale != 1 &&
        (rel > 0.5 || (s->clip > 0 && norm64 > 0 && fabs(gn / norm64 - 1) > 0.5))) {
        snprintf(why, sizeof why,
                 "the gradient the device %s had norm %.6g where the unscaled fp64 gradient's is "
                 "%.6g (scale %.6g), and the gradient its optimizer used is off by %.3g of its "
                 "norm: not unscaled before %s",
                 s->clip > 0 ? "clipped" : "measured", gn, norm64, scale, rel,
                 s->clip > 0 ? "clipping" : "the step");
        fail(run, t, "unscale", why);
    }
    if (!nvw_drive_update_ok(s, m, o->g, o->w, o->m1, o->m2, lr, dv->applied + 1, why, sizeof why))
        fail(run, t, "optimizer_update", why);
    if ((int64_t)jnum(info, "optimizer_steps") != dv->applied + 1) {
        snprintf(why, sizeof why, "the device's optimizer step count is %lld, %lld expected",
                 (long long)jnum(info, "optimizer_steps"), (long long)dv->applied + 1);
        fail(run, t, "optimizer_update", why);
    }
    dv->applied++;
    run->checked_steps++;
    return 0;
}

/* One STEP call: batch t out, the reply decoded into o (P parameters). */
static int device_step(drive *dv, const nvw_data *d, uint64_t seed, int64_t t, double lr,
                       const nvw_model *m, json_t **ret_info, step_out *o)
{
    int P = m->n_params;
    nv_tensor *x = NULL, *y = NULL;
    int r = nvw_data_batch(d, seed, t, NV_DT_FP32, &x, &y);
    int R = dv->s->ranks > 1 ? dv->s->ranks : 0, n_out = NOUT(P) + (R ? (R + 1) * P : 0);
    nv_tensor_view in[2] = {0}, *out = calloc((size_t)n_out, sizeof *out);
    if (!out) {
        snprintf(dv->err, sizeof dv->err, "out of memory");
        r = -ENOMEM;
    }
    o->rg = R ? calloc((size_t)(R * P), sizeof *o->rg) : NULL;
    o->n_rg = o->rg ? R * P : 0;
    if (R && !o->rg)
        r = -ENOMEM;
    bool vx = false, vy = false;
    r = r < 0 ? r : nvw_view_from_tensor(x, &in[0]);
    vx = r == 0;
    r = r < 0 ? r : nvw_view_from_tensor(y, &in[1]);
    vy = r == 0;
    char cfg[96];
    snprintf(cfg, sizeof cfg, "{\"step\":%lld,\"lr\":%.17g}", (long long)t, lr);
    r = r < 0 ? r : call(dv, NV_TRAIN_STEP, cfg, 2, in, n_out, out);
    if (r == 0) {
        for (int i = 0; i < P; i++) {
            o->g[i] = nvw_tensor_from_view(&out[i], false);
            o->w[i] = nvw_tensor_from_view(&out[P + i], false);
            o->m1[i] = nvw_tensor_from_view(&out[2 * P + i], false);
            o->m2[i] = nvw_tensor_from_view(&out[3 * P + i], false);
            int64_t n = m->p[i].w->numel;
            if (!o->g[i] || !o->w[i] || !o->m1[i] || !o->m2[i] || o->g[i]->numel != n ||
                o->w[i]->numel != n || o->m1[i]->numel != n || o->m2[i]->numel != n)
                r = -EIO;
        }
        o->mask = out[4 * P].ndim == 2 ? nvw_tensor_from_view(&out[4 * P], false) : NULL;
        for (int k = 0; k < (R ? (R + 1) * P : 0) && r == 0; k++) {
            nv_tensor *g = nvw_tensor_from_view(&out[NOUT(P) + k], false);
            if (!g || g->numel != o->w[k % P]->numel)
                r = -EIO;
            if (k < R * P)
                o->rg[k] = g;
            else
                o->red[k - R * P] = g;
        }
        if (dv->s->dropout > 0 && (!o->mask || o->mask->numel != (int64_t)dv->s->batch *
                                                                   dv->s->hidden))
            r = -EIO;
        if (r < 0)
            snprintf(dv->err, sizeof dv->err,
                     "the device's step reply has a tensor that is not what the ABI lists "
                     "(gradients, weights, moments, dropout mask%s)",
                     R ? ", each rank's gradient, the reduced gradient" : "");
        release(dv, n_out, out);
        json_error_t je;
        *ret_info = r == 0 ? json_loads(dv->info, 0, &je) : NULL;
        if (r == 0 && !json_is_object(*ret_info)) {
            snprintf(dv->err, sizeof dv->err, "the device's step info is not a JSON object");
            r = -EIO;
        }
    }
    free(out);
    if (vx)
        nvw_view_free(&in[0]);
    if (vy)
        nvw_view_free(&in[1]);
    nv_tensor_free(x), nv_tensor_free(y);
    return r;
}

static void adopt(nvw_model *m, step_out *o)
{
    for (int i = 0; i < m->n_params; i++) {
        memcpy(m->p[i].w->data, o->w[i]->data, (size_t)o->w[i]->numel * sizeof(double));
        memcpy(m->p[i].m, o->m1[i]->data, (size_t)o->m1[i]->numel * sizeof(double));
        memcpy(m->p[i].v, o->m2[i]->data, (size_t)o->m2[i]->numel * sizeof(double));
        nv_tensor_free(m->p[i].g);
        m->p[i].g = o->g[i];
        o->g[i] = NULL;
    }
}

static void norms(const nvw_model *m, nvw_run *run, nvw_point *pt)
{
    double total = 0;
    for (int i = 0; i < m->n_params; i++) {
        const nvw_param *p = &m->p[i];
        int l = 0;
        while (l < run->n_layers && strcmp(run->layers[l], p->layer))
            l++;
        if (l == run->n_layers && l < NVW_MAX_PARAMS)
            snprintf(run->layers[run->n_layers++], 16, "%s", p->layer);
        double q = 0;
        for (int64_t k = 0; p->g && k < p->g->numel; k++)
            q += p->g->data[k] * p->g->data[k];
        pt->layer_norms[l] += q;
        total += q;
        pt->dev_err2[l] += pt->p_dev_err2[i];
        pt->decl_err2[l] += pt->p_decl_err2[i];
        pt->ref2[l] += pt->p_ref2[i];
    }
    for (int l = 0; l < run->n_layers; l++)
        pt->layer_norms[l] = sqrt(pt->layer_norms[l]);
    pt->grad_norm = sqrt(total);
}

int nvw_train_driven(const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                     const nvw_resume *resume, nvw_run *run)
{
    memset(run, 0, sizeof *run);
    run->seed = seed, run->driven = true, run->det_honoured = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    drive *dv = calloc(1, sizeof *dv);
    int n_log = (int)(s->steps / s->log_every) + 2;
    run->pts = calloc((size_t)n_log, sizeof *run->pts);
    size_t ns = (size_t)s->steps + 1;
    run->scale_bits = calloc(ns, 8), run->mask_hash = calloc(ns, 8), run->state_hash = calloc(ns, 8);
    nvw_model m;
    memset(&m, 0, sizeof m);
    int r = dv && run->pts && run->scale_bits && run->mask_hash && run->state_hash ? 0 : -ENOMEM;
    r = r < 0 ? r : nvw_model_init(&m, s, seed, NV_DT_FP32);
    if (r == 0) {
        dv->s = s, dv->table = ex->table, dv->ctx = ex->ctx;
        dv->scale = s->scaler ? r32(s->init_scale) : 1;
        dv->config = config_json(s, ex, seed);
        r = dv->config ? init_device(dv, &m) : -ENOMEM;
    }
    nvw_exec dev = *ex; /* the resumed half runs on the fresh context */
    for (int64_t t = 0; t <= s->steps && r == 0; t++) {
        if (resume && t == resume->at && (r = save_restore(dv, resume)) < 0)
            break;
        dev.ctx = dv->ctx, dev.table = dv->table;
        bool log = t % s->log_every == 0 || t == s->steps;
        nvw_point cur;
        memset(&cur, 0, sizeof cur);
        cur.step = t, cur.loss = cur.eval_dev = cur.eval_decl = NAN;
        if (log && (r = nvw_eval_loss(&m, d, &dev, &cur.loss)) < 0)
            break;
        if (log && (r = nvw_shadow_eval(&m, d, &dev, &cur.eval_dev, &cur.eval_decl)) < 0)
            break;
        if (t == s->steps) {
            run->final_loss = cur.loss;
            run->pts[run->n_pts++] = cur;
            break;
        }
        double lr = nvw_lr_at(s->cosine ? NVW_LR_COSINE : NVW_LR_CONSTANT, s->lr, s->warmup,
                              s->min_lr_ratio, t, s->steps);
        json_t *info = NULL;
        step_out o;
        memset(&o, 0, sizeof o);
        r = device_step(dv, d, seed, t, lr, &m, &info, &o);
        if (r == 0 && t == 0) {
            char *ops = json_dumps(json_object_get(info, "ops"), JSON_COMPACT);
            snprintf(run->ops, sizeof run->ops, "%s", ops ? ops : "null");
            free(ops);
        }
        if (r == 0)
            r = check_step(dv, &m, d, &dev, seed, t, lr, info, &o, run, &cur);
        if (r == 0) {
            double sc = jnum(info, "scale"), ls = jnum(info, "loss");
            memcpy(&run->scale_bits[t], &sc, 8);
            run->mask_hash[t] = hash_tensor(1469598103934665603ull, o.mask);
            uint64_t h = fnv(1469598103934665603ull, &ls, sizeof ls);
            for (int i = 0; i < m.n_params; i++)
                h = hash_tensor(hash_tensor(hash_tensor(h, o.w[i]), o.m1[i]), o.m2[i]);
            run->state_hash[t] = h;
            adopt(&m, &o);
            run->skipped_steps += cur.skipped;
            run->nonfinite_total += cur.nonfinite;
            norms(&m, run, &cur);
            if (log)
                run->pts[run->n_pts++] = cur;
            run->steps_done = t + 1;
        }
        step_out_free(&o);
        json_decref(info);
    }
    if (r < 0)
        snprintf(run->err, sizeof run->err, "%s",
                 dv && dv->err[0] ? dv->err
                 : dev.err[0]     ? dev.err /* the step checks' executor */
                 : ex->err[0]     ? ex->err
                                  : strerror(-r));
    if (dv && dv->own_ctx)
        dv->table->close(dv->ctx);
    if (dv)
        free(dv->config);
    free(dv);
    nvw_model_done(&m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    run->seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return r;
}
