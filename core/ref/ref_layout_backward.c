/* Reference backward of the data-movement ops (NV_OPK_LAYOUT): transpose,
 * split_heads, merge_heads and embedding. Each output element is one element
 * of input 0 moved (nv_op_layout_sources), so the VJP is the scatter-add
 *   gx[e] = sum over the outputs o moved from e of gy[o]:
 * one term per element for the permutations (their inverse permutation), and
 * for embedding the sum of the output-gradient rows of every position whose
 * id is that row (Paszke et al., PyTorch's embedding_backward: index_add of
 * grad_output into the weight rows). A sum of repeated ids is computed exactly
 * and rounded once (nv_dd_sum, ddsum.h), so the reference is the correctly
 * rounded fp64 value whatever the multiplicity; ids get no gradient. The ops
 * are linear in input 0, so their second-order VJP is zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward_internal.h"
#include "ddsum.h"
#include "numval/backend.h"

static int64_t out_numel(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                         const nv_tensor *const *in)
{
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    if (nv_op_infer(op, a, n_in, in, &nd, shape, err, sizeof err) != 0)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

int nvb_forward_layout(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                       const nv_tensor *const *in, double *out)
{
    char err[160];
    return nv_op_layout_eval(op, a, n_in, in, out, err, sizeof err);
}

int nvb_vjp_layout(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const double *gy, double *const *gx, double *const *mag)
{
    int64_t n_out = out_numel(op, a, n_in, in), n_x = in[0]->numel;
    if (n_out < 0)
        return NV_E_INVALID;
    if ((!gx || !gx[0]) && (!mag || !mag[0]))
        return 0;
    /* Counting sort of the outputs by source: first[e] .. first[e + 1] index
     * order[] for the outputs moved from e, in output order. */
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(n_out + 1));
    int64_t *first = calloc((size_t)(n_x + 2), sizeof(int64_t));
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(n_out + 1));
    double *terms = malloc(sizeof(double) * (size_t)(n_out + 1));
    int r = NV_E_NOMEM;
    if (!src || !first || !order || !terms)
        goto out;
    if ((r = nv_op_layout_sources(op, a, n_in, in, n_out, src)) != NV_OK)
        goto out;
    for (int64_t o = 0; o < n_out; o++)
        first[src[o] + 2]++;
    for (int64_t e = 0; e < n_x; e++)
        first[e + 2] += first[e + 1];
    for (int64_t o = 0; o < n_out; o++)
        order[first[src[o] + 1]++] = o;
    for (int64_t e = 0; e < n_x; e++) {
        int64_t k = 0;
        for (int64_t j = first[e]; j < first[e + 1]; j++)
            terms[k++] = gy[order[j]];
        double hi = 0, lo = 0;
        nv_mag abs = {0, 0};
        nv_dd_sum(terms, k, 1, &hi, &lo, &abs);
        if (gx && gx[0])
            gx[0][e] = hi;
        if (mag && mag[0])
            mag[0][e] = nv_mag_to_d(abs);
    }
    r = 0;
out:
    free(src);
    free(first);
    free(order);
    free(terms);
    return r;
}

int nvb_vjp2_layout(const nv_tensor *const *in, double *const *hx, double *const *mag)
{
    int64_t n = in[0]->numel;
    for (int64_t e = 0; e < n; e++) {
        if (hx && hx[0])
            hx[0][e] = 0;
        if (mag && mag[0])
            mag[0][e] = 0;
    }
    return 0;
}

int64_t nvb_layout_sum_len(int id, const nv_tensor *const *in, int i)
{
    /* embedding: an id may repeat at every position, so a weight row's
     * gradient sums up to numel(ids) terms; a permutation moves each element
     * once */
    return id == NVO_EMBEDDING && i == 0 && in[1]->numel > 0 ? in[1]->numel : 1;
}
