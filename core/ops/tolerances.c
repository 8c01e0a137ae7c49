/* Shipped default tolerances for every op x output dtype, each with its reason
 * (docs/TOLERANCES.md explains every entry; keep the two in step).
 *
 * Classes:
 * - exact: neg, abs, relu, maximum, minimum, max, transpose, embedding,
 *   split_heads, merge_heads, cache_write, flatten, max_pool2d: the
 *   result is an input value (or its negation / absolute value), representable
 *   in the dtype: 0 ulp.
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
 * - sum, mean, var, norm2, matmul, bmm, conv2d (n = K = C/groups kh kw + 1),
 *   avg_pool2d (n = kernel^2 + 1, mean's: the window's sum and one division):
 *   Higham & Mary's probabilistic bound
 *   (SIAM J. Sci. Comput. 41(5), 2019, Thm. 3.1) |got - exact| <= gamma~_n(lambda)
 *   abs_sum + ulp/2, growth "probabilistic" with c = 1: lambda is set per case for
 *   a false-failure probability of at most 1e-9 under independent (or
 *   mean-independent: Connolly, Higham & Mary 2021) rounding errors (compare.c bound_setup), and the allowance never exceeds the
 *   deterministic 2 (n - 1) u abs_sum + ulp/2 (Higham, Accuracy and Stability of
 *   Numerical Algorithms, 2nd ed., §4.2 for sums, §3.5 for inner products), which
 *   the result reports beside it. Valid for every summation order.
 * - the composed reductions (logsumexp .. cross_entropy): the deterministic
 *   first-order bound c g(n) u abs_sum + ulp/2, c = 2, g(n) = n - 1: their abs_sum
 *   weighs each step's error by a worst-case first-order analysis (the
 *   exponential's argument, the division, the square root), not by a model of
 *   independent rounding errors.
 * - rotary_embedding: the bound metric with n = 2, c = 2, u of the output dtype
 *   and abs_sum the weight of the first-order error model of a framework's
 *   rope (angle in fp32, tables in the output dtype; core/ref/ref_rotary.c).
 * u is the unit roundoff of fp32 accumulation (fp64 for fp64 outputs; matmul: its
 * "acc" dtype), abs_sum as nv_op_reference defines it. */
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
    TC_SELECT,
    TC_ROTARY,
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
    case NVO_TRANSPOSE:
    case NVO_EMBEDDING:
    case NVO_SPLIT_HEADS:
    case NVO_MERGE_HEADS:
    case NVO_CACHE_WRITE:
    case NVO_FLATTEN:
    case NVO_MAX_POOL2D:
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
    case NVO_CONV2D:     /* a dot product of K = C/groups kh kw terms per output, as matmul's */
    case NVO_AVG_POOL2D: /* a window's mean, as mean's */
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
    case NVO_ARGMAX:
    case NVO_SAMPLE:
        return TC_SELECT;
    case NVO_ROTARY_EMBEDDING:
        return TC_ROTARY;
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
    if (tc == TC_MATMUL || tc == TC_REDUCTION) {
        /* The reason states the probability and its assumption (docs/TOLERANCES.md
         * "Reductions and matmul"); it must stay below NV_TOL_REASON_MAX. */
        t->c = 1;
        t->growth = NV_GROWTH_PROBABILISTIC;
        if (tc == TC_MATMUL)
            t->u_dtype = a->acc_dtype;
        set_reason(t, NV_REASON_REDUCTION_LENGTH,
                   "Higham & Mary 2019 (SISC 41(5), Thm 3.1) probabilistic bound "
                   "gamma~_n(lambda) sum|terms|, gamma~ = exp(lambda sqrt(n) u + n u^2/(1-u)) "
                   "- 1, u of %s accumulation, any order; lambda per case for a false-failure "
                   "probability <= 1e-9 (union bound over outputs x terms) if rounding errors "
                   "are independent; capped by the worst case 2(n-1)u sum|terms| (Higham "
                   "§4.2), reported beside it; systematic data-dependent rounding may exceed "
                   "it; plus half an ulp of %s",
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
    /* a selection's output is int32 whatever its input's float dtype */
    if (op->kind == NV_OPK_SELECT ? dt != NV_DT_INT32 : !nvo_dtype_supported(op, dt))
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
    case TC_SELECT:
        t.max_ulp = 0;
        if (id == NVO_ARGMAX)
            set_reason(&t, NV_REASON_DTYPE_PRECISION,
                       "%s returns the index of an input value (ties: the lowest index; the "
                       "first NaN): a comparison of exact inputs, no rounding, so the index "
                       "must be the exact one%s",
                       op->name, "");
        else
            set_reason(&t, NV_REASON_APPROXIMATION_ERROR,
                       "%s's token is a function of u = Philox(seed, offset + row) and the exact "
                       "CDF: it must be the exact token, or the reference's alternative where u "
                       "(or top_p) lies within delta = 2 (V + 3 + 2 max|x/T|) u_c of a CDF "
                       "boundary (the first-order error of a CDF computed in %s, Higham §3.1, "
                       "§4.2, doubled): docs/TOLERANCES.md \"Selections\"",
                       op->name, "fp32 (fp64 for fp64 logits)");
        break;
    case TC_ROTARY:
        /* abs_sum is the error model's weight (core/ref/ref_rotary.c,
         * docs/TOLERANCES.md "Rotary embedding"); n = 2 makes g(n) = 1 */
        t.metric = NV_TOL_BOUND;
        t.c = 2;
        t.growth = NV_GROWTH_N;
        t.has_u_dtype = 1;
        t.u_dtype = dt;
        set_reason(&t, NV_REASON_APPROXIMATION_ERROR,
                   "first-order model of a framework's rope, doubled: the angle p theta^(-2k/hd) "
                   "computed in fp32 (fp64 for fp64) as HF transformers / GPT-NeoX do "
                   "(relative error (ln theta + 4) u, an absolute error growing with the "
                   "position), cos and sin faithful there, the tables held in %s, the two "
                   "products and the difference rounded in %s (gamma_2); abs_sum carries each "
                   "term's weight; plus half an ulp: docs/TOLERANCES.md \"Rotary embedding\"",
                   dn, dn);
        break;
    default:
        fill_bound(&t, op, a, dt, tc);
        break;
    }
    *ret = t;
    return 0;
}

