/* The entries of refmath.h that take no fast path: rounding a value already
 * held as a pair hi + lo (what nv_ref_eval returned), and the MPFR-only
 * rounding the tests compare the fast path with. */
#include <math.h>

#include "refmath_internal.h"

double nv_ref_round_mpfr(nv_fn f, double x, nv_dtype dt, nv_rounding rounding)
{
    double v;
    if ((unsigned)f >= NV_FN_COUNT)
        return NAN;
    nv_round_mode m = {rounding == NV_ROUND_STOCHASTIC ? NV_ROUND_NEAREST_EVEN : rounding, false,
                       false};
    if (rm_special(f, x, &v))
        return nv_dtype_round(dt, v, &m, 0);
    return rm_mpfr_direct(f, x, dt, m.rounding);
}

/* Rounding the pair: hi alone decides unless hi sits on a possible boundary
 * and lo moves the value off it; then hi one fp64 place toward lo lies strictly
 * inside the same rounding cell as hi + lo (boundaries of formats with p <= 51
 * are at least two fp64 places apart). fp64 itself: hi = RN(hi + lo), directed
 * modes step one place by lo's sign. */
double nv_ref_round_pair(double hi, double lo, nv_dtype dt, nv_rounding r)
{
    nv_round_mode m = {r == NV_ROUND_STOCHASTIC ? NV_ROUND_NEAREST_EVEN : r, false, false};
    if (lo == 0 || !isfinite(hi))
        return nv_dtype_round(dt, hi, &m, 0);
    if (dt == NV_DT_FP64) {
        /* (+-DBL_MAX, +-2^970) is the overflow threshold: nearest gives inf. */
        if (m.rounding == NV_ROUND_NEAREST_EVEN && fabs(hi) == 0x1.fffffffffffffp1023 &&
            fabs(lo) >= 0x1p970 && signbit(lo) == signbit(hi))
            return copysign(INFINITY, hi);
        if ((m.rounding == NV_ROUND_UP && lo > 0) ||
            (m.rounding == NV_ROUND_TOWARD_ZERO && hi < 0 && lo > 0))
            return nextafter(hi, INFINITY);
        if ((m.rounding == NV_ROUND_DOWN && lo < 0) ||
            (m.rounding == NV_ROUND_TOWARD_ZERO && hi > 0 && lo < 0))
            return nextafter(hi, -INFINITY);
        return hi;
    }
    const nv_dtype_info *in = nv_dtype_get(dt);
    /* Beyond 2^1000 every other format has overflowed whatever lo says. */
    if (in && fabs(hi) <= 0x1p1000 && rm_on_half_quantum(hi, in))
        hi = nextafter(hi, lo > 0 ? INFINITY : -INFINITY);
    return nv_dtype_round(dt, hi, &m, 0);
}
