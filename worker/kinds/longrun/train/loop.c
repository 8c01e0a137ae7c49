/* One long-run training run: per step a batch, the tape's forward and backward
 * on the executor, unscaling and the non-finite check of the gradient scaler,
 * and the optimizer on the master weights (fp32 on the device, as PyTorch AMP
 * keeps them; fp64 in the reference). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_internal.h"

/* Master-precision rounding: fp32 masters round every stored value; fp64 (the
 * host reference) keeps it. */
static double mround(nv_dtype master, double x)
{
    return master == NV_DT_FP32 ? (double)(float)x : x;
}

/* The stored weight: in the master dtype, or in the policy's "master_weights"
 * dtype when the device keeps weights in bf16 or fp16 (round to nearest even,
 * IEEE 754-2019 4.3.1; the optimizer state stays in the master dtype). */
static double wround(nv_dtype master, nv_dtype weights, double x)
{
    if (weights == NV_DT_BF16 || weights == NV_DT_FP16)
        return nv_dtype_round(weights, x, &NV_ROUND_DEFAULT, 0);
    return mround(master, x);
}

/* The eval loss of the current weights, computed by the host fp64 reference for
 * device and reference runs alike: the curve measures the model training
 * produced, not the device's arithmetic in computing a loss (a device that
 * accumulates the eval mean in bf16 would misreport it). */
int nvw_eval_loss(nvw_model *m, const nvw_data *d, nvw_exec *ex, double *ret)
{
    nvw_exec host;
    memset(&host, 0, sizeof host);
    host.host = true;
    nvw_tape tp;
    nvw_tape_init(&tp, &host);
    nv_dtype dt = NV_DT_FP64;
    nv_tensor *x = nv_tensor_contiguous(d->eval_x), *y = nv_tensor_contiguous(d->eval_y);
    int r = -ENOMEM;
    if (x && y) {
        x->dtype = dt;
        r = nvw_model_loss(m, &tp, x, y);
        x = y = NULL;
    }
    if (r >= 0)
        *ret = tp.vals[r].t->data[0];
    else
        snprintf(ex->err, sizeof ex->err, "eval (host fp64): %.400s", host.err);
    nv_tensor_free(x);
    nv_tensor_free(y);
    nvw_tape_done(&tp);
    return r < 0 ? r : 0;
}

/* Unscale the gradients of the tape's parameter leaves into the model; returns
 * the count of non-finite elements. */
static int64_t collect(nvw_model *m, nvw_tape *tp, double inv_scale)
{
    int64_t bad = 0;
    for (int i = 0; i < m->n_params; i++) {
        nvw_param *p = &m->p[i];
        nv_tensor_free(p->g);
        p->g = tp->vals[i].g; /* the parameters are the tape's first leaves */
        tp->vals[i].g = NULL;
        if (!p->g)
            continue;
        for (int64_t k = 0; k < p->g->numel; k++) {
            double g = mround(m->master, p->g->data[k] * inv_scale);
            bad += !isfinite(g);
            p->g->data[k] = g;
        }
    }
    return bad;
}

static void optimizer_step(nvw_model *m, const nv_longrun_spec *s, nv_dtype wdt, double lr,
                           int64_t t)
{
    double b1t = 1 - pow(s->beta1, (double)t), b2t = 1 - pow(s->beta2, (double)t);
    for (int i = 0; i < m->n_params; i++) {
        nvw_param *p = &m->p[i];
        if (!p->g)
            continue;
        for (int64_t k = 0; k < p->w->numel; k++) {
            double g = p->g->data[k], w = p->w->data[k];
            if (s->adamw) { /* Loshchilov & Hutter, Decoupled Weight Decay, Alg. 2 */
                double mm = p->m[k] = mround(m->master, s->beta1 * p->m[k] + (1 - s->beta1) * g);
                double vv = p->v[k] =
                    mround(m->master, s->beta2 * p->v[k] + (1 - s->beta2) * g * g);
                w -= lr * ((mm / b1t) / (sqrt(vv / b2t) + s->eps) + s->weight_decay * w);
            } else { /* SGD with momentum as torch.optim.SGD (dampening 0) */
                g += s->weight_decay * w;
                double b = p->m[k] = mround(m->master, s->momentum * p->m[k] + g);
                w -= lr * b;
            }
            p->w->data[k] = wround(m->master, wdt, w);
        }
    }
}

static void norms(const nvw_model *m, nvw_run *run, nvw_point *pt)
{
    double total = 0;
    memset(pt->layer_norms, 0, sizeof pt->layer_norms);
    memset(pt->dev_err2, 0, sizeof pt->dev_err2);
    memset(pt->decl_err2, 0, sizeof pt->decl_err2);
    memset(pt->ref2, 0, sizeof pt->ref2);
    for (int i = 0; i < m->n_params; i++) {
        const nvw_param *p = &m->p[i];
        int l = 0;
        while (l < run->n_layers && strcmp(run->layers[l], p->layer))
            l++;
        if (l == run->n_layers && l < NVW_MAX_PARAMS)
            snprintf(run->layers[run->n_layers++], 16, "%s", p->layer);
        double s = 0;
        for (int64_t k = 0; p->g && k < p->g->numel; k++)
            s += p->g->data[k] * p->g->data[k];
        pt->layer_norms[l] += s;
        total += s;
        pt->dev_err2[l] += pt->p_dev_err2[i];
        pt->decl_err2[l] += pt->p_decl_err2[i];
        pt->ref2[l] += pt->p_ref2[i];
    }
    for (int l = 0; l < run->n_layers; l++)
        pt->layer_norms[l] = sqrt(pt->layer_norms[l]);
    pt->grad_norm = sqrt(total);
}

