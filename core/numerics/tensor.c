/* Tensors of doubles with element strides (see tensor.h). */
#include "tensor.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static nv_tensor *tensor_new(nv_dtype dt, int ndim, const int64_t *shape, bool zero)
{
    if (ndim < 0 || ndim > NV_MAX_DIMS || (ndim > 0 && !shape) || !nv_dtype_get(dt))
        return NULL;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return NULL;
        if (shape[i] > 0 && numel > (INT64_MAX / (int64_t)sizeof(double)) / shape[i])
            return NULL;
        numel *= shape[i];
    }
    nv_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    /* calloc(0) may return NULL; keep one element so data is always valid. */
    size_t n = numel > 0 ? (size_t)numel : 1;
    t->data = zero || numel == 0 ? calloc(n, sizeof(double)) : malloc(n * sizeof(double));
    if (!t->data) {
        free(t);
        return NULL;
    }
    t->dtype = dt;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->strides[i] = stride;
        stride *= shape[i] > 0 ? shape[i] : 1;
    }
    t->offset = 0;
    t->numel = numel;
    t->storage_len = numel;
    return t;
}

nv_tensor *nv_tensor_new(nv_dtype dt, int ndim, const int64_t *shape)
{
    return tensor_new(dt, ndim, shape, true);
}

nv_tensor *nv_tensor_new_uninit(nv_dtype dt, int ndim, const int64_t *shape)
{
    return tensor_new(dt, ndim, shape, false);
}

void nv_tensor_free(nv_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    free(t);
}

int64_t nv_tensor_offset(const nv_tensor *t, const int64_t *idx)
{
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++)
        off += idx[i] * t->strides[i];
    return off;
}

int64_t nv_tensor_offset_linear(const nv_tensor *t, int64_t i)
{
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        if (n <= 0)
            return t->offset;
        /* Once i is inside the extent, the remainder is i and the quotient 0:
         * two 64-bit divisions per dim saved (the reference and the inputs'
         * layouts call this per element). */
        if (i >= 0 && i < n) {
            off += i * t->strides[d];
            i = 0;
            continue;
        }
        off += (i % n) * t->strides[d];
        i /= n;
    }
    return off;
}

bool nv_tensor_dense(const nv_tensor *t)
{
    int64_t st = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != st)
            return false;
        st *= t->shape[d];
    }
    return true;
}

nv_tensor *nv_tensor_contiguous(const nv_tensor *t)
{
    assert(t);
    nv_tensor *c = nv_tensor_new(t->dtype, t->ndim, t->shape);
    if (!c)
        return NULL;
    if (nv_tensor_dense(t)) {
        if (c->numel > 0)
            memcpy(c->data, t->data + t->offset, (size_t)c->numel * sizeof(double));
        return c;
    }
    /* Walk the multi-index like an odometer: no division per element. */
    int64_t idx[NV_MAX_DIMS] = {0};
    int64_t off = t->offset;
    for (int64_t i = 0; i < c->numel; i++) {
        c->data[i] = t->data[off];
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) {
                off += t->strides[d];
                break;
            }
            off -= (t->shape[d] - 1) * t->strides[d];
            idx[d] = 0;
        }
    }
    return c;
}
