/* The Jacobian structure of the catalog ops (docs/JOBS.md "gradient"): which
 * ops have a backward the gradient job checks, which inputs get a gradient, and
 * the structure of d out / d in as groups. Metadata only (no arithmetic on
 * values), so numvald validates gradient jobs with it; the reference backward
 * itself is core/ref/backward.h. */
#ifndef NUMVAL_JACOBIAN_H
#define NUMVAL_JACOBIAN_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

/* The Jacobian structure an op declares (docs/JOBS.md "gradient"):
 * diagonal: each output element depends on the same-index element of each input;
 * row_block: outputs of one line along the axis depend only on that line of x
 *   (softmax, layer_norm, the reductions, cross_entropy per row); layer_norm and
 *   rms_norm's weight/bias act per column;
 * bilinear: matmul, C[m,n] depends on row m of A and column n of B;
 * dense: every output may depend on every input (cross_entropy with "mean";
 *   max_pool2d and conv2d, whose windows overlap in general);
 * gather: each output element is one input element moved (transpose,
 *   split_heads, merge_heads: a permutation; embedding: weight[ids[t], k]). */
typedef enum nv_jac_kind {
    NV_JAC_DIAGONAL,
    NV_JAC_ROW_BLOCK,
    NV_JAC_BILINEAR,
    NV_JAC_DENSE,
    NV_JAC_GATHER,
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

#endif
