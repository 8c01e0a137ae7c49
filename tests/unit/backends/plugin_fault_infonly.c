/* A device that breaks its own contract: describe() declares
 * "inference_only": true, yet backward computes gradients (the emu's, which
 * are right). A gradient job must not take the declaration on trust: it calls
 * backward once, and this device's answer contradicts it, so every case fails
 * the "contract" check (contract_mismatch, field inference_only). With the
 * option "silent" (plugin:/path.so?silent) backward refuses, NV_E_UNSUPPORTED,
 * but with an empty message: a refusal that tells the user nothing is a
 * contract mismatch too. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "worker/backends/emu/emu.h"

static nv_backend table;

typedef struct info_ctx {
    void *emu;
    char *describe;
    bool silent;
} info_ctx;

static int info_open(const char *options, void **ret, char *err, size_t errlen)
{
    info_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NV_E_NOMEM;
    c->silent = options && strcmp(options, "silent") == 0;
    int r = nvw_emu_backend()->open(c->silent ? "" : options, &c->emu, err, errlen);
    if (r != NV_OK) {
        free(c);
        return r;
    }
    json_error_t je;
    json_t *d = json_loads(nvw_emu_backend()->describe(c->emu), 0, &je);
    json_object_set_new(d, "inference_only", json_true());
    c->describe = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    if (!c->describe) {
        nvw_emu_backend()->close(c->emu);
        free(c);
        return NV_E_NOMEM;
    }
    *ret = c;
    return NV_OK;
}

static void info_close(void *ctx)
{
    info_ctx *c = ctx;
    nvw_emu_backend()->close(c->emu);
    free(c->describe);
    free(c);
}

static const char *info_describe(void *ctx)
{
    return ((info_ctx *)ctx)->describe;
}

static int info_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    return nvw_emu_backend()->forward(((info_ctx *)ctx)->emu, call, err, errlen);
}

static int info_backward(void *ctx, nv_backward_call *call, char *err, size_t errlen)
{
    info_ctx *c = ctx;
    if (c->silent) {
        err[0] = '\0';
        return NV_E_UNSUPPORTED;
    }
    return nvw_emu_backend()->backward(c->emu, call, err, errlen);
}

static int info_double_backward(void *ctx, nv_double_backward_call *call, char *err, size_t errlen)
{
    return nvw_emu_backend()->double_backward(((info_ctx *)ctx)->emu, call, err, errlen);
}

static void info_release(void *ctx, nv_tensor_view *t)
{
    nvw_emu_backend()->release_tensor(((info_ctx *)ctx)->emu, t);
}

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend();
    table.name = "fault_infonly";
    table.open = info_open;
    table.close = info_close;
    table.describe = info_describe;
    table.forward = info_forward;
    table.backward = info_backward;
    table.double_backward = info_double_backward;
    table.graph = NULL;
    table.release_tensor = info_release;
    return &table;
}
