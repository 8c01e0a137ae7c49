/* Exact sums for the references (DESIGN.md "Reductions use an exact or
 * double-double sum"): nvo_sum_exact uses the exact long accumulator of
 * ddsum.h (Kulisch), so hi + lo is the exact sum rounded to about 128
 * bits, whatever the cancellation; nvo_mp_moments gives S = sum x and
 * Q = sum x^2 exactly in MPFR for the variance-based references. */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#include "ddsum.h"
#include "numval/backend.h"
#include "ref_internal.h"

int nvo_sum_exact(const double *v, int64_t n, double *ret_hi, double *ret_lo, nv_mag *ret_abs)
{
    nv_dd_sum(v, n, 1, ret_hi, ret_lo, ret_abs);
    return 0;
}

static const double *array_read(void *ud, int64_t line, int64_t k0, int64_t n, double *buf)
{
    (void)line, (void)n, (void)buf;
    return (const double *)ud + k0;
}

void nvo_rd_array(nvo_rd *rd, const double *v, int64_t n)
{
    *rd = (nvo_rd){.read = array_read, .ud = (void *)v, .len = n, .chunk = n > 0 ? n : 1};
}

/* nv_dd_sum's value and abs_sum (ddsum.c) with the two loops over the terms
 * fused into one: the long accumulator is exact in any order, and the fp64 sum
 * of |v_i| still adds them in index order; its fallback (a sum of |v_i| beyond
 * fp64's range, in magnitudes) is the second pass it is there. */
int nvo_sum_exact_rd(const nvo_rd *rd, double *ret_hi, double *ret_lo, nv_mag *ret_abs)
{
    nv_xacc a;
    nv_xacc_init(&a);
    double s = 0;
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *v = nvo_rd_piece(rd, k0, &m);
        if (!v)
            return NV_E_INVALID;
        nv_xacc_add_n(&a, v, m);
        for (int64_t i = 0; i < m; i++)
            s += fabs(v[i]);
    }
    nv_xacc_get(&a, ret_hi, ret_lo);
    if (!ret_abs)
        return 0;
    if (isfinite(s)) {
        *ret_abs = nv_mag_from_d(s);
        return 0;
    }
    nv_xacc_init(&a);
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *v = nvo_rd_piece(rd, k0, &m);
        if (!v)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++)
            if (isfinite(v[i]))
                nv_xacc_add(&a, fabs(v[i]));
    }
    *ret_abs = nv_xacc_get_mag(&a);
    return 0;
}

/* The exact sum held in MPFR, divided there at 128 bits: the quotient is rounded
 * once (2^-128 relative) and nothing on the way is limited by fp64's range, so a
 * mean whose sum overflows fp64 is still exact (docs/TOLERANCES.md "References"). */
static int mean_exact_div_rd(const nvo_rd *rd, int64_t d, double *ret_hi, double *ret_lo,
                             nv_mag *ret_abs, nv_mag *ret_peak)
{
    nv_xacc a, abs;
    nv_xacc_init(&a);
    nv_xacc_init(&abs);
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *v = nvo_rd_piece(rd, k0, &m);
        if (!v)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++) {
            nv_xacc_add(&a, v[i]);
            if (isfinite(v[i]))
                nv_xacc_add(&abs, fabs(v[i]));
        }
    }
    mpfr_t s, q, tmp;
    mpfr_inits2(128, s, q, tmp, (mpfr_ptr)0);
    nv_xacc_get_mpfr(&a, s);
    mpfr_div_si(q, s, (long)(d > 0 ? d : 1), MPFR_RNDN);
    nvo_mp_split(q, tmp, ret_hi, ret_lo);
    nv_mag sa = nv_xacc_get_mag(&abs);
    if (ret_peak)
        *ret_peak = sa;
    if (ret_abs)
        *ret_abs = nv_mag_mul(sa, nv_mag_from_d(1.0 / (double)(d > 0 ? d : 1)));
    mpfr_clears(s, q, tmp, (mpfr_ptr)0);
    return 0;
}

int nvo_mean_exact_rd(const nvo_rd *rd, double *ret_hi, double *ret_lo, nv_mag *ret_abs,
                      nv_mag *ret_peak)
{
    return mean_exact_div_rd(rd, rd->len, ret_hi, ret_lo, ret_abs, ret_peak);
}

void nvo_mean_exact_div(const double *v, int64_t n, int64_t d, double *ret_hi, double *ret_lo,
                        nv_mag *ret_abs, nv_mag *ret_peak)
{
    nvo_rd rd;
    nvo_rd_array(&rd, v, n);
    mean_exact_div_rd(&rd, d, ret_hi, ret_lo, ret_abs, ret_peak); /* an array never fails */
}

void nvo_mean_exact(const double *v, int64_t n, double *ret_hi, double *ret_lo, nv_mag *ret_abs,
                    nv_mag *ret_peak)
{
    nvo_rd rd;
    nvo_rd_array(&rd, v, n);
    nvo_mean_exact_rd(&rd, ret_hi, ret_lo, ret_abs, ret_peak); /* an array never fails */
}

int nvo_mp_moments_rd(const nvo_rd *rd, mpfr_ptr S, mpfr_ptr Q)
{
    int emax = INT32_MIN, emin = INT32_MAX;
    for (int64_t k0 = 0, m; k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x)
            return NV_E_INVALID;
        for (int64_t i = 0; i < m; i++) {
            if (x[i] == 0 || !isfinite(x[i]))
                continue;
            int e;
            frexp(x[i], &e);
            emax = e > emax ? e : emax;
            emin = e - 53 < emin ? e - 53 : emin;
        }
    }
    /* Terms of S are multiples of 2^emin below 2^emax, terms of Q multiples of
     * 2^(2 emin) below 2^(2 emax); 64 bits of carry room each. */
    mpfr_prec_t ps = emax == INT32_MIN ? 64 : (mpfr_prec_t)(emax - emin) + 66;
    mpfr_set_prec(S, ps);
    mpfr_set_prec(Q, 2 * ps);
    mpfr_set_zero(S, 1);
    mpfr_set_zero(Q, 1);
    mpfr_t sq;
    mpfr_init2(sq, 2 * 53);
    int r = 0;
    for (int64_t k0 = 0, m; r == 0 && k0 < rd->len; k0 += m) {
        const double *x = nvo_rd_piece(rd, k0, &m);
        if (!x) {
            r = NV_E_INVALID;
            break;
        }
        for (int64_t i = 0; i < m; i++) {
            if (x[i] == 0)
                continue;
            mpfr_add_d(S, S, x[i], MPFR_RNDN);
            mpfr_set_d(sq, x[i], MPFR_RNDN);
            mpfr_sqr(sq, sq, MPFR_RNDN); /* exact at 106 bits */
            mpfr_add(Q, Q, sq, MPFR_RNDN);
        }
    }
    mpfr_clear(sq);
    return r;
}

void nvo_mp_moments(const double *x, int64_t n, mpfr_ptr S, mpfr_ptr Q)
{
    nvo_rd rd;
    nvo_rd_array(&rd, x, n);
    nvo_mp_moments_rd(&rd, S, Q); /* an array never fails */
}

void nvo_mp_split(mpfr_srcptr v, mpfr_ptr tmp, double *hi, double *lo)
{
    *hi = mpfr_get_d(v, MPFR_RNDN);
    *lo = 0;
    if (isfinite(*hi)) {
        mpfr_sub_d(tmp, v, *hi, MPFR_RNDN);
        *lo = mpfr_get_d(tmp, MPFR_RNDN);
        if (!isfinite(*lo))
            *lo = 0;
    }
}
