/* Exact and double-double summation (see ddsum.h for the contracts). */
#include "ddsum.h"

#include <assert.h>
#include <gmp.h>
#include <mpfr.h>
#include <stdbool.h>
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

/* ---- magnitudes in a wide exponent range ---- */

nv_mag nv_mag_from_d(double x)
{
    nv_mag r = {fabs(x), 0};
    if (r.m == 0 || !isfinite(r.m))
        return r;
    int e;
    r.m = frexp(r.m, &e);
    r.e = e;
    return r;
}

nv_mag nv_mag_from_mpfr(mpfr_srcptr v)
{
    if (mpfr_nan_p(v))
        return (nv_mag){NAN, 0};
    if (mpfr_inf_p(v))
        return (nv_mag){INFINITY, 0};
    if (mpfr_zero_p(v))
        return (nv_mag){0, 0};
    long e;
    double d = fabs(mpfr_get_d_2exp(&e, v, MPFR_RNDN));
    int k;
    d = frexp(d, &k); /* d is already in [0.5, 1); frexp keeps it so */
    return (nv_mag){d, e + k};
}

double nv_mag_to_d(nv_mag a)
{
    if (a.m == 0 || !isfinite(a.m))
        return a.m;
    if (a.e > 1024)
        return INFINITY;
    if (a.e < -1100)
        return 0;
    return ldexp(a.m, (int)a.e); /* rounds once where the result is subnormal */
}

static nv_mag mag_norm(double m, long e)
{
    int k;
    m = frexp(m, &k);
    return (nv_mag){m, e + k};
}

nv_mag nv_mag_add(nv_mag a, nv_mag b)
{
    if (isnan(a.m) || isnan(b.m))
        return (nv_mag){NAN, 0};
    if (isinf(a.m) || isinf(b.m))
        return (nv_mag){INFINITY, 0};
    if (b.m == 0)
        return a;
    if (a.m == 0)
        return b;
    if (a.e < b.e) {
        nv_mag t = a;
        a = b;
        b = t;
    }
    long d = a.e - b.e;
    if (d > 60) /* b below half an ulp of a: a is the sum rounded to nearest */
        return a;
    return mag_norm(a.m + ldexp(b.m, (int)-d), a.e); /* one rounding */
}

nv_mag nv_mag_mul(nv_mag a, nv_mag b)
{
    if (isnan(a.m) || isnan(b.m))
        return (nv_mag){NAN, 0};
    if (a.m == 0 || b.m == 0)
        return (nv_mag){isinf(a.m) || isinf(b.m) ? NAN : 0, 0};
    if (isinf(a.m) || isinf(b.m))
        return (nv_mag){INFINITY, 0};
    return mag_norm(a.m * b.m, a.e + b.e);
}

int nv_mag_cmp(nv_mag a, nv_mag b)
{
    if (isnan(a.m) || isnan(b.m))
        return isnan(a.m) && isnan(b.m) ? 0 : isnan(a.m) ? 1 : -1;
    if (isinf(a.m) || isinf(b.m))
        return isinf(a.m) == isinf(b.m) ? 0 : isinf(a.m) ? 1 : -1;
    if (a.m == 0 || b.m == 0)
        return a.m == b.m ? 0 : a.m == 0 ? -1 : 1;
    if (a.e != b.e)
        return a.e < b.e ? -1 : 1;
    return a.m < b.m ? -1 : a.m > b.m;
}

/* ---- exact long accumulator ----
 * A finite double is m 2^q with an integer 0 <= m < 2^53 and q = biased exponent
 * - 1075 (or -1074 for subnormals). x 2^e is added into base-2^32 digits held in
 * int64 at bit q + e - NV_XACC_LSB, trailing zero bits of m dropped first, so each
 * digit takes < 2^33 per add and 2^29 adds fit before carries must be propagated.
 * Range: a product of two doubles, scaled as in nv_xacc_add_prod, has its lowest
 * set bit at or above 2^-2252 (two subnormal halves 2^-1073 2^-53 2^-53) and is
 * below 2^2048; 2^60 of them stay below the top digit's 2^2176. */

#define DIGIT_MASK 0xffffffffLL
#define PENDING_MAX (1LL << 29)

/* Only the digits [lo, top] are live (top = hi + 2 leaves room for the carries
 * out of the highest digit written, 2^29 adds of < 2^33 each): nv_xacc_init does
 * not clear the 1.1 KiB of digits, xacc_put clears those it brings into the live
 * range, and the carries and the rounding touch only that range, which for
 * ordinary data is a handful of digits. */
static int top_of(const nv_xacc *a)
{
    return a->hi + 2 < NV_XACC_DIGITS - 1 ? a->hi + 2 : NV_XACC_DIGITS - 1;
}

