/* The long-run models: an MLP classifier (matmul + bias + gelu/relu, twice, then
 * cross entropy), one transformer encoder block (single-head attention with
 * softmax, residual + layer_norm, gelu MLP, residual + layer_norm, mean pooling,
 * linear classifier) and the model kind's small CNN classifier (suites/model.json
 * "cnn-classifier": conv2d 3x3 + activation + 2x2 max pool, twice, flatten,
 * linear head; its layers conv1, conv2 and head), written once against the tape
 * so the device and the host reference run the same graph. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "train_internal.h"

/* A parameter initialized N(0, 1) * std (std 0: constant `fill`), rounded to fp32
 * so the device and the reference start from the same values. shape: ndim
 * extents (1 to 4). */
static int param_nd(nvw_model *m, const char *layer, const char *what, int ndim,
                    const int64_t *shape, double std, double fill, uint64_t seed)
{
    if (m->n_params >= NVW_MAX_PARAMS)
        return -E2BIG;
    nvw_param *p = &m->p[m->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", layer, what);
    snprintf(p->layer, sizeof p->layer, "%s", layer);
    p->w = nv_tensor_new(m->master, ndim, shape);
    if (!p->w)
        return -ENOMEM;
    p->m = calloc((size_t)p->w->numel, sizeof(double));
    p->v = calloc((size_t)p->w->numel, sizeof(double));
    m->n_params++;
    if (!p->m || !p->v)
        return -ENOMEM;
    nv_rng r;
    nv_rng_init(&r, seed, 0x1417, (uint32_t)m->n_params);
    for (int64_t i = 0; i < p->w->numel; i++)
        p->w->data[i] = std > 0 ? (double)(float)(nv_rng_normal(&r) * std) : fill;
    return m->n_params - 1;
}

static int param(nvw_model *m, const char *layer, const char *what, int ndim, int64_t d0,
                 int64_t d1, double std, double fill, uint64_t seed)
{
    int64_t shape[2] = {d0, d1};
    return param_nd(m, layer, what, ndim, shape, std, fill, seed);
}

/* A 3x3 convolution's weight [co, ci, 3, 3], LeCun normal over its fan-in ci * 9. */
static int conv(nvw_model *m, const char *name, int64_t ci, int64_t co, uint64_t seed)
{
    int64_t shape[4] = {co, ci, 3, 3};
    return param_nd(m, name, "weight", 4, shape, 1.0 / sqrt((double)ci * 9), 0, seed);
}

static int linear(nvw_model *m, const char *name, int64_t in, int64_t out, uint64_t seed)
{
    int r = param(m, name, "weight", 2, in, out, 1.0 / sqrt((double)in), 0, seed);
    return r < 0 ? r : param(m, name, "bias", 1, out, 0, 0, 0, seed);
}

static int norm(nvw_model *m, const char *name, int64_t d, uint64_t seed)
{
    int r = param(m, name, "weight", 1, d, 0, 0, 1, seed);
    return r < 0 ? r : param(m, name, "bias", 1, d, 0, 0, 0, seed);
}

int nvw_model_init(nvw_model *m, const nv_longrun_spec *s, uint64_t seed, nv_dtype master)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->master = master;
    int r;
    if (s->model == NV_LR_MLP) {
        r = linear(m, "fc1", s->in_dim, s->hidden, seed);
        r = r < 0 ? r : linear(m, "fc2", s->hidden, s->classes, seed);
    } else if (s->model == NV_LR_CNN) {
        int64_t side = s->in_dim / 4, c2 = 2 * (int64_t)s->hidden;
        r = conv(m, "conv1", 1, s->hidden, seed);
        r = r < 0 ? r : conv(m, "conv2", s->hidden, c2, seed);
        r = r < 0 ? r : linear(m, "head", c2 * side * side, s->classes, seed);
    } else {
        int64_t D = s->in_dim;
        r = param(m, "attn", "wq", 2, D, D, 1.0 / sqrt((double)D), 0, seed);
        r = r < 0 ? r : param(m, "attn", "wk", 2, D, D, 1.0 / sqrt((double)D), 0, seed);
        r = r < 0 ? r : param(m, "attn", "wv", 2, D, D, 1.0 / sqrt((double)D), 0, seed);
        r = r < 0 ? r : param(m, "attn", "wo", 2, D, D, 1.0 / sqrt((double)D), 0, seed);
        r = r < 0 ? r : norm(m, "ln1", D, seed);
        r = r < 0 ? r : linear(m, "mlp1", D, s->hidden, seed);
        r = r < 0 ? r : linear(m, "mlp2", s->hidden, D, seed);
        r = r < 0 ? r : norm(m, "ln2", D, seed);
        r = r < 0 ? r : linear(m, "head", D, s->classes, seed);
    }
    if (r < 0) {
        nvw_model_done(m);
        return r;
    }
    return 0;
}

