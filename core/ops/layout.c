/* The data-movement ops (NV_OPK_LAYOUT, catalog.h): transpose (swap the last
 * two dims), embedding (out[i.., :] = weight[ids[i..], :], the gather of a
 * token embedding), split_heads (x [T, H*Dh] -> [H, T, Dh], out[h, t, j] =
 * x[t, h*Dh + j], attrs.heads = H) and merge_heads (its inverse, [H, T, Dh] ->
 * [T, H*Dh]): multi-head attention's head layout for bmm; cache_write (the
 * values unchanged: the store of a KV-cache entry, so that a device holding its
 * cache in another dtype than the output's shows it). Their values are input values moved, never rounded, so
 * one function serves the exact reference (core/ref) and emu's kernel alike;
 * shape rules are here too. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

/* split_heads / merge_heads shapes. */
static int infer_heads(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                       int *ret_ndim, int64_t *ret_shape, char *err, size_t errlen)
{
    char s0[96];
    if (nvo_op_id(op) == NVO_SPLIT_HEADS) {
        if (x->ndim != 2 || a->heads < 1 || x->shape[1] % a->heads)
            return ERR(NV_E_SHAPE,
                       "op 'split_heads': x must be [T, H*Dh] with its last dim divisible by "
                       "heads (%d), got shape %s",
                       a->heads, nvo_shape_str(x, s0, sizeof s0));
        *ret_ndim = 3;
        ret_shape[0] = a->heads;
        ret_shape[1] = x->shape[0];
        ret_shape[2] = x->shape[1] / a->heads;
        return 0;
    }
    if (x->ndim != 3)
        return ERR(NV_E_SHAPE, "op 'merge_heads': x must be [H, T, Dh], got shape %s",
                   nvo_shape_str(x, s0, sizeof s0));
    *ret_ndim = 2;
    ret_shape[0] = x->shape[1];
    ret_shape[1] = x->shape[0] * x->shape[2];
    return 0;
}

