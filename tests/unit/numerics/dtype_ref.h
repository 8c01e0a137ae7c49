/* Test oracles for dtype.c, written independently of it: format constants copied
 * from the specs, a decoder written from the value formula with ldexp, and MPFR
 * set to each format's precision and exponent range (mpfr_subnormalize) for
 * correctly rounded encodes. Header-only; included by the dtype test binaries. */
#ifndef NUMVAL_TEST_DTYPE_REF_H
#define NUMVAL_TEST_DTYPE_REF_H

#include <math.h>
#include <mpfr.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/numerics/dtype.h"

/* Binary floating-point formats as their specs state them.
 * IEEE 754-2019 Table 3.5 (binary16/32), bf16 = binary32 with 8 significant bits,
 * OFP8 rev 1.0 Table 1 (e4m3fn: bias 7, max 448, no inf, NaN S.1111.111;
 * e5m2: bias 15, max 57344, IEEE specials), OCP MX v1.0 §5.3 Table 2 (e2m3: bias
 * 1, max 7.5; e3m2: bias 3, max 28; e2m1: bias 1, max 6; no inf, no NaN). */
typedef struct ref_fmt {
    nv_dtype dt;
    const char *name;
    int ebits, mbits, bias;
    double max;
    bool has_inf, has_nan, e4m3fn;
} ref_fmt;

static const ref_fmt REF_FP32 = {NV_DT_FP32, "fp32", 8, 23, 127, 0x1.fffffep127, true, true, false};
static const ref_fmt REF_TF32 = {NV_DT_TF32, "tf32", 8, 10, 127, 0x1.ffcp127, true, true, false};
static const ref_fmt REF_BF16 = {NV_DT_BF16, "bf16", 8, 7, 127, 0x1.fep127, true, true, false};
static const ref_fmt REF_FP16 = {NV_DT_FP16, "fp16", 5, 10, 15, 65504.0, true, true, false};
static const ref_fmt REF_E4M3 = {NV_DT_FP8_E4M3, "e4m3fn", 4, 3, 7, 448.0, false, true, true};
static const ref_fmt REF_E5M2 = {NV_DT_FP8_E5M2, "e5m2", 5, 2, 15, 57344.0, true, true, false};
static const ref_fmt REF_E2M3 = {NV_DT_FP6_E2M3, "e2m3", 2, 3, 1, 7.5, false, false, false};
static const ref_fmt REF_E3M2 = {NV_DT_FP6_E3M2, "e3m2", 3, 2, 3, 28.0, false, false, false};
static const ref_fmt REF_E2M1 = {NV_DT_FP4_E2M1, "e2m1", 2, 1, 1, 6.0, false, false, false};

static inline int ref_emin(const ref_fmt *f)
{
    return 1 - f->bias;
}
static inline double ref_min_normal(const ref_fmt *f)
{
    return ldexp(1.0, ref_emin(f));
}
static inline double ref_min_sub(const ref_fmt *f)
{
    return ldexp(1.0, ref_emin(f) - f->mbits);
}
static inline int ref_nbits(const ref_fmt *f)
{
    return 1 + f->ebits + f->mbits;
}

static inline uint64_t ref_dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double ref_bitsd(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Same value and same sign of zero; any NaN equals any NaN. */
static inline bool ref_same(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Value of an encoding from the formula (-1)^s 2^(E-bias) (1 + F/2^m), subnormals
 * 2^(1-bias) (F/2^m). Returns NaN for NaN encodings (payload not modelled). */
static inline double ref_decode(const ref_fmt *f, uint64_t bits)
{
    int s = (int)((bits >> (f->ebits + f->mbits)) & 1);
    int E = (int)((bits >> f->mbits) & ((1u << f->ebits) - 1));
    uint64_t F = bits & ((1ull << f->mbits) - 1);
    int Emax = (1 << f->ebits) - 1;
    double v;
    if (f->has_inf && E == Emax)
        v = F ? NAN : INFINITY;
    else if (f->e4m3fn && E == Emax && F == (1u << f->mbits) - 1)
        v = NAN;
    else if (E == 0)
        v = ldexp((double)F, 1 - f->bias - f->mbits);
    else
        v = ldexp(1.0 + ldexp((double)F, -f->mbits), E - f->bias);
    return s ? -v : v;
}

/* Largest positive finite encoding. */
static inline uint64_t ref_max_enc(const ref_fmt *f)
{
    if (f->has_inf)
        return ((((1ull << f->ebits) - 1) << f->mbits)) - 1;
    if (f->e4m3fn)
        return (1ull << (f->ebits + f->mbits)) - 2;
    return (1ull << (f->ebits + f->mbits)) - 1;
}

static inline mpfr_rnd_t ref_mpfr_rnd(nv_rounding r)
{
    switch (r) {
    case NV_ROUND_TOWARD_ZERO:
        return MPFR_RNDZ;
    case NV_ROUND_UP:
        return MPFR_RNDU;
    case NV_ROUND_DOWN:
        return MPFR_RNDD;
    default:
        return MPFR_RNDN;
    }
}

/* The infinite result of an overflow in f under saturate: inf, ±max or NaN
 * (OFP8 §4, OCP MX v1.0 §5.3). */
static inline double ref_inf_result(const ref_fmt *f, bool neg, bool saturate)
{
    double v;
    if (saturate || !f->has_nan)
        v = f->max;
    else if (f->has_inf)
        v = INFINITY;
    else
        v = NAN;
    return neg ? -v : v;
}

/* The correctly rounded value of finite x in f under rounding/saturate/ftz.
 * MPFR emulates the format: precision p = mbits + 1, its exponent range set so
 * that MPFR's normal range covers the format's (MPFR's exponent is IEEE's + 1),
 * then mpfr_subnormalize rounds again at the subnormal quantum without double
 * rounding (MPFR manual, mpfr_subnormalize). Overflow per IEEE 754-2019 §7.4:
 * beyond max, nearest and the directed mode pointing away from zero give inf,
 * the others max. e4m3fn's top binade stops at 448 (480 would be 1.1111.111 =
 * NaN), so a result above 448 is an overflow there too. */
static inline double ref_round_mpfr(const ref_fmt *f, double x, nv_rounding rnd, bool saturate,
                                    bool ftz)
{
    int p = f->mbits + 1;
    int emin_ieee = 1 - f->bias;
    int emax_ieee = f->has_inf ? f->bias : (1 << f->ebits) - 1 - f->bias;
    mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_set_emin(emin_ieee - p + 2);
    mpfr_set_emax(emax_ieee + 1);
    mpfr_t y;
    mpfr_init2(y, p);
    mpfr_rnd_t r = ref_mpfr_rnd(rnd);
    int t = mpfr_set_d(y, x, r);
    t = mpfr_check_range(y, t, r);
    mpfr_subnormalize(y, t, r);
    double v = mpfr_get_d(y, MPFR_RNDN);
    mpfr_clear(y);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    bool neg = signbit(x);
    if (fabs(v) > f->max) {
        bool to_inf = rnd == NV_ROUND_NEAREST_EVEN || (rnd == NV_ROUND_UP && !neg) ||
                      (rnd == NV_ROUND_DOWN && neg);
        v = to_inf ? ref_inf_result(f, neg, saturate) : (neg ? -f->max : f->max);
    }
    if (ftz && v != 0 && fabs(v) < ref_min_normal(f))
        v = neg ? -0.0 : 0.0;
    return v;
}

#endif
