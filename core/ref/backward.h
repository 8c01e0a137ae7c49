/* Backward of the catalog ops (issue 4): the reference vector-Jacobian product
 * (VJP) in fp64, the plain fp64 forward that finite differences differentiate,
 * each op's declared Jacobian structure, the magnitudes that device-check
 * tolerances scale with, and each op's differentiable input domain.
 *
 * Every tensor here is contiguous row-major (nv_tensor_contiguous); gradients
 * and outputs are plain double arrays in the row-major order of their shape. */
#ifndef NUMVAL_BACKWARD_H
#define NUMVAL_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ops/catalog.h"

/* The Jacobian structure an op declares (docs/JOBS.md "gradient"):
 * diagonal: each output element depends on the same-index element of each input;
 * row_block: outputs of one line along the axis depend only on that line of x
 *   (softmax, layer_norm, the reductions, cross_entropy per row); layer_norm and
 *   rms_norm's weight/bias act per column;
 * bilinear: matmul, C[m,n] depends on row m of A and column n of B;
 * dense: every output depends on every input (cross_entropy with "mean"). */
typedef enum nv_jac_kind {
    NV_JAC_DIAGONAL,
    NV_JAC_ROW_BLOCK,
    NV_JAC_BILINEAR,
    NV_JAC_DENSE,
} nv_jac_kind;

const char *nv_jac_kind_name(nv_jac_kind k);
nv_jac_kind nv_op_jac_kind(const nv_op_def *op, const nv_op_attrs *a);

/* Whether op has a backward the gradient job checks (differentiable, and for
 * matmul only without scales). */
bool nv_op_has_backward(const nv_op_def *op, const nv_op_attrs *a);
/* Whether input i of op gets a gradient (not an index input like the
 * cross_entropy target). */
bool nv_op_grad_input(const nv_op_def *op, int i);

/* The structure of d out / d in[i], as groups: output element o depends only on
 * input elements of group out_group[o]; input element e is in group in_group[e]
 * at position in_pos[e] (0 <= pos < n_pos); slot[g * n_pos + p] is the input
 * element at (g, p) or -1. Perturbing every input at one position changes each
 * output through exactly one input element: n_pos perturbations give every
 * structurally non-zero Jacobian element. */
typedef struct nv_jac_map {
    int64_t n_in, n_out, n_groups, n_pos;
    int64_t *in_group, *in_pos, *out_group, *slot;
} nv_jac_map;

/* Build the map for input i. in[] as for nv_op_infer. Returns 0, -EINVAL (op
 * without backward, non-differentiable input) or -ENOMEM. */
int nv_jac_map_new(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   int i, nv_jac_map **ret);
void nv_jac_map_free(nv_jac_map *m); /* NULL is a no-op */

/* Forward in plain fp64 arithmetic (libm, not correctly rounded: its error is
 * ~1e-16 relative, far below what central differences resolve). out holds the
 * inferred output's numel. Returns 0 or a negative NV_E_* code. */
int nv_op_forward_f64(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, double *out);

/* Reference VJP in fp64: gx[i] (numel of in[i]) = (d out / d in[i])^T gy for
 * each differentiable input; gx[i] may be NULL to skip it (and is ignored for
 * index inputs). mag (may be NULL; same layout as gx) receives the same
 * product evaluated with |.| on every term and factor: the magnitude the
 * rounding errors of a device's backward scale with (Higham, Accuracy and
 * Stability of Numerical Algorithms, 2nd ed., §3.1: running error bounds). */
int nv_op_vjp(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
              const double *gy, double *const *gx, double *const *mag);

/* Sensitivity of input 0's gradient to a relative perturbation of the forward
 * output y, for ops whose backward is naturally computed from y (tanh: 1 - y^2,
 * sigmoid, exp, sqrt, rsqrt, reciprocal, softmax, log_softmax, norm2,
 * logsumexp): sens[e] = sum_o |d gx_e / d y_o| |y_o| (0 for the other ops).
 * A device that saves y rounded to its storage dtype (unit roundoff u_s) errs
 * by up to u_s sens[e] from that alone. */
int nv_op_vjp_sens(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const double *gy, double *sens);

/* The longest accumulation in the backward of input i (softmax: the row
 * length; layer_norm weight: the number of rows; matmul A: N): the n of the
 * device check's g(n). 1 when the backward has no reduction. */
int64_t nv_op_vjp_reduction_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                                const nv_tensor *const *in, int i);

/* Move inputs into the op's differentiable domain, in place, keeping every
 * value representable in its tensor's dtype: away from kinks (relu, abs at 0;
 * maximum/minimum and max ties), poles (reciprocal, div, log at 0) and domain
 * ends (sqrt, rsqrt, log, pow's base), by at least margin (>= 1e-2, far beyond
 * any finite-difference step). in[] contiguous. Returns 0 or -EINVAL. */
int nv_op_grad_domain(const nv_op_def *op, const nv_op_attrs *a, int n_in, nv_tensor *const *in);

#endif
