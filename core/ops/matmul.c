/* matmul / bmm: shape and dtype rules (nv_op_infer).
 *
 * C[.., m, n] = sum_k (A[.., m, k] sa(m, k)) (B[.., k, n] sb(k, n)), batch dims
 * equal (no broadcasting). Scale operand layouts are those of catalog.h; MX block
 * scales are e8m0 (OCP MX v1.0 §5) over blocks of attrs.block elements along K,
 * which must divide K. Scaled operands cannot be fp64: the exact reference
 * (core/ref/ref_matmul.c) relies on every scaled operand a sa being a double. */
#include <stdio.h>
#include <string.h>

#include "numval/backend.h"
#include "ops_internal.h"

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
