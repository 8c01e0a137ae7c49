/* A test device with one fault: its sums and matrix products accumulate in bf16
 * (every partial sum rounded to bf16, round to nearest even), as a kernel that
 * keeps its accumulator in the storage dtype does. Built against
 * include/numval/backend.h alone. It offers sum (attr "axis", default -1) and
 * matmul / bmm (unscaled, any batch dims) on fp32 and bf16 tensors of any layout,
 * the output in the input dtype.
 *
 * Options (plugin:/path/lib.so?OPTIONS, comma separated):
 *   acc=bf16     (default) the fault;
 *   acc=fp32     no fault: fp32 accumulation, a correct device;
 *   declare=D    the accumulator describe() declares for every dtype
 *                ("accumulator" and "matmul_accumulator" of its contract, range D);
 *                default: the one it uses. A device that declares fp64 and
 *                accumulates in fp32 lies about its range.
 *
 * What it shows (tests/integration/test_truth_bounds.py): the probabilistic
 * default bound (docs/TOLERANCES.md) fails acc=bf16 on N(0, 1) data on every
 * seed where the deterministic worst case passes it, acc=fp32 passes, and the
 * intermediate-overflow rule follows the declared accumulator. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"

typedef struct ctx {
    bool bf16_acc;
    char describe[1024];
} ctx;

/* fp32 -> bf16 -> fp32, round to nearest even (NaN kept quiet). */
static float to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x00400000u;
    else
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static float load(const nv_tensor_view *v, int64_t off)
{
    if (v->dtype == NV_DT_FP32)
        return ((const float *)v->data)[off];
    uint32_t u = (uint32_t)((const uint16_t *)v->data)[off] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int open_(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    c->bf16_acc = true;
    char declare[16] = "";
    char buf[256];
    snprintf(buf, sizeof buf, "%s", options ? options : "");
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (!strcmp(item, "acc=bf16"))
            c->bf16_acc = true;
        else if (!strcmp(item, "acc=fp32"))
            c->bf16_acc = false;
        else if (!strncmp(item, "declare=", 8) && strlen(item + 8) < sizeof declare)
            snprintf(declare, sizeof declare, "%s", item + 8);
        else {
            snprintf(err, errlen, "unknown option '%s' (acc=bf16, acc=fp32, declare=DTYPE)", item);
            free(c);
            return NV_E_INVALID;
        }
    }
    const char *acc = c->bf16_acc ? "bf16" : "fp32";
    const char *d = declare[0] ? declare : acc;
    char entry[200];
    snprintf(entry, sizeof entry,
             "{\"accumulator\": {\"dtype\": \"%s\", \"range\": \"%s\"},"
             " \"matmul_accumulator\": {\"dtype\": \"%s\", \"range\": \"%s\"}}",
             d, d, d, d);
    snprintf(c->describe, sizeof c->describe,
             "{\"device\": \"fault_bf16acc\", \"build\": {\"name\": \"fault_bf16acc\","
             " \"version\": \"1\"}, \"mode\": {\"accumulate\": \"%s\"},"
             " \"contract\": {\"fp32\": %s, \"bf16\": %s}, \"inference_only\": true,"
             " \"nondeterministic_ops\": []}",
             acc, entry, entry);
    *ret_ctx = c;
    return NV_OK;
}

static void close_(void *c)
{
    free(c);
}

static const char *describe_(void *c)
{
    return ((ctx *)c)->describe;
}

static float accumulate(const ctx *c, float acc, float term)
{
    float s = acc + term;
    return c->bf16_acc ? to_bf16(s) : s;
}

/* A contiguous output of ndim dims and shape, dtype dt, values v (n of them). */
static int make_output(nv_op_call *call, int32_t dt, int ndim, const int64_t *shape, const float *v,
                       int64_t n)
{
    nv_tensor_view *o = &call->outputs[0];
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->ndim = ndim;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        o->shape[d] = shape[d];
        o->strides[d] = stride;
        stride *= shape[d];
    }
    o->data = malloc((size_t)(n > 0 ? n : 1) * (dt == NV_DT_FP32 ? 4 : 2));
    if (!o->data)
        return NV_E_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (dt == NV_DT_FP32) {
            ((float *)o->data)[i] = v[i];
        } else {
            float b = to_bf16(v[i]);
            uint32_t u;
            memcpy(&u, &b, 4);
            ((uint16_t *)o->data)[i] = (uint16_t)(u >> 16);
        }
    }
    call->n_outputs = 1;
    return NV_OK;
}

static int axis_of(const char *attrs, int ndim)
{
    const char *a = attrs ? strstr(attrs, "\"axis\"") : NULL;
    int ax = -1;
    if (a && (a = strchr(a, ':')))
        ax = atoi(a + 1);
    return ax < 0 ? ax + ndim : ax;
}

