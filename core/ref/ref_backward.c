/* Reference backward of the catalog ops (backward.h): elementwise derivatives,
 * the dispatch and the differentiable domains. Row-wise ops and matmul are in
 * ref_backward_rows.c; the declared Jacobian structure is core/ops/jacobian.c.
 *
 * The VJP is evaluated in fp64 from closed-form derivatives. Its error (a few
 * fp64 ulps of the magnitude mag, Higham §3.1) is below 1e-12 of what any
 * check here resolves: the formula check's atol/rtol are 1e-5/1e-3 and the
 * device check's tolerances scale with the device's u >= 2^-24. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward_internal.h"
#include "numval/backend.h"

#define SQRT_2_PI 0.79788456080286535588   /* sqrt(2/pi) */
#define TWO_SQRT_PI 1.12837916709551257390 /* 2/sqrt(pi) */
#define INV_SQRT_2PI 0.39894228040143267794
#define GELU_C 0.044715

static bool elementwise(const nv_op_def *op)
{
    return op->kind == NV_OPK_UNARY || op->kind == NV_OPK_BINARY || op->kind == NV_OPK_TERNARY;
}

/* ---- elementwise derivatives ---- */

/* sigmoid and tanh from e = exp(-|x|) (resp. exp(-2|x|)), with no
 * cancellation: s = 1/(1+e) or e/(1+e); tanh = (1-e)/(1+e) with x's sign (its
 * absolute error stays ~2^-53 where 1 - e cancels, which is what differences
 * of it need). */
static double sigm(double x)
{
    double e = exp(-fabs(x)), q = 1 / (1 + e);
    return x >= 0 ? q : e * q;
}

static double tanh_e(double x)
{
    double e = exp(-2 * fabs(x));
    return copysign((1 - e) / (1 + e), x);
}

static inline double f_unary(int id, const nv_op_attrs *a, double x)
{
    switch (id) {
    case NVO_NEG:
        return -x;
    case NVO_ABS:
        return fabs(x);
    case NVO_SQRT:
        return sqrt(x);
    case NVO_RSQRT:
        return 1 / sqrt(x);
    case NVO_RECIPROCAL:
        return 1 / x;
    case NVO_EXP:
        return exp(x);
    case NVO_EXP2:
        return exp2(x);
    case NVO_EXPM1:
        return expm1(x);
    case NVO_LOG:
        return log(x);
    case NVO_LOG2:
        return log2(x);
    case NVO_LOG1P:
        return log1p(x);
    case NVO_SIN:
        return sin(x);
    case NVO_COS:
        return cos(x);
    case NVO_TANH:
        return tanh_e(x);
    case NVO_SIGMOID:
        return sigm(x);
    case NVO_ERF:
        return erf(x);
    case NVO_GELU:
        if (a->gelu_tanh)
            return 0.5 * x * (1 + tanh(SQRT_2_PI * (x + GELU_C * x * x * x)));
        return 0.5 * x * erfc(-x / M_SQRT2);
    case NVO_SILU:
        return x * sigm(x);
    default:
        return fmax(x, 0); /* relu */
    }
}