int nvo_layout_infer(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                     const nv_tensor *const *in, int *ret_ndim, int64_t *ret_shape, char *err,
                     size_t errlen)
{
    char s0[96];
    const nv_tensor *x = in[0];
    if (!nvo_dtype_supported(op, x->dtype))
        return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                   nv_dtype_name(x->dtype), op->inputs[0].name);
    int id = nvo_op_id(op);
    if (id == NVO_SPLIT_HEADS || id == NVO_MERGE_HEADS)
        return infer_heads(op, a, x, ret_ndim, ret_shape, err, errlen);
    if (id == NVO_CACHE_WRITE) {
        *ret_ndim = x->ndim;
        memcpy(ret_shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        return 0;
    }
    if (id == NVO_FLATTEN) {
        if (x->ndim < 1)
            return ERR(NV_E_SHAPE, "op 'flatten' needs at least 1 dim, got a scalar");
        *ret_ndim = 2;
        ret_shape[0] = x->shape[0];
        ret_shape[1] = 1;
        for (int d = 1; d < x->ndim; d++)
            ret_shape[1] *= x->shape[d];
        return 0;
    }
    if (id == NVO_MAX_POOL2D) {
        int64_t span[2];
        for (int d = 0; d < 2 && x->ndim == 4; d++)
            span[d] = x->shape[2 + d] + 2 * (int64_t)a->padding - a->kernel;
        if (x->ndim != 4 || span[0] < 0 || span[1] < 0)
            return ERR(NV_E_SHAPE,
                       "op 'max_pool2d': x must be [N, C, H, W] with H and W + 2 padding at least "
                       "the kernel (%d, padding %d), got shape %s",
                       a->kernel, a->padding, nvo_shape_str(x, s0, sizeof s0));
        *ret_ndim = 4;
        ret_shape[0] = x->shape[0];
        ret_shape[1] = x->shape[1];
        ret_shape[2] = span[0] / a->stride + 1;
        ret_shape[3] = span[1] / a->stride + 1;
        return 0;
    }
    if (id == NVO_TRANSPOSE) {
        if (x->ndim < 2)
            return ERR(NV_E_SHAPE, "op 'transpose' needs at least 2 dims, got shape %s",
                       nvo_shape_str(x, s0, sizeof s0));
        *ret_ndim = x->ndim;
        memcpy(ret_shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        ret_shape[x->ndim - 2] = x->shape[x->ndim - 1];
        ret_shape[x->ndim - 1] = x->shape[x->ndim - 2];
        return 0;
    }
    const nv_tensor *ids = n_in > 1 ? in[1] : NULL;
    if (x->ndim != 2 || x->shape[0] < 1)
        return ERR(NV_E_SHAPE, "op 'embedding': weight must be [V, D] with V >= 1, got shape %s",
                   nvo_shape_str(x, s0, sizeof s0));
    if (!ids || ids->dtype != NV_DT_INT32)
        return ERR(NV_E_DTYPE, "op 'embedding': ids must be int32, got '%s'",
                   ids ? nv_dtype_name(ids->dtype) : "none");
    if (ids->ndim + 1 > NV_MAX_DIMS)
        return ERR(NV_E_SHAPE, "op 'embedding': ids have too many dims (%d)", ids->ndim);
    *ret_ndim = ids->ndim + 1;
    memcpy(ret_shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    ret_shape[ids->ndim] = x->shape[1];
    return 0;
}

/* out[h, t, j] = x[t, h*Dh + j] (split) or the converse (merge). */
static void eval_heads(bool split, const nv_tensor *x, int64_t heads, double *out)
{
    int64_t t_len = split ? x->shape[0] : x->shape[1];
    int64_t dh = split ? x->shape[1] / heads : x->shape[2];
    for (int64_t h = 0; h < heads; h++)
        for (int64_t t = 0; t < t_len; t++)
            for (int64_t j = 0; j < dh; j++) {
                int64_t hs = (h * t_len + t) * dh + j, ts = t * heads * dh + h * dh + j;
                if (split)
                    out[hs] = x->data[nv_tensor_offset_linear(x, ts)];
                else
                    out[ts] = x->data[nv_tensor_offset_linear(x, hs)];
            }
}

/* Max pooling's source of every output: the maximum of the window of kernel x
 * kernel elements at (oh s - p, ow s - p), padding ignored. Ties go to the
 * first maximum in the window's row-major order (a later element replaces
 * the running maximum only when strictly greater), and a NaN wins over every
 * number (the first NaN). This is our reading of PyTorch's CPU max_pool2d
 * (it keeps the index of the first maximum and propagates NaN; its backward
 * routes the gradient to that index), not checked against torch here. */
static void pool_sources(const nv_op_attrs *a, const nv_tensor *x, int64_t *src)
{
    int64_t nc = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t oh = (h + 2 * (int64_t)a->padding - a->kernel) / a->stride + 1;
    int64_t ow = (w + 2 * (int64_t)a->padding - a->kernel) / a->stride + 1;
    for (int64_t p = 0; p < nc; p++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t best = -1;
                double bv = 0;
                for (int64_t u = 0; u < a->kernel; u++)
                    for (int64_t v = 0; v < a->kernel; v++) {
                        int64_t ih = i * a->stride - a->padding + u;
                        int64_t iw = j * a->stride - a->padding + v;
                        if (ih < 0 || ih >= h || iw < 0 || iw >= w)
                            continue;
                        int64_t e = (p * h + ih) * w + iw;
                        double xv = x->data[nv_tensor_offset_linear(x, e)];
                        if (best < 0 || (!isnan(bv) && (xv > bv || isnan(xv))))
                            best = e, bv = xv;
                    }
                src[(p * oh + i) * ow + j] = best;
            }
}

static int64_t numel_of(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

int nv_op_layout_eval(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, double *out, char *err, size_t errlen)
{
    const nv_tensor *x = in[0];
    int id = nvo_op_id(op);
    if (id == NVO_FLATTEN) {
        for (int64_t e = 0; e < x->numel; e++)
            out[e] = x->data[nv_tensor_offset_linear(x, e)];
        return NV_OK;
    }
    if (id == NVO_MAX_POOL2D) {
        int nd;
        int64_t shape[NV_MAX_DIMS];
        int r = nvo_layout_infer(op, a, n_in, in, &nd, shape, err, errlen);
        int64_t n_out = r == 0 ? numel_of(nd, shape) : 0;
        int64_t *src = r == 0 ? malloc(sizeof(int64_t) * (size_t)(n_out + 1)) : NULL;
        if (r != 0 || !src)
            return r != 0 ? r : ERR(NV_E_NOMEM, "out of memory");
        pool_sources(a, x, src);
        for (int64_t o = 0; o < n_out; o++)
            out[o] = x->data[nv_tensor_offset_linear(x, src[o])];
        free(src);
        return NV_OK;
    }
    if (id == NVO_SPLIT_HEADS || id == NVO_MERGE_HEADS) {
        eval_heads(id == NVO_SPLIT_HEADS, x, id == NVO_SPLIT_HEADS ? a->heads : x->shape[0], out);
        return NV_OK;
    }
    if (id == NVO_CACHE_WRITE) {
        for (int64_t i = 0; i < x->numel; i++)
            out[i] = x->data[nv_tensor_offset_linear(x, i)];
        return NV_OK;
    }
    if (id == NVO_TRANSPOSE) {
        int nd = x->ndim;
        int64_t m = x->shape[nd - 2], n = x->shape[nd - 1], batch = m > 0 && n > 0 ? x->numel / (m * n) : 0;
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++)
                    out[(b * n + i) * m + j] =
                        x->data[nv_tensor_offset_linear(x, (b * m + j) * n + i)];
        return NV_OK;
    }
    if (n_in < 2)
        return ERR(NV_E_INVALID, "op 'embedding' takes weight and ids");
    const nv_tensor *ids = in[1];
    int64_t v = x->shape[0], d = x->shape[1];
    for (int64_t t = 0; t < ids->numel; t++) {
        double id = ids->data[nv_tensor_offset_linear(ids, t)];
        if (!(id >= 0 && id < (double)v) || id != floor(id))
            return ERR(NV_E_INVALID,
                       "op 'embedding': id '%g' at position %lld is outside [0, %lld) (the rows "
                       "of weight)",
                       id, (long long)t, (long long)v);
        for (int64_t k = 0; k < d; k++)
            out[t * d + k] = x->data[nv_tensor_offset_linear(x, (int64_t)id * d + k)];
    }
    return NV_OK;
}

int nv_op_layout_sources(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                         const nv_tensor *const *in, int64_t n_out, int64_t *src)
{
    /* The op evaluated on input 0's element indices (exact in a double up to
     * 2^53 elements): each output then holds the index it was moved from. */
    const nv_tensor *x = in[0];
    if (nvo_op_id(op) == NVO_MAX_POOL2D) {
        pool_sources(a, x, src);
        return NV_OK;
    }
    nv_tensor *idx = nv_tensor_new(x->dtype, x->ndim, x->shape);
    double *v = malloc((size_t)(n_out > 0 ? n_out : 1) * sizeof *v);
    int r = NV_E_NOMEM;
    if (!idx || !v)
        goto out;
    for (int64_t e = 0; e < idx->numel; e++)
        idx->data[e] = (double)e;
    const nv_tensor *moved[NV_OP_MAX_INPUTS];
    for (int i = 0; i < n_in && i < NV_OP_MAX_INPUTS; i++)
        moved[i] = i == 0 ? idx : in[i];
    char err[160];
    r = nv_op_layout_eval(op, a, n_in, moved, v, err, sizeof err);
    for (int64_t o = 0; r == NV_OK && o < n_out; o++)
        src[o] = (int64_t)v[o];
out:
    nv_tensor_free(idx);
    free(v);
    return r;
}