static int sum(const ctx *c, nv_op_call *call, char *err, size_t errlen)
{
    const nv_tensor_view *x = &call->inputs[0];
    int ax = axis_of(call->attrs_json, x->ndim);
    if (ax < 0 || ax >= x->ndim) {
        snprintf(err, errlen, "sum: axis out of range for %d dims", (int)x->ndim);
        return NV_E_INVALID;
    }
    int64_t outer = 1, inner = 1, len = x->shape[ax], shape[NV_BACKEND_MAX_DIMS];
    int od = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d < ax)
            outer *= x->shape[d];
        if (d > ax)
            inner *= x->shape[d];
        if (d != ax)
            shape[od++] = x->shape[d];
    }
    float *v = malloc((size_t)(outer * inner > 0 ? outer * inner : 1) * sizeof *v);
    if (!v)
        return NV_E_NOMEM;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
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
            float acc = 0;
            for (int64_t k = 0; k < len; k++)
                acc = accumulate(c, acc, load(x, base + k * x->strides[ax]));
            v[o * inner + i] = acc;
        }
    int r = make_output(call, x->dtype, od, shape, v, outer * inner);
    free(v);
    return r;
}

/* Offset of element (batch b, row r, col q) of a [.., R, Q] view. */
static int64_t mat_off(const nv_tensor_view *t, int64_t b, int64_t r, int64_t q)
{
    int nd = t->ndim;
    int64_t off = r * t->strides[nd - 2] + q * t->strides[nd - 1];
    for (int d = nd - 3; d >= 0; d--) {
        off += (b % t->shape[d]) * t->strides[d];
        b /= t->shape[d];
    }
    return off;
}

static int matmul(const ctx *c, nv_op_call *call, char *err, size_t errlen)
{
    const nv_tensor_view *a = &call->inputs[0], *b = &call->inputs[1];
    int nd = a->ndim;
    if (call->n_inputs != 2 || nd < 2 || b->ndim != nd || b->dtype != a->dtype ||
        a->shape[nd - 1] != b->shape[nd - 2]) {
        snprintf(err, errlen, "matmul: two unscaled operands [.., M, K] and [.., K, N]");
        return NV_E_SHAPE;
    }
    int64_t m = a->shape[nd - 2], k = a->shape[nd - 1], n = b->shape[nd - 1], batch = 1;
    int64_t shape[NV_BACKEND_MAX_DIMS];
    for (int d = 0; d < nd - 2; d++) {
        if (a->shape[d] != b->shape[d]) {
            snprintf(err, errlen, "matmul: batch dims differ");
            return NV_E_SHAPE;
        }
        batch *= a->shape[d];
        shape[d] = a->shape[d];
    }
    shape[nd - 2] = m;
    shape[nd - 1] = n;
    float *v = malloc((size_t)(batch * m * n > 0 ? batch * m * n : 1) * sizeof *v);
    if (!v)
        return NV_E_NOMEM;
    for (int64_t q = 0; q < batch; q++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float acc = 0;
                for (int64_t kk = 0; kk < k; kk++)
                    acc = accumulate(c, acc,
                                     load(a, mat_off(a, q, i, kk)) * load(b, mat_off(b, q, kk, j)));
                v[(q * m + i) * n + j] = acc;
            }
    int r = make_output(call, a->dtype, nd, shape, v, batch * m * n);
    free(v);
    return r;
}

static int forward(void *vc, nv_op_call *call, char *err, size_t errlen)
{
    const ctx *c = vc;
    const nv_tensor_view *x = &call->inputs[0];
    if (call->n_inputs < 1 || (x->dtype != NV_DT_FP32 && x->dtype != NV_DT_BF16) ||
        call->out_dtype != x->dtype) {
        snprintf(err, errlen, "fp32 or bf16 inputs only, the output in the input dtype");
        return NV_E_DTYPE;
    }
    if (!strcmp(call->op, "sum"))
        return sum(c, call, err, errlen);
    if (!strcmp(call->op, "matmul") || !strcmp(call->op, "bmm"))
        return matmul(c, call, err, errlen);
    snprintf(err, errlen, "op '%s' is not offered (sum, matmul, bmm)", call->op);
    return NV_E_UNSUPPORTED;
}

static void release(void *c, nv_tensor_view *t)
{
    (void)c;
    free(t->data);
    t->data = NULL;
}

static const nv_backend table = {
    .abi_version = NV_BACKEND_ABI_VERSION,
    .struct_size = sizeof(nv_backend),
    .name = "fault_bf16acc",
    .open = open_,
    .close = close_,
    .describe = describe_,
    .forward = forward,
    .release_tensor = release,
};

const nv_backend *nv_backend_entry(void);
const nv_backend *nv_backend_entry(void)
{
    return &table;
}
