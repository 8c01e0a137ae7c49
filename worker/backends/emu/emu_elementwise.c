/* emu elementwise ops: unary, binary, fma and cast. Inputs are converted to the
 * compute dtype, the op runs there (basic operations correctly rounded per IEEE
 * 754-2019 §5.4.1, functions per the transcendental kind), and the result leaves in
 * the compute dtype; emu.c rounds it to storage and encodes it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emu_internal.h"

typedef enum elt {
    E_NEG,
    E_ABS,
    E_RELU,
    E_SQRT,
    E_RSQRT,
    E_RECIP,
    E_EXP,
    E_EXP2,
    E_EXPM1,
    E_LOG,
    E_LOG2,
    E_LOG1P,
    E_SIN,
    E_COS,
    E_TANH,
    E_SIGMOID,
    E_ERF,
    E_GELU,
    E_SILU,
    E_ADD,
    E_SUB,
    E_MUL,
    E_DIV,
    E_POW,
    E_MAXIMUM,
    E_MINIMUM,
    E_FMA,
    E_CAST,
} elt;

static const struct {
    const char *name;
    elt e;
    nv_fn fn; /* functions evaluated through emu_fn */
} elts[] = {
    {"neg", E_NEG, NV_FN_COUNT},         {"abs", E_ABS, NV_FN_COUNT},
    {"relu", E_RELU, NV_FN_COUNT},       {"sqrt", E_SQRT, NV_FN_SQRT},
    {"rsqrt", E_RSQRT, NV_FN_RSQRT},     {"reciprocal", E_RECIP, NV_FN_RECIP},
    {"exp", E_EXP, NV_FN_EXP},           {"exp2", E_EXP2, NV_FN_EXP2},
    {"expm1", E_EXPM1, NV_FN_EXPM1},     {"log", E_LOG, NV_FN_LOG},
    {"log2", E_LOG2, NV_FN_LOG2},        {"log1p", E_LOG1P, NV_FN_LOG1P},
    {"sin", E_SIN, NV_FN_SIN},           {"cos", E_COS, NV_FN_COS},
    {"tanh", E_TANH, NV_FN_TANH},        {"sigmoid", E_SIGMOID, NV_FN_SIGMOID},
    {"erf", E_ERF, NV_FN_ERF},           {"gelu", E_GELU, NV_FN_GELU_ERF},
    {"silu", E_SILU, NV_FN_SILU},        {"add", E_ADD, NV_FN_COUNT},
    {"sub", E_SUB, NV_FN_COUNT},         {"mul", E_MUL, NV_FN_COUNT},
    {"div", E_DIV, NV_FN_COUNT},         {"pow", E_POW, NV_FN_COUNT},
    {"maximum", E_MAXIMUM, NV_FN_COUNT}, {"minimum", E_MINIMUM, NV_FN_COUNT},
    {"fma", E_FMA, NV_FN_COUNT},         {"cast", E_CAST, NV_FN_COUNT},
};

static int find_elt(const char *name, elt *ret_e, nv_fn *ret_fn)
{
    for (size_t i = 0; i < sizeof(elts) / sizeof(elts[0]); i++)
        if (!strcmp(elts[i].name, name)) {
            *ret_e = elts[i].e;
            *ret_fn = elts[i].fn;
            return 0;
        }
    return -1;
}

/* pow in the mode's quality. Exact: correctly rounded x^y (refmath.h). */
static double emu_pow(emu_call *c, double x, double y, nv_dtype dt)
{
    switch (c->m->transcendental) {
    case EMU_TR_EXACT: {
        double hi, lo;
        nv_ref_pow(x, y, dt, &hi, &lo);
        return emu_round2(c, dt, hi, lo);
    }
    case EMU_TR_LIBM:
        return emu_round(c, dt, dt == NV_DT_FP64 ? pow(x, y) : (double)powf((float)x, (float)y));
    case EMU_TR_FAST:
        /* x^y = 2^(y log2 x) for x > 0, the special cases as C99 F.10.4.4 says. */
        if (dt == NV_DT_FP64 || !(x > 0) || !isfinite(x) || !isfinite(y))
            return emu_round(c, dt,
                             dt == NV_DT_FP64 ? pow(x, y) : (double)powf((float)x, (float)y));
        return emu_round(c, dt, emu_fast_exp2f((float)y * emu_fast_log2f((float)x)));
    }
    return NAN;
}

/* IEEE 754-2019 §9.6 maximum/minimum: NaN if either is NaN, -0 < +0. */
static double ieee_max(double a, double b, bool want_max)
{
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    if (a == b)
        return want_max ? (signbit(a) ? b : a) : (signbit(a) ? a : b);
    return want_max ? (a > b ? a : b) : (a < b ? a : b);
}

