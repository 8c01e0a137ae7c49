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

/* A cache of the row-wise references' line work (softmax's exponentials and
 * probabilities, the norms' mean, 1/std and mean |x|) across calls on inputs
 * that change in few places, as the formula check's perturbed forwards and its
 * VJPs at one point do. The results are bit-identical to the uncached calls: a
 * line's values are reused only while every element of the line keeps the
 * bits they were computed from, and an exponential only for an argument with
 * the same bits (exp is a deterministic function of its argument). For one op
 * and one attrs at a time (a different op, attrs or shape drops every entry);
 * the other op kinds ignore it. Not thread-safe: one caller at a time. */
typedef struct nv_ref_cache nv_ref_cache;

/* New empty cache; NULL on ENOMEM. */
nv_ref_cache *nv_ref_cache_new(void);
/* Forget every entry, keeping the memory. */
void nv_ref_cache_clear(nv_ref_cache *c);
/* NULL is a no-op. */
void nv_ref_cache_free(nv_ref_cache *c);

/* nv_op_forward_f64 and nv_op_vjp through cache (may be NULL: the plain calls). */
int nv_op_forward_f64_cached(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                             const nv_tensor *const *in, double *out, nv_ref_cache *cache);
int nv_op_vjp_cached(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, const double *gy, double *const *gx,
                     double *const *mag, nv_ref_cache *cache);

/* Reference second-order VJP (double backward, a VJP of the VJP) in fp64. With
 * g_i = VJP(x, gy)_i the first-order gradients of the differentiable inputs,
 * hx[k] (numel of in[k]) = d/dx_k sum_i <g_i, v[i]> = (H v)_k, where H is the
 * Hessian of gy . f(x) over all differentiable inputs (mixed blocks included):
 * what a framework's double backward returns for the inputs when it is handed
 * v as the cotangent of the gradients. Evaluated as the directional derivative
 * of the closed-form VJP along v (forward mode over the reverse formulas), so
 * its error is a few fp64 ulps of mag, like nv_op_vjp's. v[i] (numel of in[i])
 * may be NULL (a zero direction); hx[k] may be NULL to skip it; mag (may be
 * NULL; layout of hx) receives the product with |.| on every term and factor.
 * Returns 0 or a negative NV_E_* code. */
int nv_op_vjp2(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
               const double *gy, const double *const *v, double *const *hx, double *const *mag);

/* The longest sum in evaluating input i's reference VJP or second-order VJP
 * from the inputs alone, forward statistics recomputed (softmax, norm2: the line;
 * layer_norm weight: the rows plus the line; matmul A: N, B: M; 1 for
 * elementwise ops): the n of the worst-case rounding bound gamma_n of that
 * evaluation (Higham §3.1, §4.2), which the second-order check's error model
 * and the device's double-backward tolerance scale with. */
int64_t nv_op_grad_eval_len(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                            const nv_tensor *const *in, int i);

/* Sensitivity of input 0's gradient to a relative perturbation of the forward
 * output y, for ops whose backward is naturally computed from y (tanh: 1 - y^2,
 * sigmoid, exp, sqrt, rsqrt, reciprocal, softmax, log_softmax, norm2,
 * logsumexp): sens[e] = sum_o |d gx_e / d y_o| |y_o| (0 for the other ops).
 * A device that saves y rounded to its storage dtype (unit roundoff u_s) errs
 * by up to u_s sens[e] from that alone. rotary_embedding: the sensitivity to
 * its cos and sin tables and its products, which a framework composed of
 * elementwise ops holds in the storage dtype (3 (|gy_a cos| + |gy_b sin|)). */
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
