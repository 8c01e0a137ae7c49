/* emu's device-driven step of the long run's CNN (docs/JOBS.md "Device-driven
 * training"): the model kind's small CNN (conv1, conv2: conv2d 3x3 padding 1,
 * activation, 2x2 max pool; flatten; head: matmul + bias; cross entropy)
 * composed of emu's own op entries (its forward and backward tables), the way
 * a framework's autograd composes its kernels. Autocast as PyTorch's: conv2d
 * and matmul take their inputs cast to the low-precision dtype, the
 * activation and the pool keep their input's, the bias add promotes to fp32,
 * cross entropy runs in fp32; the backward casts each gradient back to its
 * input's dtype. Because every op is an op-entry call, the mode's knobs
 * (storage=, accum=, reduce=, ...) act inside the training step exactly as
 * in op jobs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/ops/jacobian.h"
#include "emu.h"
#include "emu_backward.h" /* emu_saved_json_cached */
#include "emu_train.h"
#include "worker/backends/views/views.h"

typedef struct cnn_ctx {
    emu_ctx *ctx;
    json_t *ops; /* forward read-back, NULL: not recorded (casts, backward) */
    char *err;
    size_t errlen;
} cnn_ctx;

/* One forward call of op on emu's op entry; the output decoded (NULL: err). */
static nv_tensor *fwd(cnn_ctx *c, const char *op, const char *attrs, int n, nv_tensor *const *in,
                      nv_dtype out_dt, bool record)
{
    const nv_backend *be = nvw_emu_backend();
    nv_tensor_view v[4], o;
    memset(v, 0, sizeof v);
    memset(&o, 0, sizeof o);
    int r = 0, k = 0;
    for (; k < n && r == 0; k++)
        r = nvw_view_from_tensor(in[k], &v[k]);
    nv_op_call call = {.op = op,
                       .attrs_json = attrs,
                       .out_dtype = (int32_t)out_dt,
                       .n_inputs = n,
                       .inputs = v,
                       .n_outputs = 1,
                       .outputs = &o};
    r = r ? NV_E_NOMEM : be->forward(c->ctx, &call, c->err, c->errlen);
    nv_tensor *t = r == NV_OK ? nvw_tensor_from_view(&o, false) : NULL;
    if (o.data)
        be->release_tensor(c->ctx, &o);
    for (int i = 0; i < k; i++)
        nvw_view_free(&v[i]);
    if (r == NV_OK && !t)
        snprintf(c->err, c->errlen, "out of memory");
    if (t && record && c->ops) {
        json_t *ins = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(ins, json_string(nv_dtype_name(in[i]->dtype)));
        json_array_append_new(c->ops, json_pack("{s:s, s:o, s:s}", "op", op, "inputs", ins,
                                                "output", nv_dtype_name(t->dtype)));
    }
    return t;
}

/* x in dt through emu's cast op (a copy when it already is). */
static nv_tensor *cast(cnn_ctx *c, nv_tensor *x, nv_dtype dt)
{
    if (x->dtype == dt) {
        nv_tensor *t = nv_tensor_contiguous(x);
        if (!t)
            snprintf(c->err, c->errlen, "out of memory");
        return t;
    }
    char attrs[48];
    snprintf(attrs, sizeof attrs, "{\"to\":\"%s\"}", nv_dtype_name(dt));
    return fwd(c, "cast", attrs, 1, &x, dt, false);
}

/* The backward of op on emu's backward entry: gx[i] for each differentiable
 * input (NULL for the others), with the saved tensors emu's describe lists. */
