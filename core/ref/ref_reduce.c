/* Exact references of the reductions along an axis.
 *
 * Accuracy (what "exact" means here; it must be far below any output dtype's ulp
 * so that a measured error is the device's):
 * - sum, mean, norm2: exact sums (nvo_sum_exact: a long accumulator, the exact
 *   sum split into hi + lo, within 2^-105); mean divides that by n (~2^-104);
 *   norm2 sums the exact squares (TwoProd, after scaling by a power of two so no
 *   square overflows or underflows) and takes a double-double square root
 *   (one Newton step, ~2^-100).
 * - max: exact selection with IEEE 754-2019 §9.6 maximum semantics (NaN propagates).
 * - var: exact whatever the algorithm the device uses (attr "algorithm" only tells
 *   the device): with S = sum x and Q = sum x^2 summed exactly in MPFR,
 *   n Q - S^2 is computed exactly, then divided by n (n - correction) at 128 bits.
 * - logsumexp, softmax, log_softmax, cross_entropy: e_j = exp(x_j - m) by a
 *   double-double exp (relative error below 2^-96, ref_composed.c), their sum
 *   exact, log s in MPFR at 128 bits, the rest in double-double: relative error
 *   below 2^-94 of |y| (softmax) and of |x_k - m| + |log s| (log domain).
 * - layer_norm, rms_norm: mean and variance exact (MPFR), then 1/sqrt and the
 *   affine step in MPFR at 128 bits: relative error below 2^-120.
 *   Either way at most 2^-41 ulp of fp64, and far less of narrower formats.
 *
 * abs_sum (the bound metric's sum |x_i|, Higham-style, see docs/TOLERANCES.md):
 *   sum: sum|x_i|; mean: sum|x_i| / n; max: |max|; norm2: the norm (all terms are
 *   positive: relative error of sum x^2 is gamma_n); var: sqrt(Q S2) / (n - c)
 *   with S2 = sum (x_i - mean)^2 (Chan, Golub & LeVeque 1983: the relative error
 *   of the two-pass and updating algorithms grows with kappa = sqrt(Q / S2); this
 *   is kappa times the variance); softmax: y_i (1 + |x_i - m| + sum_j y_j |x_j - m|)
 *   (the exponent arguments are rounded relative to |x - m|); log_softmax and
 *   logsumexp: |x_i - m| (resp. |m|) + |log s| + 1 + sum_j y_j |x_j - m|;
 *   cross_entropy: that of logsumexp plus |x_target|; layer_norm: |w_i| kappa
 *   (|xhat_i| + 1) + |b_i| with kappa = max(1, rms(x) / sqrt(var + eps));
 *   rms_norm: |y_i|. */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "ref_internal.h"

typedef nvo_lines lines;

void nvo_line_index(const lines *L, int64_t l, int64_t k, int64_t *idx)
{
    for (int i = L->x->ndim - 1; i >= 0; i--) {
        if (i == L->ax) {
            idx[i] = k;
            continue;
        }
        idx[i] = l % L->x->shape[i];
        l /= L->x->shape[i];
    }
}

void nvo_line_gather(const lines *L, int64_t l, double *buf)
{
    int64_t idx[NV_MAX_DIMS];
    nvo_line_index(L, l, 0, idx);
    int64_t base = nv_tensor_offset(L->x, idx);
    int64_t st = L->x->strides[L->ax];
    for (int64_t k = 0; k < L->len; k++)
        buf[k] = L->x->data[base + k * st];
}

int64_t nvo_line_out_off(const lines *L, const nv_tensor *t, bool removes, int64_t l, int64_t k)
{
    if (removes)
        return nv_tensor_offset_linear(t, l);
    int64_t idx[NV_MAX_DIMS];
    nvo_line_index(L, l, k, idx);
    return nv_tensor_offset(t, idx);
}

void nvo_line_put_mags(const nv_ref_out *o, const lines *L, bool removes, int64_t l, int64_t k,
                       nv_mag abs, nv_mag peak)
{
    if (o->abs_sum)
        nvo_put_abs(o, nvo_line_out_off(L, o->abs_sum, removes, l, k),
                    o->abs_exp ? nvo_line_out_off(L, o->abs_exp, removes, l, k) : 0, abs);
    if (o->peak)
        nvo_put_peak(o, nvo_line_out_off(L, o->peak, removes, l, k), peak);
}

/* The power of two 2^s that brings max |x| near 1 (exact scaling), 0 when the
 * line needs none. */
static int scale_exp(const double *x, int64_t n)
{
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > mx)
            mx = fabs(x[i]);
    if (mx == 0 || (mx < 0x1p400 && mx > 0x1p-400))
        return 0;
    int e;
    frexp(mx, &e);
    return -e;
}

static bool any_nonfinite(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return true;
    return false;
}

static void ref_norm2(const double *x, int64_t n, double *sq, double *hi, double *lo, nv_mag *abs,
                      nv_mag *peak)
{
    *lo = 0;
    if (any_nonfinite(x, n)) {
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += x[i] * x[i];
        *hi = sqrt(s);
        *abs = *peak = nv_mag_from_d(*hi);
        return;
    }
    int s = scale_exp(x, n);
    for (int64_t i = 0; i < n; i++) {
        double v = ldexp(x[i], s);
        two_prod(v, v, &sq[2 * i], &sq[2 * i + 1]);
    }
    double qh, ql;
    nvo_sum_exact(sq, 2 * n, &qh, &ql, NULL);
    dd_sqrt(qh, ql, hi, lo);
    *hi = ldexp(*hi, -s);
    *lo = ldexp(*lo, -s);
    *abs = nv_mag_from_d(*hi);
    /* sum x^2 = qh 2^(-2s), which may exceed fp64's range where the norm does not */
    *peak = nv_mag_from_d(qh);
    if (peak->m != 0)
        peak->e -= 2L * s;
}

