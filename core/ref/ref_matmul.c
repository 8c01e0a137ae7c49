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
 * so each scaled operand a sa is a double exactly; each product is then held
 * exactly and the K products are summed exactly (nv_dd_dot, ddsum.h: TwoProd
 * after scaling the factors by powers of two), whatever their magnitudes: fp64
 * operands whose products overflow (or underflow) fp64 individually, but whose
 * dot product does not, get the exact result, as a correct device with a wide
 * enough accumulator does.
 * abs_sum receives sum_k |a sa| |b sb|, the quantity of the Higham bound
 * |C - fl(C)| <= gamma_K |A| |B| (Higham, Accuracy and Stability, §3.5), in the
 * wide form of nv_ref_out; so does peak (every partial sum of products is below it). */
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

/* max_k |g[r k + kk]| over the finite values of each of the rows rows (NULL on
 * ENOMEM or when g is NULL). */
static double *row_max(const double *g, int64_t rows, int64_t k)
{
    double *mx = g ? malloc(sizeof(double) * (size_t)(rows + 1)) : NULL;
    for (int64_t r = 0; mx && r < rows; r++) {
        mx[r] = 0;
        for (int64_t kk = 0; kk < k; kk++)
            if (isfinite(g[r * k + kk]))
                mx[r] = fmax(mx[r], fabs(g[r * k + kk]));
    }
    return mx;
}

int nvo_ref_matmul(const nv_op_attrs *a, int n_in, const nv_tensor *const *in, const nv_ref_out *o)
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
    double *amax = o->peak ? row_max(ga, nbatch * m, k) : NULL;
    double *bmax = o->peak ? row_max(gb, nbatch * n, k) : NULL;
    if (!ga || !gb || (o->peak && (!amax || !bmax)))
        goto out;
    bool want_abs = o->abs_sum || o->peak;
    for (int64_t b = 0; b < nbatch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                /* peak: the partial sums are below sum |a b|, and the device holds
                 * the operands in its accumulator too (an fp64 operand beyond an
                 * fp32 accumulator's range cannot be multiplied there). */
                const double *ra = ga + (b * m + i) * k, *rb = gb + (b * n + j) * k;
                double hi, lo;
                nv_mag abs = {0, 0};
                nv_dd_dot(ra, 1, rb, 1, k, &hi, &lo, want_abs ? &abs : NULL);
                int64_t e = (b * m + i) * n + j;
                o->hi->data[nv_tensor_offset_linear(o->hi, e)] = hi;
                if (o->lo)
                    o->lo->data[nv_tensor_offset_linear(o->lo, e)] = lo;
                if (o->abs_sum)
                    nvo_put_abs(o, nv_tensor_offset_linear(o->abs_sum, e),
                                o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, e) : 0, abs);
                if (o->peak) {
                    nv_mag pk = abs, ma = nv_mag_from_d(fmax(amax[b * m + i], bmax[b * n + j]));
                    nvo_put_peak(o, nv_tensor_offset_linear(o->peak, e),
                                 nv_mag_cmp(ma, pk) > 0 ? ma : pk);
                }
            }
    r = 0;
out:
    free(ga);
    free(gb);
    free(amax);
    free(bmax);
    return r;
}
