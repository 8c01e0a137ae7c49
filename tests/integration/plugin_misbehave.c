/* A test device built only against include/numval/backend.h that computes fp32
 * neg and add correctly, or misbehaves in one chosen way, so the runner's output
 * checks can be shown to catch it. Options (the text after '?' in the spec):
 *   bad=none     correct results, strided inputs honoured, invalid inputs refused
 *   bad=shape    output one element short in its last dim
 *   bad=strides  output strides all zero (every element in one place)
 *   bad=dtype    output declared fp16
 *   bad=count    no output returned
 *   bad=accept   computes add for mismatched shapes instead of NV_E_SHAPE
 *   bad=bit      flips the lowest bit of output element 13 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"

typedef struct ctx {
    char bad[16];
    char describe[256];
} ctx;

static int p_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    const char *b = options ? strstr(options, "bad=") : NULL;
    snprintf(c->bad, sizeof c->bad, "%s", b ? b + 4 : "none");
    snprintf(c->describe, sizeof c->describe,
             "{\"device\": \"misbehave\", \"build\": {\"name\": \"misbehave\", \"version\": \"1\"},"
             " \"mode\": {\"bad\": \"%s\"}, \"contract\": {}, \"nondeterministic_ops\": []}",
             c->bad);
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

static int64_t numel(const nv_tensor_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

/* Element i (row-major logical order) of an fp32 view with any strides. */
static float load(const nv_tensor_view *v, int64_t i)
{
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (i % v->shape[d]) * v->strides[d];
        i /= v->shape[d];
    }
    return ((const float *)v->data)[off];
}

static bool same_shape(const nv_tensor_view *a, const nv_tensor_view *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static int check_inputs(const ctx *c, const nv_op_call *call, bool add, char *err, size_t errlen)
{
    for (int i = 0; i < call->n_inputs; i++) {
        if (call->inputs[i].dtype != NV_DT_FP32) {
            snprintf(err, errlen, "input %d: only fp32", i);
            return NV_E_DTYPE;
        }
    }
    if (add && !same_shape(&call->inputs[0], &call->inputs[1]) && strcmp(c->bad, "accept")) {
        snprintf(err, errlen, "add: input shapes differ");
        return NV_E_SHAPE;
    }
    return NV_OK;
}

static int p_forward(void *vc, nv_op_call *call, char *err, size_t errlen)
{
    ctx *c = vc;
    bool add = strcmp(call->op, "add") == 0;
    if (!add && strcmp(call->op, "neg") != 0) {
        snprintf(err, errlen, "op '%s' is not offered", call->op);
        return NV_E_UNSUPPORTED;
    }
    if (call->n_inputs != (add ? 2 : 1) || call->out_dtype != NV_DT_FP32) {
        snprintf(err, errlen, "bad call");
        return NV_E_INVALID;
    }
    int r = check_inputs(c, call, add, err, errlen);
    if (r != NV_OK)
        return r;
    if (!strcmp(c->bad, "count")) {
        call->n_outputs = 0;
        return NV_OK;
    }
    const nv_tensor_view *x = &call->inputs[0];
    int64_t n = numel(x);
    if (add && numel(&call->inputs[1]) < n)
        n = numel(&call->inputs[1]);
    float *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    if (!out)
        return NV_E_NOMEM;
    for (int64_t i = 0; i < n; i++)
        out[i] = add ? load(x, i) + load(&call->inputs[1], i) : -load(x, i);
    if (!strcmp(c->bad, "bit") && n > 13) {
        uint32_t u;
        memcpy(&u, &out[13], 4);
        u ^= 1;
        memcpy(&out[13], &u, 4);
    }
    nv_tensor_view *o = &call->outputs[0];
    memset(o, 0, sizeof *o);
    o->dtype = !strcmp(c->bad, "dtype") ? NV_DT_FP16 : NV_DT_FP32;
    o->ndim = x->ndim;
    int64_t stride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        o->shape[d] = x->shape[d];
        o->strides[d] = !strcmp(c->bad, "strides") ? 0 : stride;
        stride *= x->shape[d];
    }
    if (!strcmp(c->bad, "shape") && o->ndim > 0)
        o->shape[o->ndim - 1] -= 1;
    o->data = out;
    return NV_OK;
}

static void p_release(void *c, nv_tensor_view *t)
{
    (void)c;
    free(t->data);
    t->data = NULL;
}

static const nv_backend table = {
    .abi_version = NV_BACKEND_ABI_VERSION,
    .struct_size = sizeof(nv_backend),
    .name = "misbehave",
    .open = p_open,
    .close = p_close,
    .describe = p_describe,
    .forward = p_forward,
    .release_tensor = p_release,
};

const nv_backend *nv_backend_entry(void)
{
    return &table;
}
