/* The exact references of the catalog ops and of graphs of them: the part of
 * core that needs exact arithmetic (MPFR, GMP). The worker, the tests and the
 * benches link it; numvald, which only validates specs, does not. The backward
 * references are backward.h. */
#ifndef NUMVAL_REFERENCE_H
#define NUMVAL_REFERENCE_H

#include <stddef.h>

#include "core/numerics/tensor.h"
#include "core/ops/catalog.h"
#include "core/ops/graph.h"

/* Exact reference. out_hi (and out_lo when non-NULL) are preallocated with the
 * inferred shape and the output dtype, which selects the precision the exact value
 * must decide (refmath.h). abs_sum (may be NULL) receives sum |terms| for ops whose
 * error bound depends on it (reductions, matmul), else |exact|.
 * An exact value that overflows the output dtype under round to nearest (IEEE
 * 754-2019 §7.4) is stored as the overflow result a correct device returns:
 * +-Inf, NaN for fp8_e4m3 (OFP8), +-max_finite for the MX formats (lo = 0).
 * Returns 0 or a negative NV_E_* code. */
int nv_op_reference(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                    nv_tensor *out_hi, nv_tensor *out_lo, nv_tensor *abs_sum);

/* The outputs of nv_op_reference_ex, each preallocated with the inferred shape;
 * every one but hi may be NULL. The scales of the bound metric may exceed fp64's
 * range (a sum of values near fp64's max), so they come in a wide form:
 *   abs_sum, abs_exp  abs_sum[i] 2^abs_exp[i] is nv_op_reference's abs_sum: the
 *                     value itself (abs_exp 0) while it fits fp64, else a
 *                     mantissa in [0.5, 1) and its exponent. Without abs_exp,
 *                     abs_sum holds +Inf where the value is beyond fp64's range.
 *   peak              the accumulator demand: an upper bound, to first order in
 *                     the accumulator's unit roundoff, on the magnitude of every
 *                     partial result the op's accumulations reach in any order of
 *                     evaluation (sum, mean: sum |x_i|; matmul: sum_k |a_k b_k|
 *                     or the largest operand |a_k|, |b_k| if larger, as the
 *                     operands are held in the accumulator too;
 *                     var, layer_norm: the larger of sum |x_i| and
 *                     sum (x_i - mean)^2; norm2, rms_norm: sum x_i^2; logsumexp,
 *                     softmax, log_softmax, cross_entropy: sum exp(x_j - max),
 *                     and for cross_entropy's mean the sum of |loss_i|; 0 for ops
 *                     without an accumulation). +Inf beyond fp64's range, which
 *                     is beyond every accumulator's. compare.h's intermediate
 *                     overflow rule reads it (docs/TOLERANCES.md). */
typedef struct nv_ref_out {
    nv_tensor *hi, *lo;
    nv_tensor *abs_sum, *abs_exp;
    nv_tensor *peak;
} nv_ref_out;

/* The sample op's exact distribution for one row x[0..V) under a's temperature,
 * top_k and top_p (core/ops/select.c steps 1-4): p[i] the probability of token
 * i, the nearest double (0 outside the kept tokens). Returns 0, -1 for a row
 * without a distribution (p all 0) or NV_E_NOMEM. */
int nv_ref_sample_probs(const double *x, int64_t V, const nv_op_attrs *a, double *p);

/* A selection's tolerance rule (docs/TOLERANCES.md "Selections"): nv_op_reference's
 * lo of argmax and sample is the index a correct device may return instead of hi
 * (sample's CDF boundaries within delta; hi itself elsewhere). Every got[i] that
 * differs from hi[i] and equals lo[i] is set to hi[i], so the 0-ulp comparison
 * that follows (with no exact_lo) judges it as the exact index. Returns how many
 * were set. */
int64_t nv_select_justify(double *got, const double *hi, const double *lo, int64_t n);

/* nv_op_reference with the wide abs_sum and the accumulator demand (above). */
int nv_op_reference_ex(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                       const nv_tensor *const *in, const nv_ref_out *out);

/* Elements k0 .. k0 + n - 1 of line `line` of a reduction's input (lines in
 * row-major order of the dims other than the reduced axis, k along the axis):
 * a pointer to n values, into buf (room for n) or the reader's own storage,
 * valid until the next call; NULL on failure. */
typedef const double *(*nv_ref_read_fn)(void *ud, int64_t line, int64_t k0, int64_t n,
                                        double *buf);

/* Whether nv_op_reference_lines takes op: the reductions that remove their
 * axis and need only sums, moments or the maximum of each line (sum, mean,
 * max, norm2, var). */
bool nv_op_reference_streams(const nv_op_def *op);
/* nv_op_reference_ex of such an op with its one input x read through read(ud,
 * ...) in pieces of at most chunk (>= 1) values instead of from x->data (x
 * gives the shape only), so that the input never has to be held as doubles:
 * the same outputs bit for bit. Returns as nv_op_reference_ex; NV_E_INVALID
 * for an op it does not take or a failed read. */
int nv_op_reference_lines(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                          nv_ref_read_fn read, void *ud, int64_t chunk, const nv_ref_out *out);

/* The values a correctly rounding device returns in dt for the exact values
 * hi (+ lo, may be NULL), in place: beyond dt's overflow threshold +-Inf (NaN for
 * fp8 e4m3fn, +-max_finite for the MX formats), the dtype's own rule for an
 * Inf or NaN it cannot hold, else unchanged; hi is then tagged dt. For a
 * reference computed for a wider dtype and judged in a narrower one (a graph's
 * node references are computed for fp32 or fp64). */
void nv_ref_to_dtype(nv_tensor *hi, nv_tensor *lo, nv_dtype dt);

/* Reference execution of a graph (graph_ref.c). in[i]: the graph inputs
 * (contiguous, their dtypes). For every node, ret_hi[k] receives a new tensor with the exact value
 * of the node computed by nv_op_reference from the hi parts of its node inputs
 * (so an intermediate reference is exact for the exact upstream values up to the
 * hi part's rounding: a double within 2^-45 relative, refmath.h), tagged with
 * the node's dtype; ret_abs[k] receives sum |terms| for reductions and matmul
 * (else NULL). The caller frees both arrays' tensors. Returns 0, NV_E_* or
 * -ENOMEM with a message naming the node in err. */
int nv_graph_reference(const nv_graph *g, const nv_tensor *const *in, nv_tensor **ret_hi,
                       nv_tensor **ret_abs, char *err, size_t errlen);

/* The reference of node k alone, from the graph inputs in[] and the values
 * vals[] of the nodes it reads (the upstream reference, or a device's captured
 * values: the local reference that isolates node k's own error). New tensors in
 * *ret_hi (tagged with the node's dtype) and *ret_abs (NULL unless a reduction
 * or matmul). Returns 0, NV_E_* or -ENOMEM with err naming the node. */
int nv_graph_node_reference(const nv_graph *g, int k, const nv_tensor *const *in,
                            nv_tensor *const *vals, nv_tensor **ret_hi, nv_tensor **ret_abs,
                            char *err, size_t errlen);
/* The same with the accumulator demand of a reduction or matmul node in
 * *ret_peak (nv_ref_out's peak; NULL for other nodes). */
int nv_graph_node_reference_ex(const nv_graph *g, int k, const nv_tensor *const *in,
                               nv_tensor *const *vals, nv_tensor **ret_hi, nv_tensor **ret_abs,
                               nv_tensor **ret_peak, char *err, size_t errlen);

#endif