/* f'(x) in *d and the same expression with |.| on every term in *dabs. */
static inline void d_unary(int id, const nv_op_attrs *a, double x, double *d, double *dabs)
{
    double t, s, v;
    switch (id) {
    case NVO_NEG:
        v = -1;
        break;
    case NVO_ABS:
        v = x > 0 ? 1 : -1;
        break;
    case NVO_SQRT:
        v = 0.5 / sqrt(x);
        break;
    case NVO_RSQRT:
        v = -0.5 / (x * sqrt(x));
        break;
    case NVO_RECIPROCAL:
        v = -1 / (x * x);
        break;
    case NVO_EXP:
        v = exp(x);
        break;
    case NVO_EXP2:
        v = M_LN2 * exp2(x);
        break;
    case NVO_EXPM1:
        v = exp(x);
        *d = v;
        *dabs = 1 + fabs(expm1(x)); /* device: gy (y + 1) from the saved y */
        return;
    case NVO_LOG:
        v = 1 / x;
        break;
    case NVO_LOG2:
        v = 1 / (x * M_LN2);
        break;
    case NVO_LOG1P:
        v = 1 / (1 + x);
        break;
    case NVO_SIN:
        v = cos(x);
        break;
    case NVO_COS:
        v = -sin(x);
        break;
    case NVO_TANH: { /* sech^2 x = 4e / (1 + e)^2, e = exp(-2|x|): no cancellation */
        double e = exp(-2 * fabs(x)), q = 1 / (1 + e);
        t = (1 - e) * q;
        *d = 4 * e * q * q;
        *dabs = 1 + t * t;
        return;
    }
    case NVO_SIGMOID: { /* s(x) s(-x) = e / (1 + e)^2, e = exp(-|x|) */
        double e = exp(-fabs(x)), q = 1 / (1 + e);
        s = x >= 0 ? q : e * q;
        *d = e * q * q;
        *dabs = s * (1 + s);
        return;
    }
    case NVO_ERF: /* the device's exp(-x^2) carries x^2 u of relative error from x^2's rounding */
        v = TWO_SQRT_PI * exp(-x * x);
        *d = v;
        *dabs = v * (1 + x * x);
        return;
    case NVO_GELU:
        if (a->gelu_tanh) {
            double k = SQRT_2_PI * (1 + 3 * GELU_C * x * x);
            t = tanh(SQRT_2_PI * (x + GELU_C * x * x * x));
            *d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k;
            *dabs = 0.5 * (1 + fabs(t)) + 0.5 * fabs(x) * (1 + t * t) * k;
        } else {
            double phi = INV_SQRT_2PI * exp(-0.5 * x * x);
            *d = 0.5 * erfc(-x / M_SQRT2) + x * phi;
            /* the device's 0.5 (1 + erf(x / sqrt 2)) cancels for x << 0; its
             * exp(-x^2 / 2) carries x^2 u / 2 from the rounding of the argument */
            *dabs = 0.5 * (1 + fabs(erf(x / M_SQRT2))) + fabs(x) * phi * (1 + 0.5 * x * x);
        }
        return;
    case NVO_SILU:
        s = sigm(x);
        *d = s * (1 + x * (1 - s));
        *dabs = s * (1 + fabs(x) * (1 + s));
        return;
    default:
        v = x > 0 ? 1 : 0;
        break; /* relu */
    }
    *d = v;
    *dabs = fabs(v);
}

static double f_multi(int id, const double *v)
{
    switch (id) {
    case NVO_ADD:
        return v[0] + v[1];
    case NVO_SUB:
        return v[0] - v[1];
    case NVO_MUL:
        return v[0] * v[1];
    case NVO_DIV:
        return v[0] / v[1];
    case NVO_POW:
        return pow(v[0], v[1]);
    case NVO_MAXIMUM:
        return fmax(v[0], v[1]);
    case NVO_MINIMUM:
        return fmin(v[0], v[1]);
    default:
        return fma(v[0], v[1], v[2]);
    }
}

/* Partial derivatives d[k] = df/dv_k and their magnitudes. */
static void d_multi(int id, const double *v, double *d, double *dabs)
{
    double x = v[0], y = v[1];
    switch (id) {
    case NVO_ADD:
        d[0] = 1, d[1] = 1;
        break;
    case NVO_SUB:
        d[0] = 1, d[1] = -1;
        break;
    case NVO_MUL:
        d[0] = y, d[1] = x;
        break;
    case NVO_DIV:
        d[0] = 1 / y, d[1] = -x / (y * y);
        break;
    case NVO_POW: {
        double p = pow(x, y);
        d[0] = y * pow(x, y - 1);
        d[1] = p * log(x);
        /* The device evaluates x^(y-1) and x^y through exp and log: their
         * arguments carry |y log x| of relative error per rounding. */
        double amp = 1 + fabs((y - 1) * log(x)) + fabs(y * log(x));
        dabs[0] = fabs(d[0]) * amp;
        dabs[1] = p * (fabs(log(x)) + 1) * amp;
        return;
    }
    case NVO_MAXIMUM:
        d[0] = x > y, d[1] = !(x > y);
        break;
    case NVO_MINIMUM:
        d[0] = x < y, d[1] = !(x < y);
        break;
    default:
        d[0] = v[1], d[1] = v[0], d[2] = 1;
        break; /* fma */
    }
    for (int k = 0; k < 3; k++)
        dabs[k] = fabs(d[k]);
}

