/* Shipped default tolerances for every op x output dtype, each with its reason
 * (docs/TOLERANCES.md explains every entry; keep the two in step).
 *
 * Classes:
 * - exact: neg, abs, relu, maximum, minimum, max: the result is an input value
 *   (or its negation / absolute value), representable in the dtype: 0 ulp.
 * - correctly rounded: add, sub, mul, div, sqrt, reciprocal, cast: IEEE 754-2019
 *   §5.4.1 / §5.4.2 require correct rounding: 0.5 ulp. A device computing in a
 *   wider format and rounding again stays correctly rounded when the wide format
 *   has p' >= 2p + 2 bits (Figueroa, "When is double rounding innocuous?", 1995),
 *   which fp32 (24) satisfies for bf16, fp16, tf32 and fp8.
 * - fma: 0.5 ulp in fp64 and fp32; 1 ulp in narrower formats, which devices
 *   compute in fp32 and round again: Figueroa's theorem does not cover fma (an
 *   exact product that is a midpoint of the narrow format plus a tiny addend is
 *   rounded to the midpoint first, then to even).
 * - transcendental (exp .. silu, rsqrt, pow): 1 ulp, faithful rounding: the result
 *   is one of the two dtype values around the exact value. IEEE 754-2019 §9.2 only
 *   recommends correct rounding; faithful is what good vector libraries (glibc's
 *   fp32 functions, CUDA's accurate intrinsics for most functions) achieve, and a
 *   fast polynomial with several ulps of error fails it.
 * - reductions and matmul: Higham's bound |got - exact| <= c g(n) u abs_sum + ulp/2
 *   (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §4.2 for
 *   sums, §3.5 for inner products), c = 2, g(n) = n - 1 (recursive summation, the
 *   worst deterministic order, so it also holds for pairwise, tree, split-k and
 *   random orders), u the unit roundoff of fp32 accumulation (fp64 for fp64
 *   outputs; matmul: its "acc" dtype), abs_sum as nv_op_reference defines it. */
#include <stdio.h>
#include <string.h>

#include "numval/backend.h"
#include "ops_internal.h"

typedef enum tol_class {
    TC_EXACT,
    TC_ROUNDED,
    TC_FMA,
    TC_TRANSCENDENTAL,
    TC_REDUCTION,
    TC_COMPOSED,
    TC_MATMUL,
} tol_class;

static tol_class class_of(int id)
{
    switch (id) {
    case NVO_NEG:
    case NVO_ABS:
    case NVO_RELU:
    case NVO_MAXIMUM:
    case NVO_MINIMUM:
    case NVO_MAX:
        return TC_EXACT;
    case NVO_ADD:
    case NVO_SUB:
    case NVO_MUL:
    case NVO_DIV:
    case NVO_SQRT:
    case NVO_RECIPROCAL:
    case NVO_CAST:
        return TC_ROUNDED;
    case NVO_FMA:
        return TC_FMA;
    case NVO_SUM:
    case NVO_MEAN:
    case NVO_VAR:
    case NVO_NORM2:
        return TC_REDUCTION;
    case NVO_LOGSUMEXP:
    case NVO_SOFTMAX:
    case NVO_LOG_SOFTMAX:
    case NVO_LAYER_NORM:
    case NVO_RMS_NORM:
    case NVO_CROSS_ENTROPY:
        return TC_COMPOSED;
    case NVO_MATMUL:
    case NVO_BMM:
        return TC_MATMUL;
    default:
        return TC_TRANSCENDENTAL;
    }
}

static void set_reason(nv_tolerance *t, nv_reason_code code, const char *fmt, const char *a,
                       const char *b)
{
    t->reason_code = code;
    snprintf(t->reason, sizeof t->reason, fmt, a, b);
}

static bool narrow(nv_dtype dt)
{
    return dt != NV_DT_FP64 && dt != NV_DT_FP32;
}

