/* Internal interface of core/ops: the helpers the catalog's files share (edge
 * functions, matmul shape rules, dtype steps). Only files in core/ops include
 * this; core/ref uses opmeta.h. */
#ifndef NUMVAL_OPS_INTERNAL_H
#define NUMVAL_OPS_INTERNAL_H

#include "opmeta.h"

/* Matmul shape and dtype rules (matmul.c), same contract as nv_op_infer. */
int nvo_matmul_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen);

/* Shape rules of the data-movement ops (layout.c), same contract as nv_op_infer. */
int nvo_layout_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen);

/* conv2d shape rules (conv.c), same contract as nv_op_infer. */
int nvo_conv_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen);

/* Selection shape rules (select.c): x [.., V], V >= 1, a float dtype -> [..]. */
int nvo_select_infer(const nv_op_def *op, int n_in, const nv_tensor *const *in, int *ret_ndim,
                     int64_t *ret_shape, char *err, size_t errlen);

/* rotary_embedding shape rules (rotary.c), same contract as nv_op_infer. */
int nvo_rotary_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen);

/* Edge functions (edges.c). */
int nvo_edges_exp(nv_dtype dt, double *out, int max);
int nvo_edges_exp2(nv_dtype dt, double *out, int max);
int nvo_edges_expm1(nv_dtype dt, double *out, int max);
int nvo_edges_log(nv_dtype dt, double *out, int max);
int nvo_edges_log1p(nv_dtype dt, double *out, int max);
int nvo_edges_tanh(nv_dtype dt, double *out, int max);
int nvo_edges_erf(nv_dtype dt, double *out, int max);
int nvo_edges_sigmoid(nv_dtype dt, double *out, int max);
int nvo_edges_gelu(nv_dtype dt, double *out, int max);
int nvo_edges_silu(nv_dtype dt, double *out, int max);
int nvo_edges_sqrt(nv_dtype dt, double *out, int max);
int nvo_edges_reciprocal(nv_dtype dt, double *out, int max);
int nvo_edges_trig(nv_dtype dt, double *out, int max);
int nvo_edges_pow(nv_dtype dt, double *out, int max);
int nvo_edges_generic(nv_dtype dt, double *out, int max);
int nvo_edges_reduce(nv_dtype dt, double *out, int max);

/* The next value of dt above (dir > 0) or below (dir < 0) the dt value x. */
double nvo_dt_step(nv_dtype dt, double x, int dir);

#endif
