/* The fp64 fast path's tails (refmath.c): where f(x) is a limit A plus a
 * small L that fp64 cannot hold beside A, the pair (A, L) with L's error bound,
 * and the cell decision of such a pair; with the bit-level helpers they use.
 * Included by refmath.c alone: everything here is inlined into its loops. */
#ifndef NUMVAL_REF_REFMATH_TAIL_H
#define NUMVAL_REF_REFMATH_TAIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ddsum.h"
#include "refmath_internal.h"

#define RM_INLINE static inline __attribute__((always_inline))

/* 2^k for -1022 <= k <= 1023, from its bits. */
static inline double pow2i(int k)
{
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

/* floor(log2 |x|) for a normal double. */
static inline int exp_of(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof(b));
    return (int)((b >> 52) & 0x7ff) - 1023;
}

/* sigmoid in fp64: for t >= 0 1/(1 + e^-t), else e^t/(1 + e^t); exp's 2^-48 plus
 * three roundings: eps 2^-47. */
static inline double sigmoid64(double t)
{
    if (t >= 0)
        return 1.0 / (1.0 + exp(-t));
    double e = exp(t);
    return e / (1.0 + e);
}

/* Tails: where f approaches its limit A (+-1, or x for silu/gelu), f(x) = A + L
 * with |L| tiny against |A|, and L is computed directly (no cancellation) to
 * relative *ret_eps: tanh 1 - 2 sigmoid(-2|x|), erf 1 - erfc(|x|), sigmoid
 * 1 - sigmoid(-x), silu x - x sigmoid(-x), gelu x - x/2 erfc(x/sqrt 2) or
 * x - x sigmoid(-t), expm1 -1 + e^x, exp near 0 1 + expm1(x) (L has x's sign). There fp64 cannot hold A + L to the
 * precision the decision needs, but the pair can. Below the tail thresholds
 * (where |L| > about 2^-36 |A|) the plain fp64 value decides.
 * Deep in the tail (|L| < 2^-59 |A|, bounds by hand: 1 - tanh(x) < 2e^-2x,
 * erfc(6.5) < 2^-64, e^-42 < 2^-60, gelu_tanh's t >= 49 at x = 8) rounding
 * needs only L's sign, and need_l false skips computing it. An L that
 * underflowed or was skipped is +-2^-1074: every value strictly between A and
 * A -+ 2^-59 |A| rounds alike in every format here. */
/* Below this |x|, e^x is fast_tail's pair 1 + expm1(x). */
#define EXP_TAIL_BELOW 0x1p-36

/* The nearer half spacing of fp64 beside a nonzero normal s (a power of two
 * has the finer spacing below). */
static inline double half_spacing(double s)
{
    int es = exp_of(s);
    return pow2i(es - 53 - (fabs(s) == pow2i(es)));
}

/* tanh x = x + D near 0, D = -x^3/3 + 2x^5/15 - 17x^7/315 + ... (A&S 4.5.64).
 * For 2^-300 <= |x| < 2^-20: D in double-double (TwoProd by fma, the
 * division's exact remainder fma(-q, 3, p), Boldo; the x^5 term in plain
 * fp64, 2^-92 |D|) is within 2^-80 |D| of the true D (the x^7 term, left
 * out, is 17/105 x^4 |D| < 2^-82 |D|), and T = x + D in two TwoSums. When that interval
 * holds a single fp64 rounding of T and of T - RN(T), the pair is (RN(tanh x),
 * RN(tanh x - RN(tanh x))) exactly; below 2^-27 RN(tanh x) is x. Returns
 * false otherwise (MPFR then: near 2^-20 about one x in 2^15). glibc returns x or a value
 * within its error of x there, a rounding boundary of every format, so each
 * of the fp32 encodings of that range (half of all) would take MPFR. */
RM_INLINE bool tanh_small(double x, double *ret_hi, double *ret_lo)
{
    double x2h = x * x, x2l = fma(x, x, -x2h);
    double x3h = x2h * x, x3l = fma(x2h, x, -x3h) + x2l * x;
    double qh = x3h / 3, ql = (fma(-qh, 3, x3h) + x3l) / 3;
    double t5 = 0x1.1111111111111p-3 * (x3h * x2h); /* 2/15 x^5 */
    double dh = -qh, dl = t5 - ql;
    double h1, l1, l2, l3, hi, lo0, lo, e;
    nv_two_sum(x, dh, &h1, &l1);
    nv_two_sum(l1, dl, &l2, &l3);
    nv_two_sum(h1, l2, &hi, &lo0); /* T = hi + lo0 + l3 + delta */
    double err = fabs(dh) * 0x1p-80;
    if (!(fabs(lo0) + fabs(l3) + err < half_spacing(hi)))
        return false;
    nv_two_sum(lo0, l3, &lo, &e);
    if (lo == 0 || !(fabs(e) + err < half_spacing(lo)))
        return false;
    *ret_hi = hi;
    *ret_lo = lo;
    return true;
}

