/* Reference second-order VJP (backward.h nv_op_vjp2): elementwise second
 * derivatives, the dispatch, and the evaluation lengths the second-order error
 * model uses. Row-wise ops and matmul are in ref_backward2_rows.c.
 *
 * nv_op_vjp2 returns (H v)_k = d/dx_k sum_i <g_i(x, gy), v_i>, H the Hessian of
 * phi = gy . f(x). Since H is symmetric this is also the derivative of the VJP
 * along v, d/de g_k(x + e v) at e = 0, which is how every formula here is
 * obtained: the tangent (forward mode) of the closed-form VJP of
 * ref_backward*.c, term by term. For an elementwise op with partials f_ab:
 *   hx_a = gy sum_b f_ab v_b     (unary: gy f''(x) v).
 * mag is the same expression with |.| on every term and factor, as nv_op_vjp's
 * (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

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

/* f''(x) in *d and the same expression with |.| on every term in *dabs. tanh
 * and sigmoid from e = exp(-2|x|) (resp. exp(-|x|)) without cancellation, as
 * ref_backward.c's first derivatives. */
static void d2_unary(int id, const nv_op_attrs *a, double x, double *d, double *dabs)
{
    double v, e, q, t, s;
    switch (id) {
    case NVO_SQRT: /* -x^(-3/2) / 4 */
        v = -0.25 / (x * sqrt(x));
        break;
    case NVO_RSQRT: /* 3/4 x^(-5/2) */
        v = 0.75 / (x * x * sqrt(x));
        break;
    case NVO_RECIPROCAL:
        v = 2 / (x * x * x);
        break;
    case NVO_EXP:
        v = exp(x);
        break;
    case NVO_EXP2:
        v = M_LN2 * M_LN2 * exp2(x);
        break;
    case NVO_EXPM1: /* a device works from the saved y = expm1(x): y + 1 */
        *d = exp(x);
        *dabs = 1 + fabs(expm1(x));
        return;
    case NVO_LOG:
        v = -1 / (x * x);
        break;
    case NVO_LOG2:
        v = -1 / (x * x * M_LN2);
        break;
    case NVO_LOG1P:
        v = -1 / ((1 + x) * (1 + x));
        break;
    case NVO_SIN:
        v = -sin(x);
        break;
    case NVO_COS:
        v = -cos(x);
        break;
    case NVO_TANH: /* -2 tanh sech^2; from the saved y: -2 y (1 - y^2) */
        e = exp(-2 * fabs(x)), q = 1 / (1 + e);
        t = copysign((1 - e) * q, x);
        *d = -2 * t * 4 * e * q * q;
        *dabs = 2 * fabs(t) * (1 + t * t);
        return;
    case NVO_SIGMOID: /* s (1 - s) (1 - 2 s), 1 - 2 s = -sign(x) (1 - e) / (1 + e) */
        e = exp(-fabs(x)), q = 1 / (1 + e);
        s = x >= 0 ? q : e * q;
        *d = -copysign(e * q * q * (-expm1(-fabs(x))) * q, x);
        *dabs = s * (1 + s) * (1 + 2 * s);
        return;
    case NVO_ERF: /* -2x (2/sqrt(pi)) exp(-x^2); exp's argument error as ref_backward.c's */
        v = -2 * x * TWO_SQRT_PI * exp(-x * x);
        *d = v;
        *dabs = fabs(v) * (1 + x * x);
        return;
    case NVO_GELU:
        if (a->gelu_tanh) {
            /* f = x (1 + t) / 2, t = tanh(u), u = c (x + a x^3), k = u', u'' = 6 c a x:
             * f'' = (1 - t^2) (k + x (u'' - 2 t k^2) / 2) */
            double x2 = x * x, k = SQRT_2_PI * (1 + 3 * GELU_C * x2),
                   u2 = 6 * SQRT_2_PI * GELU_C * x;
            t = tanh(SQRT_2_PI * (x + GELU_C * x2 * x));
            *d = (1 - t * t) * (k + 0.5 * x * (u2 - 2 * t * k * k));
            *dabs = (1 + t * t) * (k + 0.5 * fabs(x) * (fabs(u2) + 2 * fabs(t) * k * k));
        } else { /* f = x Phi(x): f'' = phi(x) (2 - x^2) */
            double phi = INV_SQRT_2PI * exp(-0.5 * x * x);
            *d = phi * (2 - x * x);
            *dabs = phi * (2 + x * x) * (1 + 0.5 * x * x);
        }
        return;
    case NVO_SILU: /* f = x s: f'' = s (1 - s) (2 + x (1 - 2 s)) */
        e = exp(-fabs(x)), q = 1 / (1 + e);
        s = x >= 0 ? q : e * q;
        *d = e * q * q * (2 - x * copysign((-expm1(-fabs(x))) * q, x));
        *dabs = s * (1 + s) * (2 + fabs(x) * (1 + 2 * s));
        return;
    default: /* neg, abs, relu: piecewise linear */
        v = 0;
        break;
    }
    *d = v;
    *dabs = fabs(v);
}