static int bwd(cnn_ctx *c, const char *opname, const char *attrs, int n, nv_tensor *const *in,
               const nv_tensor *y, const nv_tensor *gy, nv_tensor **gx)
{
    const nv_backend *be = nvw_emu_backend();
    const nv_op_def *op = nv_op_find(opname);
    nv_tensor_view v[4], yv, gv, sv[5], gxv[4];
    memset(v, 0, sizeof v), memset(&yv, 0, sizeof yv), memset(&gv, 0, sizeof gv);
    memset(gxv, 0, sizeof gxv);
    for (int i = 0; i < n; i++)
        gx[i] = NULL;
    int r = 0, k = 0;
    for (; k < n && r == 0; k++)
        r = nvw_view_from_tensor(in[k], &v[k]);
    r = r ? r : nvw_view_from_tensor(y, &yv);
    r = r ? r : nvw_view_from_tensor(gy, &gv);
    int n_saved = 0, n_grads = 0;
    const json_t *list = json_object_get(emu_saved_json_cached(), opname);
    size_t i;
    const json_t *it;
    json_array_foreach(list, i, it)
    {
        const char *s = json_string_value(it);
        int idx = s ? atoi(strchr(s, ':') ? strchr(s, ':') + 1 : "0") : 0;
        sv[n_saved++] = s && !strncmp(s, "output", 6) ? yv : v[idx < n ? idx : 0];
    }
    for (int j = 0; j < n; j++)
        n_grads += nv_op_grad_input(op, j);
    nv_backward_call call = {.op = opname,
                             .attrs_json = attrs,
                             .n_inputs = n,
                             .inputs = v,
                             .n_saved = n_saved,
                             .saved = sv,
                             .grad_output = &gv,
                             .n_grads = n_grads,
                             .grad_inputs = gxv};
    r = r ? NV_E_NOMEM : be->backward(c->ctx, &call, c->err, c->errlen);
    for (int j = 0, q = 0; r == NV_OK && j < n; j++)
        if (nv_op_grad_input(op, j) && !(gx[j] = nvw_tensor_from_view(&gxv[q++], false)))
            r = NV_E_NOMEM;
    for (int j = 0; j < n_grads; j++)
        if (gxv[j].data)
            be->release_tensor(c->ctx, &gxv[j]);
    for (int j = 0; j < k; j++)
        nvw_view_free(&v[j]);
    nvw_view_free(&yv), nvw_view_free(&gv);
    if (r != NV_OK)
        for (int j = 0; j < n; j++)
            nv_tensor_free(gx[j]), gx[j] = NULL;
    if (r == NV_E_NOMEM)
        snprintf(c->err, c->errlen, "out of memory");
    return r;
}

static nv_tensor *param(const emu_train_t *t, int i)
{
    nv_tensor *p = nv_tensor_new(NV_DT_FP32, t->ndim[i], t->shape[i]);
    for (int64_t k = 0; p && k < p->numel; k++)
        p->data[k] = t->w[i][k];
    return p;
}

/* The tensors of one step, freed together. */
enum {
    X,
    XL,
    W1,
    W1L,
    C1,
    A1,
    P1,
    W2,
    W2L,
    C2,
    A2,
    P2,
    F,
    W3,
    W3L,
    Z,
    ZF,
    B3,
    BB,
    LG,
    Y,
    LOSS,
    N_FWD
};

