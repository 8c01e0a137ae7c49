/* emu transcendental functions by the mode's quality: exact (correctly rounded,
 * refmath.h), libm (the host C library, an independent device) or fast
 * (emu_fast.c). Composite functions (sigmoid, silu, gelu) are one correctly rounded
 * function in exact mode, and in libm/fast mode the sequence of operations a
 * kernel would run, each intermediate rounded to the compute dtype. */
#include <math.h>

#include "emu_internal.h"

static double exact_fn(emu_call *c, nv_fn f, double x, nv_dtype dt)
{
    if (c->rm.rounding == NV_ROUND_STOCHASTIC) {
        double hi, lo;
        nv_ref_eval(f, x, dt, &hi, &lo);
        return emu_round2(c, dt, hi, lo);
    }
    double r = nv_ref_round(f, x, dt, c->rm.rounding);
    return c->plain ? r : emu_round(c, dt, r); /* FTZ and saturation */
}

/* One primitive in fp64 libm (fp64 compute, where the fast kind also uses libm). */
static double libm_double(nv_fn f, double x)
{
    switch (f) {
    case NV_FN_EXP:
        return exp(x);
    case NV_FN_EXP2:
        return exp2(x);
    case NV_FN_EXPM1:
        return expm1(x);
    case NV_FN_LOG:
        return log(x);
    case NV_FN_LOG2:
        return log2(x);
    case NV_FN_LOG1P:
        return log1p(x);
    case NV_FN_SIN:
        return sin(x);
    case NV_FN_COS:
        return cos(x);
    case NV_FN_TANH:
        return tanh(x);
    case NV_FN_ERF:
        return erf(x);
    case NV_FN_SQRT:
        return sqrt(x);
    case NV_FN_RSQRT:
        return 1.0 / sqrt(x);
    case NV_FN_RECIP:
        return 1.0 / x;
    default:
        return NAN; /* composites are built by compose() */
    }
}

static float libm_float(nv_fn f, float x)
{
    switch (f) {
    case NV_FN_EXP:
        return expf(x);
    case NV_FN_EXP2:
        return exp2f(x);
    case NV_FN_EXPM1:
        return expm1f(x);
    case NV_FN_LOG:
        return logf(x);
    case NV_FN_LOG2:
        return log2f(x);
    case NV_FN_LOG1P:
        return log1pf(x);
    case NV_FN_SIN:
        return sinf(x);
    case NV_FN_COS:
        return cosf(x);
    case NV_FN_TANH:
        return tanhf(x);
    case NV_FN_ERF:
        return erff(x);
    case NV_FN_SQRT:
        return sqrtf(x);
    case NV_FN_RSQRT:
        return 1.0f / sqrtf(x);
    case NV_FN_RECIP:
        return 1.0f / x;
    default:
        return NAN;
    }
}

static float fast_float(nv_fn f, float x)
{
    switch (f) {
    case NV_FN_EXP:
        return emu_fast_expf(x);
    case NV_FN_EXP2:
        return emu_fast_exp2f(x);
    case NV_FN_EXPM1: {
        /* Series near 0 (inside tanh's helper) is not exported; e^x - 1 with the
         * usual small-|x| guard: x + x^2/2 + x^3/6 below 2^-7 (error < 2^-28 rel). */
        if (fabsf(x) < 0x1p-7f)
            return x + x * x * (0.5f + x * 0.16666667f);
        return emu_fast_expf(x) - 1.0f;
    }
    case NV_FN_LOG:
        return emu_fast_logf(x);
    case NV_FN_LOG2:
        return emu_fast_log2f(x);
    case NV_FN_LOG1P: {
        /* log1p x = log(u) x / (u - 1), u = 1 + x rounded (Goldberg 1991, Thm 4). */
        float u = 1.0f + x;
        if (u == 1.0f)
            return x;
        if (isinf(u))
            return emu_fast_logf(u);
        return emu_fast_logf(u) * (x / (u - 1.0f));
    }
    case NV_FN_SIN:
        return emu_fast_sinf(x);
    case NV_FN_COS:
        return emu_fast_cosf(x);
    case NV_FN_TANH:
        return emu_fast_tanhf(x);
    case NV_FN_ERF:
        return emu_fast_erff(x);
    case NV_FN_SQRT:
        return x == 0.0f || isinf(x) ? sqrtf(x) : x * emu_fast_rsqrtf(x);
    case NV_FN_RSQRT:
        return emu_fast_rsqrtf(x);
    case NV_FN_RECIP:
        return emu_fast_recipf(x);
    default:
        return NAN;
    }
}

/* A primitive in the libm/fast kinds, rounded to dt. */
static double prim(emu_call *c, nv_fn f, double x, nv_dtype dt)
{
    double r;
    if (dt == NV_DT_FP64)
        r = libm_double(f, x);
    else if (c->m->transcendental == EMU_TR_FAST)
        r = fast_float(f, (float)x);
    else
        r = libm_float(f, (float)x);
    return emu_round(c, dt, r);
}

/* Composite functions as kernels compute them, each step rounded to dt. */
static double compose(emu_call *c, nv_fn f, double x, nv_dtype dt)
{
    switch (f) {
    case NV_FN_SIGMOID: {
        double e = prim(c, NV_FN_EXP, -x, dt);
        return emu_div(c, dt, 1.0, emu_add(c, dt, 1.0, e));
    }
    case NV_FN_SILU: {
        double s = compose(c, NV_FN_SIGMOID, x, dt);
        return emu_mul(c, dt, x, s);
    }
    case NV_FN_GELU_ERF: {
        double k = emu_round(c, dt, 0.70710678118654752); /* 1/sqrt 2 */
        double e = prim(c, NV_FN_ERF, emu_mul(c, dt, x, k), dt);
        double v = emu_mul(c, dt, x, emu_add(c, dt, 1.0, e));
        return emu_mul(c, dt, 0.5, v);
    }
    case NV_FN_GELU_TANH: {
        double k0 = emu_round(c, dt, 0.79788456080286536); /* sqrt(2/pi) */
        double k1 = emu_round(c, dt, 0.044715);
        double x3 = emu_mul(c, dt, emu_mul(c, dt, x, x), x);
        double in = emu_mul(c, dt, k0, emu_add(c, dt, x, emu_mul(c, dt, k1, x3)));
        double t = prim(c, NV_FN_TANH, in, dt);
        double v = emu_mul(c, dt, x, emu_add(c, dt, 1.0, t));
        return emu_mul(c, dt, 0.5, v);
    }
    default:
        return prim(c, f, x, dt);
    }
}

double emu_fn(emu_call *c, nv_fn f, double x, nv_dtype dt)
{
    if (c->m->transcendental == EMU_TR_EXACT)
        return exact_fn(c, f, x, dt);
    return compose(c, f, x, dt);
}
