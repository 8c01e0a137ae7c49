/* emu rounding: every value the emu produces passes through here, rounded to the
 * dtype of the stage that made it (compute, accumulate, storage) under the mode's
 * rounding direction, saturation and FTZ. */
#include <math.h>
#include <string.h>

#include "emu_internal.h"

double emu_round_slow(emu_call *c, nv_dtype dt, double x)
{
    uint32_t rnd = 0;
    if (c->rm.rounding == NV_ROUND_STOCHASTIC)
        rnd = (uint32_t)(emu_splitmix(&c->sr_state) >> 32);
    return nv_dtype_round(dt, x, &c->rm, rnd);
}

/* hi + lo rounded to fp64 itself: hi is the RNE double of the exact value, so only
 * the directed and stochastic directions move it (IEEE 754-2019 §4.3.2). */
static double round2_fp64(emu_call *c, double hi, double lo)
{
    double r = hi;
    if (lo != 0 && isfinite(hi)) {
        switch (c->rm.rounding) {
        case NV_ROUND_NEAREST_EVEN:
            /* (+-DBL_MAX, +-2^970 or more) reaches the overflow threshold
             * 2^1024 (1 - 2^-54): nearest gives inf (IEEE 754-2019 §7.4). */
            if (fabs(hi) == 0x1.fffffffffffffp1023 && fabs(lo) >= 0x1p970 &&
                signbit(lo) == signbit(hi))
                r = copysign(INFINITY, hi);
            break;
        case NV_ROUND_TOWARD_ZERO:
            if ((hi > 0) != (lo > 0))
                r = nextafter(hi, 0.0);
            break;
        case NV_ROUND_UP:
            if (lo > 0)
                r = nextafter(hi, INFINITY);
            break;
        case NV_ROUND_DOWN:
            if (lo < 0)
                r = nextafter(hi, -INFINITY);
            break;
        case NV_ROUND_STOCHASTIC: {
            /* Away from hi toward lo with probability |lo| / gap. */
            double other = nextafter(hi, lo > 0 ? INFINITY : -INFINITY);
            double p = fabs(lo) / fabs(other - hi);
            double u = (double)(emu_splitmix(&c->sr_state) >> 11) * 0x1p-53;
            if (u < p)
                r = other;
            break;
        }
        }
    }
    /* Saturation and FTZ of fp64 itself. */
    return c->plain ? r : nv_dtype_round(NV_DT_FP64, r, &c->rm, 0);
}

double emu_round2(emu_call *c, nv_dtype dt, double hi, double lo)
{
    if (dt == NV_DT_FP64)
        return round2_fp64(c, hi, lo);
    if (lo == 0 || !isfinite(hi))
        return emu_round(c, dt, hi);
    /* Rounding to odd (Boldo and Melquiond, "Emulation of FMA and correctly
     * rounded sums: proved algorithms using rounding to odd", IEEE TC 2008): of hi
     * and its neighbouring double toward lo, which bracket hi + lo, take the one
     * with an odd last significand bit. Every boundary of a format with at most 51
     * significand bits (its values and the midpoints between them) is an even
     * double, so the odd one lies strictly inside the same gap between boundaries
     * as hi + lo and rounds like it in every direction. Moving to the neighbour
     * whatever hi's parity would be wrong when that neighbour is a boundary (fp32:
     * fma(0x1.8p-74, 0x1.000002p0, -0x1.fffffcp-127) would round up from a tie). */
    uint64_t u;
    memcpy(&u, &hi, sizeof u);
    double odd = (u & 1) ? hi : nextafter(hi, lo > 0 ? INFINITY : -INFINITY);
    return emu_round(c, dt, odd);
}

static inline void two_sum(double a, double b, double *s, double *e)
{
    double x = a + b;
    double bv = x - a;
    double av = x - bv;
    *s = x;
    *e = (a - av) + (b - bv);
}

