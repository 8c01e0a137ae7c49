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
 *              double from 2^-1074 to 2^1024 with 64 guard bits: the sum of up to
 *              2^60 doubles is held exactly, whatever the cancellation; the result
 *              is rounded once, at the end.
 *
 * nv_dd_sum / nv_dd_dot use nv_xacc, so their hi + lo is the exact sum (dot
 * product) rounded to about 128 bits then split: |hi + lo - s| <= 2^-105 |s|
 * (hi = s rounded to nearest fp64), whatever the cancellation. Exceptions:
 *   - NaN anywhere gives hi = NaN; +Inf and -Inf give +-Inf or NaN by IEEE 754
 *     §6.1 rules (inf - inf = NaN), lo = 0;
 *   - a dot product is exact only where no product x_i y_i falls below 2^-969 in
 *     magnitude (its TwoProduct error term would underflow fp64) and no product
 *     overflows fp64; inputs decoded from the dtypes of dtype.h never come near.
 *   - results that overflow fp64 give hi = +-Inf, lo = 0.
 * abs_sum (when not NULL) receives sum |x_i| (or sum |x_i y_i|) accumulated in
 * double-double and rounded to fp64 (relative error below 2^-52 + n 2^-104): the
 * scale of the bound metric of compare.h (Higham §4.2). Terms that are NaN or Inf
 * are left out of it.
 */
#ifndef NUMVAL_DDSUM_H
#define NUMVAL_DDSUM_H

#include <math.h>
#include <stdint.h>

#include "core/numerics/eft.h" /* nv_two_sum, nv_two_prod */

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

/* Exact long accumulator. About 600 bytes; embed it (no allocation). */
#define NV_XACC_DIGITS 72
typedef struct nv_xacc {
    int64_t
        d[NV_XACC_DIGITS]; /* base 2^32 digits with carry room; value = sum d_k 2^(32k - 1074) */
    int64_t pending;       /* adds since the last carry normalisation */
    int n_nan, n_pinf, n_ninf; /* special values seen */
    double abs_sum;
    int64_t n;
} nv_xacc;

void nv_xacc_init(nv_xacc *a);
void nv_xacc_add(nv_xacc *a, double x);                /* exact for every finite x */
void nv_xacc_add_prod(nv_xacc *a, double x, double y); /* exact, see the header note */
/* The exact sum rounded as described above; abs_sum may be NULL. Does not modify
 * the value held (the accumulator can keep going). */
void nv_xacc_get(const nv_xacc *a, double *ret_hi, double *ret_lo, double *ret_abs_sum);

/* sum_{i<n} x[i*stride] exactly rounded to a pair (see above). n <= 0 gives 0. */
void nv_dd_sum(const double *x, int64_t n, int64_t stride, double *ret_hi, double *ret_lo,
               double *ret_abs_sum);

/* sum_{i<n} x[i*incx] * y[i*incy], same contract; abs_sum is sum |x_i y_i|. */
void nv_dd_dot(const double *x, int64_t incx, const double *y, int64_t incy, int64_t n,
               double *ret_hi, double *ret_lo, double *ret_abs_sum);

#endif
