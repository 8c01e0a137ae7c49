/* The operator catalog: each op's inputs and domains, attributes, shape and
 * dtype rules, reduction lengths and shipped default tolerances. The exact
 * references are core/ref/reference.h (forward) and core/ref/backward.h; the
 * Jacobian structure is jacobian.h. */
#ifndef NUMVAL_CATALOG_H
#define NUMVAL_CATALOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/numerics/inputs.h"
#include "core/numerics/tensor.h"
#include "core/numerics/tolerance.h"

typedef enum nv_op_kind {
    NV_OPK_UNARY,   /* elementwise, one input */
    NV_OPK_BINARY,  /* elementwise, two inputs of the same shape */
    NV_OPK_TERNARY, /* fma */
    NV_OPK_CAST,    /* attrs.cast_to */
    NV_OPK_REDUCE,  /* along attrs.axis: sum, mean, max, var, norm2, logsumexp (axis removed);
                       softmax, log_softmax, layer_norm, rms_norm (shape kept);
                       cross_entropy (logits [N, C], target int32 [N] -> [N]) */
    NV_OPK_MATMUL,  /* matmul / bmm */
    NV_OPK_LAYOUT,  /* data movement, exact: transpose (last two dims swapped), embedding
                       (weight [V, D], ids int32 [..] -> [.., D]), split_heads ([T, H*Dh] ->
                       [H, T, Dh], attrs.heads), merge_heads (its inverse), cache_write
                       (the values unchanged: a KV-cache store), flatten
                       ([N, ..] -> [N, prod ..]), max_pool2d (x [N, C, H, W], the window
                       maximum: a selection of input values) */
    NV_OPK_CONV,    /* windowed linear ops over x [N, C, H, W] (conv.c): conv2d (weight
                       [Co, C/groups, kh, kw] -> [N, Co, OH, OW], a dot product of length
                       C/groups*kh*kw per output) and avg_pool2d (the window's mean) */
    NV_OPK_SELECT,  /* an index per row of the last axis, int32 output x [.., V] -> [..]:
                       argmax; sample (a categorical draw from the temperature-scaled,
                       top-k / top-p truncated softmax with a counter-based Philox stream,
                       select.c, docs/TOLERANCES.md "Selections") */
    NV_OPK_ROTARY,  /* rotary_embedding (rotary.c): x [.., T, D] -> [.., T, D], each head's
                       pairs rotated by the angle of their position and frequency */
} nv_op_kind;

typedef enum nv_scale_granularity {
    NV_SCALE_NONE,    /* plain inputs */
    NV_SCALE_TENSOR,  /* one fp32 scale per operand */
    NV_SCALE_CHANNEL, /* fp32 scale per row of A and per column of B */
    NV_SCALE_BLOCK,   /* MX: e8m0 scale per block of attrs.block along K (OCP MX v1.0 §5) */
    NV_SCALE_TILE,    /* fp32 scale per tile_r x tile_c tile */
} nv_scale_granularity;

typedef struct nv_op_attrs {
    int axis;             /* reductions: default -1 (last) */
    bool gelu_tanh;       /* gelu "approximate": "none" | "tanh" */
    bool welford;         /* var "algorithm": "two_pass" | "welford" */
    int correction;       /* var: 0 population (default), 1 sample */
    double eps;           /* layer_norm / rms_norm: default 1e-5 */
    nv_dtype cast_to;     /* cast */
    nv_dtype acc_dtype;   /* matmul accumulate dtype: default fp32 */
    nv_scale_granularity scale;
    int block;            /* block:n, default 32 */
    int tile_r, tile_c;   /* tile:RxC */
    bool reduction_mean;  /* cross_entropy "reduction": "none" (default) | "mean" */
    int heads;            /* split_heads "heads": default 1 */
    int stride, padding;  /* conv2d, max_pool2d: same in H and W (stride of a pool: its kernel) */
    int dilation;         /* conv2d: default 1 */
    int kernel;           /* max_pool2d, avg_pool2d: square window, default 2 */
    int groups;           /* conv2d: channel groups, default 1 (depthwise: groups = C) */
    bool count_include_pad; /* avg_pool2d: divide by kernel^2 (default true, PyTorch's)
                               or by the window's count of input elements (false) */
    bool ceil_mode;       /* avg_pool2d: output size rounded up (PyTorch's ceil_mode) */
    int divisor_override; /* avg_pool2d: divide every window's sum by it; 0 (default): none */
    double temperature;   /* sample: > 0, default 1 */
    int top_k;            /* sample: keep the k most likely tokens, 0 (default): all */
    double top_p;         /* sample: nucleus mass in (0, 1], 1 (default): all */
    uint64_t seed;        /* sample: the Philox key, default 0 */
    uint64_t offset;      /* sample: counter of row 0 (row r draws at offset + r), default 0;
                             rotary_embedding: the position of row 0 (a KV-cache decode's
                             first new position), default 0 */
    double theta;         /* rotary_embedding: the frequency base, default 10000 */
    bool interleaved;     /* rotary_embedding: pairs (2i, 2i+1) (RoFormer's) instead of
                             (i, i + hd/2) (GPT-NeoX / Llama's rotate_half, the default) */
    int head_dim;         /* rotary_embedding: width of one head in D, 0 (default): D */
} nv_op_attrs;

