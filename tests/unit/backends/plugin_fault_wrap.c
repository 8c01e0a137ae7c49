/* The emu device wrapped for the one-fault plugins (plugin_fault.h): every entry
 * is emu's, forward then applies the plugin's fault, describe() names it. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "plugin_fault.h"
#include "worker/backends/emu/emu.h"

static nv_backend table;

typedef struct fault_ctx {
    void *emu;
    char *describe;
} fault_ctx;

int64_t fault_numel(const nv_tensor_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

static int64_t offset_of(const nv_tensor_view *v, int64_t k)
{
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (k % v->shape[d]) * v->strides[d];
        k /= v->shape[d];
    }
    return off;
}

double fault_get(const nv_tensor_view *v, int64_t k)
{
    nv_dtype dt = (nv_dtype)v->dtype;
    return nv_dtype_decode(dt, nv_dtype_load_bits(dt, v->data, offset_of(v, k)), false);
}

void fault_set(nv_tensor_view *v, int64_t k, double x)
{
    nv_dtype dt = (nv_dtype)v->dtype;
    nv_dtype_store_bits(dt, v->data, offset_of(v, k), nv_dtype_encode(dt, x, &NV_ROUND_DEFAULT, 0));
}

static int f_open(const char *options, void **ret, char *err, size_t errlen)
{
    fault_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NV_E_NOMEM;
    int r = nvw_emu_backend()->open(options, &c->emu, err, errlen);
    if (r != NV_OK) {
        free(c);
        return r;
    }
    json_error_t je;
    json_t *d = json_loads(nvw_emu_backend()->describe(c->emu), 0, &je);
    if (d) {
        json_object_set_new(d, "device", json_string(fault_name));
        json_object_set_new(d, "build", json_pack("{ss ss}", "name", fault_name, "version", "1"));
        c->describe = json_dumps(d, JSON_COMPACT);
        json_decref(d);
    }
    if (!c->describe) {
        nvw_emu_backend()->close(c->emu);
        free(c);
        return NV_E_NOMEM;
    }
    *ret = c;
    return NV_OK;
}

static void f_close(void *ctx)
{
    fault_ctx *c = ctx;
    nvw_emu_backend()->close(c->emu);
    free(c->describe);
    free(c);
}

static const char *f_describe(void *ctx)
{
    return ((fault_ctx *)ctx)->describe;
}

static int f_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    int r = nvw_emu_backend()->forward(((fault_ctx *)ctx)->emu, call, err, errlen);
    if (r != NV_OK || call->n_outputs < 1)
        return r;
    return fault_apply(call, err, errlen);
}

static int f_backward(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    return nvw_emu_backend()->backward(((fault_ctx *)ctx)->emu, c, err, errlen);
}

static void f_release(void *ctx, nv_tensor_view *t)
{
    nvw_emu_backend()->release_tensor(((fault_ctx *)ctx)->emu, t);
}

/* Only the entries wrapped here: an emu entry added later must not be handed
 * this plugin's context. No fused execution (op jobs only). */
const nv_backend *nv_backend_entry(void)
{
    table = (nv_backend){.abi_version = NV_BACKEND_ABI_VERSION,
                         .struct_size = sizeof(nv_backend),
                         .name = fault_name,
                         .open = f_open,
                         .close = f_close,
                         .describe = f_describe,
                         .forward = f_forward,
                         .backward = f_backward,
                         .release_tensor = f_release};
    return &table;
}