/* var = (n Q - S^2) / (n (n - c)) with an exact numerator; NaN for any
 * non-finite element (Inf - Inf in the centring) or n - c <= 0 (0 / 0). */
static void ref_var(const double *x, int64_t n, int corr, double *hi, double *lo, nv_mag *abs,
                    nv_mag *peak)
{
    *lo = 0;
    if (any_nonfinite(x, n) || n - corr <= 0) {
        *hi = NAN;
        *abs = *peak = (nv_mag){NAN, 0};
        return;
    }
    mpfr_t S, Q, N, t;
    mpfr_inits2(64, S, Q, N, t, (mpfr_ptr)0);
    nvo_mp_moments(x, n, S, Q);
    mpfr_prec_t pn = 2 * mpfr_get_prec(S) + 8;
    mpfr_set_prec(N, pn);
    mpfr_set_prec(t, pn);
    mpfr_mul_si(N, Q, (long)n, MPFR_RNDN); /* exact */
    mpfr_sqr(t, S, MPFR_RNDN);             /* exact */
    mpfr_sub(N, N, t, MPFR_RNDN);          /* exact: multiples of 2^(2 emin), in range */
    mpfr_set_prec(t, 128);
    mpfr_div_si(t, N, (long)n, MPFR_RNDN);
    mpfr_div_si(t, t, (long)(n - corr), MPFR_RNDN);
    mpfr_t u;
    mpfr_init2(u, 128);
    nvo_mp_split(t, u, hi, lo);
    /* abs = sqrt(Q * S2) / (n - c), S2 = N / n (MPFR: no fp64 range limit). */
    mpfr_div_si(u, N, (long)n, MPFR_RNDN);
    nv_mag s2 = nv_mag_from_mpfr(u);
    mpfr_mul(u, u, Q, MPFR_RNDN);
    mpfr_sqrt(u, u, MPFR_RNDN);
    mpfr_div_si(u, u, (long)(n - corr), MPFR_RNDN);
    *abs = nv_mag_from_mpfr(u);
    /* The accumulations: sum x (the mean) and sum (x - mean)^2. */
    double sh, sl;
    nv_mag sabs;
    nvo_sum_exact(x, n, &sh, &sl, &sabs);
    *peak = nv_mag_cmp(sabs, s2) >= 0 ? sabs : s2;
    mpfr_clears(S, Q, N, t, u, (mpfr_ptr)0);
}

static double ieee_max_line(const double *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return x[i];
        if (x[i] > m || (x[i] == m && !signbit(x[i])))
            m = x[i];
    }
    return m;
}

static void reduce_line(int id, const nv_op_attrs *a, const lines *L, int64_t l, double *buf,
                        double *work, const nv_ref_out *o)
{
    int64_t n = L->len;
    double hi = 0, lo = 0;
    nv_mag abs = {0, 0}, peak = {0, 0};
    nvo_line_gather(L, l, buf);
    switch (id) {
    case NVO_SUM:
        nvo_sum_exact(buf, n, &hi, &lo, &abs);
        peak = abs;
        break;
    case NVO_MEAN:
        nvo_mean_exact(buf, n, &hi, &lo, &abs, &peak);
        break;
    case NVO_MAX:
        hi = ieee_max_line(buf, n);
        abs = nv_mag_from_d(hi);
        break;
    case NVO_NORM2:
        ref_norm2(buf, n, work, &hi, &lo, &abs, &peak);
        break;
    default: /* NVO_VAR */
        ref_var(buf, n, a->correction, &hi, &lo, &abs, &peak);
        break;
    }
    o->hi->data[nvo_line_out_off(L, o->hi, true, l, 0)] = hi;
    if (o->lo)
        o->lo->data[nvo_line_out_off(L, o->lo, true, l, 0)] = isfinite(hi) ? lo : 0;
    nvo_line_put_mags(o, L, true, l, 0, abs, peak);
}

int nvo_ref_reduce(int id, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const nv_ref_out *o)
{
    (void)n_in;
    const nv_op_def *op = nv_op_all(NULL) + id;
    lines L = {.x = in[0], .ax = nvo_norm_axis(op, a, in[0]->ndim)};
    if (L.ax < 0)
        return NV_E_SHAPE;
    L.len = L.x->shape[L.ax];
    L.n_lines = L.len ? L.x->numel / L.len : o->hi->numel;
    if (!nvo_reduce_removes_axis(id) || id == NVO_LOGSUMEXP)
        return nvo_ref_composed(id, a, &L, in, o);
    double *buf = malloc(sizeof(double) * (size_t)(L.len + 1));
    double *work = malloc(sizeof(double) * (size_t)(2 * L.len + 2));
    int r = NV_E_NOMEM;
    if (!buf || !work)
        goto out;
    for (int64_t l = 0; l < L.n_lines; l++)
        reduce_line(id, a, &L, l, buf, work, o);
    r = 0;
out:
    free(buf);
    free(work);
    return r;
}
