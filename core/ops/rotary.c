/* rotary_embedding (NV_OPK_ROTARY, catalog.h): the rotary position embedding
 * of Su et al., "RoFormer: Enhanced Transformer with Rotary Position
 * Embedding" (arXiv:2104.09864, 2021, §3.4.2 eq. 34): each pair of a head's
 * coordinates is rotated by an angle proportional to the position.
 *
 * Definition (attrs offset O, theta B, interleaved, head_dim hd):
 * x [.., T, D] with D = H hd, hd even, is seen as rows of D values; row r has
 * the position p = O + (r mod T) (the second-to-last axis is the sequence;
 * [.., T, H, hd] row-major is the same memory as [.., T, H hd], so a per-head
 * layout is passed as [.., T, H hd] with head_dim hd). In each head, pair k in
 * [0, hd/2) has the frequency B^(-2k/hd) and the angle
 *     phi = p B^(-2k/hd)            (exact real number),
 * and with (a, b) its elements (nv_rope_pair)
 *     y_a = x_a cos phi - x_b sin phi,   y_b = x_b cos phi + x_a sin phi.
 * The pairing is the half split (a, b) = (k, k + hd/2) by default: GPT-NeoX's
 * and Hugging Face transformers' Llama "rotate_half" (x * cos + rotate_half(x)
 * * sin with cos, sin repeated over the two halves), which numval's decoder
 * composes (docs/MODEL.md); interleaved = true pairs (2k, 2k + 1), RoFormer's
 * own block-diagonal R_Theta and Meta's original Llama (complex view of
 * adjacent pairs). The two are the same rotation up to a permutation of the
 * coordinates, so a device that uses the other pairing fails (its outputs
 * rotate the wrong coordinates together).
 *
 * Positions are at most 2^31 - 1 (int32 positions, as frameworks hold them),
 * B in [2, 1e9] (attrs.c). */
#include <stdio.h>

#include "numval/backend.h"
#include "ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

#define ROPE_MAX_POS 2147483647ll

int nv_rope_geom_of(const nv_op_attrs *a, const nv_tensor *x, nv_rope_geom *g)
{
    if (!a || !x || x->ndim < 2)
        return -1;
    int64_t d = x->shape[x->ndim - 1], t = x->shape[x->ndim - 2];
    int64_t hd = a->head_dim > 0 ? a->head_dim : d;
    if (d < 2 || hd < 2 || hd % 2 || d % hd || t < 1)
        return -1;
    if (a->offset > (uint64_t)ROPE_MAX_POS || (int64_t)a->offset + t - 1 > ROPE_MAX_POS)
        return -1;
    *g = (nv_rope_geom){.rows = x->numel / d,
                        .t = t,
                        .d = d,
                        .hd = hd,
                        .heads = d / hd,
                        .offset = a->offset,
                        .theta = a->theta,
                        .interleaved = a->interleaved};
    return 0;
}

int nvo_rotary_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen)
{
    (void)n_in;
    const nv_tensor *x = in[0];
    char s0[96];
    if (!nvo_dtype_supported(op, x->dtype))
        return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input 'x'", op->name,
                   nv_dtype_name(x->dtype));
    if (x->ndim < 2)
        return ERR(NV_E_SHAPE, "op '%s': x must be [.., T, D] (at least 2 dims), got shape %s",
                   op->name, nvo_shape_str(x, s0, sizeof s0));
    int64_t d = x->shape[x->ndim - 1], t = x->shape[x->ndim - 2];
    int64_t hd = a->head_dim > 0 ? a->head_dim : d;
    if (hd < 2 || hd % 2 || d % hd)
        return ERR(NV_E_SHAPE,
                   "op '%s': head_dim %lld must be even and divide the last dimension of shape "
                   "%s",
                   op->name, (long long)hd, nvo_shape_str(x, s0, sizeof s0));
    if (t < 1)
        return ERR(NV_E_SHAPE, "op '%s': shape %s has no positions (T = 0)", op->name,
                   nvo_shape_str(x, s0, sizeof s0));
    if (a->offset > (uint64_t)ROPE_MAX_POS || (int64_t)a->offset + t - 1 > ROPE_MAX_POS)
        return ERR(NV_E_SHAPE,
                   "op '%s': positions %llu .. %llu of shape %s pass 2^31 - 1 (int32 "
                   "positions)",
                   op->name, (unsigned long long)a->offset,
                   (unsigned long long)a->offset + (unsigned long long)t - 1,
                   nvo_shape_str(x, s0, sizeof s0));
    *ret_ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++)
        ret_shape[i] = x->shape[i];
    return 0;
}