#define TRY(e)                                                                                     \
    do {                                                                                           \
        if (!(e)) {                                                                                \
            r = r ? r : NV_E_INVALID;                                                              \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

int emu_train_cnn_grads(emu_ctx *ctx, const emu_train_t *t, const nv_tensor_view *xv,
                        const int32_t *y, int64_t B, double **g, double *ret_loss, json_t *ops,
                        char *err, size_t errlen)
{
    cnn_ctx c = {.ctx = ctx, .ops = ops, .err = err, .errlen = errlen};
    nv_dtype L = t->amp ? t->low : NV_DT_FP32;
    nv_tensor *v[N_FWD] = {0}, *gr[24] = {0};
    int r = NV_OK, ng = 0;
    const char *cv = "{\"padding\":1}", *pool = "{\"kernel\":2}";
    const char *act = t->relu ? "relu" : "gelu";
    err[0] = 0;
    TRY(v[X] = nvw_tensor_from_view(xv, false));
    int64_t side = t->in / 4, feat = 2 * (int64_t)t->hid * side * side, ys = B;
    TRY(v[Y] = nv_tensor_new(NV_DT_INT32, 1, &ys));
    for (int64_t b = 0; b < B; b++)
        v[Y]->data[b] = y[b];
    TRY(v[W1] = param(t, 0));
    TRY(v[W2] = param(t, 1));
    TRY(v[W3] = param(t, 2));
    TRY(v[B3] = param(t, 3));
    /* forward */
    TRY(v[XL] = cast(&c, v[X], L));
    TRY(v[W1L] = cast(&c, v[W1], L));
    nv_tensor *a[2] = {v[XL], v[W1L]};
    TRY(v[C1] = fwd(&c, "conv2d", cv, 2, a, L, true));
    TRY(v[A1] = fwd(&c, act, "{}", 1, &v[C1], L, true));
    TRY(v[P1] = fwd(&c, "max_pool2d", pool, 1, &v[A1], L, true));
    TRY(v[W2L] = cast(&c, v[W2], L));
    a[0] = v[P1], a[1] = v[W2L];
    TRY(v[C2] = fwd(&c, "conv2d", cv, 2, a, L, true));
    TRY(v[A2] = fwd(&c, act, "{}", 1, &v[C2], L, true));
    TRY(v[P2] = fwd(&c, "max_pool2d", pool, 1, &v[A2], L, true));
    TRY(v[F] = nv_tensor_contiguous(v[P2])); /* flatten: the same elements */
    v[F]->ndim = 2, v[F]->shape[0] = B, v[F]->shape[1] = feat;
    v[F]->strides[0] = feat, v[F]->strides[1] = 1;
    TRY(v[W3L] = cast(&c, v[W3], L));
    a[0] = v[F], a[1] = v[W3L];
    TRY(v[Z] = fwd(&c, "matmul", "{}", 2, a, L, true));
    TRY(v[ZF] = cast(&c, v[Z], NV_DT_FP32)); /* the add promotes to the bias's fp32 */
    int64_t bs[2] = {B, t->cls};
    TRY(v[BB] = nv_tensor_new(NV_DT_FP32, 2, bs)); /* the bias broadcast over the rows */
    for (int64_t k = 0; k < B * t->cls; k++)
        v[BB]->data[k] = v[B3]->data[k % t->cls];
    a[0] = v[ZF], a[1] = v[BB];
    TRY(v[LG] = fwd(&c, "add", "{}", 2, a, NV_DT_FP32, true));
    a[0] = v[LG], a[1] = v[Y];
    TRY(v[LOSS] = fwd(&c, "cross_entropy", "{\"reduction\":\"mean\"}", 2, a, NV_DT_FP32, true));
    *ret_loss = v[LOSS]->data[0];
    /* backward from the scaled loss seed = scale * loss_weight */
    nv_tensor *seed = gr[ng++] = nv_tensor_new(NV_DT_FP32, 0, NULL);
    TRY(seed);
    seed->data[0] = (double)(float)(t->scale * t->loss_weight);
    nv_tensor *gx[2];
    a[0] = v[LG], a[1] = v[Y];
    TRY(bwd(&c, "cross_entropy", "{\"reduction\":\"mean\"}", 2, a, v[LOSS], seed, gx) == NV_OK);
    nv_tensor *glg = gr[ng++] = gx[0];
    a[0] = v[ZF], a[1] = v[BB];
    TRY(bwd(&c, "add", "{}", 2, a, v[LG], glg, gx) == NV_OK);
    gr[ng++] = gx[0], gr[ng++] = gx[1];
    nv_tensor *gb = gr[ng++] = fwd(&c, "sum", "{\"axis\":0}", 1, &gx[1], NV_DT_FP32, false);
    TRY(gb);
    nv_tensor *gz = gr[ng++] = cast(&c, gx[0], L);
    TRY(gz);
    a[0] = v[F], a[1] = v[W3L];
    TRY(bwd(&c, "matmul", "{}", 2, a, v[Z], gz, gx) == NV_OK);
    gr[ng++] = gx[0], gr[ng++] = gx[1];
    nv_tensor *gw3 = gr[ng++] = cast(&c, gx[1], NV_DT_FP32);
    TRY(gw3);
    nv_tensor *gp = gr[ng++] = nv_tensor_contiguous(gx[0]); /* unflatten */
    TRY(gp);
    gp->ndim = 4;
    for (int d = 0; d < 4; d++)
        gp->shape[d] = v[P2]->shape[d], gp->strides[d] = v[P2]->strides[d];
    nv_tensor *gw[2] = {NULL, NULL};
    nv_tensor *const lin[2] = {v[XL], v[P1]}, *const lw[2] = {v[W1L], v[W2L]};
    nv_tensor *const lc[2] = {v[C1], v[C2]}, *const la[2] = {v[A1], v[A2]};
    nv_tensor *const lp[2] = {v[P1], v[P2]};
    for (int l = 1; l >= 0; l--) {
        TRY(bwd(&c, "max_pool2d", pool, 1, &la[l], lp[l], gp, gx) == NV_OK);
        nv_tensor *ga = gr[ng++] = gx[0];
        TRY(bwd(&c, act, "{}", 1, &lc[l], la[l], ga, gx) == NV_OK);
        nv_tensor *gc = gr[ng++] = gx[0];
        a[0] = lin[l], a[1] = lw[l];
        TRY(bwd(&c, "conv2d", cv, 2, a, lc[l], gc, gx) == NV_OK);
        gr[ng++] = gx[0], gr[ng++] = gx[1];
        gp = gx[0];
        TRY(gw[l] = gr[ng++] = cast(&c, gx[1], NV_DT_FP32));
    }
    const nv_tensor *out[NP] = {gw[0], gw[1], gw3, gb};
    for (int i = 0; i < NP; i++) {
        if (out[i]->numel != t->n[i]) {
            snprintf(err, errlen, "cnn step: gradient %d has %lld elements, %lld expected", i,
                     (long long)out[i]->numel, (long long)t->n[i]);
            r = NV_E_INVALID;
            goto out;
        }
        memcpy(g[i], out[i]->data, (size_t)t->n[i] * sizeof(double));
    }
out:
    if (r != NV_OK && !err[0])
        snprintf(err, errlen, "out of memory");
    for (int i = 0; i < N_FWD; i++)
        nv_tensor_free(v[i]);
    for (int i = 0; i < ng; i++)
        nv_tensor_free(gr[i]);
    return r;
}