/* The dtype the run keeps its weights in (wround). */
static nv_dtype weights_dtype(const nvw_exec *ex)
{
    return !ex->host && ex->amp.enabled ? ex->amp.master : NV_DT_FP64;
}

/* One step: forward, backward with the scaled seed, unscale, check, update.
 * check (a logged step of a device run): the gradient is also compared at
 * matched weights (shadow.c) before the update, unless the step is skipped. */
static int step(nvw_model *m, const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex,
                nvw_scaler *sc, uint64_t seed, int64_t t, bool check, int64_t *applied,
                nvw_point *pt)
{
    nv_tensor *x = NULL, *y = NULL;
    int r = nvw_data_batch(d, seed, t, ex->host ? NV_DT_FP64 : NV_DT_FP32, &x, &y);
    if (r < 0)
        return r;
    nvw_tape tp;
    nvw_tape_init(&tp, ex);
    int64_t z0 = ex->lowp_grad_zero, e0 = ex->lowp_grad_elems;
    int loss = nvw_model_loss(m, &tp, x, y);
    double scale = nvw_scaler_scale(sc);
    r = loss < 0 ? loss : nvw_tape_backward(&tp, loss, scale * s->loss_weight);
    if (r < 0)
        goto out;
    pt->train_loss = tp.vals[loss].t->data[0];
    pt->scale = scale;
    pt->nonfinite = collect(m, &tp, 1.0 / (scale * s->loss_weight) * s->loss_weight);
    int64_t de = ex->lowp_grad_elems - e0;
    pt->lowp_zero_frac = de ? (double)(ex->lowp_grad_zero - z0) / (double)de : 0;
    if (check && !ex->host && pt->nonfinite == 0 &&
        (r = nvw_shadow_grads(m, d, ex, seed, t, scale, 0, NULL, pt)) < 0)
        goto out;
    pt->skipped = nvw_scaler_update(sc, pt->nonfinite > 0);
    if (!pt->skipped) {
        double lr = nvw_lr_at(s->cosine ? NVW_LR_COSINE : NVW_LR_CONSTANT, s->lr, s->warmup,
                              s->min_lr_ratio, t, s->steps);
        optimizer_step(m, s, weights_dtype(ex), lr, ++*applied);
    }
out:
    nvw_tape_done(&tp);
    return r;
}

int nvw_train_run(const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                  nvw_run *run)
{
    memset(run, 0, sizeof *run);
    run->seed = seed;
    run->host = ex->host;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n_log = (int)(s->steps / s->log_every) + 2;
    run->pts = calloc((size_t)n_log, sizeof *run->pts);
    nvw_model m;
    int r = run->pts ? nvw_model_init(&m, s, seed, ex->host ? NV_DT_FP64 : NV_DT_FP32) : -ENOMEM;
    if (r < 0)
        return r;
    nv_dtype wdt = weights_dtype(ex);
    for (int i = 0; i < m.n_params && wdt != NV_DT_FP64; i++) /* bf16/fp16 weights from step 0 */
        for (int64_t k = 0; k < m.p[i].w->numel; k++)
            m.p[i].w->data[k] = wround(m.master, wdt, m.p[i].w->data[k]);
    nvw_scaler sc;
    nvw_scaler_init(&sc, s->scaler && !ex->host, s->init_scale, s->growth, s->backoff,
                    s->growth_interval);
    int64_t applied = 0, zsum_n = 0;
    double zsum = 0;
    nvw_point cur;
    for (int64_t t = 0; t <= s->steps && r == 0; t++) {
        bool log = t % s->log_every == 0 || t == s->steps;
        double el = NAN, ev_dev = NAN, ev_decl = NAN;
        if (log && (r = nvw_eval_loss(&m, d, ex, &el)) < 0)
            break;
        if (log && !ex->host && (r = nvw_shadow_eval(&m, d, ex, &ev_dev, &ev_decl)) < 0)
            break;
        if (t == s->steps) {
            run->final_loss = el;
            cur.step = t, cur.loss = el;
            cur.eval_dev = ev_dev, cur.eval_decl = ev_decl;
            cur.checked = false;
            run->pts[run->n_pts++] = cur;
            break;
        }
        memset(&cur, 0, sizeof cur);
        r = step(&m, s, d, ex, &sc, seed, t, log, &applied, &cur);
        cur.step = t, cur.loss = el;
        cur.eval_dev = ev_dev, cur.eval_decl = ev_decl;
        run->skipped_steps += cur.skipped;
        run->nonfinite_total += cur.nonfinite;
        zsum += cur.lowp_zero_frac, zsum_n++;
        norms(&m, run, &cur);
        if (log && r == 0)
            run->pts[run->n_pts++] = cur;
        run->steps_done = t + 1;
    }
    if (r < 0)
        snprintf(run->err, sizeof run->err, "%s", ex->err[0] ? ex->err : strerror(-r));
    run->lowp_zero_frac = zsum_n ? zsum / (double)zsum_n : 0;
    nvw_model_done(&m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    run->seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return r;
}

void nvw_run_done(nvw_run *r)
{
    free(r->pts);
    r->pts = NULL;
    free(r->scale_bits), free(r->mask_hash), free(r->state_hash);
    r->scale_bits = r->mask_hash = r->state_hash = NULL;
}