/* Where the one rounding of a correctly rounded function goes: straight to the
 * storage dtype when compute holds every storage value (the function unit writes
 * the destination format), else to compute (emu.c rounds to storage after). */
static nv_dtype fn_target(const emu_call *c)
{
    if (c->m->transcendental == EMU_TR_EXACT && emu_dtype_contains(c->compute, c->storage))
        return c->storage;
    return c->compute;
}

static double unary(emu_call *c, elt e, nv_fn fn, double x, nv_dtype dt)
{
    switch (e) {
    case E_NEG:
        return -x;
    case E_ABS:
        return fabs(x);
    case E_RELU:
        return isnan(x) ? x : (x > 0 ? x : 0.0);
    case E_SQRT:
        if (c->m->transcendental == EMU_TR_FAST)
            return emu_fn(c, fn, x, c->compute);
        return emu_sqrt(c, dt, x); /* a basic operation: correctly rounded */
    case E_RECIP:
        if (c->m->transcendental == EMU_TR_FAST)
            return emu_fn(c, fn, x, c->compute);
        return emu_div(c, dt, 1.0, x);
    default:
        return emu_fn(c, fn, x, dt);
    }
}

static double binary(emu_call *c, elt e, double x, double y, nv_dtype dt)
{
    switch (e) {
    case E_ADD:
        return emu_add(c, dt, x, y);
    case E_SUB:
        return emu_add(c, dt, x, -y);
    case E_MUL:
        return emu_mul(c, dt, x, y);
    case E_DIV:
        return emu_div(c, dt, x, y);
    case E_POW:
        return emu_pow(c, x, y, dt);
    case E_MAXIMUM:
        return ieee_max(x, y, true);
    default:
        return ieee_max(x, y, false);
    }
}

/* Whether unary() of e goes to emu_fn's exact, plain, non-stochastic path. */
static bool batch_exact(const emu_call *c, elt e)
{
    if (e == E_NEG || e == E_ABS || e == E_RELU || e == E_SQRT || e == E_RECIP)
        return false;
    return c->m->transcendental == EMU_TR_EXACT && c->plain &&
           c->rm.rounding != NV_ROUND_STOCHASTIC;
}

int emu_elementwise(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
                    const nv_tensor *const *in, double *out, char *err, size_t errlen)
{
    elt e;
    nv_fn fn;
    if (find_elt(op->name, &e, &fn) < 0) {
        snprintf(err, errlen, "emu has no elementwise kernel for op '%s'", op->name);
        return NV_E_UNSUPPORTED;
    }
    int64_t n = in[0]->numel;
    if (e == E_CAST) {
        /* A conversion rounds once, to the target (IEEE 754-2019 §5.4.2). */
        for (int64_t i = 0; i < n; i++)
            out[i] = emu_round(c, a->cast_to, in[0]->data[i]);
        return NV_OK;
    }
    nv_dtype cd = c->compute;
    bool conv[3];
    for (int k = 0; k < n_in && k < 3; k++)
        conv[k] = !emu_dtype_contains(cd, in[k]->dtype);
    /* Functions (and pow) round where fn_target says; basic arithmetic in compute
     * (rounding again to bf16/fp16 storage is innocuous for add, sub, mul, div and
     * sqrt from fp32: 24 >= 2p + 2, Figueroa 1995). */
    nv_dtype dt = (n_in == 1 || e == E_POW) ? fn_target(c) : cd;
    if (e == E_GELU && a->gelu_tanh)
        fn = NV_FN_GELU_TANH;
    if (n_in == 1 && !conv[0] && batch_exact(c, e)) {
        /* emu_fn's exact path per element is nv_ref_round (plain: no FTZ or
         * saturation after it), which is nv_ref_round_n of one element: one call
         * over the array gives the same values. */
        nv_ref_round_n(fn, in[0]->data, n, dt, c->rm.rounding, out);
        return NV_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double x = in[0]->data[i];
        if (conv[0])
            x = emu_round(c, cd, x);
        if (n_in == 1) {
            out[i] = unary(c, e, fn, x, dt);
            continue;
        }
        double y = in[1]->data[i];
        if (conv[1])
            y = emu_round(c, cd, y);
        if (e != E_FMA) {
            out[i] = binary(c, e, x, y, dt);
            continue;
        }
        double z = in[2]->data[i];
        if (conv[2])
            z = emu_round(c, cd, z);
        /* fma=off: the product is rounded before the add (two roundings). */
        out[i] = c->m->fma ? emu_fma(c, cd, x, y, z) : emu_add(c, cd, emu_mul(c, cd, x, y), z);
    }
    return NV_OK;
}
