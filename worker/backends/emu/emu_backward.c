/* emu backward (include/numval/backend.h nv_backward_call): the emulated
 * accelerator's VJPs, computed in the device's dtypes from the tensors a real
 * kernel saves (describe()'s "saved" list, emu_saved_json): tanh, sigmoid, exp,
 * sqrt, rsqrt, reciprocal from the ROUNDED output y (1 - y^2, y (1 - y), ...),
 * layer_norm / rms_norm from x and the weight, with the mean and rstd
 * recomputed in the accumulate dtype exactly as the forward kernel computes
 * (and would save) them. Elementwise steps round to the compute dtype; every
 * backward reduction accumulates in the accumulate dtype in the mode's order
 * (emu_sum), so accum=bf16 over a long reduction shows its error. Gradients are
 * stored in the storage dtype: the dtype of the input they belong to unless the
 * mode sets "storage". Row-wise ops and matmul are in emu_backward_rows.c. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_backward.h"
#include "worker/backends/views/views.h"

#define TWO_SQRT_PI 1.12837916709551257390
#define INV_SQRT_2PI 0.39894228040143267794
#define SQRT_2_PI 0.79788456080286535588

/* ---- saved tensors ---- */

/* What the emu keeps from the forward of op id for its backward. */
static const char *saved_of(const nv_op_def *op)
{
    static const char *const out_only[] = {"tanh",  "sigmoid", "exp",         "exp2",
                                           "expm1", "sqrt",    "rsqrt",       "reciprocal",
                                           "relu",  "softmax", "log_softmax", NULL};
    static const char *const in_out[] = {"max", "norm2", "logsumexp", NULL};
    for (int i = 0; out_only[i]; i++)
        if (strcmp(op->name, out_only[i]) == 0)
            return "o";
    for (int i = 0; in_out[i]; i++)
        if (strcmp(op->name, in_out[i]) == 0)
            return "io";
    /* moved values: only the ids, or the pooled input (its argmax), decide where */
    if (op->kind == NV_OPK_LAYOUT && strcmp(op->name, "max_pool2d"))
        return strcmp(op->name, "embedding") == 0 ? "1" : "";
    if (strcmp(op->name, "neg") == 0 || strcmp(op->name, "add") == 0 ||
        strcmp(op->name, "sub") == 0 || strcmp(op->name, "sum") == 0 ||
        strcmp(op->name, "mean") == 0 || strcmp(op->name, "avg_pool2d") == 0 ||
        op->kind == NV_OPK_ROTARY)
        return "";
    return "i";
}

json_t *emu_saved_json(void)
{
    json_t *s = json_object();
    size_t n;
    const nv_op_def *ops = nv_op_all(&n);
    for (size_t k = 0; s && k < n; k++) {
        if (!ops[k].differentiable || ops[k].kind == NV_OPK_CAST)
            continue;
        const char *sv = saved_of(&ops[k]);
        json_t *l = json_array();
        for (int i = 0; l && strchr(sv, 'i') && i < ops[k].n_inputs; i++) {
            char name[24];
            snprintf(name, sizeof name, "input:%d", i);
            json_array_append_new(l, json_string(name));
        }
        if (l && strchr(sv, '1'))
            json_array_append_new(l, json_string("input:1"));
        if (l && strchr(sv, 'o'))
            json_array_append_new(l, json_string("output:0"));
        json_object_set_new(s, ops[k].name, l);
    }
    return s;
}

/* ---- call state ---- */

void emu_bwd_call_init(emu_call *ec, const emu_mode *m, const nv_op_def *op, const nv_op_attrs *a,
                       nv_dtype dt)
{
    memset(ec, 0, sizeof(*ec));
    ec->m = m;
    ec->out = dt;
    ec->storage = m->storage_set ? m->storage : dt;
    ec->compute =
        m->compute_set ? m->compute : (ec->storage == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32);
    if (m->accum_set)
        ec->accum = m->accum;
    else if (op->kind == NV_OPK_MATMUL)
        ec->accum = a->acc_dtype;
    else
        ec->accum = ec->compute == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    ec->rm.rounding = m->rounding;
    ec->rm.saturate = m->saturate;
    ec->rm.ftz = m->ftz;
    ec->plain = m->rounding == NV_ROUND_NEAREST_EVEN && !m->saturate && !m->ftz;
    ec->sr_state = m->seed ^ 0x6261636B77617264ull; /* "backward" */
    ec->order_state = m->seed ^ ((uint64_t)(uintptr_t)ec * 0xD1B54A32D192ED03ull);
}

