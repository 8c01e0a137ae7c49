/* Exact references of the elementwise ops, as hi + lo pairs.
 *
 * - neg, abs, relu, maximum, minimum, cast: the exact value is a double (lo = 0).
 *   cast's exact value is its input: the device's rounding to the target dtype is
 *   then what the tolerance judges (IEEE 754-2019 §5.4.2 convertFormat).
 * - add, sub: TwoSum gives the exact sum as hi + lo; mul: TwoProd (fma) gives the
 *   exact product (the low part is exact unless |x y| < 2^-969, where it can only
 *   matter for fp64 subnormal results, and there hi is already the correctly
 *   rounded fp64 value). fma: TwoProd then two TwoSums give an exact
 *   three-component expansion, renormalised to hi + lo with relative error below
 *   2^-104 (Shewchuk's grow-expansion; Muller et al., Handbook of Floating-Point
 *   Arithmetic, §4.3).
 * - div: for an fp64 output the quotient comes from MPFR at 160 bits (hi = RN(q),
 *   lo = RN(q - hi)): the fp64 remainder method below is only 2^-54 ulp accurate
 *   in fp64, too close to a rounding boundary to judge a 0.5-ulp tolerance. For
 *   narrower outputs q = RN(x / y) and lo = (x - q y) / y with the remainder
 *   x - q y exact by fma (Muller et al. §4.4): relative error below 2^-105, which
 *   is below 2^-81 ulp of any format of at most 24 bits; and when the quotient is
 *   a double (every exact or midpoint quotient of such inputs) the remainder is 0
 *   and the pair is exact.
 * - sqrt, rsqrt, reciprocal and the transcendentals: nv_ref_eval with the output
 *   dtype (refmath.h: close enough to decide every rounding of that dtype);
 *   pow: nv_ref_pow.
 * - maximum / minimum: IEEE 754-2019 §9.6 maximum / minimum (not maximumNumber):
 *   a NaN operand gives NaN, and -0 < +0. This is what torch.maximum and
 *   jax.numpy.maximum do; C's fmax (maximumNumber semantics) would hide NaNs.
 * - relu: max(x, +0) with the same semantics (NaN propagates, relu(-0) = +0). */
#include <math.h>
#include <mpfr.h>

#include "refmath.h"
#include "numval/backend.h"
#include "ref_internal.h"

static double ieee_maximum(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y; /* quiet NaN, payload of a NaN operand */
    if (x == y)
        return signbit(x) ? y : x; /* -0 < +0 */
    return x > y ? x : y;
}

static double ieee_minimum(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return signbit(x) ? x : y;
    return x < y ? x : y;
}

static void exact_fma(double a, double b, double c, double *hi, double *lo)
{
    double ph, pl;
    two_prod(a, b, &ph, &pl);
    if (!isfinite(ph) || !isfinite(c)) {
        *hi = fma(a, b, c);
        *lo = 0;
        return;
    }
    /* grow-expansion: (pl, ph) + c -> e0 + e1 + e2, exact. */
    double q, e0, e1, e2;
    two_sum(c, pl, &q, &e0);
    two_sum(q, ph, &e2, &e1);
    double s, t, h, u;
    two_sum(e1, e0, &s, &t);
    two_sum(e2, s, &h, &u);
    double l = u + t;
    fast_two_sum(h, l, hi, lo);
    /* Where the expansion leaves fp64 (fp64 operands: a sum beyond DBL_MAX, whose
     * two_sum gives inf - inf = NaN) or gives zero (exact, or a product's low part
     * lost below 2^-1074), the hardware fma's one rounding is the answer: the
     * overflow result, and the zero's sign of IEEE 754-2019 §6.3 (-0 for -0 + -0
     * and for a negative result below half the smallest subnormal). */
    if (!isfinite(*hi) || (*hi == 0 && *lo == 0)) {
        *hi = fma(a, b, c);
        *lo = 0;
    }
}

static void exact_div(double x, double y, nv_dtype dt, mpfr_ptr q, double *hi, double *lo)
{
    double h = x / y;
    if (!isfinite(h) || h == 0 || !isfinite(x) || !isfinite(y)) {
        *hi = h;
        *lo = 0;
        return;
    }
    if (dt == NV_DT_FP64) {
        mpfr_set_d(q, x, MPFR_RNDN);
        mpfr_div_d(q, q, y, MPFR_RNDN);
        *hi = mpfr_get_d(q, MPFR_RNDN);
        mpfr_sub_d(q, q, *hi, MPFR_RNDN);
        *lo = mpfr_get_d(q, MPFR_RNDN);
        return;
    }
    dd_div_d(x, 0, y, hi, lo);
}

