/* Fast transcendental approximations of the kind accelerators ship (special
 * function units, "fast math" intrinsics): range reduction plus a short
 * polynomial, evaluated in fp32 arithmetic. They are deliberately not correctly
 * rounded; their stated bounds (emu_fast_bounds) are checked by test-emu against
 * glibc's fp64 functions on a dense sample of fp32 inputs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "emu_internal.h"

/* 2^x: x = k + f with k = rint(x), |f| <= 1/2; 2^f by its Taylor polynomial of
 * degree 6 (coefficients (ln 2)^j / j!, truncation below 1.2e-7 relative). */
float emu_fast_exp2f(float x)
{
    if (isnan(x))
        return x;
    if (x >= 128.0f)
        return INFINITY;
    if (x < -151.0f)
        return 0.0f;
    float k = rintf(x);
    float f = x - k;
    float p = 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    return ldexpf(p, (int)k);
}

/* e^x = 2^(x log2 e): the product's rounding error grows with |x|, as in the
 * hardware ex2-based exp (CUDA __expf documents 2 + 1.16|x| ulp). */
float emu_fast_expf(float x)
{
    return emu_fast_exp2f(x * 1.44269504f);
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1),
 * by its series to s^7 (|s| <= 0.1716: truncation below 4e-8 relative). */
float emu_fast_logf(float x)
{
    if (isnan(x) || x < 0.0f)
        return x < 0.0f ? NAN : x;
    if (x == 0.0f)
        return -INFINITY;
    if (isinf(x))
        return x;
    int e;
    float m = frexpf(x, &e); /* [0.5, 1) */
    if (m < 0.70710678f) {
        m *= 2.0f;
        e -= 1;
    }
    float s = (m - 1.0f) / (m + 1.0f);
    float s2 = s * s;
    float p = 0.14285715f;
    p = p * s2 + 0.2f;
    p = p * s2 + 0.33333334f;
    p = p * s2 + 1.0f;
    float lm = 2.0f * s * p;
    return (float)e * 0.69314718f + lm;
}

float emu_fast_log2f(float x)
{
    return emu_fast_logf(x) * 1.44269504f;
}

/* e^x - 1: Taylor to degree 8 for |x| <= 1/2 (no cancellation near 0), e^x - 1
 * through the fast exp beyond. */
static float fast_expm1f(float x)
{
    if (fabsf(x) > 0.5f)
        return emu_fast_expf(x) - 1.0f;
    float p = 2.4801587e-5f;
    p = p * x + 1.9841270e-4f;
    p = p * x + 1.3888889e-3f;
    p = p * x + 8.3333333e-3f;
    p = p * x + 4.1666667e-2f;
    p = p * x + 1.6666667e-1f;
    p = p * x + 0.5f;
    return x + x * x * p;
}

/* tanh x = t / (t + 2) with t = e^(2x) - 1; |x| >= 9 rounds to +-1 in fp32. */
float emu_fast_tanhf(float x)
{
    if (isnan(x))
        return x;
    if (fabsf(x) >= 9.0f)
        return copysignf(1.0f, x);
    float t = fast_expm1f(2.0f * x);
    return t / (t + 2.0f);
}

/* erf: Maclaurin series to x^13 for |x| < 1/2; beyond, Abramowitz & Stegun 7.1.26
 * (|error| <= 1.5e-7 absolute) with the fast exp; +-1 past 3.92. */
float emu_fast_erff(float x)
{
    if (isnan(x))
        return x;
    float ax = fabsf(x);
    if (ax < 0.5f) {
        float x2 = x * x;
        float p = 1.2055332e-4f; /* (2/sqrt pi) (-1)^n / (n! (2n+1)), n = 6 ... 0 */
        p = p * x2 - 8.5483259e-4f;
        p = p * x2 + 5.2239776e-3f;
        p = p * x2 - 2.6866171e-2f;
        p = p * x2 + 1.1283792e-1f;
        p = p * x2 - 3.7612639e-1f;
        p = p * x2 + 1.1283792f;
        return x * p;
    }
    if (ax >= 3.92f)
        return copysignf(1.0f, x);
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    float y = 1.0f - p * t * emu_fast_expf(-ax * ax);
    return copysignf(y, x);
}