double emu_add_slow(emu_call *c, nv_dtype dt, double a, double b)
{
    if (c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64)) {
        /* fp32: double rounding through fp64 is innocuous for + since 53 >= 2*24+2
         * (Figueroa, "When is double rounding innocuous?", 1995). */
        return dt == NV_DT_FP32 ? (double)(float)(a + b) : a + b;
    }
    double s, e;
    two_sum(a, b, &s, &e);
    if (s == 0 && e == 0) {
        /* Exact zero: its sign per IEEE 754-2019 §6.3 (-0 only when rounding down,
         * or when both operands are -0). */
        if (a == 0 && b == 0 && signbit(a) && signbit(b))
            return -0.0;
        return c->rm.rounding == NV_ROUND_DOWN ? -0.0 : 0.0;
    }
    return emu_round2(c, dt, s, isfinite(s) ? e : 0);
}

double emu_mul_slow(emu_call *c, nv_dtype dt, double a, double b)
{
    double p = a * b;
    if (c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64))
        return dt == NV_DT_FP32 ? (double)(float)p : p; /* innocuous: 53 >= 2*24+2 */
    if (!isfinite(p) || p == 0)
        return emu_round(c, dt, p);
    return emu_round2(c, dt, p, fma(a, b, -p));
}

double emu_div_slow(emu_call *c, nv_dtype dt, double a, double b)
{
    double q = a / b;
    if (c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64))
        return dt == NV_DT_FP32 ? (double)(float)q : q; /* innocuous: 53 >= 2*24+2 */
    if (!isfinite(q) || q == 0)
        return emu_round(c, dt, q);
    double r = fma(-q, b, a); /* exact remainder a - q b */
    return emu_round2(c, dt, q, r / b);
}

double emu_sqrt(emu_call *c, nv_dtype dt, double a)
{
    double s = sqrt(a);
    if (c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64))
        return dt == NV_DT_FP32 ? (double)(float)s : s; /* innocuous: 53 >= 2*24+2 */
    if (!isfinite(s) || s == 0)
        return emu_round(c, dt, s);
    double r = fma(-s, s, a);
    return emu_round2(c, dt, s, r / (2 * s));
}

double emu_fma(emu_call *c, nv_dtype dt, double a, double b, double s)
{
    double p = a * b;
    double pe = fma(a, b, -p);
    /* fp64 under round to nearest, a finite product beyond fp64's range or a
     * nonzero one below it: the hardware fma rounds a b + s once, as IEEE
     * 754-2019 §5.4.1 asks (a b + inf = inf; fma(2^-1074, -1.3, 2^-1074) = -0,
     * §6.3), where the expansion below would lose the product's low part. */
    if ((dt == NV_DT_FP64 && c->rm.rounding == NV_ROUND_NEAREST_EVEN) ||
        (!isfinite(p) && isfinite(a) && isfinite(b)) || (p == 0 && a != 0 && b != 0))
        return emu_round(c, dt, fma(a, b, s));
    if (!isfinite(p) || !isfinite(s) || p == 0)
        return emu_add(c, dt, p, s);
    double h, e;
    two_sum(p, s, &h, &e);
    double l = e + pe;
    double h2 = h + l; /* renormalize so that |l| <= ulp(h)/2 */
    l = l - (h2 - h);
    if (h2 == 0 && l == 0)
        return emu_add(c, dt, p, s);
    return emu_round2(c, dt, h2, l);
}

bool emu_dtype_contains(nv_dtype a, nv_dtype b)
{
    const nv_dtype_info *ia = nv_dtype_get(a), *ib = nv_dtype_get(b);
    if (!ia || !ib || !ia->is_float || !ib->is_float)
        return a == b;
    return ia->mant_bits >= ib->mant_bits && ia->emax >= ib->emax &&
           ia->min_subnormal <= ib->min_subnormal && ia->max_finite >= ib->max_finite;
}
