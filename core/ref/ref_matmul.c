/* matmul / bmm: shape rules and the exact reference.
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
 * (nv_dd_dot, numerics/ddsum.h). Without scales fp64 operands are allowed: TwoProd is exact
 * there too unless a product's low part underflows (|a b| < 2^-969).
 * abs_sum receives sum_k |a sa| |b sb|, the quantity of the Higham bound
 * |C - fl(C)| <= gamma_K |A| |B| (Higham, Accuracy and Stability, §3.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ddsum.h"
#include "numval/backend.h"
#include "core/ops/ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

static bool mm_in_dtype(nv_dtype dt)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    return di && di->is_float && dt != NV_DT_E8M0;
}

static const char *scale_name(const nv_op_attrs *a)
{
    switch (a->scale) {
    case NV_SCALE_TENSOR:
        return "tensor";
    case NV_SCALE_CHANNEL:
        return "channel";
    case NV_SCALE_BLOCK:
        return "block";
    case NV_SCALE_TILE:
        return "tile";
    default:
        return "none";
    }
}

/* Expected shape of scale operand s (0: A's, 1: B's); false when not divisible. */
static bool scale_shape(const nv_op_attrs *a, int s, int nb, const int64_t *batch, int64_t m,
                        int64_t k, int64_t n, int *ret_nd, int64_t *ret)
{
    int nd = 0;
    if (a->scale == NV_SCALE_TENSOR) {
        ret[0] = 1;
        *ret_nd = 1;
        return true;
    }
    for (int i = 0; i < nb; i++)
        ret[nd++] = batch[i];
    int64_t r = s == 0 ? m : k, c = s == 0 ? k : n;
    switch (a->scale) {
    case NV_SCALE_CHANNEL:
        ret[nd++] = s == 0 ? m : n;
        break;
    case NV_SCALE_BLOCK:
        if (k % a->block)
            return false;
        ret[nd++] = s == 0 ? m : k / a->block;
        ret[nd++] = s == 0 ? k / a->block : n;
        break;
    default: /* tile */
        if (r % a->tile_r || c % a->tile_c)
            return false;
        ret[nd++] = r / a->tile_r;
        ret[nd++] = c / a->tile_c;
        break;
    }
    *ret_nd = nd;
    return true;
}

static int check_scales(const nv_op_attrs *a, const nv_tensor *const *in, int nb, int64_t m,
                        int64_t k, int64_t n, char *err, size_t errlen)
{
    char s0[96], s1[96];
    for (int s = 0; s < 2; s++) {
        const nv_tensor *t = in[2 + s];
        int nd;
        int64_t want[NV_MAX_DIMS];
        if (!scale_shape(a, s, nb, in[0]->shape, m, k, n, &nd, want))
            return ERR(NV_E_SHAPE,
                       "op 'matmul': scale '%s' does not divide shapes %s of 'a' and %s of 'b'",
                       a->scale == NV_SCALE_BLOCK ? "block" : "tile",
                       nvo_shape_str(in[0], s0, sizeof s0), nvo_shape_str(in[1], s1, sizeof s1));
        bool ok = t->ndim == nd || (a->scale == NV_SCALE_TENSOR && t->numel == 1);
        for (int i = 0; ok && a->scale != NV_SCALE_TENSOR && i < nd; i++)
            ok = t->shape[i] == want[i];
        if (a->scale == NV_SCALE_TENSOR)
            ok = t->numel == 1;
        if (!ok) {
            nv_tensor w = {.ndim = nd};
            memcpy(w.shape, want, sizeof(int64_t) * (size_t)nd);
            return ERR(NV_E_SHAPE, "op 'matmul': shape %s of '%s' must be %s for scale '%s'",
                       nvo_shape_str(t, s0, sizeof s0), s ? "scale_b" : "scale_a",
                       nvo_shape_str(&w, s1, sizeof s1), scale_name(a));
        }
        bool dt_ok =
            a->scale == NV_SCALE_BLOCK
                ? t->dtype == NV_DT_E8M0
                : (t->dtype == NV_DT_FP32 || t->dtype == NV_DT_BF16 || t->dtype == NV_DT_FP16);
        if (!dt_ok)
            return ERR(NV_E_DTYPE, "op 'matmul': dtype '%s' of '%s' is not a %s scale dtype (%s)",
                       nv_dtype_name(t->dtype), s ? "scale_b" : "scale_a", scale_name(a),
                       a->scale == NV_SCALE_BLOCK ? "e8m0" : "fp32, bf16 or fp16");
    }
    return 0;
}

int nvo_matmul_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen)
{
    char s0[96], s1[96];
    int want = a->scale == NV_SCALE_NONE ? 2 : 4;
    if (n_in != want)
        return ERR(NV_E_INVALID, "op '%s' with scale '%s' takes %d inputs, got %d", op->name,
                   scale_name(a), want, n_in);
    const nv_tensor *A = in[0], *B = in[1];
    for (int i = 0; i < 2; i++) {
        if (!mm_in_dtype(in[i]->dtype))
            return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                       nv_dtype_name(in[i]->dtype), i ? "b" : "a");
        if (a->scale != NV_SCALE_NONE && in[i]->dtype == NV_DT_FP64)
            return ERR(NV_E_DTYPE, "op '%s': scaled operands cannot be 'fp64' (input '%s')",
                       op->name, i ? "b" : "a");
    }
    bool ok = A->ndim >= 2 && A->ndim == B->ndim;
    int nd = A->ndim;
    for (int i = 0; ok && i < nd - 2; i++)
        ok = A->shape[i] == B->shape[i];
    if (ok)
        ok = A->shape[nd - 1] == B->shape[nd - 2];
    if (!ok)
        return ERR(NV_E_SHAPE,
                   "op '%s': shapes %s of 'a' and %s of 'b' do not fit [.., M, K] x [.., K, N] "
                   "with equal batch dimensions",
                   op->name, nvo_shape_str(A, s0, sizeof s0), nvo_shape_str(B, s1, sizeof s1));
    int64_t m = A->shape[nd - 2], k = A->shape[nd - 1], n = B->shape[nd - 1];
    if (want == 4) {
        int r = check_scales(a, in, nd - 2, m, k, n, err, errlen);
        if (r < 0)
            return r;
    }
    memcpy(ret_shape, A->shape, sizeof(int64_t) * (size_t)(nd - 1));
    ret_shape[nd - 1] = n;
    *ret_ndim = nd;
    return 0;
}

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
