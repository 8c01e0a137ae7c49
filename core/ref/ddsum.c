/* Exact and double-double summation (see ddsum.h for the contracts). */
#include "ddsum.h"

#include <assert.h>
#include <gmp.h>
#include <mpfr.h>
#include <string.h>

void nv_dd_acc_init(nv_dd_acc *a)
{
    assert(a);
    memset(a, 0, sizeof(*a));
}

/* Sum2 (Ogita-Rump-Oishi 2005, Alg. 4.4): s carries the float sum, c the sum of
 * the exact rounding errors of every addition. */
void nv_dd_acc_add(nv_dd_acc *a, double x)
{
    double s, e;
    nv_two_sum(a->s, x, &s, &e);
    a->s = s;
    a->c += e;
    a->abs_sum += fabs(x);
    a->n++;
}

/* Dot2 (ORO 2005, Alg. 5.3): the product's error term joins the error sum. */
void nv_dd_acc_add_prod(nv_dd_acc *a, double x, double y)
{
    double p, ep, s, es;
    nv_two_prod(x, y, &p, &ep);
    nv_two_sum(a->s, p, &s, &es);
    a->s = s;
    a->c += es + ep;
    a->abs_sum += fabs(p);
    a->n++;
}

void nv_dd_acc_get(const nv_dd_acc *a, double *ret_hi, double *ret_lo, double *ret_abs_sum)
{
    assert(a && ret_hi && ret_lo);
    double hi, lo;
    nv_two_sum(a->s, a->c, &hi, &lo);
    if (!isfinite(hi))
        lo = 0;
    *ret_hi = hi;
    *ret_lo = lo;
    if (ret_abs_sum)
        *ret_abs_sum = a->abs_sum;
}

/* ---- exact long accumulator ----
 * A finite double is m 2^(pos - 1074) with an integer 0 <= m < 2^53 and
 * 0 <= pos <= 2045 (pos = biased exponent - 1, or 0 for subnormals). It is added
 * into base-2^32 digits held in int64, so each digit takes < 2^33 per add and
 * 2^29 adds fit before carries must be propagated. */

#define DIGIT_MASK 0xffffffffLL
#define PENDING_MAX (1LL << 29)

void nv_xacc_init(nv_xacc *a)
{
    assert(a);
    memset(a, 0, sizeof(*a));
}

static void xacc_carry(int64_t *d)
{
    for (int k = 0; k < NV_XACC_DIGITS - 1; k++) {
        int64_t low = d[k] & DIGIT_MASK;
        int64_t c = (d[k] - low) / (DIGIT_MASK + 1);
        d[k] = low;
        d[k + 1] += c;
    }
}

/* Adds a finite double; returns without touching abs_sum. */
static void xacc_put(nv_xacc *a, double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    int e = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((1ULL << 52) - 1);
    if (e == 0) {
        if (m == 0)
            return;
        e = 1;
    } else {
        m |= 1ULL << 52;
    }
    int pos = e - 1;
    int w = pos >> 5, s = pos & 31;
    int64_t t0 = (int64_t)((m & DIGIT_MASK) << s);
    int64_t t1 = (int64_t)((m >> 32) << s);
    int64_t d0 = t0 & DIGIT_MASK;
    int64_t d1 = (t0 >> 32) + (t1 & DIGIT_MASK);
    int64_t d2 = t1 >> 32;
    if (bits >> 63) {
        a->d[w] -= d0;
        a->d[w + 1] -= d1;
        a->d[w + 2] -= d2;
    } else {
        a->d[w] += d0;
        a->d[w + 1] += d1;
        a->d[w + 2] += d2;
    }
    if (++a->pending >= PENDING_MAX) {
        xacc_carry(a->d);
        a->pending = 0;
    }
}

static int xacc_special(nv_xacc *a, double x)
{
    if (isnan(x)) {
        a->n_nan++;
        return 1;
    }
    if (isinf(x)) {
        if (x > 0)
            a->n_pinf++;
        else
            a->n_ninf++;
        return 1;
    }
    return 0;
}

void nv_xacc_add(nv_xacc *a, double x)
{
    a->n++;
    if (xacc_special(a, x))
        return;
    a->abs_sum += fabs(x);
    xacc_put(a, x);
}

void nv_xacc_add_prod(nv_xacc *a, double x, double y)
{
    double p, e;
    a->n++;
    nv_two_prod(x, y, &p, &e);
    if (xacc_special(a, p))
        return;
    a->abs_sum += fabs(p);
    xacc_put(a, p);
    xacc_put(a, e);
}

