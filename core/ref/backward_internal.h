/* Internal interface of the backward references (ref_backward*.c). The row
 * view (nvb_lines) is core/ops/opmeta.h, shared with the Jacobian structure. */
#ifndef NUMVAL_BACKWARD_INTERNAL_H
#define NUMVAL_BACKWARD_INTERNAL_H

#include "backward.h"
#include "core/ops/opmeta.h"

/* The line cache of backward.h (ref_rows_cache.c). Per-line entries are valid
 * while the line's elements keep the bits saved in x; an exponential (arg,
 * ex) while its argument keeps its bits. */
enum { NVB_RC_SOFTMAX = 1, NVB_RC_NORM = 2, NVB_RC_MABS = 4, NVB_RC_EXP = 8 };

struct nv_ref_cache {
    int id; /* the key: op, the norms' eps (bits), the line view; -1: empty */
    uint64_t eps_bits;
    nvb_lines L;
    size_t cap_el, cap_lines;
    double *x;                     /* per element, at its own offset: the values last seen */
    uint8_t *have;                 /* per line: NVB_RC_* */
    double *lse, *mu, *rstd, *mab; /* per line */
    double *p, *arg, *ex;          /* per element, line-major (l n + j): softmax, exp memo */
};

/* Bind c to op id, attrs a and lines L: every entry dropped when the key
 * changes, the arrays grown to fit. Returns 0 or NV_E_NOMEM. */
int nvb_cache_bind(nv_ref_cache *c, int id, const nv_op_attrs *a, const nvb_lines *L);

/* Row-wise ops and matmul (ref_backward_rows.c), same contracts as backward.h. */
int nvb_forward_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, double *out,
                     nv_ref_cache *cache);
int nvb_vjp_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                 double *const *gx, double *const *mag, nv_ref_cache *cache);
int nvb_forward_matmul(const nv_tensor *const *in, double *out);
int nvb_vjp_matmul(const nv_tensor *const *in, const double *gy, double *const *gx,
                   double *const *mag);

/* Second-order VJPs of the row-wise ops and matmul (ref_backward2_rows.c), same
 * contract as backward.h nv_op_vjp2. */
int nvb_vjp2_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                  const double *const *v, double *const *hx, double *const *mag);
int nvb_vjp2_matmul(const nv_tensor *const *in, const double *gy, const double *const *v,
                    double *const *hx, double *const *mag);

/* The data-movement ops (ref_layout_backward.c): forward, the scatter-add VJP
 * (exact sums of repeated embedding ids), the zero second-order VJP, and the
 * longest scatter sum of input i (nv_op_vjp_reduction_len). */
int nvb_forward_layout(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                       const nv_tensor *const *in, double *out);
int nvb_vjp_layout(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const double *gy, double *const *gx, double *const *mag);
int nvb_vjp2_layout(const nv_tensor *const *in, double *const *hx, double *const *mag);
int64_t nvb_layout_sum_len(int id, const nv_tensor *const *in, int i);

/* conv2d and avg_pool2d (ref_conv_backward.c, id their nvo_id): the fp64
 * forward, the VJP and second-order VJP (contracts of backward.h), and the
 * longest sum of input i's VJP (nv_op_vjp_reduction_len). */
int nvb_forward_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, double *out);
int nvb_vjp_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                 double *const *gx, double *const *mag);
int nvb_vjp2_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                  const double *const *v, double *const *hx, double *const *mag);
int64_t nvb_conv_sum_len(int id, const nv_op_attrs *a, const nv_tensor *const *in, int i);

/* rotary_embedding (ref_rotary.c): the fp64 forward with correctly rounded
 * cos and sin, the VJP (the rotation by -phi; mag adds the angle's
 * sensitivity) and the zero second-order VJP (the op is linear); every
 * gradient element is a sum of two terms. */
int nvb_forward_rotary(const nv_op_attrs *a, const nv_tensor *const *in, double *out);
int nvb_vjp_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                   double *const *gx, double *const *mag);
/* nv_op_vjp_sens of rotary_embedding: 3 (|gy_a c| + |gy_b s|) (gx_a), the
 * error of a backward whose tables and products are held in the storage dtype. */
int nvb_sens_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                    double *sens);
int nvb_vjp2_rotary(const nv_tensor *const *in, double *const *hx, double *const *mag);

#endif
