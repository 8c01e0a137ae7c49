/* Backward of the catalog ops: the reference vector-Jacobian product (VJP) in
 * fp64, the plain fp64 forward that finite differences differentiate, the
 * magnitudes that device-check tolerances scale with, and each op's
 * differentiable input domain. Each op's declared Jacobian structure is
 * core/ops/jacobian.h (included here).
 *
 * Every tensor here is contiguous row-major (nv_tensor_contiguous); gradients
 * and outputs are plain double arrays in the row-major order of their shape. */
#ifndef NUMVAL_BACKWARD_H
#define NUMVAL_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ops/catalog.h"
#include "core/ops/jacobian.h"

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
