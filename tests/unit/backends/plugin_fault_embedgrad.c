/* A device with the classic embedding-backward bug: the emu device, except
 * that the weight gradient of embedding stores each position's output
 * gradient row into its id's row (last write wins) instead of adding it, so a
 * row whose id repeats keeps one term of its sum. A kernel that scatters with
 * plain stores where it needs an atomic add or index_add has exactly this
 * bug. Rows whose id occurs once are right, so only a gradient job whose ids
 * repeat sees it: the "device" check must fail there
 * (tests/integration/test_layout_grad.py). */
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "worker/backends/emu/emu.h"
#include "worker/backends/loader.h"

static nv_backend table;

static int overwrite_rows(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    /* the emu's call checks the operands and allocates the result */
    int r = nvw_emu_backend()->backward(ctx, c, err, errlen);
    if (r != NV_OK)
        return r;
    nv_tensor *ids = nvw_tensor_from_view(&c->inputs[1], false);
    nv_tensor *gy = nvw_tensor_from_view(c->grad_output, false);
    nv_tensor_view *out = &c->grad_inputs[0];
    int64_t d = c->inputs[0].ndim == 2 ? c->inputs[0].shape[1] : 0;
    nv_dtype dt = (nv_dtype)out->dtype;
    for (int64_t t = 0; ids && gy && t < ids->numel; t++)
        for (int64_t k = 0; k < d; k++) {
            int64_t e = (int64_t)ids->data[t] * d + k;
            nv_dtype_store_bits(dt, out->data, e,
                                nv_dtype_encode(dt, gy->data[t * d + k], &NV_ROUND_DEFAULT, 0));
        }
    r = ids && gy ? NV_OK : NV_E_NOMEM;
    if (r != NV_OK)
        nvw_emu_backend()->release_tensor(ctx, out);
    nv_tensor_free(ids);
    nv_tensor_free(gy);
    return r;
}

static int embedgrad_backward(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    if (c->op && strcmp(c->op, "embedding") == 0)
        return overwrite_rows(ctx, c, err, errlen);
    return nvw_emu_backend()->backward(ctx, c, err, errlen);
}

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend(); /* the emu's context is this plugin's */
    table.name = "fault_embedgrad";
    table.backward = embedgrad_backward;
    return &table;
}
