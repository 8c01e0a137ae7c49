/* matmul / bmm: the exact reference (the shape rules are core/ops/matmul.c).
 *
 * C[.., m, n] = sum_k (A[.., m, k] sa(m, k)) (B[.., k, n] sb(k, n)), batch dims
 * equal (no broadcasting). Scale operand layouts are those of catalog.h; MX block
 * scales are e8m0 powers of two 2^(e - 127) applied to blocks of attrs.block
 * consecutive elements along K (OCP MX v1.0 §5; an e8m0 NaN scale makes its
 * block NaN, §5.3). The reference decodes every operand exactly, so it is the
 * exact product of the decoded inputs.
 *
 * Exactness: A and B elements of scaled products have at most 24 significand
 * bits (scales are refused with fp64 operands), and a scale has at most 24 bits,
 * so each scaled operand a sa is a double exactly and each product is hi + lo
 * exactly by TwoProd; the 2K doubles of a dot product are then summed exactly
 * (nv_dd_dot, ddsum.h). Without scales fp64 operands are allowed: TwoProd is exact
 * there too unless a product's low part underflows (|a b| < 2^-969).
 * abs_sum receives sum_k |a sa| |b sb|, the quantity of the Higham bound
 * |C - fl(C)| <= gamma_K |A| |B| (Higham, Accuracy and Stability, §3.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ddsum.h"
#include "numval/backend.h"
#include "ref_internal.h"

/* Scale of operand s at (batch b, row r, col c) of that operand. */
static double scale_at(const nv_op_attrs *a, const nv_tensor *t, int s, int nb, int64_t b,
                       const int64_t *bshape, int64_t r, int64_t c)
{
    int64_t idx[NV_MAX_DIMS];
    if (a->scale == NV_SCALE_TENSOR)
        return t->data[t->offset];
    int64_t rem = b;
    for (int i = nb - 1; i >= 0; i--) {
        idx[i] = rem % bshape[i];
        rem /= bshape[i];
    }
    int nd = nb;
    switch (a->scale) {
    case NV_SCALE_CHANNEL:
        idx[nd++] = s == 0 ? r : c;
        break;
    case NV_SCALE_BLOCK:
        idx[nd++] = s == 0 ? r : r / a->block;
        idx[nd++] = s == 0 ? c / a->block : c;
        break;
    default:
        idx[nd++] = r / a->tile_r;
        idx[nd++] = c / a->tile_c;
        break;
    }
    return t->data[nv_tensor_offset(t, idx)];
}

/* Operand s gathered scaled: A as [batch][m][k], B transposed as [batch][n][k]. */
static double *gather(const nv_op_attrs *a, const nv_tensor *const *in, int s, int64_t nbatch,
                      int64_t m, int64_t k, int64_t n)
{
    const nv_tensor *t = in[s];
    int nd = t->ndim, nb = nd - 2;
    int64_t rows = s == 0 ? m : n;
    double *g = malloc(sizeof(double) * (size_t)(nbatch * rows * k + 1));
    if (!g)
        return NULL;
    int64_t idx[NV_MAX_DIMS];
    for (int64_t b = 0; b < nbatch; b++) {
        int64_t rem = b;
        for (int i = nb - 1; i >= 0; i--) {
            idx[i] = rem % t->shape[i];
            rem /= t->shape[i];
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t kk = 0; kk < k; kk++) {
                idx[nb] = s == 0 ? r : kk;
                idx[nb + 1] = s == 0 ? kk : r;
                double v = t->data[nv_tensor_offset(t, idx)];
                if (a->scale != NV_SCALE_NONE)
                    v *= scale_at(a, in[2 + s], s, nb, b, t->shape, idx[nb], idx[nb + 1]);
                g[(b * rows + r) * k + kk] = v;
            }
    }
    return g;
}

int nvo_ref_matmul(const nv_op_attrs *a, int n_in, const nv_tensor *const *in, nv_tensor *out_hi,
                   nv_tensor *out_lo, nv_tensor *abs_sum)
{
    (void)n_in;
    const nv_tensor *A = in[0], *B = in[1];
    int nd = A->ndim;
    int64_t m = A->shape[nd - 2], k = A->shape[nd - 1], n = B->shape[nd - 1];
    int64_t nbatch = 1;
    for (int i = 0; i < nd - 2; i++)
        nbatch *= A->shape[i];
    int r = NV_E_NOMEM;
    double *ga = gather(a, in, 0, nbatch, m, k, n);
    double *gb = gather(a, in, 1, nbatch, m, k, n);
    if (!ga || !gb)
        goto out;
    for (int64_t b = 0; b < nbatch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const double *ra = ga + (b * m + i) * k, *rb = gb + (b * n + j) * k;
                double hi, lo, abs;
                nv_dd_dot(ra, 1, rb, 1, k, &hi, &lo, &abs);
                int64_t o = (b * m + i) * n + j;
                out_hi->data[nv_tensor_offset_linear(out_hi, o)] = hi;
                if (out_lo)
                    out_lo->data[nv_tensor_offset_linear(out_lo, o)] = lo;
                if (abs_sum)
                    abs_sum->data[nv_tensor_offset_linear(abs_sum, o)] = abs;
            }
    r = 0;
out:
    free(ga);
    free(gb);
    return r;
}