RM_INLINE bool fast_tail(nv_fn f, double x, bool need_l, double *ret_a, double *ret_l,
                         double *ret_eps)
{
    double ax = fabs(x), s = copysign(1.0, x), a, l = 0, eps = 0;
    bool deep;
    switch (f) {
    case NV_FN_TANH:
        if (ax < 0x1p-20 && ax >= 0x1p-300 && tanh_small(x, &a, &l)) {
            deep = false;
            eps = 0x1p-52; /* l = RN(tanh x - a) */
            break;
        }
        if (ax < 13) /* 1 - tanh(13) ~ 2^-36.5 */
            return false;
        a = s;
        deep = ax > 21;
        if (need_l || !deep)
            l = -s * 2 * sigmoid64(-2 * ax);
        eps = 0x1p-46;
        break;
    case NV_FN_ERF:
        if (ax < 4.5) /* erfc(4.5) ~ 2^-32 */
            return false;
        a = s;
        deep = ax > 6.5;
        if (need_l || !deep)
            l = -s * erfc(ax);
        eps = 0x1p-47;
        break;
    case NV_FN_SIGMOID:
    case NV_FN_SILU:
        if (x < 25) /* e^-25 ~ 2^-36 */
            return false;
        a = f == NV_FN_SIGMOID ? 1.0 : x;
        deep = x > 42;
        if (need_l || !deep)
            l = -a * sigmoid64(-x);
        eps = 0x1p-45;
        break;
    case NV_FN_GELU_ERF: {
        if (x < 6.4) /* erfc(6.4/sqrt 2)/2 ~ 2^-36 */
            return false;
        double z = x * 0.7071067811865476;
        a = x;
        deep = x > 9.2;
        if (need_l || !deep)
            l = -0.5 * x * erfc(z);
        /* z's 2u through erfc's condition number < 2z^2 + 2z + 1 (A&S 7.1.13). */
        eps = (2 * z * z + 2 * z + 1) * 0x1p-52 + 0x1p-46;
        break;
    }
    case NV_FN_GELU_TANH: {
        if (x < 6) /* t(6) > 25 */
            return false;
        double t = 2 * 0.7978845608028654 * (x + 0.044715 * (x * x * x));
        a = x;
        deep = x > 8;
        if (need_l || !deep)
            l = -x * sigmoid64(-t);
        eps = (t + 1) * 8 * 0x1p-53 + 0x1p-45;
        break;
    }
    case NV_FN_EXP:
        /* Near 0, e^x = 1 + expm1(x): the 2^23 x 99 fp32 encodings below 2^-25 in
         * magnitude (40% of all) would otherwise each take MPFR, because fp64
         * holds 1 + x to no better than the decision's bound. */
        if (ax >= EXP_TAIL_BELOW || x == 0)
            return false;
        a = 1.0;
        deep = ax < 0x1p-59;
        l = expm1(x); /* glibc: at most 1 ulp (libm-test-ulps, x86_64) */
        eps = 0x1p-47;
        break;
    case NV_FN_EXPM1:
        if (x > -25)
            return false;
        a = -1.0;
        deep = x < -42;
        if (need_l || !deep)
            l = exp(x);
        eps = 0x1p-47;
        break;
    default:
        return false;
    }
    (void)deep;
    if (!(fabs(a) >= 0x1p-900 && fabs(a) <= 0x1p1000))
        return false;
    if (l == 0)
        l = a > 0 ? -0x1p-1074 : 0x1p-1074;
    *ret_a = a;
    *ret_l = l;
    *ret_eps = eps;
    return true;
}

/* fast_decides for y = a + l (|l| < |a|/2, so y has a's sign), l known to
 * relative eps: in magnitudes, |y| = A + L with A = |a| = kA h + rA (exact:
 * A/h is a power-of-two scaling below 2^(p+3), the rest fits), so |y| lies in
 * cell kA + floor((rA + L)/h) when both ends of L's interval agree. */
static inline bool fast_decides_pair(double a, double l, double eps, const nv_dtype_info *in,
                                     int64_t *ret_c, double *ret_h)
{
    double A = fabs(a), L = signbit(a) ? -l : l;
    /* y's binade: A + L in fp64 may round up onto a power of two that y lies
     * below; take the lower binade then, and check below that y's interval lies
     * inside the binade chosen (else MPFR decides). */
    double s = A + L;
    int e = exp_of(s);
    if (L < 0 && s == pow2i(e))
        e--;
    bool sub = e <= in->emin;
    if (sub)
        e = in->emin;
    double h = pow2i(e - in->mant_bits - 1);
    int64_t ka = (int64_t)(A * pow2i(in->mant_bits + 1 - e));
    double t = (A - (double)ka * h) + L;
    double err = (fabs(L) * eps + fabs(t) * 0x1p-52) * (1 + 0x1p-40);
    double lo = (t - err) / h, hi = (t + err) / h; /* exact scalings by a power of two */
    double fl = floor(lo);
    int64_t c = ka + (int64_t)fl;
    int64_t cells = (int64_t)1 << (in->mant_bits + 1); /* half quanta in a binade */
    *ret_c = c;
    *ret_h = h;
    return fl == floor(hi) && lo != fl && c < 2 * cells && (sub || c >= cells);
}

#endif