/* sin/cos: x = k pi/2 + r, reduced Cody-Waite style with pi/2 as two fp64 parts
 * (|r| <= pi/4; accurate while k < 2^30), Taylor polynomials on r to degree 9
 * (sin) and 10 (cos) in fp32, quadrant by k mod 4. */
static void fast_sincos(float x, float *ret_s, float *ret_c)
{
    double k = rint((double)x * 0.63661977236758134);
    double rd = fma(-k, 1.5707963267948966, (double)x);
    float r = (float)fma(-k, 6.123233995736766e-17, rd);
    float r2 = r * r;
    float s = 2.7557319e-6f;
    s = s * r2 - 1.9841270e-4f;
    s = s * r2 + 8.3333333e-3f;
    s = s * r2 - 1.6666667e-1f;
    s = r + r * r2 * s;
    float c = -2.7557319e-7f;
    c = c * r2 + 2.4801587e-5f;
    c = c * r2 - 1.3888889e-3f;
    c = c * r2 + 4.1666667e-2f;
    c = c * r2 - 0.5f;
    c = 1.0f + r2 * c;
    int q = (int)fmod(k, 4.0);
    if (q < 0)
        q += 4;
    switch (q) {
    case 0:
        *ret_s = s;
        *ret_c = c;
        break;
    case 1:
        *ret_s = c;
        *ret_c = -s;
        break;
    case 2:
        *ret_s = -s;
        *ret_c = -c;
        break;
    default:
        *ret_s = -c;
        *ret_c = s;
        break;
    }
}

float emu_fast_sinf(float x)
{
    if (!isfinite(x))
        return NAN;
    float s, c;
    fast_sincos(x, &s, &c);
    return s;
}

float emu_fast_cosf(float x)
{
    if (!isfinite(x))
        return NAN;
    float s, c;
    fast_sincos(x, &s, &c);
    return c;
}

/* 1/sqrt x: m 2^e with e even and m in [1/2, 2), a linear first guess and four
 * Newton steps y <- y (3 - m y^2) / 2 in fp32 (quadratic convergence). */
float emu_fast_rsqrtf(float x)
{
    if (isnan(x) || x < 0.0f)
        return NAN;
    if (x == 0.0f)
        return copysignf(INFINITY, x);
    if (isinf(x))
        return 0.0f;
    int e;
    float m = frexpf(x, &e);
    if (e & 1) {
        m *= 2.0f;
        e -= 1;
    }
    float y = 1.6f - 0.45f * m;
    for (int i = 0; i < 4; i++)
        y = y * (1.5f - 0.5f * m * y * y);
    return ldexpf(y, -e / 2);
}

/* 1/x: m 2^e with m in [1/2, 1), the first guess 48/17 - 32/17 m (error <= 1/17)
 * and three Newton steps y <- y (2 - m y). */
float emu_fast_recipf(float x)
{
    if (isnan(x))
        return x;
    if (x == 0.0f)
        return copysignf(INFINITY, x);
    if (isinf(x))
        return copysignf(0.0f, x);
    int e;
    float m = frexpf(fabsf(x), &e);
    float y = 2.8235294f - 1.8823529f * m;
    for (int i = 0; i < 3; i++)
        y = y * (2.0f - m * y);
    return copysignf(ldexpf(y, -e), x);
}

/* Bounds: the maximum measured by test-emu's sampling (every 61st fp32 bit pattern,
 * against glibc's fp64 functions), times about 1.4 for what the sample missed;
 * exp's grows with |x| (fp32 rounding of x log2 e: about |x|/2 + 3 ulp). */
static const emu_fast_bound bounds[] = {
    {"exp2", 4, "all fp32 with normal results"},
    {"exp", 128, "all fp32 with normal results"},
    {"log", 4, "all positive fp32"},
    {"log2", 6, "all positive fp32"},
    {"tanh", 8, "all fp32 with normal results"},
    {"erf", 8, "all fp32 with normal results"},
    {"sin", 3, "|x| <= 2^16 with |result| >= 2^-20 (no bound beyond)"},
    {"cos", 3, "|x| <= 2^16 with |result| >= 2^-20 (no bound beyond)"},
    {"rsqrt", 4, "all positive fp32"},
    {"reciprocal", 3, "all fp32 with normal results"},
};

const emu_fast_bound *emu_fast_bounds(int *ret_n)
{
    *ret_n = (int)(sizeof(bounds) / sizeof(bounds[0]));
    return bounds;
}
