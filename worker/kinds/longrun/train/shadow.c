/* The device's arithmetic at matched weights. A long run's loss curve sees the
 * device only through the training signal, and SGD and AdamW average rounding
 * noise away (docs/JOBS.md), so at every logged step the weights the device run
 * holds are also handed to two host executors on the same batch and eval set:
 * the fp64 reference (the exact answer to within fp64) and the declared-precision
 * reference (tape.h: every op rounded once to the dtype the AMP policy gives the
 * device). The device's gradient and eval loss are then judged by how far they
 * are from the first, against how far the second is (judge.c). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "train_internal.h"

/* A host model holding the device model's current weights (fp32 values, exact in
 * either master dtype). */
static int clone_model(const nvw_model *m, nv_dtype master, nvw_model *ret)
{
    int r = nvw_model_init(ret, m->s, 0, master);
    if (r < 0)
        return r;
    ret->mask = m->mask;
    for (int i = 0; i < m->n_params; i++)
        memcpy(ret->p[i].w->data, m->p[i].w->data,
               (size_t)m->p[i].w->numel * sizeof(*m->p[i].w->data));
    return 0;
}

static nv_tensor *retagged(const nv_tensor *t, nv_dtype dt)
{
    nv_tensor *c = nv_tensor_contiguous(t);
    if (c && c->dtype != NV_DT_INT32)
        c->dtype = dt;
    return c;
}

/* Forward (and with grads the backward from seed) of the model on (x, y) on ex;
 * takes x and y. grads[i]: parameter i's gradient, or NULL. */
static int run_tape(nvw_model *m, nvw_exec *ex, nv_tensor *x, nv_tensor *y, double seed,
                    double *ret_loss, nv_tensor **grads)
{
    nvw_tape tp;
    nvw_tape_init(&tp, ex);
    int loss = nvw_model_loss(m, &tp, x, y);
    int r = loss < 0 ? loss : 0;
    if (r == 0)
        *ret_loss = tp.vals[loss].t->data[0];
    if (r == 0 && grads)
        r = nvw_tape_backward(&tp, loss, seed);
    for (int i = 0; r == 0 && grads && i < m->n_params; i++) {
        grads[i] = tp.vals[i].g; /* the parameters are the tape's first leaves */
        tp.vals[i].g = NULL;
    }
    nvw_tape_done(&tp);
    return r;
}

static void host_exec(const nvw_exec *dev, bool declared, nvw_exec *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->host = true;
    ret->declared = declared;
    ret->amp = dev->amp;
}

