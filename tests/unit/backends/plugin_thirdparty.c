/* A third-party device as a lab would write it: built against
 * include/numval/backend.h alone (meson gives it include/ as its only include
 * directory, so no other numval header can be reached), with the dtypes named by
 * the ABI's NV_DT_* codes and nothing copied from numval's sources. It offers
 * neg on every signed float dtype, for any layout: the sign bit of each element
 * is flipped, which is exact in every format. e8m0 (unsigned) and the int dtypes
 * are refused with NV_E_DTYPE. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"

/* Storage bytes of a signed float dtype and the position of its sign bit in the
 * little-endian element (docs/BACKEND_ABI.md "Dtype codes"); 0 for the others. */
static int float_layout(int32_t dt, int *ret_sign_bit)
{
    switch (dt) {
    case NV_DT_FP64:
        *ret_sign_bit = 63;
        return 8;
    case NV_DT_FP32:
    case NV_DT_TF32:
        *ret_sign_bit = 31;
        return 4;
    case NV_DT_BF16:
    case NV_DT_FP16:
        *ret_sign_bit = 15;
        return 2;
    case NV_DT_FP8_E4M3:
    case NV_DT_FP8_E5M2:
        *ret_sign_bit = 7;
        return 1;
    case NV_DT_FP6_E2M3:
    case NV_DT_FP6_E3M2:
        *ret_sign_bit = 5;
        return 1;
    case NV_DT_FP4_E2M1:
        *ret_sign_bit = 3;
        return 1;
    default: /* NV_DT_E8M0, NV_DT_INT8, NV_DT_INT32 */
        return 0;
    }
}

static int p_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    (void)options;
    (void)err;
    (void)errlen;
    *ret_ctx = NULL; /* stateless */
    return NV_OK;
}

static void p_close(void *ctx)
{
    (void)ctx;
}

static const char *p_describe(void *ctx)
{
    (void)ctx;
    return "{\"device\": \"thirdparty\", \"build\": {\"name\": \"thirdparty\", \"version\": \"1\"},"
           " \"mode\": {}, \"contract\": {}, \"inference_only\": true,"
           " \"nondeterministic_ops\": [], \"saved\": {}}";
}

static int p_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    (void)ctx;
    if (strcmp(call->op, "neg") != 0) {
        snprintf(err, errlen, "thirdparty: op '%s' is not offered (neg only)", call->op);
        return NV_E_UNSUPPORTED;
    }
    if (call->n_inputs != 1 || call->n_outputs != 1) {
        snprintf(err, errlen, "thirdparty: neg takes one input and gives one output");
        return NV_E_INVALID;
    }
    const nv_tensor_view *x = &call->inputs[0];
    int sign_bit = 0;
    int size = float_layout(x->dtype, &sign_bit);
    if (size == 0 || call->out_dtype != x->dtype) {
        snprintf(err, errlen,
                 "thirdparty: neg of dtype code %d into %d: signed floats only, "
                 "result in the input's dtype",
                 (int)x->dtype, (int)call->out_dtype);
        return NV_E_DTYPE;
    }
    if (x->ndim < 0 || x->ndim > NV_BACKEND_MAX_DIMS) {
        snprintf(err, errlen, "thirdparty: rank %d", (int)x->ndim);
        return NV_E_SHAPE;
    }
    nv_tensor_view *o = &call->outputs[0];
    memset(o, 0, sizeof *o);
    o->dtype = x->dtype;
    o->ndim = x->ndim;
    int64_t n = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        o->shape[d] = x->shape[d];
        o->strides[d] = n;
        n *= x->shape[d];
    }
    o->data = malloc((size_t)(n > 0 ? n : 1) * (size_t)size);
    if (!o->data) {
        snprintf(err, errlen, "thirdparty: out of memory");
        return NV_E_NOMEM;
    }
    /* Row-major walk of the output; the input is read through its strides. */
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, off = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            off += (rest % x->shape[d]) * x->strides[d];
            rest /= x->shape[d];
        }
        unsigned char *dst = (unsigned char *)o->data + i * size;
        memcpy(dst, (const unsigned char *)x->data + off * size, (size_t)size);
        dst[sign_bit / 8] ^= (unsigned char)(1u << (sign_bit % 8));
    }
    return NV_OK;
}

static void p_release(void *ctx, nv_tensor_view *t)
{
    (void)ctx;
    free(t->data);
    t->data = NULL;
}

static const nv_backend table = {
    .abi_version = NV_BACKEND_ABI_VERSION,
    .struct_size = sizeof(nv_backend),
    .name = "thirdparty",
    .open = p_open,
    .close = p_close,
    .describe = p_describe,
    .forward = p_forward,
    .backward = NULL,
    .graph = NULL,
    .release_tensor = p_release,
};

const nv_backend *nv_backend_entry(void);
const nv_backend *nv_backend_entry(void)
{
    return &table;
}
