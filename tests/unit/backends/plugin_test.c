/* A tiny third-party device for the loader tests: built only against
 * include/numval/backend.h, as a lab's plugin would be. It implements neg, add,
 * exp and sum (along the last axis) on fp32 tensors of any layout. Option
 * delay_ms=N makes every call take N ms longer: a slow device whose jobs last
 * as long as a test needs them to, however fast the worker gets. Variants:
 * -DWRONG_ABI exports abi_version 999; -DNO_ENTRY exports no entry symbol. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numval/backend.h"

typedef struct ctx {
    char describe[512];
    long delay_ms;
} ctx;

static int p_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    if (options && strstr(options, "fail=1")) {
        snprintf(err, errlen, "test plugin refuses options '%s'", options);
        return NV_E_INVALID;
    }
    ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    const char *d = options ? strstr(options, "delay_ms=") : NULL;
    if (d) {
        char *end;
        c->delay_ms = strtol(d + 9, &end, 10);
        if (end == d + 9 || c->delay_ms < 0 || c->delay_ms > 10000) {
            snprintf(err, errlen, "test plugin: delay_ms must be 0..10000, got '%s'", d + 9);
            free(c);
            return NV_E_INVALID;
        }
    }
    snprintf(c->describe, sizeof(c->describe),
             "{\"device\": \"plugin-test\", \"build\": {\"name\": \"plugin-test\", "
             "\"version\": \"1\"}, \"mode\": {\"options\": \"%s\"}, \"contract\": {}, "
             "\"inference_only\": true, \"nondeterministic_ops\": [], \"saved\": {}}",
             options ? options : "");
    *ret_ctx = c;
    return NV_OK;
}

static void p_close(void *c)
{
    free(c);
}

static const char *p_describe(void *c)
{
    return ((ctx *)c)->describe;
}

static int64_t numel_of(const nv_tensor_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

/* Element i (row-major logical order) of an fp32 view. */
static float get(const nv_tensor_view *v, int64_t i)
{
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (i % v->shape[d]) * v->strides[d];
        i /= v->shape[d];
    }
    float f;
    memcpy(&f, (const char *)v->data + off * 4, 4);
    return f;
}

static int alloc_out(nv_tensor_view *o, int ndim, const int64_t *shape)
{
    memset(o, 0, sizeof(*o));
    o->dtype = NV_DT_FP32;
    o->ndim = ndim;
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        o->shape[d] = shape[d];
        o->strides[d] = n;
        n *= shape[d];
    }
    o->data = malloc((size_t)(n > 0 ? n : 1) * 4);
    return o->data ? NV_OK : NV_E_NOMEM;
}

static int p_forward(void *c, nv_op_call *call, char *err, size_t errlen)
{
    long ms = ((ctx *)c)->delay_ms;
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    const nv_tensor_view *x = call->inputs;
    if (call->n_inputs < 1 || x->dtype != NV_DT_FP32 || call->n_outputs != 1) {
        snprintf(err, errlen, "test plugin: fp32 inputs and one output only");
        return NV_E_DTYPE;
    }
    int unary = !strcmp(call->op, "neg") || !strcmp(call->op, "exp");
    int binary = !strcmp(call->op, "add");
    int sum = !strcmp(call->op, "sum");
    if (!unary && !binary && !sum) {
        snprintf(err, errlen, "test plugin: op '%s' is not offered", call->op);
        return NV_E_UNSUPPORTED;
    }
    if (sum && x->ndim < 1) {
        snprintf(err, errlen, "test plugin: sum needs a dimension");
        return NV_E_SHAPE;
    }
    int64_t n = numel_of(x);
    nv_tensor_view *o = call->outputs;
    int r = alloc_out(o, sum ? x->ndim - 1 : x->ndim, x->shape);
    if (r)
        return r;
    float *out = o->data;
    if (sum) {
        /* Along the last axis, accumulated in fp64 and rounded once. */
        int64_t len = x->shape[x->ndim - 1], rows = len ? n / len : 0;
        for (int64_t i = 0; i < rows; i++) {
            double s = 0;
            for (int64_t j = 0; j < len; j++)
                s += get(x, i * len + j);
            out[i] = (float)s;
        }
        return NV_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        float a = get(x, i);
        if (binary)
            out[i] = (float)((double)a + (double)get(&call->inputs[1], i));
        else if (!strcmp(call->op, "neg"))
            out[i] = -a;
        else
            out[i] = (float)exp((double)a);
    }
    return NV_OK;
}

static void p_release(void *c, nv_tensor_view *t)
{
    (void)c;
    free(t->data);
    t->data = NULL;
}

static const nv_backend table = {
#ifdef WRONG_ABI
    .abi_version = 999,
#else
    .abi_version = NV_BACKEND_ABI_VERSION,
#endif
    .struct_size = sizeof(nv_backend),
    .name = "plugin-test",
    .open = p_open,
    .close = p_close,
    .describe = p_describe,
    .forward = p_forward,
    .backward = NULL,
    .graph = NULL,
    .release_tensor = p_release,
};

#ifndef NO_ENTRY
const nv_backend *nv_backend_entry(void);
const nv_backend *nv_backend_entry(void)
{
    return &table;
}
#else
const nv_backend *nv_backend_other(void);
const nv_backend *nv_backend_other(void)
{
    return &table;
}
#endif