/* The unary ops, each given its own loop below with f_unary and d_unary
 * specialised to it (no dispatch per element; the same expressions, so the
 * same values as the generic loop). */
/* clang-format off */
#define UNARY_IDS(X)                                                                               \
    X(NVO_NEG) X(NVO_ABS) X(NVO_SQRT) X(NVO_RSQRT) X(NVO_RECIPROCAL) X(NVO_EXP) X(NVO_EXP2)        \
    X(NVO_EXPM1) X(NVO_LOG) X(NVO_LOG2) X(NVO_LOG1P) X(NVO_SIN) X(NVO_COS) X(NVO_TANH)           \
    X(NVO_SIGMOID) X(NVO_ERF) X(NVO_GELU) X(NVO_SILU) X(NVO_RELU)
/* clang-format on */

static void forward_unary(int id, const nv_op_attrs *a, const double *x, double *out, int64_t n)
{
    switch (id) {
#define FWD(ID)                                                                                    \
    case ID:                                                                                       \
        for (int64_t e = 0; e < n; e++)                                                            \
            out[e] = f_unary(ID, a, x[e]);                                                         \
        return;
        UNARY_IDS(FWD)
#undef FWD
    default:
        for (int64_t e = 0; e < n; e++)
            out[e] = f_unary(id, a, x[e]);
    }
}

/* gx[e] = gy[e] f'(x[e]), mag[e] = |gy[e]| |f'|(x[e]) (either may be NULL). */
static void vjp_unary(int id, const nv_op_attrs *a, const double *x, const double *gy, double *gx,
                      double *mag, int64_t n)
{
    switch (id) {
#define VJP(ID)                                                                                    \
    case ID:                                                                                       \
        for (int64_t e = 0; e < n; e++) {                                                          \
            double d = 0, dabs = 0;                                                                \
            d_unary(ID, a, x[e], &d, &dabs);                                                       \
            if (gx)                                                                                \
                gx[e] = gy[e] * d;                                                                 \
            if (mag)                                                                               \
                mag[e] = fabs(gy[e]) * dabs;                                                       \
        }                                                                                          \
        return;
        UNARY_IDS(VJP)
#undef VJP
    default:
        for (int64_t e = 0; e < n; e++) {
            double d = 0, dabs = 0;
            d_unary(id, a, x[e], &d, &dabs);
            if (gx)
                gx[e] = gy[e] * d;
            if (mag)
                mag[e] = fabs(gy[e]) * dabs;
        }
    }
}

static void forward_elementwise(int id, const nv_op_def *op, const nv_op_attrs *a,
                                const nv_tensor *const *in, double *out)
{
    int64_t n = in[0]->numel;
    if (op->kind == NV_OPK_UNARY) {
        forward_unary(id, a, in[0]->data, out, n);
        return;
    }
    for (int64_t e = 0; e < n; e++) {
        double v[3] = {0, 0, 0};
        for (int k = 0; k < op->n_inputs; k++)
            v[k] = in[k]->data[e];
        out[e] = f_multi(id, v);
    }
}

static void vjp_elementwise(int id, const nv_op_def *op, const nv_op_attrs *a,
                            const nv_tensor *const *in, const double *gy, double *const *gx,
                            double *const *mag)
{
    int64_t n = in[0]->numel;
    if (op->kind == NV_OPK_UNARY) {
        vjp_unary(id, a, in[0]->data, gy, gx ? gx[0] : NULL, mag ? mag[0] : NULL, n);
        return;
    }
    for (int64_t e = 0; e < n; e++) {
        /* 0 where an op has no such input: d_multi's magnitude loop reads all
         * three partials, a binary op sets two */
        double d[3] = {0, 0, 0}, dabs[3] = {0, 0, 0};
        if (op->kind == NV_OPK_UNARY) {
            d_unary(id, a, in[0]->data[e], &d[0], &dabs[0]);
        } else {
            double v[3] = {0, 0, 0};
            for (int k = 0; k < op->n_inputs; k++)
                v[k] = in[k]->data[e];
            d_multi(id, v, d, dabs);
        }
        for (int k = 0; k < op->n_inputs; k++) {
            if (gx && gx[k])
                gx[k][e] = gy[e] * d[k];
            if (mag && mag[k])
                mag[k][e] = fabs(gy[e]) * dabs[k];
        }
    }
}

/* ---- dispatch ---- */