/* Matmul operands by granularity: NONE: A [..,M,K], B [..,K,N]; TENSOR adds
 * sa [1], sb [1]; CHANNEL adds sa [..,M], sb [..,N]; BLOCK adds sa [..,M,K/block]
 * and sb [..,K/block,N] in e8m0; TILE adds sa [..,M/tile_r,K/tile_c] and sb
 * [..,K/tile_r,N/tile_c]. The product is sum_k (A[m,k] sa(m,k)) (B[k,n] sb(k,n)). */

typedef struct nv_op_input_desc {
    const char *name; /* "x", "y", "weight", "target" ... */
    double lo, hi;    /* real domain for the random classes (may be +-INFINITY) */
    bool is_index;    /* class indices (int32) in [0, C) */
} nv_op_input_desc;

#define NV_OP_MAX_INPUTS 6

typedef struct nv_op_def {
    const char *name;
    nv_op_kind kind;
    int n_inputs; /* for matmul: the count without scales */
    nv_op_input_desc inputs[NV_OP_MAX_INPUTS];
    bool transcendental; /* judged against a correctly rounded reference */
    bool differentiable;

    /* Domain edges of input 0 for the "domain_edges" class in dtype dt (exp's
     * overflow threshold, log near 0 and 1, tanh saturation ...): up to max values
     * written to out, count returned. */
    nv_input_edges_fn edges;
} nv_op_def;

/* Lookup by catalog name; NULL when unknown. */
const nv_op_def *nv_op_find(const char *name);
/* All ops, for iteration: *ret_n set to the count. */
const nv_op_def *nv_op_all(size_t *ret_n);

/* What op asks of its input tensor i for the input generators (inputs.h): the
 * domain of op->inputs[i], index or scale role (i >= n_inputs: a matmul scale),
 * input 0's domain edges, and the add / sub tie partner for "midpoints" of
 * input 1. op NULL: plain values on the whole real line. */
nv_input_domain nv_op_input_domain(const nv_op_def *op, int i);

/* Whether a device's zero result must have the sign of the exact one (the
 * comparison's nv_compare_input.zero_sign): true for the elementwise ops, where
 * IEEE 754-2019 defines it (§6.3 sums, products, quotients, sqrt(-0) = -0 and
 * zero results of underflow; §5.5.1 negate, abs; §9.6 maximum, minimum with
 * -0 < +0; §9.2.1 odd functions at +-0; §5.4.2 conversions), and numval's
 * contract extends it to sigmoid, erf, gelu, silu and relu (a correctly
 * rounded zero has the exact value's sign; relu(-0) = +0); false for the
 * reductions, matmul and rotary_embedding (docs/TOLERANCES.md "Signed zero"
 * says why). */
bool nv_op_zero_sign_judged(const nv_op_def *op);

/* Attributes from a JSON object (NULL = all defaults). Unknown keys are refused.
 * On error returns -EINVAL and a malloc'd message naming the key in *ret_msg. */
int nv_op_parse_attrs(const nv_op_def *op, const json_t *obj, nv_op_attrs *ret, char **ret_msg);
json_t *nv_op_attrs_to_json(const nv_op_def *op, const nv_op_attrs *a);

/* Output shape for the given inputs (counting matmul scales). Returns 0,
 * NV_E_SHAPE or NV_E_DTYPE (include/numval/backend.h) with a message in err. */
int nv_op_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen);

/* The values of a data-movement op (NV_OPK_LAYOUT) for inputs that infer
 * (layout.c): input values moved into out (numel of the inferred shape,
 * row-major), so the exact reference and a device's kernel are the same.
 * Returns NV_OK, or NV_E_INVALID for an embedding id outside [0, V) with a
 * message naming it. */
int nv_op_layout_eval(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, double *out, char *err, size_t errlen);

/* For a data-movement op (NV_OPK_LAYOUT) on inputs that infer: src[o] = the
 * row-major index of the element of input 0 that output o holds (n_out
 * outputs). Every op of the kind moves one input-0 value to each output, so
 * its Jacobian is a 0/1 matrix with one 1 per output row and its VJP the
 * scatter-add gx[src[o]] += gy[o] (layout.c). Returns NV_OK, NV_E_NOMEM or
 * nv_op_layout_eval's error. */
int nv_op_layout_sources(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                         const nv_tensor *const *in, int64_t n_out, int64_t *src);