void nvw_model_done(nvw_model *m)
{
    for (int i = 0; i < m->n_params; i++) {
        nv_tensor_free(m->p[i].w);
        nv_tensor_free(m->p[i].g);
        free(m->p[i].m);
        free(m->p[i].v);
    }
    m->n_params = 0;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int r_ = (x);                                                                              \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
    } while (0)

/* x [N, K] @ W + b, from parameters w and w + 1. */
static int affine(nvw_tape *tp, const int *pv, int w, int x, int64_t rows)
{
    int r, ab[2] = {x, pv[w]};
    TRY(r = nvw_tape_op(tp, "matmul", "{}", 2, ab));
    int mm = r;
    TRY(r = nvw_tape_expand(tp, pv[w + 1], rows));
    int sum[2] = {mm, r};
    return nvw_tape_op(tp, "add", "{}", 2, sum);
}

static int act(nvw_tape *tp, bool relu, int x)
{
    return nvw_tape_op(tp, relu ? "relu" : "gelu", "{}", 1, &x);
}

static int mlp_logits(nvw_model *m, nvw_tape *tp, const int *pv, int x, int64_t B)
{
    int r;
    TRY(r = affine(tp, pv, 0, x, B));
    TRY(r = act(tp, m->s->relu, r));
    if (m->mask) { /* dropout, with the device's own mask */
        nv_tensor *k = nv_tensor_contiguous(m->mask);
        if (!k)
            return -ENOMEM;
        k->dtype = nvw_exec_fp64(tp->ex) ? NV_DT_FP64 : NV_DT_FP32;
        int mv[2] = {r, 0};
        TRY(mv[1] = nvw_tape_leaf_own(tp, k));
        TRY(r = nvw_tape_op(tp, "mul", "{}", 2, mv));
    }
    return affine(tp, pv, 2, r, B);
}

static int attention(nvw_model *m, nvw_tape *tp, const int *pv, int xf, int64_t B)
{
    const nv_longrun_spec *s = m->s;
    int64_t T = s->seq, D = s->in_dim, s3[3] = {B, T, D};
    int r, qkv[3];
    for (int k = 0; k < 3; k++) {
        int ab[2] = {xf, pv[k]};
        TRY(r = nvw_tape_op(tp, "matmul", "{}", 2, ab));
        TRY(qkv[k] = nvw_tape_reshape(tp, r, 3, s3));
    }
    TRY(r = nvw_tape_transpose(tp, qkv[1]));
    int qk[2] = {qkv[0], r};
    TRY(r = nvw_tape_op(tp, "bmm", "{}", 2, qk));
    int64_t ss[3] = {B, T, T};
    nv_tensor *c = nv_tensor_new(nvw_exec_fp64(tp->ex) ? NV_DT_FP64 : NV_DT_FP32, 3, ss);
    if (!c)
        return -ENOMEM;
    for (int64_t i = 0; i < c->numel; i++) /* 1/sqrt(d) (Vaswani et al. 2017, eq. 1) */
        c->data[i] = (double)(float)(1.0 / sqrt((double)D));
    int sc[2] = {r, 0};
    TRY(sc[1] = nvw_tape_leaf_own(tp, c));
    TRY(r = nvw_tape_op(tp, "mul", "{}", 2, sc));
    TRY(r = nvw_tape_op(tp, "softmax", "{\"axis\":-1}", 1, &r));
    int av[2] = {r, qkv[2]};
    TRY(r = nvw_tape_op(tp, "bmm", "{}", 2, av));
    int64_t s2[2] = {B * T, D};
    TRY(r = nvw_tape_reshape(tp, r, 2, s2));
    int ow[2] = {r, pv[3]};
    return nvw_tape_op(tp, "matmul", "{}", 2, ow);
}