int nv_op_forward_f64(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, double *out)
{
    return nv_op_forward_f64_cached(op, a, n_in, in, out, NULL);
}

int nv_op_forward_f64_cached(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                             const nv_tensor *const *in, double *out, nv_ref_cache *cache)
{
    assert(in && out);
    int id = nvo_op_id(op);
    if (id < 0 || !nv_op_has_backward(op, a) || n_in < op->n_inputs)
        return NV_E_INVALID;
    if (elementwise(op)) {
        forward_elementwise(id, op, a, in, out);
        return 0;
    }
    if (op->kind == NV_OPK_LAYOUT)
        return nvb_forward_layout(op, a, n_in, in, out);
    if (op->kind == NV_OPK_MATMUL)
        return nvb_forward_matmul(in, out);
    if (op->kind == NV_OPK_CONV)
        return nvb_forward_conv(id, a, in, out);
    if (op->kind == NV_OPK_ROTARY)
        return nvb_forward_rotary(a, in, out);
    return nvb_forward_rows(id, a, in, out, cache);
}

int nv_op_vjp(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
              const double *gy, double *const *gx, double *const *mag)
{
    return nv_op_vjp_cached(op, a, n_in, in, gy, gx, mag, NULL);
}

int nv_op_vjp_cached(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, const double *gy, double *const *gx,
                     double *const *mag, nv_ref_cache *cache)
{
    assert(in && gy && gx);
    int id = nvo_op_id(op);
    if (id < 0 || !nv_op_has_backward(op, a) || n_in < op->n_inputs)
        return NV_E_INVALID;
    if (elementwise(op)) {
        vjp_elementwise(id, op, a, in, gy, gx, mag);
        return 0;
    }
    if (op->kind == NV_OPK_LAYOUT)
        return nvb_vjp_layout(op, a, n_in, in, gy, gx, mag);
    if (op->kind == NV_OPK_MATMUL)
        return nvb_vjp_matmul(in, gy, gx, mag);
    if (op->kind == NV_OPK_CONV)
        return nvb_vjp_conv(id, a, in, gy, gx, mag);
    if (op->kind == NV_OPK_ROTARY)
        return nvb_vjp_rotary(a, in, gy, gx, mag);
    return nvb_vjp_rows(id, a, in, gy, gx, mag, cache);
}

int64_t nv_op_vjp_reduction_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                                const nv_tensor *const *in, int i)
{
    assert(in);
    int id = nvo_op_id(op);
    if (id < 0 || n_in < 1 || elementwise(op))
        return 1;
    const nv_tensor *x = in[0];
    if (op->kind == NV_OPK_LAYOUT)
        return nvb_layout_sum_len(id, in, i);
    if (op->kind == NV_OPK_CONV)
        return nvb_conv_sum_len(id, a, in, i);
    if (op->kind == NV_OPK_ROTARY)
        return 2; /* gy_a c + gy_b s */
    if (op->kind == NV_OPK_MATMUL) {
        int nd = x->ndim;
        /* dA = dC B^T sums over N; dB = A^T dC over M. */
        return i == 0 ? in[1]->shape[nd - 1] : x->shape[nd - 2];
    }
    nvb_lines L;
    if (nvb_lines_of(op, a, x, &L) < 0)
        return 1;
    switch (id) {
    case NVO_SUM:
    case NVO_MEAN:
    case NVO_MAX:
    case NVO_NORM2:
    case NVO_LOGSUMEXP:
        return 1; /* a broadcast of gy from saved values */
    case NVO_LAYER_NORM:
    case NVO_RMS_NORM:
        return i == 0 ? L.n : L.outer * L.inner; /* weight, bias: over the rows */
    case NVO_CROSS_ENTROPY:
        return L.n + (a->reduction_mean ? x->shape[0] : 0);
    default:
        return L.n; /* var (the mean), softmax, log_softmax */
    }
}

/* ---- differentiable domains ---- */

static double rnd(nv_dtype dt, double x)
{
    return nv_dtype_round(dt, x, &NV_ROUND_DEFAULT, 0);
}

/* |x| pushed to at least lo (sign kept, 0 becomes +lo), then rounded. */
static double away_from_zero(nv_dtype dt, double x, double lo)
{
    if (fabs(x) >= lo)
        return x;
    return rnd(dt, signbit(x) ? -lo : lo);
}