void nv_xacc_init(nv_xacc *a)
{
    assert(a);
    a->pending = 0;
    a->lo = NV_XACC_DIGITS;
    a->hi = -1;
    a->n_nan = a->n_pinf = a->n_ninf = 0;
    a->n = 0;
}

/* Normalises digits [lo, top] to [0, 2^32) except d[top], which keeps the carry
 * (and the sign). */
static void xacc_carry(int64_t *d, int lo, int top)
{
    for (int k = lo; k < top; k++) {
        int64_t low = d[k] & DIGIT_MASK;
        int64_t c = (d[k] - low) / (DIGIT_MASK + 1);
        d[k] = low;
        d[k + 1] += c;
    }
}

/* Brings digits [w, w + 2] into the live range, clearing the new ones. */
static void xacc_extend(nv_xacc *a, int w)
{
    if (a->lo > a->hi) { /* empty */
        a->lo = w;
        a->hi = w + 2;
        for (int k = w; k <= top_of(a); k++)
            a->d[k] = 0;
        return;
    }
    if (w < a->lo) {
        for (int k = w; k < a->lo; k++)
            a->d[k] = 0;
        a->lo = w;
    }
    if (w + 2 > a->hi) {
        int old_top = top_of(a);
        a->hi = w + 2;
        for (int k = old_top + 1; k <= top_of(a); k++)
            a->d[k] = 0;
    }
}

/* Adds m 2^(pos + NV_XACC_LSB) (m < 2^53) with the sign of neg. */
static inline void xacc_put_m(nv_xacc *a, uint64_t m, int pos, bool neg)
{
    int w = pos >> 5, s = pos & 31;
    if (w < a->lo || w + 2 > a->hi)
        xacc_extend(a, w);
    int64_t t0 = (int64_t)((m & DIGIT_MASK) << s);
    int64_t t1 = (int64_t)((m >> 32) << s);
    int64_t d0 = t0 & DIGIT_MASK;
    int64_t d1 = (t0 >> 32) + (t1 & DIGIT_MASK);
    int64_t d2 = t1 >> 32;
    if (neg) {
        a->d[w] -= d0;
        a->d[w + 1] -= d1;
        a->d[w + 2] -= d2;
    } else {
        a->d[w] += d0;
        a->d[w + 1] += d1;
        a->d[w + 2] += d2;
    }
    if (++a->pending >= PENDING_MAX) {
        xacc_carry(a->d, a->lo, top_of(a));
        a->pending = 0;
    }
}

/* Adds a finite double x 2^e: the integer significand m at bit q + e, q =
 * biased exponent - 1075 (-1074 for subnormals). e = 0 (every double) needs no
 * more; a scaled half of a product (e != 0) may sit below 2^-2200, so its
 * trailing zero bits are dropped first to stay above NV_XACC_LSB. */
static void xacc_put(nv_xacc *a, double x, long e)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    int be = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((1ULL << 52) - 1);
    if (be == 0) {
        if (m == 0)
            return;
        be = 1;
    } else {
        m |= 1ULL << 52;
    }
    int pos = be - 1075 - NV_XACC_LSB;
    if (e != 0) {
        int tz = __builtin_ctzll(m);
        m >>= tz;
        long p = (long)pos + e + tz;
        assert(p >= 0 && (p >> 5) + 2 < NV_XACC_DIGITS);
        pos = (int)p;
    }
    xacc_put_m(a, m, pos, bits >> 63);
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
    xacc_put(a, x, 0);
}

/* Bins by exponent field (Malcolm's idea, as in Neal's "small
 * superaccumulator", arXiv:1505.05571): a finite double with field be is an
 * integer m < 2^53 times 2^(max(be, 1) - 1075), so the signed m of one field
 * add exactly in an int64; 1023 of them stay below 2^63. Each bin then goes
 * into the long accumulator as two digits' worth (xacc_put_m takes m < 2^53).
 * Exact, so the accumulator holds the value n nv_xacc_add calls give it. */
#define BIN_FLUSH 1023

static void bins_flush(nv_xacc *a, int64_t *bin, int lo, int hi)
{
    for (int be = lo; be <= hi; be++) {
        int64_t v = bin[be];
        if (v == 0)
            continue;
        bin[be] = 0;
        bool neg = v < 0;
        uint64_t m = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        int pos = be - 1075 - NV_XACC_LSB;
        if (m & DIGIT_MASK)
            xacc_put_m(a, m & DIGIT_MASK, pos, neg);
        if (m >> 32)
            xacc_put_m(a, m >> 32, pos + 32, neg);
    }
}

