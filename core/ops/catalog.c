/* The operator catalog v1: the op table, dtype support, shape and dtype
 * inference (matmul's in matmul.c), reduction lengths and what each op asks of
 * the input generators (nv_op_input_domain). Attributes are attrs.c, default
 * tolerances tolerances.c; the exact references are core/ref/reference.c.
 *
 * Input domains (nv_op_input_desc lo/hi, closed intervals) bound the random
 * classes (normal, uniform, near_zero, large, midpoints, cancellation, offset):
 * log and log2 take [0, inf) (0 gives -inf, IEEE 754-2019 §9.2.1), log1p
 * [-1, inf), sqrt, rsqrt [0, inf), pow's base [0, inf) (a negative base with an
 * integer exponent is exercised by pow's domain edges); every other input takes
 * the whole line. "specials", "domain_edges", "sweep" and "exhaustive" ignore
 * the domain on purpose: NaN, +-Inf and values outside the domain test the op's
 * IEEE 754 special-case behaviour, which the reference defines. "cancellation"
 * is meaningful for add, sub, fma, the reductions and matmul; every op accepts
 * every class. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "ops_internal.h"

#define LINE                                                                                       \
    {                                                                                              \
        "x", -INFINITY, INFINITY, false                                                            \
    }
#define POS                                                                                        \
    {                                                                                              \
        "x", 0, INFINITY, false                                                                    \
    }

#define UN(nm, tr, lo, ed)                                                                         \
    {                                                                                              \
        .name = nm, .kind = NV_OPK_UNARY, .n_inputs = 1, .inputs = {{"x", lo, INFINITY, false}},   \
        .transcendental = tr, .differentiable = true, .edges = ed                                  \
    }
#define BIN(nm, ed)                                                                                \
    {                                                                                              \
        .name = nm, .kind = NV_OPK_BINARY, .n_inputs = 2,                                          \
        .inputs = {LINE, {"y", -INFINITY, INFINITY, false}}, .differentiable = true, .edges = ed   \
    }
#define RED(nm)                                                                                    \
    {                                                                                              \
        .name = nm, .kind = NV_OPK_REDUCE, .n_inputs = 1, .inputs = {LINE},                        \
        .differentiable = true, .edges = nvo_edges_reduce                                          \
    }

/* Order matches nvo_id (opmeta.h). */
static const nv_op_def table[NVO_COUNT] = {
    UN("neg", false, -INFINITY, nvo_edges_generic),
    UN("abs", false, -INFINITY, nvo_edges_generic),
    BIN("add", nvo_edges_generic),
    BIN("sub", nvo_edges_generic),
    BIN("mul", nvo_edges_generic),
    BIN("div", nvo_edges_generic),
    {.name = "fma",
     .kind = NV_OPK_TERNARY,
     .n_inputs = 3,
     .inputs = {{"a", -INFINITY, INFINITY, false},
                {"b", -INFINITY, INFINITY, false},
                {"c", -INFINITY, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_generic},
    UN("sqrt", false, 0, nvo_edges_sqrt),
    UN("rsqrt", false, 0, nvo_edges_sqrt),
    UN("reciprocal", false, -INFINITY, nvo_edges_reciprocal),
    UN("exp", true, -INFINITY, nvo_edges_exp),
    UN("exp2", true, -INFINITY, nvo_edges_exp2),
    UN("expm1", true, -INFINITY, nvo_edges_expm1),
    UN("log", true, 0, nvo_edges_log),
    UN("log2", true, 0, nvo_edges_log),
    UN("log1p", true, -1, nvo_edges_log1p),
    UN("sin", true, -INFINITY, nvo_edges_trig),
    UN("cos", true, -INFINITY, nvo_edges_trig),
    UN("tanh", true, -INFINITY, nvo_edges_tanh),
    UN("sigmoid", true, -INFINITY, nvo_edges_sigmoid),
    UN("erf", true, -INFINITY, nvo_edges_erf),
    UN("gelu", true, -INFINITY, nvo_edges_gelu),
    UN("silu", true, -INFINITY, nvo_edges_silu),
    UN("relu", false, -INFINITY, nvo_edges_generic),
    {.name = "pow",
     .kind = NV_OPK_BINARY,
     .n_inputs = 2,
     .inputs = {POS, {"y", -INFINITY, INFINITY, false}},
     .transcendental = true,
     .differentiable = true,
     .edges = nvo_edges_pow},
    BIN("maximum", nvo_edges_generic),
    BIN("minimum", nvo_edges_generic),
    {.name = "cast",
     .kind = NV_OPK_CAST,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = false,
     .edges = nvo_edges_generic},
    RED("sum"),
    RED("mean"),
    RED("max"),
    RED("var"),
    RED("norm2"),
    RED("logsumexp"),
    RED("softmax"),
    RED("log_softmax"),
    {.name = "layer_norm",
     .kind = NV_OPK_REDUCE,
     .n_inputs = 3,
     .inputs = {LINE, {"weight", -INFINITY, INFINITY, false}, {"bias", -INFINITY, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    {.name = "rms_norm",
     .kind = NV_OPK_REDUCE,
     .n_inputs = 2,
     .inputs = {LINE, {"weight", -INFINITY, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    {.name = "cross_entropy",
     .kind = NV_OPK_REDUCE,
     .n_inputs = 2,
     .inputs = {{"logits", -INFINITY, INFINITY, false}, {"target", 0, INFINITY, true}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    {.name = "matmul",
     .kind = NV_OPK_MATMUL,
     .n_inputs = 2,
     .inputs = {{"a", -INFINITY, INFINITY, false},
                {"b", -INFINITY, INFINITY, false},
                {"scale_a", 0, INFINITY, false},
                {"scale_b", 0, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    {.name = "bmm",
     .kind = NV_OPK_MATMUL,
     .n_inputs = 2,
     .inputs = {{"a", -INFINITY, INFINITY, false},
                {"b", -INFINITY, INFINITY, false},
                {"scale_a", 0, INFINITY, false},
                {"scale_b", 0, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    /* Data movement (layout.c). Their backward is the scatter-add of the
     * output gradient into the element each output was moved from: the inverse
     * permutation for transpose, split_heads and merge_heads; embedding's sums
     * the gradient rows of repeated ids (core/ref/ref_layout_backward.c); ids
     * get no gradient (an index input). */
    {.name = "transpose",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
    {.name = "embedding",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 2,
     .inputs = {{"weight", -INFINITY, INFINITY, false}, {"ids", 0, INFINITY, true}},
     .differentiable = true,
     .edges = nvo_edges_generic},
    {.name = "split_heads",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
    {.name = "merge_heads",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
    /* The store of a KV-cache entry (docs/SERVING.md): the values unchanged,
     * in the cache's declared dtype (the output dtype). */
    {.name = "cache_write",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .edges = nvo_edges_generic},
    /* A CNN's flatten before its classifier, and max pooling: each output is
     * one input element (the window's maximum), so they are data movement too. */
    {.name = "flatten",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
    {.name = "max_pool2d",
     .kind = NV_OPK_LAYOUT,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
    /* Windowed linear ops (conv.c): conv2d's backward is the transposed
     * convolution for x and the correlation of x with gy for the weight;
     * avg_pool2d's scatters gy / divisor over each window. */
    {.name = "conv2d",
     .kind = NV_OPK_CONV,
     .n_inputs = 2,
     .inputs = {{"x", -INFINITY, INFINITY, false}, {"weight", -INFINITY, INFINITY, false}},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    {.name = "avg_pool2d",
     .kind = NV_OPK_CONV,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_reduce},
    /* Selections (select.c): an int32 index per row of the last axis, not
     * differentiable (piecewise constant). argmax's ties go to the lowest index
     * and a NaN counts above every number; sample's draw is defined in
     * docs/TOLERANCES.md "Selections" so that another device can reproduce it. */
    {.name = "argmax",
     .kind = NV_OPK_SELECT,
     .n_inputs = 1,
     .inputs = {LINE},
     .edges = nvo_edges_generic},
    {.name = "sample",
     .kind = NV_OPK_SELECT,
     .n_inputs = 1,
     .inputs = {{"logits", -INFINITY, INFINITY, false}},
     .edges = nvo_edges_generic},
    /* Rotary position embedding (rotary.c, Su et al. 2021): linear in x, so its
     * backward is the rotation by minus the angle. */
    {.name = "rotary_embedding",
     .kind = NV_OPK_ROTARY,
     .n_inputs = 1,
     .inputs = {LINE},
     .differentiable = true,
     .edges = nvo_edges_generic},
};

const nv_op_def *nv_op_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < NVO_COUNT; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

const nv_op_def *nv_op_all(size_t *ret_n)
{
    if (ret_n)
        *ret_n = NVO_COUNT;
    return table;
}

int nvo_op_id(const nv_op_def *op)
{
    if (!op || op < table || op >= table + NVO_COUNT)
        return -1;
    return (int)(op - table);
}

nv_input_domain nv_op_input_domain(const nv_op_def *op, int i)
{
    nv_input_domain d = {.role = NV_INPUT_VALUES};
    if (!op || i < 0)
        return d;
    if (i >= op->n_inputs) {
        d.role = NV_INPUT_SCALE;
        return d;
    }
    const nv_op_input_desc *in = &op->inputs[i];
    if (in->is_index) {
        d.role = NV_INPUT_INDEX;
        return d;
    }
    int id = nvo_op_id(op);
    d.bounded = true;
    d.lo = in->lo;
    d.hi = in->hi;
    d.edges = i == 0 ? op->edges : NULL;
    d.tie_partner = i == 1 && (id == NVO_ADD || id == NVO_SUB);
    /* "specials" meet as every ordered tuple in the operands of add .. fma, pow,
     * maximum, minimum; "offset", "sweep" and "exhaustive" describe the rows of
     * layer_norm / rms_norm, not their per-channel weight and bias. */
    if (op->kind == NV_OPK_BINARY || op->kind == NV_OPK_TERNARY)
        d.cross_arity = op->n_inputs;
    d.param = i > 0 && (id == NVO_LAYER_NORM || id == NVO_RMS_NORM);
    return d;
}

bool nv_op_zero_sign_judged(const nv_op_def *op)
{
    /* Reductions and matmul start their accumulators from +0 where IEEE's sum
     * of -0 terms is -0, and the max reduction keeps whichever of -0 and +0 its
     * comparisons meet first: their zero's sign is not part of the contract.
     * rotary_embedding is a two-term sum x_a cos - x_b sin (and the identity
     * at position 0): x cos + (-x') sin and x cos - x' sin are both IEEE
     * evaluations and give different zeros. */
    return op && !nv_op_accumulates(op);
}

bool nv_op_accumulates(const nv_op_def *op)
{
    /* rotary_embedding: a two-term sum x_a cos - x_b sin judged by the bound
     * metric, whose weight abs_sum its reference fills (ref_rotary.c) */
    return op && (op->kind == NV_OPK_REDUCE || op->kind == NV_OPK_MATMUL ||
                  op->kind == NV_OPK_CONV || op->kind == NV_OPK_ROTARY);
}

/* ---- dtype support ---- */

#define DT(x) (1u << (x))
#define F_STD (DT(NV_DT_FP64) | DT(NV_DT_FP32) | DT(NV_DT_TF32) | DT(NV_DT_BF16) | DT(NV_DT_FP16))
#define F_8 (DT(NV_DT_FP8_E4M3) | DT(NV_DT_FP8_E5M2))
#define F_MX (DT(NV_DT_FP6_E2M3) | DT(NV_DT_FP6_E3M2) | DT(NV_DT_FP4_E2M1))

/* Dtypes an op computes in. Exact ops (sign, selection) take every float format;
 * the IEEE 754 basic operations also fp8 (OFP8 formats are IEEE-like binary
 * formats, so correct rounding is defined); transcendentals and reductions the
 * standard formats. cast's output (attr "to") is any float format; matmul's mask
 * is its output dtypes, its operands are checked in nvo_matmul_infer (matmul.c). */
static unsigned dtype_mask(int id)
{
    switch (id) {
    case NVO_NEG:
    case NVO_ABS:
    case NVO_RELU:
    case NVO_MAXIMUM:
    case NVO_MINIMUM:
    case NVO_CAST:
    case NVO_TRANSPOSE:
    case NVO_EMBEDDING:
    case NVO_SPLIT_HEADS:
    case NVO_MERGE_HEADS:
    case NVO_CACHE_WRITE:
    case NVO_FLATTEN:
    case NVO_MAX_POOL2D:
        return F_STD | F_8 | F_MX;
    case NVO_ADD:
    case NVO_SUB:
    case NVO_MUL:
    case NVO_DIV:
    case NVO_FMA:
    case NVO_SQRT:
        return F_STD | F_8;
    case NVO_MATMUL:
    case NVO_BMM: /* output dtypes; operands: nvo_matmul_infer */
        return DT(NV_DT_FP64) | DT(NV_DT_FP32) | DT(NV_DT_TF32) | DT(NV_DT_BF16) | DT(NV_DT_FP16);
    default:
        return F_STD;
    }
}

bool nvo_dtype_supported(const nv_op_def *op, nv_dtype dt)
{
    int id = nvo_op_id(op);
    if (id < 0 || (unsigned)dt >= NV_DT_COUNT)
        return false;
    return (dtype_mask(id) & DT(dt)) != 0;
}

bool nvo_is_float_dt(nv_dtype dt)
{
    return (unsigned)dt < NV_DT_COUNT && ((F_STD | F_8 | F_MX) & DT(dt));
}

bool nvo_reduce_removes_axis(int id)
{
    return id == NVO_SUM || id == NVO_MEAN || id == NVO_MAX || id == NVO_VAR || id == NVO_NORM2 ||
           id == NVO_LOGSUMEXP;
}

int nvo_norm_axis(const nv_op_def *op, const nv_op_attrs *a, int ndim)
{
    int id = nvo_op_id(op);
    if (ndim < 1)
        return -1;
    if (id == NVO_LAYER_NORM || id == NVO_RMS_NORM)
        return ndim - 1;
    if (id == NVO_CROSS_ENTROPY)
        return 1;
    int ax = a->axis < 0 ? a->axis + ndim : a->axis;
    return ax >= 0 && ax < ndim ? ax : -1;
}

/* ---- shape inference ---- */

const char *nvo_shape_str(const nv_tensor *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                                 (long long)t->shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

static bool same_shape(const nv_tensor *a, const nv_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

static int check_dtype(const nv_op_def *op, const nv_tensor *t, int i, char *err, size_t errlen)
{
    if (!nvo_dtype_supported(op, t->dtype))
        return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                   nv_dtype_name(t->dtype), op->inputs[i].name);
    return 0;
}

static int infer_elementwise(const nv_op_def *op, int n_in, const nv_tensor *const *in, char *err,
                             size_t errlen)
{
    char s0[96], s1[96];
    for (int i = 0; i < n_in; i++) {
        if (op->kind == NV_OPK_CAST) {
            if (!nvo_is_float_dt(in[i]->dtype) && in[i]->dtype != NV_DT_INT8 &&
                in[i]->dtype != NV_DT_INT32)
                return ERR(NV_E_DTYPE, "op 'cast' does not support source dtype '%s'",
                           nv_dtype_name(in[i]->dtype));
        } else {
            int r = check_dtype(op, in[i], i, err, errlen);
            if (r < 0)
                return r;
        }
        if (i == 0)
            continue;
        if (!same_shape(in[0], in[i]))
            return ERR(NV_E_SHAPE, "op '%s': shape %s of '%s' and shape %s of '%s' differ",
                       op->name, nvo_shape_str(in[0], s0, sizeof s0), op->inputs[0].name,
                       nvo_shape_str(in[i], s1, sizeof s1), op->inputs[i].name);
        if (in[i]->dtype != in[0]->dtype)
            return ERR(NV_E_DTYPE, "op '%s': dtype '%s' of '%s' and dtype '%s' of '%s' differ",
                       op->name, nv_dtype_name(in[0]->dtype), op->inputs[0].name,
                       nv_dtype_name(in[i]->dtype), op->inputs[i].name);
    }
    return 0;
}

/* layer_norm / rms_norm parameters: one value per element of x's last axis. */
static int infer_norm_params(const nv_op_def *op, int n_in, const nv_tensor *const *in, char *err,
                             size_t errlen)
{
    char s0[96], s1[96];
    const nv_tensor *x = in[0];
    for (int i = 1; i < n_in; i++) {
        const nv_tensor *w = in[i];
        if (!nvo_dtype_supported(op, w->dtype))
            return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                       nv_dtype_name(w->dtype), op->inputs[i].name);
        if (w->ndim != 1 || w->shape[0] != x->shape[x->ndim - 1])
            return ERR(NV_E_SHAPE,
                       "op '%s': shape %s of '%s' must be [%lld], the last dimension of "
                       "shape %s of 'x'",
                       op->name, nvo_shape_str(w, s1, sizeof s1), op->inputs[i].name,
                       (long long)x->shape[x->ndim - 1], nvo_shape_str(x, s0, sizeof s0));
    }
    return 0;
}

static int infer_reduce(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                        const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                        size_t errlen)
{
    int id = nvo_op_id(op);
    const nv_tensor *x = in[0];
    char s0[96], s1[96];
    int r = check_dtype(op, x, 0, err, errlen);
    if (r < 0)
        return r;
    if (id == NVO_CROSS_ENTROPY) {
        const nv_tensor *t = in[1];
        if (x->ndim != 2)
            return ERR(NV_E_SHAPE, "op 'cross_entropy': logits must be [N, C], got shape %s",
                       nvo_shape_str(x, s0, sizeof s0));
        if (t->dtype != NV_DT_INT32)
            return ERR(NV_E_DTYPE, "op 'cross_entropy': target must be int32, got '%s'",
                       nv_dtype_name(t->dtype));
        if (t->ndim != 1 || t->shape[0] != x->shape[0])
            return ERR(NV_E_SHAPE,
                       "op 'cross_entropy': target shape %s does not match logits shape %s "
                       "(expected [%lld])",
                       nvo_shape_str(t, s1, sizeof s1), nvo_shape_str(x, s0, sizeof s0),
                       (long long)x->shape[0]);
        *ret_ndim = a->reduction_mean ? 0 : 1;
        ret_shape[0] = x->shape[0];
        return 0;
    }
    int ax = nvo_norm_axis(op, a, x->ndim);
    if (ax < 0)
        return ERR(NV_E_SHAPE, "op '%s': axis '%d' is out of range for shape %s", op->name, a->axis,
                   nvo_shape_str(x, s0, sizeof s0));
    if (x->shape[ax] == 0 && id != NVO_SUM)
        return ERR(NV_E_SHAPE, "op '%s': reduction over an empty axis of shape %s", op->name,
                   nvo_shape_str(x, s0, sizeof s0));
    if (id == NVO_LAYER_NORM || id == NVO_RMS_NORM) {
        r = infer_norm_params(op, n_in, in, err, errlen);
        if (r < 0)
            return r;
    }
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != ax || !nvo_reduce_removes_axis(id))
            ret_shape[nd++] = x->shape[i];
    *ret_ndim = nd;
    return 0;
}

int nv_op_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen)
{
    int id = nvo_op_id(op);
    if (id < 0 || !a || !in)
        return ERR(NV_E_INVALID, "unknown op");
    if (op->kind != NV_OPK_MATMUL && n_in != op->n_inputs)
        return ERR(NV_E_INVALID, "op '%s' takes %d input(s), got %d", op->name, op->n_inputs, n_in);
    for (int i = 0; i < n_in; i++)
        if (!in[i])
            return ERR(NV_E_INVALID, "op '%s': input %d is missing", op->name, i);
    int64_t shape[NV_MAX_DIMS];
    int nd = 0;
    int r;
    switch (op->kind) {
    case NV_OPK_UNARY:
    case NV_OPK_BINARY:
    case NV_OPK_TERNARY:
    case NV_OPK_CAST:
        r = infer_elementwise(op, n_in, in, err, errlen);
        nd = in[0]->ndim;
        memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
        break;
    case NV_OPK_REDUCE:
        r = infer_reduce(op, a, n_in, in, &nd, shape, err, errlen);
        break;
    case NV_OPK_LAYOUT:
        r = nvo_layout_infer(op, a, n_in, in, &nd, shape, err, errlen);
        break;
    case NV_OPK_CONV:
        r = nvo_conv_infer(op, a, n_in, in, &nd, shape, err, errlen);
        break;
    case NV_OPK_SELECT:
        r = nvo_select_infer(op, n_in, in, &nd, shape, err, errlen);
        break;
    case NV_OPK_ROTARY:
        r = nvo_rotary_infer(op, a, n_in, in, &nd, shape, err, errlen);
        break;
    default:
        r = nvo_matmul_infer(op, a, n_in, in, &nd, shape, err, errlen);
        break;
    }
    if (r < 0)
        return r;
    *ret_ndim = nd;
    memcpy(ret_shape, shape, sizeof(int64_t) * (size_t)nd);
    return 0;
}

/* The n of g(n) in the bound metric: the number of rounded operations on the
 * longest dependency chain of one output, counting each non-sum step (division
 * by n, square, exp, log, sqrt, the scale products) as one more term, so that
 * c g(n) u covers them too (docs/TOLERANCES.md). */
int64_t nv_op_reduction_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                            const nv_tensor *const *in)
{
    int id = nvo_op_id(op);
    if (id < 0 || n_in < 1 || !in || !in[0])
        return 1;
    const nv_tensor *x = in[0];
    if (op->kind == NV_OPK_MATMUL) {
        if (x->ndim < 2)
            return 1;
        bool fp_scales = a->scale != NV_SCALE_NONE && a->scale != NV_SCALE_BLOCK;
        return x->shape[x->ndim - 1] + 1 + (fp_scales ? 2 : 0);
    }
    if (op->kind == NV_OPK_CONV) {
        nv_conv_geom g;
        /* K products (avg_pool2d: terms) summed and one more rounding (the
         * division), as matmul's and mean's */
        bool pool = id == NVO_AVG_POOL2D;
        if (!pool && n_in < 2)
            return 1;
        return nv_conv_geom_of(a, x, pool ? NULL : in[1], &g) == 0 ? g.k + 1 : 1;
    }
    if (op->kind == NV_OPK_ROTARY)
        return 2; /* x_a cos - x_b sin: two terms (the bound's terms, tolerances.c) */
    if (op->kind != NV_OPK_REDUCE)
        return 1;
    if (id == NVO_CROSS_ENTROPY) {
        if (x->ndim != 2)
            return 1;
        return x->shape[1] + 4 + (a->reduction_mean ? x->shape[0] : 0);
    }
    int ax = nvo_norm_axis(op, a, x->ndim);
    if (ax < 0)
        return 1;
    int64_t n = x->shape[ax];
    switch (id) {
    case NVO_SUM:
    case NVO_MAX:
        return n;
    case NVO_MEAN:
        return n + 1;
    case NVO_NORM2:
        return n + 2;
    case NVO_VAR:
        return n + 3;
    default:
        return n + 4;
    }
}
