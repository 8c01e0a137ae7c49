/* Tensor views (views.h): nv_tensor <-> nv_tensor_view, encoded and decoded
 * exactly in the view's dtype. */
#include "views.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"


static bool view_shape_ok(const nv_tensor_view *v)
{
    if (!nv_dtype_get((nv_dtype)v->dtype) || v->ndim < 0 || v->ndim > NV_BACKEND_MAX_DIMS ||
        v->ndim > NV_MAX_DIMS)
        return false;
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] < 0)
            return false;
    return true;
}

bool nvw_view_span(const nv_tensor_view *v, int64_t *ret_lo, int64_t *ret_hi)
{
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0)
            return false;
        int64_t reach = (v->shape[d] - 1) * v->strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    *ret_lo = lo;
    *ret_hi = hi;
    return true;
}

/* Element i of base encoded from x. Values are exact in the dtype: fp32 and
 * fp64 store by conversion. */
static inline void store(nv_dtype dt, unsigned char *base, int64_t i, double x)
{
    if (dt == NV_DT_FP32) {
        float f = (float)x;
        memcpy(base + i * 4, &f, 4);
    } else if (dt == NV_DT_FP64) {
        memcpy(base + i * 8, &x, 8);
    } else {
        nv_dtype_store_bits(dt, base, i, nv_dtype_encode(dt, x, &NV_ROUND_DEFAULT, 0));
    }
}

int nvw_view_alloc(nv_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                   double fill, nv_tensor_view *ret)
{
    if (!nv_dtype_get(dt) || ndim < 0 || ndim > NV_BACKEND_MAX_DIMS)
        return -EINVAL;
    nv_tensor_view v;
    memset(&v, 0, sizeof(v));
    v.dtype = (int32_t)dt;
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    int nb = nv_dtype_get(dt)->storage_bytes;
    int64_t lo = 0, hi = -1;
    if (!nvw_view_span(&v, &lo, &hi))
        lo = 0, hi = -1;
    int64_t n = hi - lo + 1;
    unsigned char *base = calloc((size_t)(n > 0 ? n : 1), (size_t)nb);
    if (!base)
        return -ENOMEM;
    if (fill != 0 || signbit(fill))
        for (int64_t i = 0; i < n; i++)
            store(dt, base, i, fill);
    v.data = base + (size_t)(-lo) * (size_t)nb;
    *ret = v;
    return 0;
}

void nvw_view_put_run(nv_tensor_view *v, int64_t off, int64_t st, int64_t n, const double *src)
{
    nv_dtype dt = (nv_dtype)v->dtype;
    if (dt == NV_DT_FP32 && st == 1) {
        float *p = (float *)v->data + off;
        for (int64_t j = 0; j < n; j++)
            p[j] = (float)src[j];
        return;
    }
    for (int64_t j = 0; j < n; j++)
        store(dt, v->data, off + j * st, src[j]);
}

int nvw_view_from_tensor(const nv_tensor *t, nv_tensor_view *ret)
{
    if (!nv_dtype_get(t->dtype) || t->ndim < 0 || t->ndim > NV_BACKEND_MAX_DIMS)
        return -EINVAL;
    nv_tensor_view v;
    memset(&v, 0, sizeof(v));
    v.dtype = (int32_t)t->dtype;
    v.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        v.shape[d] = t->shape[d];
        v.strides[d] = t->strides[d];
    }
    int nb = nv_dtype_get(t->dtype)->storage_bytes;
    int64_t lo = 0, hi = -1;
    if (!nvw_view_span(&v, &lo, &hi))
        lo = 0, hi = -1;
    int64_t n = hi - lo + 1;
    unsigned char *base = calloc((size_t)(n > 0 ? n : 1), (size_t)nb);
    if (!base)
        return -ENOMEM;
    /* Encode the whole span, gaps included, so the view is the tensor's real layout. */
    for (int64_t i = 0; i < n; i++) {
        int64_t src = t->offset + lo + i;
        if (src >= 0 && src < t->storage_len)
            store(t->dtype, base, i, t->data[src]);
    }
    v.data = base + (size_t)(-lo) * (size_t)nb;
    *ret = v;
    return 0;
}

void nvw_view_free(nv_tensor_view *v)
{
    if (!v || !v->data)
        return;
    int64_t lo = 0, hi = 0;
    const nv_dtype_info *info = nv_dtype_get((nv_dtype)v->dtype);
    if (info && nvw_view_span(v, &lo, &hi))
        free((unsigned char *)v->data + lo * info->storage_bytes);
    else
        free(v->data);
    v->data = NULL;
}

/* One element, with fp32/fp64 read directly (DAZ: a subnormal reads as signed zero). */
static inline double load(nv_dtype dt, const void *data, int64_t off, bool daz)
{
    if (dt == NV_DT_FP32) {
        float f;
        memcpy(&f, (const char *)data + off * 4, 4);
        if (daz && f != 0 && fabsf(f) < FLT_MIN)
            f = copysignf(0.0f, f);
        return f;
    }
    if (dt == NV_DT_FP64) {
        double d;
        memcpy(&d, (const char *)data + off * 8, 8);
        if (daz && d != 0 && fabs(d) < DBL_MIN)
            d = copysign(0.0, d);
        return d;
    }
    return nv_dtype_decode(dt, nv_dtype_load_bits(dt, data, off), daz);
}

/* One run of n elements along the last axis (element stride st) into dst. */
static void load_run(nv_dtype dt, const void *data, int64_t off, int64_t st, int64_t n, bool daz,
                     double *dst)
{
    if (dt == NV_DT_FP32 && !daz) {
        const char *p = (const char *)data + off * 4;
        for (int64_t j = 0; j < n; j++) {
            float f;
            memcpy(&f, p + j * st * 4, 4);
            dst[j] = f;
        }
        return;
    }
    for (int64_t j = 0; j < n; j++)
        dst[j] = load(dt, data, off + j * st, daz);
}

int nvw_view_decode(const nv_tensor_view *v, bool daz, double *dst)
{
    if (!view_shape_ok(v))
        return -EINVAL;
    int nd = v->ndim;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++)
        numel *= v->shape[d];
    if (numel == 0)
        return 0;
    if (!v->data)
        return -EINVAL;
    nv_dtype dt = (nv_dtype)v->dtype;
    int64_t len = nd ? v->shape[nd - 1] : 1, st = nd ? v->strides[nd - 1] : 0;
    int64_t idx[NV_BACKEND_MAX_DIMS] = {0};
    int64_t off = 0;
    /* Runs along the last axis; an odometer over the others keeps the offset. */
    for (int64_t i = 0; i < numel; i += len) {
        load_run(dt, v->data, off, st, len, daz, dst + i);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) {
                off += v->strides[d];
                break;
            }
            off -= (v->shape[d] - 1) * v->strides[d];
            idx[d] = 0;
        }
    }
    return 0;
}

nv_tensor *nvw_tensor_from_view(const nv_tensor_view *v, bool daz)
{
    if (!view_shape_ok(v))
        return NULL;
    nv_tensor *t = nv_tensor_new_uninit((nv_dtype)v->dtype, v->ndim, v->shape);
    if (!t)
        return NULL;
    if (nvw_view_decode(v, daz, t->data) < 0) { /* else every element decoded */
        nv_tensor_free(t);
        return NULL;
    }
    return t;
}

void nvw_view_get_run(const nv_tensor_view *v, int64_t off, int64_t st, int64_t n, double *dst)
{
    load_run((nv_dtype)v->dtype, v->data, off, st, n, false, dst);
}