/* The Hessian of a binary or ternary op at one element: h[a][b] = d2f/dv_a dv_b
 * and its magnitudes. */
static void d2_multi(int id, const double *v, double h[3][3], double habs[3][3])
{
    double x = v[0], y = v[1];
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            h[p][q] = habs[p][q] = 0;
    switch (id) {
    case NVO_MUL:
    case NVO_FMA: /* x y (+ z) */
        h[0][1] = h[1][0] = 1;
        break;
    case NVO_DIV: /* x / y: f_xy = -1/y^2, f_yy = 2x/y^3 */
        h[0][1] = h[1][0] = -1 / (y * y);
        h[1][1] = 2 * x / (y * y * y);
        break;
    case NVO_POW: { /* x^y */
        double lx = log(x), p1 = pow(x, y - 1);
        h[0][0] = y * (y - 1) * pow(x, y - 2);
        h[0][1] = h[1][0] = p1 * (1 + y * lx);
        h[1][1] = pow(x, y) * lx * lx;
        /* as the first derivatives: powers evaluated through exp and log carry
         * |y log x| of relative error per rounding of their argument */
        double amp = 1 + fabs((y - 2) * lx) + fabs((y - 1) * lx) + fabs(y * lx);
        habs[0][0] = fabs(y) * (fabs(y) + 1) * pow(x, y - 2) * amp;
        habs[0][1] = habs[1][0] = p1 * (1 + fabs(y * lx)) * amp;
        habs[1][1] = fabs(h[1][1]) * amp;
        return;
    }
    default: /* add, sub, maximum, minimum: linear where differentiable */
        break;
    }
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            habs[p][q] = fabs(h[p][q]);
}

static void vjp2_elementwise(int id, const nv_op_def *op, const nv_op_attrs *a,
                             const nv_tensor *const *in, const double *gy, const double *const *v,
                             double *const *hx, double *const *mag)
{
    int64_t n = in[0]->numel;
    int ni = op->n_inputs;
    for (int64_t e = 0; e < n; e++) {
        double r[3] = {0, 0, 0}, ra[3] = {0, 0, 0};
        if (op->kind == NV_OPK_UNARY) {
            double d, dabs, ve = v[0] ? v[0][e] : 0;
            d2_unary(id, a, in[0]->data[e], &d, &dabs);
            r[0] = gy[e] * d * ve;
            ra[0] = fabs(gy[e]) * dabs * fabs(ve);
        } else {
            double x[3] = {0, 0, 0}, h[3][3], habs[3][3];
            for (int k = 0; k < ni; k++)
                x[k] = in[k]->data[e];
            d2_multi(id, x, h, habs);
            for (int p = 0; p < ni; p++)
                for (int q = 0; q < ni; q++) {
                    double vq = v[q] ? v[q][e] : 0;
                    r[p] += gy[e] * h[p][q] * vq;
                    ra[p] += fabs(gy[e]) * habs[p][q] * fabs(vq);
                }
        }
        for (int k = 0; k < ni; k++) {
            if (hx && hx[k])
                hx[k][e] = r[k];
            if (mag && mag[k])
                mag[k][e] = ra[k];
        }
    }
}

int nv_op_vjp2(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
               const double *gy, const double *const *v, double *const *hx, double *const *mag)
{
    assert(in && gy && v);
    int id = nvo_op_id(op);
    if (id < 0 || !nv_op_has_backward(op, a) || n_in < op->n_inputs)
        return NV_E_INVALID;
    if (elementwise(op)) {
        vjp2_elementwise(id, op, a, in, gy, v, hx, mag);
        return 0;
    }
    if (op->kind == NV_OPK_LAYOUT)
        return nvb_vjp2_layout(in, hx, mag);
    if (op->kind == NV_OPK_MATMUL)
        return nvb_vjp2_matmul(in, gy, v, hx, mag);
    if (op->kind == NV_OPK_CONV)
        return nvb_vjp2_conv(id, a, in, gy, v, hx, mag);
    if (op->kind == NV_OPK_ROTARY)
        return nvb_vjp2_rotary(in, hx, mag);
    return nvb_vjp2_rows(id, a, in, gy, v, hx, mag);
}

int64_t nv_op_grad_eval_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
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
        return 2;
    if (op->kind == NV_OPK_MATMUL) {
        int nd = x->ndim;
        return i == 0 ? in[1]->shape[nd - 1] : x->shape[nd - 2];
    }
    nvb_lines L;
    if (nvb_lines_of(op, a, x, &L) < 0)
        return 1;
    if ((id == NVO_LAYER_NORM || id == NVO_RMS_NORM) && i > 0)
        return L.n + L.outer * L.inner; /* the line's statistics, then the rows */
    if (id == NVO_CROSS_ENTROPY && a->reduction_mean)
        return L.n + x->shape[0];
    return L.n;
}
