/* A test device built only against include/numval/backend.h: fp32
 * "sum" along one axis (attrs {"axis": k}, default -1), accumulated in fp64 and
 * rounded once to fp32 (so its correct result is within 0.5 ulp of fp32 plus the
 * fp64 accumulation error, far inside any fp32 bound), with one injected fault:
 *
 *   fault=drop   (default) skips the element at position 5000 of the reduced
 *                axis when that axis is longer than 4096 elements;
 *   fault=none   no fault (the same device, fixed);
 *   fault=crash  like drop, but aborts (SIGABRT) instead of skipping, to show a
 *                crashing backend costs a probe, not the worker.
 *
 * Built with -DNVTEST_BUILD=N -DNVTEST_FAULT_FROM=F (the bisection test builds
 * it 16 times), the default is "none" for N < F and "drop" from build F on.
 *
 * The fault can only be seen in inputs with more than 4096 elements along the
 * axis, so a minimized reproducer cannot be short: it keeps the length and
 * neutralizes (zeroes) the other elements (docs/ARTIFACTS.md "Minimized
 * reproducers"). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"

#if defined(NVTEST_BUILD) && defined(NVTEST_FAULT_FROM)
#define DEFAULT_FAULT (NVTEST_BUILD >= NVTEST_FAULT_FROM ? "drop" : "none")
#else
#define DEFAULT_FAULT "drop"
#endif

#define DROP_AT 5000
#define MIN_LEN 4097

typedef struct ctx {
    char fault[16];
    char describe[320];
} ctx;

static int p_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    const char *f = options ? strstr(options, "fault=") : NULL;
    snprintf(c->fault, sizeof c->fault, "%s", f ? f + 6 : DEFAULT_FAULT);
    if (strcmp(c->fault, "drop") && strcmp(c->fault, "none") && strcmp(c->fault, "crash")) {
        snprintf(err, errlen, "unknown fault '%s' (drop, none, crash)", c->fault);
        free(c);
        return NV_E_INVALID;
    }
    snprintf(c->describe, sizeof c->describe,
             "{\"device\": \"dropsum\", \"build\": {\"name\": \"dropsum\", \"version\": \"1\"},"
             " \"mode\": {\"accumulate\": \"fp64\", \"fault\": \"%s\"}, \"contract\": {},"
             " \"nondeterministic_ops\": []}",
             strcmp(c->fault, "none") ? "drop" : "none");
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

static int axis_of(const char *attrs, int ndim)
{
    const char *a = attrs ? strstr(attrs, "\"axis\"") : NULL;
    int ax = -1;
    if (a) {
        a = strchr(a, ':');
        if (a)
            ax = atoi(a + 1);
    }
    return ax < 0 ? ax + ndim : ax;
}

static int p_forward(void *vc, nv_op_call *call, char *err, size_t errlen)
{
    ctx *c = vc;
    if (strcmp(call->op, "sum") != 0) {
        snprintf(err, errlen, "op '%s' is not supported (only sum)", call->op);
        return NV_E_UNSUPPORTED;
    }
    const nv_tensor_view *x = &call->inputs[0];
    if (call->n_inputs != 1 || x->dtype != NV_DT_FP32 || call->out_dtype != NV_DT_FP32) {
        snprintf(err, errlen, "sum takes one fp32 input");
        return NV_E_DTYPE;
    }
    int ax = axis_of(call->attrs_json, x->ndim);
    if (ax < 0 || ax >= x->ndim) {
        snprintf(err, errlen, "bad axis");
        return NV_E_INVALID;
    }
    int64_t len = x->shape[ax], outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    float *out = malloc((size_t)(outer * inner > 0 ? outer * inner : 1) * sizeof *out);
    if (!out)
        return NV_E_NOMEM;
    bool faulty = strcmp(c->fault, "none") != 0 && len >= MIN_LEN;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            /* multi-index of (o, k, i) through the view's strides */
            int64_t base = 0, rest = o;
            for (int d = ax - 1; d >= 0; d--) {
                base += (rest % x->shape[d]) * x->strides[d];
                rest /= x->shape[d];
            }
            rest = i;
            for (int d = x->ndim - 1; d > ax; d--) {
                base += (rest % x->shape[d]) * x->strides[d];
                rest /= x->shape[d];
            }
            double acc = 0;
            for (int64_t k = 0; k < len; k++) {
                if (faulty && k == DROP_AT) {
                    if (!strcmp(c->fault, "crash"))
                        abort();
                    continue;
                }
                acc += ((const float *)x->data)[base + k * x->strides[ax]];
            }
            out[o * inner + i] = (float)acc;
        }
    nv_tensor_view *ov = &call->outputs[0];
    memset(ov, 0, sizeof *ov);
    ov->dtype = NV_DT_FP32;
    ov->ndim = x->ndim - 1;
    int64_t stride = 1;
    for (int d = x->ndim - 1, od = ov->ndim - 1; d >= 0; d--) {
        if (d == ax)
            continue;
        ov->shape[od] = x->shape[d];
        ov->strides[od] = stride;
        stride *= x->shape[d];
        od--;
    }
    ov->data = out;
    call->n_outputs = 1;
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
    .name = "dropsum",
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
