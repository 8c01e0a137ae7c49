/* Internal interface of the backward references (ref_backward*.c). */
#ifndef NUMVAL_BACKWARD_INTERNAL_H
#define NUMVAL_BACKWARD_INTERNAL_H

#include "backward.h"
#include "core/ops/ops_internal.h"

/* A tensor seen as outer x n x inner around the reduction axis: element (o, j, i)
 * is at (o * n + j) * inner + i; line l = o * inner + i. */
typedef struct nvb_lines {
    int64_t outer, n, inner;
} nvb_lines;

static inline int64_t nvb_at(const nvb_lines *L, int64_t l, int64_t j)
{
    return ((l / L->inner) * L->n + j) * L->inner + (l % L->inner);
}

/* The lines of in[0] for a row-wise op (axis per nvo_norm_axis). */
int nvb_lines_of(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x, nvb_lines *ret);

/* Row-wise ops and matmul (ref_backward_rows.c), same contracts as backward.h. */
int nvb_forward_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, double *out);
int nvb_vjp_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                 double *const *gx, double *const *mag);
int nvb_forward_matmul(const nv_tensor *const *in, double *out);
int nvb_vjp_matmul(const nv_tensor *const *in, const double *gy, double *const *gx,
                   double *const *mag);

#endif
