/* Exact and double-double summation for references of reductions and matmul.
 *
 * Error-free transformations (Knuth TwoSum; Dekker/Kahan TwoProduct through fma,
 * as in Ogita, Rump, Oishi, "Accurate sum and dot product", SIAM J. Sci. Comput.
 * 26(6), 2005, §2) and two accumulators:
 *
 *   nv_dd_acc  a double-double running sum (Sum2/Dot2 of Ogita-Rump-Oishi): cheap,
 *              result error <= u|s| + gamma_{n-1}^2 sum|x_i| with u = 2^-53
 *              (ORO 2005, Prop. 4.5), i.e. about 2^-106 relative unless the sum
 *              cancels by more than ~2^40.
 *   nv_xacc    an exact fixed-point "long accumulator" (Kulisch) covering every
 *              product of two doubles, from 2^-2272 to 2^2208: every double, every
 *              exact product x y (split into its two halves after scaling by
 *              powers of two, so nothing overflows or underflows on the way) and
 *              their sums, up to 2^60 terms, are held exactly whatever the
 *              cancellation; the result is rounded once, at the end.
 *
 * nv_dd_sum / nv_dd_dot use nv_xacc, so their hi + lo is the exact sum (dot
 * product) rounded to about 128 bits then split: |hi + lo - s| <= 2^-105 |s|
 * (hi = s rounded to nearest fp64), whatever the cancellation and whatever the
 * magnitudes: a sum whose partial sums (or products) overflow fp64 but whose
 * value does not is exact. Exceptions:
 *   - NaN anywhere gives hi = NaN; +Inf and -Inf give +-Inf or NaN by IEEE 754
 *     §6.1 rules (inf - inf = NaN, inf * 0 = NaN), lo = 0;
 *   - results that overflow fp64 give hi = +-Inf, lo = 0 (nv_xacc_get_mpfr
 *     gives the exact value instead).
 * abs_sum (when not NULL) receives sum |x_i| (or sum |x_i y_i|) over the finite
 * terms as an nv_mag, relative error below (n - 1) 2^-53 (an fp64 sum of positive
 * terms, Higham §4.2; exact or in nv_mag where that would leave fp64's range): it
 * may exceed fp64's range (the scale of the bound metric of compare.h). */
#ifndef NUMVAL_DDSUM_H
#define NUMVAL_DDSUM_H

#include <math.h>
#include <mpfr.h>
#include <stdint.h>

#include "core/numerics/eft.h" /* nv_two_sum, nv_two_prod */

/* A non-negative magnitude in a wide exponent range: m 2^e with m in [0.5, 1),
 * or m = 0 (e = 0), or m = +Inf / NaN. Sums and products of magnitudes are
 * rounded to 53 bits (relative error below 2^-52 each), never overflow. */
typedef struct nv_mag {
    double m;
    long e;
} nv_mag;

nv_mag nv_mag_from_d(double x);         /* |x| */
nv_mag nv_mag_from_mpfr(mpfr_srcptr v); /* |v|, rounded to nearest */
double nv_mag_to_d(nv_mag a);           /* m 2^e rounded to fp64: +Inf beyond its range */
nv_mag nv_mag_add(nv_mag a, nv_mag b);
nv_mag nv_mag_mul(nv_mag a, nv_mag b);
int nv_mag_cmp(nv_mag a, nv_mag b); /* -1, 0, 1 (NaN compares above everything) */

/* Double-double running sum (Sum2 / Dot2). Embed and initialise with nv_dd_acc_init. */
typedef struct nv_dd_acc {
    double s;       /* fl-sum of the values */
    double c;       /* sum of the rounding errors */
    double abs_sum; /* sum of |terms| */
    int64_t n;      /* terms added */
} nv_dd_acc;

void nv_dd_acc_init(nv_dd_acc *a);
void nv_dd_acc_add(nv_dd_acc *a, double x);
void nv_dd_acc_add_prod(nv_dd_acc *a, double x, double y); /* adds x * y (Dot2) */
/* Result as a normalised pair (hi = fl(hi + lo)); abs_sum may be NULL. */
void nv_dd_acc_get(const nv_dd_acc *a, double *ret_hi, double *ret_lo, double *ret_abs_sum);

/* Exact long accumulator: value = sum_k d[k] 2^(32 k + NV_XACC_LSB). About 1.1 KiB;
 * embed it (no allocation). */
#define NV_XACC_LSB (-2272)
#define NV_XACC_DIGITS 140
typedef struct nv_xacc {
    int64_t d[NV_XACC_DIGITS]; /* base 2^32 digits with carry room; only [lo, hi + 2] live */
    int64_t pending;           /* adds since the last carry normalisation */
    int lo, hi;                /* the digits written so far (lo > hi: none) */
    int n_nan, n_pinf, n_ninf; /* special values seen */
    int64_t n;
} nv_xacc;

void nv_xacc_init(nv_xacc *a);
void nv_xacc_add(nv_xacc *a, double x);                /* exact for every finite x */
/* x[0..n) as n nv_xacc_add calls would add them (the same exact value and
 * counts), faster for large n: ddsum.c's exponent bins. */
void nv_xacc_add_n(nv_xacc *a, const double *x, int64_t n);
void nv_xacc_add_prod(nv_xacc *a, double x, double y); /* exact for every finite x, y */
/* The exact sum rounded as described above. Does not modify the value held (the
 * accumulator can keep going). */
void nv_xacc_get(const nv_xacc *a, double *ret_hi, double *ret_lo);
/* The exact sum itself: v gets the precision that holds it (NaN or +-Inf for the
 * special cases above). v must be initialised. */
void nv_xacc_get_mpfr(const nv_xacc *a, mpfr_ptr v);
/* |exact sum| rounded to 53 bits, in the wide range of nv_mag. */
nv_mag nv_xacc_get_mag(const nv_xacc *a);

/* sum_{i<n} x[i*stride] exactly rounded to a pair (see above). n <= 0 gives 0. */
void nv_dd_sum(const double *x, int64_t n, int64_t stride, double *ret_hi, double *ret_lo,
               nv_mag *ret_abs_sum);

/* sum_{i<n} x[i*incx] * y[i*incy], same contract; abs_sum is sum |x_i y_i|. */
void nv_dd_dot(const double *x, int64_t incx, const double *y, int64_t incy, int64_t n,
               double *ret_hi, double *ret_lo, nv_mag *ret_abs_sum);

#endif