/* The geometry of conv2d and avg_pool2d (conv.c): x [n, c, h, w], weight
 * [co, cg, kh, kw] with cg = c / groups (avg_pool2d: weight NULL, an all-ones
 * kernel x kernel window per channel, groups = co = c, cg = 1), output
 * [n, co, oh, ow]; cog = co / groups output channels per group, k = cg kh kw
 * the dot-product length. Patch position kk in [0, k) is (c, i, j) with
 * kk = (c kh + i) kw + j, the row-major index into a weight row, so output
 * (n, co, oh, ow) = sum_kk x[nv_conv_x_index(.., co / cog, .., kk)] w[co k + kk].
 * nv_conv_geom_of returns 0, or -1 when the shapes do not infer. */
typedef struct nv_conv_geom {
    int64_t n, c, h, w, co, kh, kw, oh, ow, k;
    int64_t groups, cg, cog;
    int stride, padding, dilation;
} nv_conv_geom;
int nv_conv_geom_of(const nv_op_attrs *a, const nv_tensor *x, const nv_tensor *w, nv_conv_geom *g);
/* The row-major index into x of patch position kk of output (n, oh, ow) in
 * group q; -1 where the patch reads the zero padding. */
int64_t nv_conv_x_index(const nv_conv_geom *g, int64_t n, int64_t q, int64_t oh, int64_t ow,
                        int64_t kk);
/* avg_pool2d's divisor of output (oh, ow) (conv.c): divisor_override when
 * set; with count_include_pad the window's positions inside the padded input
 * (kh kw except where ceil_mode lets the last window run past it); else the
 * window's positions inside the input. */
int64_t nv_pool_divisor(const nv_conv_geom *g, const nv_op_attrs *a, int64_t oh, int64_t ow);

/* What the selections' exact reference and devices share (select.c, the
 * definition in its header comment). nv_argmax_row: argmax's index of x[0..n)
 * (ties: lowest index; the first NaN wins). nv_sample_order: sample's steps 1-2,
 * the kept tokens in order into order[0..ret), ret = min(top_k, n) (all n for
 * top_k 0); -1 for a row without a distribution (a NaN, a +Inf, or all -inf),
 * -2 when out of memory. */
int64_t nv_argmax_row(const double *x, int64_t n);
int64_t nv_sample_order(const double *x, int64_t n, int top_k, int64_t *order);

/* The geometry of rotary_embedding (rotary.c, the definition in its header
 * comment): x [.., t, d] seen as rows of d = heads hd, row r at position
 * offset + r % t; pair k in [0, hd/2) of a head is the elements (a, b) of
 * nv_rope_pair, rotated by angle (offset + r % t) theta^(-2k/hd).
 * nv_rope_geom_of returns 0, or -1 when x does not infer. */
typedef struct nv_rope_geom {
    int64_t rows, t, d, hd, heads;
    uint64_t offset;
    double theta;
    bool interleaved;
} nv_rope_geom;
int nv_rope_geom_of(const nv_op_attrs *a, const nv_tensor *x, nv_rope_geom *g);
/* The offsets within a head of pair k: its first element a (the one whose
 * output is x_a cos - x_b sin) and its second b (x_b cos + x_a sin). */
static inline void nv_rope_pair(const nv_rope_geom *g, int64_t k, int64_t *a, int64_t *b)
{
    *a = g->interleaved ? 2 * k : k;
    *b = g->interleaved ? 2 * k + 1 : k + g->hd / 2;
}

/* Whether op accumulates (reductions, matmul, conv2d, and rotary_embedding's
 * two-term sum): its reference fills abs_sum with sum |terms| (rotary: its
 * error model's weight) and the accumulator demand (reference.h; 0 for rotary). */
bool nv_op_accumulates(const nv_op_def *op);

/* The reduction length n of the output's reduction (1 for elementwise, K for
 * matmul) for the bound metric. */
int64_t nv_op_reduction_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                            const nv_tensor *const *in);

/* The shipped default tolerance for (op, output dtype), with reason. */
int nv_op_default_tolerance(const nv_op_def *op, const nv_op_attrs *a, nv_dtype dt,
                            nv_tolerance *ret);

/* The accumulator the intermediate-overflow rule (compare.h, docs/TOLERANCES.md
 * "Intermediate overflow") judges op's outputs by, for inputs of dtype dt. entry
 * (may be NULL) is the device's describe() contract entry for dt: its
 * "accumulator": {"dtype": D, "range": R} (R defaults to D) applies to the
 * reductions, "matmul_accumulator" of the same form to matmul and bmm. Without a
 * declaration (or with one naming no float dtype) it is what the default
 * tolerance assumes: the op's "acc" for matmul, fp64 for fp64 outputs (out), fp32
 * otherwise. Sets *ret_dtype, *ret_range and *ret_declared (any may be NULL). */
void nv_op_accumulator(const nv_op_def *op, const nv_op_attrs *a, nv_dtype out,
                       const json_t *entry, nv_dtype *ret_dtype, nv_dtype *ret_range,
                       bool *ret_declared);

#endif