void nv_xacc_add_n(nv_xacc *a, const double *x, int64_t n)
{
    if (n < 256) {
        for (int64_t i = 0; i < n; i++)
            nv_xacc_add(a, x[i]);
        return;
    }
    int64_t bin[2048] = {0};
    int pend = 0, lo = 2047, hi = 0; /* the fields written since the last flush */
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &x[i], sizeof u);
        int be = (int)((u >> 52) & 0x7ff);
        if (be == 0x7ff) {
            nv_xacc_add(a, x[i]); /* NaN, Inf: counted there (and in a->n) */
            continue;
        }
        uint64_t m = (u & ((UINT64_C(1) << 52) - 1)) | (be ? UINT64_C(1) << 52 : 0);
        be = be ? be : 1;
        bin[be] += u >> 63 ? -(int64_t)m : (int64_t)m;
        lo = be < lo ? be : lo;
        hi = be > hi ? be : hi;
        a->n++;
        if (++pend == BIN_FLUSH) {
            bins_flush(a, bin, lo, hi);
            pend = 0;
            lo = 2047;
            hi = 0;
        }
    }
    bins_flush(a, bin, lo, hi);
}

/* x y exactly: TwoProduct where neither the product overflows nor its error term
 * underflows (|x y| >= 2^-969); otherwise both factors are scaled to [0.5, 1) by
 * frexp (exact), their TwoProduct is exact there, and the halves are added with
 * the exponent put back. */
void nv_xacc_add_prod(nv_xacc *a, double x, double y)
{
    a->n++;
    if (!isfinite(x) || !isfinite(y)) {
        xacc_special(a, x * y); /* Inf * 0 = NaN (IEEE 754 §7.2) */
        return;
    }
    if (x == 0 || y == 0)
        return;
    double p = x * y, e;
    if (isfinite(p) && fabs(p) >= 0x1p-969) {
        nv_two_prod(x, y, &p, &e);
        xacc_put(a, p, 0);
        xacc_put(a, e, 0);
        return;
    }
    int ex, ey;
    double mx = frexp(x, &ex), my = frexp(y, &ey);
    nv_two_prod(mx, my, &p, &e);
    xacc_put(a, p, (long)ex + ey);
    xacc_put(a, e, (long)ex + ey);
}

/* The live digits of the value, normalised (magnitude in d[lo..top], each in
 * [0, 2^32)), its sign, and the range. Returns false when the value is zero. */
typedef struct xacc_val {
    int64_t d[NV_XACC_DIGITS];
    int lo, top, negative;
} xacc_val;

static bool xacc_digits(const nv_xacc *a, xacc_val *v)
{
    if (a->lo > a->hi)
        return false;
    int lo = a->lo, top = top_of(a);
    memcpy(v->d + lo, a->d + lo, sizeof(int64_t) * (size_t)(top - lo + 1));
    xacc_carry(v->d, lo, top);
    v->negative = v->d[top] < 0;
    if (v->negative) {
        for (int k = lo; k <= top; k++)
            v->d[k] = -v->d[k];
        xacc_carry(v->d, lo, top);
    }
    while (top >= lo && v->d[top] == 0)
        top--;
    while (lo <= top && v->d[lo] == 0)
        lo++;
    v->lo = lo;
    v->top = top;
    return lo <= top;
}

/* The value as sign * z * 2^(*ret_exp). */
static void xacc_to_mpz(const xacc_val *v, mpz_t z, long *ret_exp)
{
    uint32_t words[NV_XACC_DIGITS];
    int n = v->top - v->lo + 1;
    for (int k = 0; k < n; k++)
        words[k] = (uint32_t)v->d[v->lo + k];
    mpz_import(z, (size_t)n, -1, sizeof(uint32_t), 0, 0, words);
    if (v->negative)
        mpz_neg(z, z);
    *ret_exp = NV_XACC_LSB + 32L * v->lo;
}

/* Rounds the value to a pair: hi = RN(s), lo = RZ(s - hi). lo toward zero keeps
 * hi + lo on the same side of every double-double threshold as s (reference.c
 * decides fp64 overflow from the sign and size of lo next to max_finite). */
static void xacc_round(const xacc_val *v, double *ret_hi, double *ret_lo)
{
    mpz_t z;
    long ez;
    mpz_init(z);
    xacc_to_mpz(v, z, &ez);
    mpfr_t r53, rem;
    mpfr_init2(r53, 53);
    mpfr_init2(rem, (mpfr_prec_t)(v->top - v->lo + 1) * 32 + 64); /* s and s - hi exactly */
    /* hi is rounded once from the exact value, so it is fl(s) (no double rounding). */
    mpfr_set_z_2exp(r53, z, ez, MPFR_RNDN);
    mpfr_set_z_2exp(rem, z, ez, MPFR_RNDN);
    double hi = mpfr_get_d(r53, MPFR_RNDN);
    double lo = 0;
    if (isfinite(hi)) {
        mpfr_sub_d(rem, rem, hi, MPFR_RNDN);
        lo = mpfr_get_d(rem, MPFR_RNDZ);
    }
    mpfr_clears(r53, rem, (mpfr_ptr)0);
    mpz_clear(z);
    *ret_hi = hi;
    *ret_lo = lo;
}