/* Positive domain [lo, hi]: |x| folded in, clipped, rounded. */
static double positive(nv_dtype dt, double x, double lo, double hi)
{
    return rnd(dt, fmin(fmax(fabs(x), lo), hi));
}

/* Unique line maxima: the largest element of each line is raised by 1 so the
 * runner-up is at least 1 away (a tie is a kink of max). */
static void unique_max(const nv_op_def *op, const nv_op_attrs *a, nv_tensor *x)
{
    nvb_lines L;
    if (nvb_lines_of(op, a, x, &L) < 0)
        return;
    for (int64_t l = 0; l < L.outer * L.inner; l++) {
        int64_t best = nvb_at(&L, l, 0);
        for (int64_t j = 1; j < L.n; j++)
            if (x->data[nvb_at(&L, l, j)] > x->data[best])
                best = nvb_at(&L, l, j);
        x->data[best] = rnd(x->dtype, x->data[best] + 1);
    }
}

typedef struct ranked {
    double v;
    int64_t e;
} ranked;

static int by_value(const void *p, const void *q)
{
    const ranked *a = p, *b = q;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    return a->e < b->e ? -1 : a->e > b->e;
}

/* Max pooling is differentiable where every window has a unique maximum: the
 * values are replaced, order kept, by their ranks on a grid of 1/8 (ties
 * broken by position), centred on 0. Any two elements then differ by at
 * least 1/8, far beyond a finite-difference step; the grid values are exact
 * in bf16 up to 512 elements (8 significand bits), in fp16 up to 4096, in
 * fp32 beyond 10^7: a larger tensor in a narrow dtype may round two ranks
 * together, a tie the formula check would see. */
static int distinct_ranks(nv_tensor *x)
{
    int64_t n = x->numel;
    ranked *r = malloc(sizeof *r * (size_t)(n > 0 ? n : 1));
    if (!r)
        return -ENOMEM;
    for (int64_t e = 0; e < n; e++)
        r[e] = (ranked){x->data[e], e};
    qsort(r, (size_t)n, sizeof *r, by_value);
    for (int64_t k = 0; k < n; k++)
        x->data[r[k].e] = rnd(x->dtype, ((double)k - (double)(n / 2)) / 8);
    free(r);
    return 0;
}

int nv_op_grad_domain(const nv_op_def *op, const nv_op_attrs *a, int n_in, nv_tensor *const *in)
{
    assert(in);
    int id = nvo_op_id(op);
    if (id < 0 || n_in < op->n_inputs)
        return -EINVAL;
    nv_tensor *x = in[0];
    nv_dtype dt = x->dtype;
    for (int64_t e = 0; e < x->numel; e++) {
        double *v = &x->data[e];
        switch (id) {
        case NVO_ABS:
        case NVO_RELU:
        case NVO_RECIPROCAL:
            *v = away_from_zero(dt, *v, 0.25);
            break;
        case NVO_SQRT:
        case NVO_RSQRT:
        case NVO_LOG:
        case NVO_LOG2:
        case NVO_POW:
            *v = positive(dt, *v, 0.25, 8);
            break;
        case NVO_LOG1P:
            *v = rnd(dt, fmax(*v, -0.75));
            break;
        case NVO_DIV:
            in[1]->data[e] = away_from_zero(dt, in[1]->data[e], 0.25);
            break;
        case NVO_MAXIMUM:
        case NVO_MINIMUM:
            if (fabs(*v - in[1]->data[e]) < 0.125)
                in[1]->data[e] = rnd(dt, *v + 0.5);
            break;
        case NVO_EXP:
        case NVO_EXP2:
        case NVO_EXPM1:
            *v = rnd(dt, fmin(fmax(*v, -8), 8));
            break;
        default:
            break;
        }
    }
    if (id == NVO_POW)
        for (int64_t e = 0; e < in[1]->numel; e++)
            in[1]->data[e] = rnd(dt, fmin(fmax(in[1]->data[e], -3), 3));
    if (id == NVO_MAX_POOL2D)
        return distinct_ranks(x);
    if (id == NVO_MAX)
        unique_max(op, a, x);
    if (id == NVO_NORM2)
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] = away_from_zero(dt, x->data[e], 0.25); /* no zero line */
    return 0;
}
