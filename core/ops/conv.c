/* The windowed linear ops over NCHW (NV_OPK_CONV, catalog.h): conv2d and
 * avg_pool2d. Shape rules and the patch geometry the exact references, emu's
 * kernels and the backward share.
 *
 * conv2d, G = groups, Cg = C / G input and Cog = Co / G output channels per
 * group, output channel co in group q = co / Cog:
 *   out[n, co, oh, ow] = sum_{c < Cg, i, j} x[n, q Cg + c, oh*s - p + i*d, ow*s - p + j*d]
 *                                            * w[co, c, i, j]
 * with x zero outside [0, H) x [0, W) (zero padding), stride s, padding p and
 * dilation d the same in both spatial dims, OH = floor((H + 2p - d (kh - 1) -
 * 1) / s) + 1 (PyTorch's Conv2d, no bias: a bias is an add node). Each output
 * is a dot product of length K = Cg kh kw: the reduction length of its bound,
 * as matmul's K. G = C = Co is a depthwise convolution.
 *
 * avg_pool2d is the depthwise case with an all-ones k x k kernel (G = C = Co,
 * d = 1, the stride defaulting to k) divided by the window's divisor:
 * k^2 with "count_include_pad" true, PyTorch's default (torch.nn.AvgPool2d,
 * https://pytorch.org/docs/stable/generated/torch.nn.AvgPool2d.html:
 * count_include_pad=True, ceil_mode=False, divisor_override=None; "pad should
 * be at most half of effective kernel size"), or the
 * number of window positions inside the input when false. With p <= k/2 and
 * floor rounding no window reaches past the padded border, so PyTorch's
 * (hend - hstart)(wend - wstart) is k^2 for every window (aten's
 * AvgPool2d.cpp clips hend to H + p).
 *
 * "ceil_mode" (avg_pool2d): OH = ceil((H + 2p - k) / s) + 1, less one when
 * that last window would start in the right padding: PyTorch's AvgPool2d
 * docs give H_out = floor or ceil of (H_in + 2 padding - kernel_size) /
 * stride + 1 and "when ceil_mode=True, sliding windows are allowed to go
 * off-bounds if they start within the left padding or the input. Sliding
 * windows that would start in the right padded region are ignored" (aten's
 * pooling_output_shape: --OH when (OH - 1) s >= H + p). Such a last window
 * reads zeros past the padded input too; with count_include_pad its divisor
 * counts only its positions inside the padded input (aten's clipped hend),
 * without, its positions inside the input, as always. "divisor_override" D
 * divides every window's sum by D instead. */
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

int nv_conv_geom_of(const nv_op_attrs *a, const nv_tensor *x, const nv_tensor *w, nv_conv_geom *g)
{
    if (x->ndim != 4 || (w && w->ndim != 4))
        return -1;
    g->n = x->shape[0], g->c = x->shape[1], g->h = x->shape[2], g->w = x->shape[3];
    if (w) {
        g->co = w->shape[0], g->cg = w->shape[1], g->kh = w->shape[2], g->kw = w->shape[3];
        g->groups = a->groups;
        g->dilation = a->dilation;
    } else { /* avg_pool2d: one channel per group */
        g->co = g->c, g->cg = 1, g->kh = g->kw = a->kernel;
        g->groups = g->c;
        g->dilation = 1;
    }
    if (g->groups < 1 || g->c % g->groups || g->co % g->groups || g->cg * g->groups != g->c)
        return -1;
    g->cog = g->co / g->groups;
    g->stride = a->stride, g->padding = a->padding;
    int64_t eh = (int64_t)g->dilation * (g->kh - 1) + 1,
            ew = (int64_t)g->dilation * (g->kw - 1) + 1;
    int64_t sh = g->h + 2 * (int64_t)a->padding - eh, sw = g->w + 2 * (int64_t)a->padding - ew;
    if (g->kh < 1 || g->kw < 1 || sh < 0 || sw < 0 || a->stride < 1)
        return -1;
    g->oh = sh / a->stride + 1;
    g->ow = sw / a->stride + 1;
    if (!w && a->ceil_mode) {
        g->oh = (sh + a->stride - 1) / a->stride + 1;
        g->ow = (sw + a->stride - 1) / a->stride + 1;
        if ((g->oh - 1) * a->stride >= g->h + a->padding)
            g->oh--;
        if ((g->ow - 1) * a->stride >= g->w + a->padding)
            g->ow--;
    }
    g->k = g->cg * g->kh * g->kw;
    return 0;
}

