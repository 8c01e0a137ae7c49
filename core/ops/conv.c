/* conv2d (NV_OPK_CONV, catalog.h): shape rules and the patch geometry the
 * exact reference, emu's kernels and the backward share.
 *
 * out[n, co, oh, ow] = sum_{c, i, j} x[n, c, oh*s - p + i*d, ow*s - p + j*d]
 *                                    * w[co, c, i, j]
 * with x zero outside [0, H) x [0, W) (zero padding), stride s, padding p and
 * dilation d the same in both spatial dims, OH = floor((H + 2p - d (kh - 1) -
 * 1) / s) + 1 (PyTorch's Conv2d, groups 1, no bias: a bias is an add node).
 * Each output is a dot product of length K = C kh kw: the reduction length of
 * its bound, as matmul's K. */
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

int nv_conv_geom_of(const nv_op_attrs *a, const nv_tensor *x, const nv_tensor *w, nv_conv_geom *g)
{
    if (x->ndim != 4 || w->ndim != 4 || x->shape[1] != w->shape[1])
        return -1;
    g->n = x->shape[0], g->c = x->shape[1], g->h = x->shape[2], g->w = x->shape[3];
    g->co = w->shape[0], g->kh = w->shape[2], g->kw = w->shape[3];
    g->stride = a->stride, g->padding = a->padding, g->dilation = a->dilation;
    int64_t eh = (int64_t)a->dilation * (g->kh - 1) + 1, ew = (int64_t)a->dilation * (g->kw - 1) + 1;
    int64_t sh = g->h + 2 * (int64_t)a->padding - eh, sw = g->w + 2 * (int64_t)a->padding - ew;
    if (g->kh < 1 || g->kw < 1 || sh < 0 || sw < 0 || a->stride < 1)
        return -1;
    g->oh = sh / a->stride + 1;
    g->ow = sw / a->stride + 1;
    g->k = g->c * g->kh * g->kw;
    return 0;
}

int64_t nv_conv_x_index(const nv_conv_geom *g, int64_t n, int64_t oh, int64_t ow, int64_t kk)
{
    int64_t c = kk / (g->kh * g->kw), i = (kk / g->kw) % g->kh, j = kk % g->kw;
    int64_t ih = oh * g->stride - g->padding + i * g->dilation;
    int64_t iw = ow * g->stride - g->padding + j * g->dilation;
    if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
        return -1;
    return ((n * g->c + c) * g->h + ih) * g->w + iw;
}

int nvo_conv_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen)
{
    char s0[96], s1[96];
    (void)n_in;
    const nv_tensor *x = in[0], *w = in[1];
    for (int i = 0; i < 2; i++)
        if (!nvo_dtype_supported(op, in[i]->dtype))
            return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                       nv_dtype_name(in[i]->dtype), op->inputs[i].name);
    if (x->dtype != w->dtype)
        return ERR(NV_E_DTYPE, "op 'conv2d': dtype '%s' of 'x' and dtype '%s' of 'weight' differ",
                   nv_dtype_name(x->dtype), nv_dtype_name(w->dtype));
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, w, &g) < 0)
        return ERR(NV_E_SHAPE,
                   "op 'conv2d': x must be [N, C, H, W] and weight [Co, C, kh, kw] with the "
                   "dilated kernel within the padded input (stride %d, padding %d, dilation "
                   "%d), got shapes %s and %s",
                   a->stride, a->padding, a->dilation, nvo_shape_str(x, s0, sizeof s0),
                   nvo_shape_str(w, s1, sizeof s1));
    *ret_ndim = 4;
    ret_shape[0] = g.n, ret_shape[1] = g.co, ret_shape[2] = g.oh, ret_shape[3] = g.ow;
    return 0;
}