/* ---- elementwise ---- */

static double unary(emu_call *c, int id, const nv_op_attrs *a, double g, double x, double y)
{
    nv_dtype cd = c->compute;
    double t, s;
    switch (id) {
    case EMU_B_NEG:
        return -g;
    case EMU_B_ABS:
        return x > 0 ? g : -g;
    case EMU_B_RELU:
        return y > 0 ? g : 0;
    case EMU_B_SQRT:
        return emu_div(c, cd, emu_mul(c, cd, g, 0.5), y);
    case EMU_B_RSQRT:
        t = emu_mul(c, cd, emu_mul(c, cd, y, y), y);
        return emu_mul(c, cd, emu_mul(c, cd, g, -0.5), t);
    case EMU_B_RECIP:
        return emu_mul(c, cd, -g, emu_mul(c, cd, y, y));
    case EMU_B_EXP:
        return emu_mul(c, cd, g, y);
    case EMU_B_EXP2:
        return emu_mul(c, cd, emu_mul(c, cd, g, y), emu_round(c, cd, M_LN2));
    case EMU_B_EXPM1:
        return emu_mul(c, cd, g, emu_add(c, cd, y, 1));
    case EMU_B_LOG:
        return emu_div(c, cd, g, x);
    case EMU_B_LOG2:
        return emu_div(c, cd, g, emu_mul(c, cd, x, emu_round(c, cd, M_LN2)));
    case EMU_B_LOG1P:
        return emu_div(c, cd, g, emu_add(c, cd, x, 1));
    case EMU_B_SIN:
        return emu_mul(c, cd, g, emu_fn(c, NV_FN_COS, x, cd));
    case EMU_B_COS:
        return emu_mul(c, cd, -g, emu_fn(c, NV_FN_SIN, x, cd));
    case EMU_B_TANH:
        return emu_mul(c, cd, g, emu_add(c, cd, 1, -emu_mul(c, cd, y, y)));
    case EMU_B_SIGMOID:
        return emu_mul(c, cd, emu_mul(c, cd, g, y), emu_add(c, cd, 1, -y));
    case EMU_B_ERF:
        t = emu_fn(c, NV_FN_EXP, -emu_mul(c, cd, x, x), cd);
        return emu_mul(c, cd, emu_mul(c, cd, g, emu_round(c, cd, TWO_SQRT_PI)), t);
    case EMU_B_GELU:
        if (a->gelu_tanh) {
            double x2 = emu_mul(c, cd, x, x);
            double in = emu_mul(c, cd, emu_round(c, cd, SQRT_2_PI),
                                emu_add(c, cd, x, emu_mul(c, cd, 0.044715, emu_mul(c, cd, x2, x))));
            t = emu_fn(c, NV_FN_TANH, in, cd);
            double k = emu_mul(c, cd, emu_round(c, cd, SQRT_2_PI),
                               emu_add(c, cd, 1, emu_mul(c, cd, 3 * 0.044715, x2)));
            double d1 = emu_mul(c, cd, 0.5, emu_add(c, cd, 1, t));
            double d2 = emu_mul(c, cd, emu_mul(c, cd, 0.5, x),
                                emu_mul(c, cd, emu_add(c, cd, 1, -emu_mul(c, cd, t, t)), k));
            return emu_mul(c, cd, g, emu_add(c, cd, d1, d2));
        } else {
            double cdf =
                emu_mul(c, cd, 0.5,
                        emu_add(c, cd, 1, emu_fn(c, NV_FN_ERF, emu_mul(c, cd, x, M_SQRT1_2), cd)));
            double pdf =
                emu_mul(c, cd, emu_round(c, cd, INV_SQRT_2PI),
                        emu_fn(c, NV_FN_EXP, emu_mul(c, cd, -0.5, emu_mul(c, cd, x, x)), cd));
            return emu_mul(c, cd, g, emu_add(c, cd, cdf, emu_mul(c, cd, x, pdf)));
        }
    default: /* silu */
        s = emu_fn(c, NV_FN_SIGMOID, x, cd);
        t = emu_add(c, cd, 1, emu_mul(c, cd, x, emu_add(c, cd, 1, -s)));
        return emu_mul(c, cd, emu_mul(c, cd, g, s), t);
    }
}