/* A float dtype named by key of obj (e8m0 has no sign and no use as an
 * accumulator), false when absent or not one. */
static bool float_dtype_at(const json_t *obj, const char *key, nv_dtype *ret)
{
    const char *name = json_string_value(json_object_get(obj, key));
    nv_dtype dt;
    if (!name || nv_dtype_from_name(name, &dt) < 0)
        return false;
    const nv_dtype_info *di = nv_dtype_get(dt);
    if (!di || !di->is_float || dt == NV_DT_E8M0)
        return false;
    *ret = dt;
    return true;
}

void nv_op_accumulator(const nv_op_def *op, const nv_op_attrs *a, nv_dtype out, const json_t *entry,
                       nv_dtype *ret_dtype, nv_dtype *ret_range, bool *ret_declared)
{
    bool mm = op && op->kind == NV_OPK_MATMUL;
    nv_dtype acc = mm && a ? a->acc_dtype : out == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    nv_dtype range = acc;
    bool declared = false;
    const json_t *d = json_object_get(entry, mm ? "matmul_accumulator" : "accumulator");
    nv_dtype dd;
    if (json_is_object(d) && float_dtype_at(d, "dtype", &dd)) {
        declared = true;
        acc = range = dd;
        float_dtype_at(d, "range", &range);
    }
    if (ret_dtype)
        *ret_dtype = acc;
    if (ret_range)
        *ret_range = range;
    if (ret_declared)
        *ret_declared = declared;
}