/* Rounds sign * digits * 2^-1074 (digits normalised, non-negative) to a pair. */
static void xacc_round(const int64_t *d, int negative, double *ret_hi, double *ret_lo)
{
    int top = NV_XACC_DIGITS - 1;
    while (top >= 0 && d[top] == 0)
        top--;
    if (top < 0) {
        *ret_hi = 0;
        *ret_lo = 0;
        return;
    }
    uint32_t words[NV_XACC_DIGITS];
    for (int k = 0; k <= top; k++)
        words[k] = (uint32_t)d[k];
    mpz_t z;
    mpfr_t r53, r128, rem;
    mpz_init(z);
    mpz_import(z, (size_t)top + 1, -1, sizeof(uint32_t), 0, 0, words);
    if (negative)
        mpz_neg(z, z);
    mpfr_inits2(128, r128, (mpfr_ptr)0);
    mpfr_init2(r53, 53);
    mpfr_init2(rem, 192);
    /* hi is rounded once from the exact value, so it is fl(s) (no double rounding). */
    mpfr_set_z_2exp(r53, z, -1074, MPFR_RNDN);
    mpfr_set_z_2exp(r128, z, -1074, MPFR_RNDN);
    double hi = mpfr_get_d(r53, MPFR_RNDN);
    double lo = 0;
    if (isfinite(hi)) {
        mpfr_sub_d(rem, r128, hi, MPFR_RNDN); /* exact: 192 bits cover both */
        lo = mpfr_get_d(rem, MPFR_RNDN);
    }
    mpfr_clears(r53, r128, rem, (mpfr_ptr)0);
    mpz_clear(z);
    *ret_hi = hi;
    *ret_lo = lo;
}

void nv_xacc_get(const nv_xacc *a, double *ret_hi, double *ret_lo, double *ret_abs_sum)
{
    assert(a && ret_hi && ret_lo);
    if (ret_abs_sum)
        *ret_abs_sum = a->abs_sum;
    if (a->n_nan || (a->n_pinf && a->n_ninf)) {
        *ret_hi = NAN;
        *ret_lo = 0;
        return;
    }
    if (a->n_pinf || a->n_ninf) {
        *ret_hi = a->n_pinf ? INFINITY : -INFINITY;
        *ret_lo = 0;
        return;
    }
    int64_t d[NV_XACC_DIGITS];
    memcpy(d, a->d, sizeof(d));
    xacc_carry(d);
    int negative = d[NV_XACC_DIGITS - 1] < 0;
    if (negative) {
        for (int k = 0; k < NV_XACC_DIGITS; k++)
            d[k] = -d[k];
        xacc_carry(d);
    }
    xacc_round(d, negative, ret_hi, ret_lo);
}

void nv_dd_sum(const double *x, int64_t n, int64_t stride, double *ret_hi, double *ret_lo,
               double *ret_abs_sum)
{
    assert(n >= 0 && (x || n == 0) && ret_hi && ret_lo);
    nv_xacc a;
    nv_dd_acc abs;
    nv_xacc_init(&a);
    nv_dd_acc_init(&abs);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i * stride];
        nv_xacc_add(&a, v);
        if (isfinite(v))
            nv_dd_acc_add(&abs, fabs(v));
    }
    nv_xacc_get(&a, ret_hi, ret_lo, NULL);
    if (ret_abs_sum)
        *ret_abs_sum = abs.s + abs.c;
}

void nv_dd_dot(const double *x, int64_t incx, const double *y, int64_t incy, int64_t n,
               double *ret_hi, double *ret_lo, double *ret_abs_sum)
{
    assert(n >= 0 && ((x && y) || n == 0) && ret_hi && ret_lo);
    nv_xacc a;
    nv_dd_acc abs;
    nv_xacc_init(&a);
    nv_dd_acc_init(&abs);
    for (int64_t i = 0; i < n; i++) {
        double u = x[i * incx], v = y[i * incy];
        nv_xacc_add_prod(&a, u, v);
        double p = u * v;
        if (isfinite(p))
            nv_dd_acc_add(&abs, fabs(p));
    }
    nv_xacc_get(&a, ret_hi, ret_lo, NULL);
    if (ret_abs_sum)
        *ret_abs_sum = abs.s + abs.c;
}