/* Binary ops and fma: gradients of all inputs at element e. */
static void multi(emu_call *c, int id, double g, const double *v, double *gx)
{
    nv_dtype cd = c->compute;
    double x = v[0], y = v[1];
    switch (id) {
    case EMU_B_ADD:
        gx[0] = g, gx[1] = g;
        break;
    case EMU_B_SUB:
        gx[0] = g, gx[1] = -g;
        break;
    case EMU_B_MUL:
        gx[0] = emu_mul(c, cd, g, y), gx[1] = emu_mul(c, cd, g, x);
        break;
    case EMU_B_DIV:
        gx[0] = emu_div(c, cd, g, y);
        gx[1] = emu_div(c, cd, emu_mul(c, cd, -g, emu_div(c, cd, x, y)), y);
        break;
    case EMU_B_POW: {
        double lx = emu_fn(c, NV_FN_LOG, x, cd);
        double p1 = emu_fn(c, NV_FN_EXP, emu_mul(c, cd, emu_add(c, cd, y, -1), lx), cd);
        double p = emu_fn(c, NV_FN_EXP, emu_mul(c, cd, y, lx), cd);
        gx[0] = emu_mul(c, cd, emu_mul(c, cd, g, y), p1);
        gx[1] = emu_mul(c, cd, emu_mul(c, cd, g, p), lx);
        break;
    }
    case EMU_B_MAXIMUM:
        gx[0] = x > y ? g : 0, gx[1] = x > y ? 0 : g;
        break;
    case EMU_B_MINIMUM:
        gx[0] = x < y ? g : 0, gx[1] = x < y ? 0 : g;
        break;
    default: /* fma */
        gx[0] = emu_mul(c, cd, g, v[1]), gx[1] = emu_mul(c, cd, g, v[0]), gx[2] = g;
        break;
    }
}

/* gelu's (erf form) VJP over all elements with its two functions batched: the
 * arguments of erf and exp for a block of elements, each array through one
 * nv_ref_round_n, then unary()'s arithmetic. With the exact kind and plain
 * rounding emu_fn is nv_ref_round, and nv_ref_round_n gives every element what
 * nv_ref_round gives it (refmath.h), so the values are unary()'s. */
#define GELU_BLOCK 256

/* The arithmetic of a block in fp32 itself (plain fp32 compute): every
 * operand of unary()'s fp32 steps is an fp32 value, so each step rounded once
 * by the float operation is the step rounded through fp64 (innocuous, as in
 * emu_mul), and x/sqrt(2) keeps its fp64 product. A result that is NaN is
 * recomputed by unary(): which NaN an operation returns follows operand order
 * (IEEE 754-2019 §6.2.3), and a non-NaN result had no NaN on its way (every
 * step propagates one), so its value is the one IEEE rounding defines. */
static void gelu_erf_block_f32(emu_call *c, const nv_op_attrs *a, const emu_bwd_io *io,
                               int64_t e0, int len, double *u, double *w)
{
    float xf[GELU_BLOCK], r[GELU_BLOCK];
    const double *xd = io->x[0] ? io->x[0]->data + e0 : NULL, *gd = io->gy->data + e0;
    for (int j = 0; j < len; j++) {
        float x = xd ? (float)xd[j] : 0.0f;
        xf[j] = x;
        u[j] = (float)((double)x * M_SQRT1_2);
        w[j] = -0.5f * (x * x);
    }
    nv_ref_round_n(NV_FN_ERF, u, len, NV_DT_FP32, c->rm.rounding, u);
    nv_ref_round_n(NV_FN_EXP, w, len, NV_DT_FP32, c->rm.rounding, w);
    const float k_pdf = (float)INV_SQRT_2PI;
    for (int j = 0; j < len; j++) {
        float cdf = 0.5f * (1.0f + (float)u[j]), pdf = k_pdf * (float)w[j];
        r[j] = (float)gd[j] * (cdf + xf[j] * pdf);
    }
    double *gx = io->gx[0] + e0;
    for (int j = 0; j < len; j++)
        gx[j] = isnan(r[j]) ? unary(c, EMU_B_GELU, a, emu_round(c, NV_DT_FP32, gd[j]), xf[j], 0)
                            : r[j];
}

