/* The reductions that remove their axis, one line at a time, over a line
 * reader (nvo_rd, ref_internal.h) that hands the line out in pieces: a line in
 * memory is one piece, a streamed input (nv_op_reference_lines) many. Each pass
 * reads the line in index order and does per element what the reference did
 * over the whole line at once, so the results are the same bit for bit however
 * the line is cut; the accuracy of each reference is stated in ref_reduce.c. */
#include <math.h>
#include <mpfr.h>

#include "numval/backend.h"
#include "ref_internal.h"

/* Whether the line holds an Inf or NaN: *ret 1 or 0. */
static int any_nonfinite(const nvo_rd *rd, bool *ret)
{
    *ret = false;
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++)
            if (!isfinite(x[i])) {
                *ret = true;
                return 0;
            }
    }
    return 0;
}

/* The power of two 2^s that brings max |x| near 1 (exact scaling), 0 when the
 * line needs none. */
static int scale_exp(const nvo_rd *rd, int *ret_s)
{
    double mx = 0;
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++)
            if (isfinite(x[i]) && fabs(x[i]) > mx)
                mx = fabs(x[i]);
    }
    *ret_s = 0;
    if (mx == 0 || (mx < 0x1p400 && mx > 0x1p-400))
        return 0;
    int e;
    frexp(mx, &e);
    *ret_s = -e;
    return 0;
}

static int ref_norm2(const nvo_rd *rd, double *hi, double *lo, nv_mag *abs, nv_mag *peak)
{
    *lo = 0;
    bool nonfinite;
    int r = any_nonfinite(rd, &nonfinite);
    if (r < 0)
        return r;
    if (nonfinite) {
        double s = 0;
        for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
            const double *x = nvo_rd_piece(rd, k0, &m);
            if (!x)
                return NV_E_INVALID;
            for (int64_t i = 0; i < m; i++)
                s += x[i] * x[i];
        }
        *hi = sqrt(s);
        *abs = *peak = nv_mag_from_d(*hi);
        return 0;
    }
    int s;
    if ((r = scale_exp(rd, &s)) < 0)
        return r;
    /* The exact squares' halves added to the long accumulator in the order
     * nvo_sum_exact added them as an array (h_0, l_0, h_1, l_1, ...). */
    nv_xacc a;
    nv_xacc_init(&a);
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++) {
            double v = ldexp(x[i], s), ph, pl;
            two_prod(v, v, &ph, &pl);
            nv_xacc_add(&a, ph);
            nv_xacc_add(&a, pl);
        }
    }
    double qh, ql;
    nv_xacc_get(&a, &qh, &ql);
    dd_sqrt(qh, ql, hi, lo);
    *hi = ldexp(*hi, -s);
    *lo = ldexp(*lo, -s);
    *abs = nv_mag_from_d(*hi);
    /* sum x^2 = qh 2^(-2s), which may exceed fp64's range where the norm does not */
    *peak = nv_mag_from_d(qh);
    if (peak->m != 0)
        peak->e -= 2L * s;
    return 0;
}

/* var = (n Q - S^2) / (n (n - c)) with an exact numerator; NaN for any
 * non-finite element (Inf - Inf in the centring) or n - c <= 0 (0 / 0). */
static int ref_var(const nvo_rd *rd, int corr, double *hi, double *lo, nv_mag *abs, nv_mag *peak)
{
    int64_t n = rd->len;
    *lo = 0;
    bool nonfinite;
    int r = any_nonfinite(rd, &nonfinite);
    if (r < 0)
        return r;
    if (nonfinite || n - corr <= 0) {
        *hi = NAN;
        *abs = *peak = (nv_mag){NAN, 0};
        return 0;
    }
    mpfr_t S, Q, N, t, u;
    mpfr_inits2(64, S, Q, N, t, (mpfr_ptr)0);
    mpfr_init2(u, 128);
    if ((r = nvo_mp_moments_rd(rd, S, Q)) < 0)
        goto out;
    mpfr_prec_t pn = 2 * mpfr_get_prec(S) + 8;
    mpfr_set_prec(N, pn);
    mpfr_set_prec(t, pn);
    mpfr_mul_si(N, Q, (long)n, MPFR_RNDN); /* exact */
    mpfr_sqr(t, S, MPFR_RNDN);             /* exact */
    mpfr_sub(N, N, t, MPFR_RNDN);          /* exact: multiples of 2^(2 emin), in range */
    mpfr_set_prec(t, 128);
    mpfr_div_si(t, N, (long)n, MPFR_RNDN);
    mpfr_div_si(t, t, (long)(n - corr), MPFR_RNDN);
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
    if ((r = nvo_sum_exact_rd(rd, &sh, &sl, &sabs)) < 0)
        goto out;
    *peak = nv_mag_cmp(sabs, s2) >= 0 ? sabs : s2;
out:
    mpfr_clears(S, Q, N, t, u, (mpfr_ptr)0);
    return r;
}

/* IEEE 754-2019 §9.6 maximum: NaN propagates (the first one met). */
static int ieee_max_line(const nvo_rd *rd, double *ret)
{
    double mx = -INFINITY;
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++) {
            if (isnan(x[i])) {
                *ret = x[i];
                return 0;
            }
            if (x[i] > mx || (x[i] == mx && !signbit(x[i])))
                mx = x[i];
        }
    }
    *ret = mx;
    return 0;
}

int nvo_reduce_line(int id, const nv_op_attrs *a, const nvo_rd *rd, double *ret_hi,
                    double *ret_lo, nv_mag *ret_abs, nv_mag *ret_peak)
{
    *ret_hi = *ret_lo = 0;
    *ret_abs = *ret_peak = (nv_mag){0, 0};
    int r;
    switch (id) {
    case NVO_SUM:
        r = nvo_sum_exact_rd(rd, ret_hi, ret_lo, ret_abs);
        *ret_peak = *ret_abs;
        return r;
    case NVO_MEAN:
        return nvo_mean_exact_rd(rd, ret_hi, ret_lo, ret_abs, ret_peak);
    case NVO_MAX:
        r = ieee_max_line(rd, ret_hi);
        *ret_abs = nv_mag_from_d(*ret_hi);
        return r;
    case NVO_NORM2:
        return ref_norm2(rd, ret_hi, ret_lo, ret_abs, ret_peak);
    case NVO_VAR:
        return ref_var(rd, a->correction, ret_hi, ret_lo, ret_abs, ret_peak);
    default:
        return NV_E_INVALID;
    }
}