int64_t nv_conv_x_index(const nv_conv_geom *g, int64_t n, int64_t q, int64_t oh, int64_t ow,
                        int64_t kk)
{
    int64_t c = q * g->cg + kk / (g->kh * g->kw), i = (kk / g->kw) % g->kh, j = kk % g->kw;
    int64_t ih = oh * g->stride - g->padding + i * g->dilation;
    int64_t iw = ow * g->stride - g->padding + j * g->dilation;
    if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
        return -1;
    return ((n * g->c + c) * g->h + ih) * g->w + iw;
}

int64_t nv_pool_divisor(const nv_conv_geom *g, const nv_op_attrs *a, int64_t oh, int64_t ow)
{
    if (a->divisor_override)
        return a->divisor_override;
    if (a->count_include_pad) {
        int64_t hs = oh * g->stride - g->padding, ws = ow * g->stride - g->padding;
        int64_t he = hs + g->kh < g->h + g->padding ? hs + g->kh : g->h + g->padding;
        int64_t we = ws + g->kw < g->w + g->padding ? ws + g->kw : g->w + g->padding;
        return (he - hs) * (we - ws);
    }
    int64_t cnt = 0;
    for (int64_t kk = 0; kk < g->k; kk++)
        cnt += nv_conv_x_index(g, 0, 0, oh, ow, kk) >= 0;
    return cnt;
}

static int infer_pool(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x, int *ret_ndim,
                      int64_t *ret_shape, char *err, size_t errlen)
{
    char s0[96];
    nv_conv_geom g;
    if (x->ndim != 4 || nv_conv_geom_of(a, x, NULL, &g) < 0)
        return ERR(NV_E_SHAPE,
                   "op '%s': x must be [N, C, H, W] with the %dx%d window within the padded "
                   "input (stride %d, padding %d), got shape %s",
                   op->name, a->kernel, a->kernel, a->stride, a->padding,
                   nvo_shape_str(x, s0, sizeof s0));
    *ret_ndim = 4;
    ret_shape[0] = g.n, ret_shape[1] = g.c, ret_shape[2] = g.oh, ret_shape[3] = g.ow;
    return 0;
}

int nvo_conv_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen)
{
    char s0[96], s1[96];
    for (int i = 0; i < n_in; i++)
        if (!nvo_dtype_supported(op, in[i]->dtype))
            return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                       nv_dtype_name(in[i]->dtype), op->inputs[i].name);
    if (nvo_op_id(op) == NVO_AVG_POOL2D)
        return infer_pool(op, a, in[0], ret_ndim, ret_shape, err, errlen);
    const nv_tensor *x = in[0], *w = in[1];
    if (x->dtype != w->dtype)
        return ERR(NV_E_DTYPE, "op 'conv2d': dtype '%s' of 'x' and dtype '%s' of 'weight' differ",
                   nv_dtype_name(x->dtype), nv_dtype_name(w->dtype));
    if (x->ndim == 4 && w->ndim == 4) {
        int64_t c = x->shape[1], co = w->shape[0];
        if (c % a->groups || co % a->groups)
            return ERR(NV_E_SHAPE,
                       "op 'conv2d': groups (%d) must divide the input channels (%lld, of x "
                       "%s) and the output channels (%lld, of weight %s)",
                       a->groups, (long long)c, nvo_shape_str(x, s0, sizeof s0), (long long)co,
                       nvo_shape_str(w, s1, sizeof s1));
        if (w->shape[1] * a->groups != c)
            return ERR(NV_E_SHAPE,
                       "op 'conv2d': weight %s must have C / groups = %lld / %d = %lld input "
                       "channels per group (dimension 1), got %lld",
                       nvo_shape_str(w, s1, sizeof s1), (long long)c, a->groups,
                       (long long)(c / a->groups), (long long)w->shape[1]);
    }
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, w, &g) < 0)
        return ERR(NV_E_SHAPE,
                   "op 'conv2d': x must be [N, C, H, W] and weight [Co, C/groups, kh, kw] with "
                   "the dilated kernel within the padded input (stride %d, padding %d, dilation "
                   "%d, groups %d), got shapes %s and %s",
                   a->stride, a->padding, a->dilation, a->groups, nvo_shape_str(x, s0, sizeof s0),
                   nvo_shape_str(w, s1, sizeof s1));
    *ret_ndim = 4;
    ret_shape[0] = g.n, ret_shape[1] = g.co, ret_shape[2] = g.oh, ret_shape[3] = g.ow;
    return 0;
}