static int block_logits(nvw_model *m, nvw_tape *tp, const int *pv, int x, int64_t B)
{
    const nv_longrun_spec *s = m->s;
    int64_t T = s->seq, D = s->in_dim, s2[2] = {B * T, D}, s3[3] = {B, T, D};
    int r, xf;
    TRY(xf = nvw_tape_reshape(tp, x, 2, s2));
    TRY(r = attention(m, tp, pv, xf, B));
    int res[2] = {xf, r};
    TRY(r = nvw_tape_op(tp, "add", "{}", 2, res));
    int ln[3] = {r, pv[4], pv[5]};
    TRY(r = nvw_tape_op(tp, "layer_norm", "{}", 3, ln));
    int h1 = r;
    TRY(r = affine(tp, pv, 6, h1, B * T));
    TRY(r = act(tp, s->relu, r));
    TRY(r = affine(tp, pv, 8, r, B * T));
    int res2[2] = {h1, r};
    TRY(r = nvw_tape_op(tp, "add", "{}", 2, res2));
    int ln2[3] = {r, pv[10], pv[11]};
    TRY(r = nvw_tape_op(tp, "layer_norm", "{}", 3, ln2));
    TRY(r = nvw_tape_reshape(tp, r, 3, s3));
    TRY(r = nvw_tape_op(tp, "mean", "{\"axis\":1}", 1, &r));
    return affine(tp, pv, 12, r, B);
}

/* The model kind's CNN: [B, 1, S, S] -> conv1 (hidden channels) -> act -> pool
 * -> conv2 (2 hidden) -> act -> pool -> flatten [B, 2 hidden (S/4)^2] -> head. */
static int cnn_logits(nvw_model *m, nvw_tape *tp, const int *pv, int x, int64_t B)
{
    const nv_longrun_spec *s = m->s;
    int r = x;
    for (int l = 0; l < 2; l++) {
        int cw[2] = {r, pv[l]};
        TRY(r = nvw_tape_op(tp, "conv2d", "{\"padding\":1}", 2, cw));
        TRY(r = act(tp, s->relu, r));
        TRY(r = nvw_tape_op(tp, "max_pool2d", "{\"kernel\":2}", 1, &r));
    }
    int64_t side = s->in_dim / 4, flat[2] = {B, 2 * (int64_t)s->hidden * side * side};
    TRY(r = nvw_tape_reshape(tp, r, 2, flat));
    return affine(tp, pv, 2, r, B);
}

int nvw_model_loss(nvw_model *m, nvw_tape *tp, nv_tensor *x, nv_tensor *target)
{
    int r, pv[NVW_MAX_PARAMS];
    for (int i = 0; i < m->n_params; i++)
        TRY(pv[i] = nvw_tape_leaf_borrow(tp, m->p[i].w));
    int xv, yv;
    TRY(xv = nvw_tape_leaf_own(tp, x));
    TRY(yv = nvw_tape_leaf_own(tp, target));
    int64_t B = x->shape[0];
    if (m->s->model == NV_LR_MLP)
        TRY(r = mlp_logits(m, tp, pv, xv, B));
    else if (m->s->model == NV_LR_CNN)
        TRY(r = cnn_logits(m, tp, pv, xv, B));
    else
        TRY(r = block_logits(m, tp, pv, xv, B));
    int ce[2] = {r, yv};
    return nvw_tape_op(tp, "cross_entropy", "{\"reduction\":\"mean\"}", 2, ce);
}