static int fn_of(int id, const nv_op_attrs *a, nv_fn *ret)
{
    static const struct {
        int id;
        nv_fn fn;
    } map[] = {
        {NVO_SQRT, NV_FN_SQRT},       {NVO_RSQRT, NV_FN_RSQRT}, {NVO_RECIPROCAL, NV_FN_RECIP},
        {NVO_EXP, NV_FN_EXP},         {NVO_EXP2, NV_FN_EXP2},   {NVO_EXPM1, NV_FN_EXPM1},
        {NVO_LOG, NV_FN_LOG},         {NVO_LOG2, NV_FN_LOG2},   {NVO_LOG1P, NV_FN_LOG1P},
        {NVO_SIN, NV_FN_SIN},         {NVO_COS, NV_FN_COS},     {NVO_TANH, NV_FN_TANH},
        {NVO_SIGMOID, NV_FN_SIGMOID}, {NVO_ERF, NV_FN_ERF},     {NVO_SILU, NV_FN_SILU},
    };
    if (id == NVO_GELU) {
        *ret = a->gelu_tanh ? NV_FN_GELU_TANH : NV_FN_GELU_ERF;
        return 0;
    }
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].id == id) {
            *ret = map[i].fn;
            return 0;
        }
    return -1;
}

/* One element: exact value of op(x, y, z) as hi + lo. */
static void eval(int id, nv_fn fn, nv_dtype dt, mpfr_ptr q, double x, double y, double z,
                 double *hi, double *lo)
{
    *lo = 0;
    switch (id) {
    case NVO_NEG:
        *hi = -x;
        return;
    case NVO_ABS:
        *hi = fabs(x);
        return;
    case NVO_CAST:
        *hi = x;
        return;
    case NVO_RELU:
        *hi = ieee_maximum(x, 0.0);
        return;
    case NVO_MAXIMUM:
        *hi = ieee_maximum(x, y);
        return;
    case NVO_MINIMUM:
        *hi = ieee_minimum(x, y);
        return;
    case NVO_ADD:
        two_sum(x, y, hi, lo);
        break;
    case NVO_SUB:
        two_sum(x, -y, hi, lo);
        break;
    case NVO_MUL:
        two_prod(x, y, hi, lo);
        break;
    case NVO_DIV:
        exact_div(x, y, dt, q, hi, lo);
        break;
    case NVO_FMA:
        exact_fma(x, y, z, hi, lo);
        break;
    case NVO_POW:
        nv_ref_pow(x, y, dt, hi, lo);
        break;
    default:
        nv_ref_eval(fn, x, dt, hi, lo);
        break;
    }
    if (!isfinite(*hi) || !isfinite(*lo))
        *lo = 0;
}

int nvo_ref_elementwise(int id, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                        nv_tensor *out_hi, nv_tensor *out_lo, nv_tensor *abs_sum)
{
    nv_fn fn = NV_FN_EXP;
    if (fn_of(id, a, &fn) < 0 && id != NVO_NEG && id != NVO_ABS && id != NVO_CAST &&
        id != NVO_RELU && id != NVO_MAXIMUM && id != NVO_MINIMUM && id != NVO_ADD &&
        id != NVO_SUB && id != NVO_MUL && id != NVO_DIV && id != NVO_FMA && id != NVO_POW)
        return NV_E_INVALID;
    nv_dtype dt = out_hi->dtype;
    mpfr_t q;
    mpfr_init2(q, 160);
    if (n_in == 1 && id != NVO_POW && fn_of(id, a, &fn) == 0 && nv_tensor_dense(in[0]) &&
        nv_tensor_dense(out_hi) && out_lo && nv_tensor_dense(out_lo) &&
        (!abs_sum || nv_tensor_dense(abs_sum))) {
        /* eval()'s default branch over the whole tensor, one dispatch. */
        double *hi = out_hi->data + out_hi->offset, *lo = out_lo->data + out_lo->offset;
        nv_ref_eval_n(fn, in[0]->data + in[0]->offset, out_hi->numel, dt, hi, lo);
        if (!abs_sum) /* the same steps without the branch, so that gcc vectorises them */
            for (int64_t i = 0; i < out_hi->numel; i++)
                lo[i] = isfinite(hi[i]) & isfinite(lo[i]) ? lo[i] : 0;
        for (int64_t i = 0; abs_sum && i < out_hi->numel; i++) {
            if (!isfinite(hi[i]) || !isfinite(lo[i]))
                lo[i] = 0;
            abs_sum->data[abs_sum->offset + i] = fabs(hi[i]);
        }
        mpfr_clear(q);
        return 0;
    }
    bool din[3] = {false, false, false};
    for (int k = 0; k < n_in && k < 3; k++)
        din[k] = nv_tensor_dense(in[k]);
    bool dhi = nv_tensor_dense(out_hi), dlo = out_lo && nv_tensor_dense(out_lo);
    bool dabs = abs_sum && nv_tensor_dense(abs_sum);
    for (int64_t i = 0; i < out_hi->numel; i++) {
        double v[3] = {0, 0, 0};
        for (int k = 0; k < n_in && k < 3; k++)
            v[k] = in[k]->data[nv_tensor_offset_lin(in[k], din[k], i)];
        double hi, lo;
        eval(id, fn, dt, q, v[0], v[1], v[2], &hi, &lo);
        out_hi->data[nv_tensor_offset_lin(out_hi, dhi, i)] = hi;
        if (out_lo)
            out_lo->data[nv_tensor_offset_lin(out_lo, dlo, i)] = lo;
        if (abs_sum)
            abs_sum->data[nv_tensor_offset_lin(abs_sum, dabs, i)] = fabs(hi);
    }
    mpfr_clear(q);
    return 0;
}