/* The special result, if any: 1 with *ret set (NaN, +-Inf), else 0. */
static int xacc_special_result(const nv_xacc *a, double *ret)
{
    if (a->n_nan || (a->n_pinf && a->n_ninf)) {
        *ret = NAN;
        return 1;
    }
    if (a->n_pinf || a->n_ninf) {
        *ret = a->n_pinf ? INFINITY : -INFINITY;
        return 1;
    }
    return 0;
}

void nv_xacc_get(const nv_xacc *a, double *ret_hi, double *ret_lo)
{
    assert(a && ret_hi && ret_lo);
    if (xacc_special_result(a, ret_hi)) {
        *ret_lo = 0;
        return;
    }
    xacc_val v;
    if (!xacc_digits(a, &v)) {
        *ret_hi = *ret_lo = 0;
        return;
    }
    xacc_round(&v, ret_hi, ret_lo);
}

void nv_xacc_get_mpfr(const nv_xacc *a, mpfr_ptr out)
{
    assert(a && out);
    double sp;
    if (xacc_special_result(a, &sp)) {
        mpfr_set_d(out, sp, MPFR_RNDN);
        return;
    }
    xacc_val v;
    if (!xacc_digits(a, &v)) {
        mpfr_set_zero(out, 1);
        return;
    }
    mpz_t z;
    long ez;
    mpz_init(z);
    xacc_to_mpz(&v, z, &ez);
    mpfr_set_prec(out, (mpfr_prec_t)(v.top - v.lo + 1) * 32 + 1);
    mpfr_set_z_2exp(out, z, ez, MPFR_RNDN); /* exact at that precision */
    mpz_clear(z);
}

nv_mag nv_xacc_get_mag(const nv_xacc *a)
{
    mpfr_t v;
    mpfr_init2(v, 64);
    nv_xacc_get_mpfr(a, v);
    nv_mag r = nv_mag_from_mpfr(v);
    mpfr_clear(v);
    return r;
}

/* sum |x_i| in fp64 (positive terms: relative error below (n - 1) 2^-53, ample for
 * a tolerance's scale), or exactly in a long accumulator where that overflows or
 * meets a non-finite term (left out). */
static nv_mag abs_sum(const double *x, int64_t n, int64_t stride)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs(x[i * stride]);
    if (isfinite(s))
        return nv_mag_from_d(s);
    nv_xacc a;
    nv_xacc_init(&a);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i * stride]))
            nv_xacc_add(&a, fabs(x[i * stride]));
    return nv_xacc_get_mag(&a);
}

void nv_dd_sum(const double *x, int64_t n, int64_t stride, double *ret_hi, double *ret_lo,
               nv_mag *ret_abs_sum)
{
    assert(n >= 0 && (x || n == 0) && ret_hi && ret_lo);
    nv_xacc a;
    nv_xacc_init(&a);
    if (stride == 1)
        nv_xacc_add_n(&a, x, n);
    else
        for (int64_t i = 0; i < n; i++)
            nv_xacc_add(&a, x[i * stride]);
    nv_xacc_get(&a, ret_hi, ret_lo);
    if (ret_abs_sum)
        *ret_abs_sum = abs_sum(x, n, stride);
}

/* sum |x_i y_i| in fp64 as abs_sum above, or as magnitudes where a product or
 * the sum leaves fp64's range or a term is not finite (left out). Products below
 * 2^-1022 lose relative accuracy there; their absolute error is below 2^-1075
 * each, far below the min_normal term the reference adds (reference.c). */
static nv_mag abs_dot(const double *x, int64_t incx, const double *y, int64_t incy, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs(x[i * incx] * y[i * incy]);
    if (isfinite(s))
        return nv_mag_from_d(s);
    nv_mag m = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        double u = x[i * incx], v = y[i * incy];
        if (isfinite(u) && isfinite(v))
            m = nv_mag_add(m, nv_mag_mul(nv_mag_from_d(u), nv_mag_from_d(v)));
    }
    return m;
}

void nv_dd_dot(const double *x, int64_t incx, const double *y, int64_t incy, int64_t n,
               double *ret_hi, double *ret_lo, nv_mag *ret_abs_sum)
{
    assert(n >= 0 && ((x && y) || n == 0) && ret_hi && ret_lo);
    nv_xacc a;
    nv_xacc_init(&a);
    for (int64_t i = 0; i < n; i++)
        nv_xacc_add_prod(&a, x[i * incx], y[i * incy]);
    nv_xacc_get(&a, ret_hi, ret_lo);
    if (ret_abs_sum)
        *ret_abs_sum = abs_dot(x, incx, y, incy, n);
}