static void gelu_erf_batched(emu_call *c, const nv_op_attrs *a, const emu_bwd_io *io, int64_t n)
{
    nv_dtype cd = c->compute;
    double u[GELU_BLOCK], w[GELU_BLOCK], xs[GELU_BLOCK];
    const double k_pdf = emu_round(c, cd, INV_SQRT_2PI);
    for (int64_t e0 = 0; e0 < n; e0 += GELU_BLOCK) {
        int len = n - e0 < GELU_BLOCK ? (int)(n - e0) : GELU_BLOCK;
        if (cd == NV_DT_FP32) {
            gelu_erf_block_f32(c, a, io, e0, len, u, w);
            continue;
        }
        for (int j = 0; j < len; j++) {
            double x = io->x[0] ? emu_round(c, cd, io->x[0]->data[e0 + j]) : 0;
            xs[j] = x;
            u[j] = emu_mul(c, cd, x, M_SQRT1_2);
            w[j] = emu_mul(c, cd, -0.5, emu_mul(c, cd, x, x));
        }
        nv_ref_round_n(NV_FN_ERF, u, len, cd, c->rm.rounding, u);
        nv_ref_round_n(NV_FN_EXP, w, len, cd, c->rm.rounding, w);
        for (int j = 0; j < len; j++) {
            double g = emu_round(c, cd, io->gy->data[e0 + j]), x = xs[j];
            double cdf = emu_mul(c, cd, 0.5, emu_add(c, cd, 1, u[j]));
            double pdf = emu_mul(c, cd, k_pdf, w[j]);
            io->gx[0][e0 + j] = emu_mul(c, cd, g, emu_add(c, cd, cdf, emu_mul(c, cd, x, pdf)));
        }
    }
}

int emu_bwd_elementwise(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                        const emu_bwd_io *io)
{
    int64_t n = io->gy->numel;
    if (id == EMU_B_GELU && !a->gelu_tanh && c->m->transcendental == EMU_TR_EXACT && c->plain) {
        gelu_erf_batched(c, a, io, n);
        return NV_OK;
    }
    if (id == EMU_B_ADD) { /* multi()'s add: the rounded gy to both inputs */
        for (int64_t e = 0; e < n; e++)
            io->gx[0][e] = io->gx[1][e] = emu_round(c, c->compute, io->gy->data[e]);
        return NV_OK;
    }
    return emu_bwd_elementwise_each(c, id, op, a, io);
}

int emu_bwd_elementwise_each(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                             const emu_bwd_io *io)
{
    int64_t n = io->gy->numel;
    for (int64_t e = 0; e < n; e++) {
        double g = emu_round(c, c->compute, io->gy->data[e]);
        if (op->kind == NV_OPK_UNARY) {
            double x = io->x[0] ? emu_round(c, c->compute, io->x[0]->data[e]) : 0;
            double y = io->y ? io->y->data[e] : 0;
            io->gx[0][e] = unary(c, id, a, g, x, y);
            continue;
        }
        double v[3] = {0, 0, 0}, gx[3] = {0, 0, 0};
        for (int k = 0; k < op->n_inputs; k++)
            v[k] = io->x[k] ? emu_round(c, c->compute, io->x[k]->data[e]) : 0;
        multi(c, id, g, v, gx);
        for (int k = 0; k < op->n_inputs; k++)
            io->gx[k][e] = gx[k];
    }
    return NV_OK;
}

static json_t *saved_cache;
static pthread_once_t saved_once = PTHREAD_ONCE_INIT;

static void saved_build(void)
{
    saved_cache = emu_saved_json();
}

const json_t *emu_saved_json_cached(void)
{
    pthread_once(&saved_once, saved_build);
    return saved_cache;
}