static void fill_bound(nv_tolerance *t, const nv_op_def *op, const nv_op_attrs *a, nv_dtype dt,
                       tol_class tc)
{
    t->metric = NV_TOL_BOUND;
    t->c = 2;
    t->growth = NV_GROWTH_N;
    t->has_u_dtype = 1;
    t->u_dtype = dt == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    if (tc == TC_MATMUL) {
        t->u_dtype = a->acc_dtype;
        set_reason(t, NV_REASON_REDUCTION_LENGTH,
                   "Higham §3.5 inner-product bound gamma_K |A||B| for K products accumulated "
                   "in %s (the op's acc dtype), any summation order; c = 2 covers the "
                   "second-order term; plus half an ulp of the %s output rounding",
                   nv_dtype_name(a->acc_dtype), nv_dtype_name(dt));
    } else if (tc == TC_REDUCTION) {
        set_reason(t, NV_REASON_REDUCTION_LENGTH,
                   "Higham §4.2 recursive-summation bound (n-1) u sum|x_i| with u of %s "
                   "accumulation (valid for every summation order); c = 2 covers the "
                   "second-order term; plus half an ulp of the %s output rounding",
                   nv_dtype_name(t->u_dtype), nv_dtype_name(dt));
    } else {
        set_reason(t, NV_REASON_REDUCTION_LENGTH,
                   "first-order error analysis of the composed reduction (sum of n terms in "
                   "%s, Higham §4.2, plus exp/log/sqrt/division steps, each counted as one "
                   "more term); abs_sum carries the conditioning; plus half an ulp of the %s "
                   "output rounding",
                   nv_dtype_name(t->u_dtype), nv_dtype_name(dt));
    }
    (void)op;
}

int nv_op_default_tolerance(const nv_op_def *op, const nv_op_attrs *a, nv_dtype dt,
                            nv_tolerance *ret)
{
    int id = nvo_op_id(op);
    if (id < 0 || !a || !ret)
        return NV_E_INVALID;
    if (!nvo_dtype_supported(op, dt))
        return NV_E_DTYPE;
    nv_tolerance t;
    memset(&t, 0, sizeof t);
    t.metric = NV_TOL_ULP;
    snprintf(t.source, sizeof t.source, "default");
    const char *dn = nv_dtype_name(dt);
    tol_class tc = class_of(id);
    switch (tc) {
    case TC_EXACT:
        t.max_ulp = 0;
        set_reason(&t, NV_REASON_DTYPE_PRECISION,
                   "%s returns an input value (or its negation or magnitude), which is "
                   "representable in %s: no rounding, so no error is allowed",
                   op->name, dn);
        break;
    case TC_ROUNDED:
        t.max_ulp = 0.5;
        set_reason(&t, NV_REASON_DTYPE_PRECISION,
                   "IEEE 754-2019 §5.4 requires %s to be correctly rounded in %s (0.5 ulp, "
                   "round to nearest even); computing in fp32 and rounding again is still "
                   "correct (Figueroa 1995: p' >= 2p+2)",
                   op->name, dn);
        break;
    case TC_FMA:
        t.max_ulp = narrow(dt) ? 1 : 0.5;
        set_reason(&t, NV_REASON_DTYPE_PRECISION,
                   narrow(dt) ? "%s in %s is computed in fp32 and rounded again; double "
                                "rounding is not innocuous for fma (Figueroa 1995 covers only "
                                "+-*/ and sqrt), so 1 ulp (faithful) instead of 0.5"
                              : "IEEE 754-2019 §5.4.1 requires %s to round once, correctly, "
                                "in %s: 0.5 ulp",
                   op->name, dn);
        break;
    case TC_TRANSCENDENTAL:
        t.max_ulp = 1;
        set_reason(&t, NV_REASON_APPROXIMATION_ERROR,
                   "%s is approximated by the device's math library; 1 ulp in %s is "
                   "faithful rounding (IEEE 754-2019 §9.2 recommends but does not require "
                   "correct rounding), the bound of good vendor libraries",
                   op->name, dn);
        break;
    default:
        fill_bound(&t, op, a, dt, tc);
        break;
    }
    *ret = t;
    return 0;
}