int nvw_shadow_grads(const nvw_model *m, const nvw_data *d, const nvw_exec *dev, uint64_t seed,
                     int64_t t, double scale, double clip, double *ret_norm64, nvw_point *pt)
{
    nv_tensor *x = NULL, *y = NULL, *g64[NVW_MAX_PARAMS] = {0}, *gdl[NVW_MAX_PARAMS] = {0};
    nvw_model h64, hdl;
    bool have64 = false, havedl = false;
    int r = nvw_data_batch(d, seed, t, NV_DT_FP32, &x, &y); /* the device's own batch */
    r = r < 0 ? r : clone_model(m, NV_DT_FP64, &h64);
    have64 = r == 0;
    r = r < 0 ? r : clone_model(m, NV_DT_FP32, &hdl);
    havedl = r == 0;
    nvw_exec e64, edl;
    host_exec(dev, false, &e64);
    host_exec(dev, true, &edl);
    double l64 = 0, ldl = 0;
    if (r == 0) {
        nv_tensor *x64 = retagged(x, NV_DT_FP64), *y64 = nv_tensor_contiguous(y);
        double lw = m->s->loss_weight;
        r = x64 && y64 ? run_tape(&h64, &e64, x64, y64, lw, &l64, g64) : -ENOMEM;
        if (r == 0) {
            /* The device's loss scale too: its gradients are scaled in the
             * declared dtypes and unscaled in fp32 (loop.c collect). */
            r = run_tape(&hdl, &edl, x, y, scale * lw, &ldl, gdl);
            x = y = NULL;
        }
    }
    /* Gradient-norm clipping (torch.nn.utils.clip_grad_norm_) of both
     * references by the fp64 gradient's norm: the device's gradient is the
     * clipped one its optimizer used. */
    double n2 = 0, coef = 1;
    for (int i = 0; r == 0 && i < m->n_params; i++)
        for (int64_t k = 0; g64[i] && k < g64[i]->numel; k++)
            n2 += g64[i]->data[k] * g64[i]->data[k];
    if (ret_norm64)
        *ret_norm64 = sqrt(n2);
    if (clip > 0 && clip / (sqrt(n2) + 1e-6) < 1)
        coef = clip / (sqrt(n2) + 1e-6);
    for (int i = 0; r == 0 && i < m->n_params; i++) {
        const nv_tensor *gd = m->p[i].g, *g = g64[i], *gc = gdl[i];
        double ed = 0, ec = 0, rr = 0;
        for (int64_t k = 0; g && k < g->numel; k++) {
            /* The declared reference's gradient unscaled and stored as the
             * device's is (fp32 master, loop.c collect). */
            double ref = coef * g->data[k], dv = gd ? gd->data[k] : 0,
                   cv = gc ? coef * (double)(float)(gc->data[k] * (1.0 / scale)) : 0;
            ed += (dv - ref) * (dv - ref);
            ec += (cv - ref) * (cv - ref);
            rr += ref * ref;
        }
        pt->p_dev_err2[i] = ed, pt->p_decl_err2[i] = ec, pt->p_ref2[i] = rr;
    }
    if (r == 0)
        pt->checked = true;
    for (int i = 0; i < NVW_MAX_PARAMS; i++) {
        nv_tensor_free(g64[i]);
        nv_tensor_free(gdl[i]);
    }
    nv_tensor_free(x);
    nv_tensor_free(y);
    if (have64)
        nvw_model_done(&h64);
    if (havedl)
        nvw_model_done(&hdl);
    return r;
}

int nvw_shadow_eval(const nvw_model *m, const nvw_data *d, nvw_exec *dev, double *ret_dev,
                    double *ret_decl)
{
    nvw_model hdl;
    int r = clone_model(m, NV_DT_FP32, &hdl);
    if (r < 0)
        return r;
    nvw_exec edl;
    host_exec(dev, true, &edl);
    /* The eval set in fp32, as a device holds it (each value rounded once). */
    nv_tensor *xs[2] = {retagged(d->eval_x, NV_DT_FP64), retagged(d->eval_x, NV_DT_FP64)};
    for (int k = 0; k < 2 && xs[k]; k++)
        for (int64_t i = 0; i < xs[k]->numel; i++)
            xs[k]->data[i] = (double)(float)xs[k]->data[i];
    nv_tensor *ys[2] = {nv_tensor_contiguous(d->eval_y), nv_tensor_contiguous(d->eval_y)};
    r = xs[0] && xs[1] && ys[0] && ys[1] ? 0 : -ENOMEM;
    for (int k = 0; k < 2 && xs[k]; k++)
        xs[k]->dtype = NV_DT_FP32;
    if (r == 0) {
        /* The device's own forward: the device model, on the device. */
        r = run_tape((nvw_model *)m, dev, xs[0], ys[0], 0, ret_dev, NULL);
        xs[0] = ys[0] = NULL;
    }
    if (r == 0) {
        r = run_tape(&hdl, &edl, xs[1], ys[1], 0, ret_decl, NULL);
        xs[1] = ys[1] = NULL;
    }
    for (int k = 0; k < 2; k++) {
        nv_tensor_free(xs[k]);
        nv_tensor_free(ys[k]);
    }
    nvw_model_done(&hdl);
    return r;
}
