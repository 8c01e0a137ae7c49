/* A device that lies in describe(): it computes as the emu device in one mode
 * and describes itself as the emu device in another. The option text is
 * "REAL|CLAIMED", two emu mode strings ("rounding=rtz|" rounds toward zero and
 * declares emu's default, nearest-even). tests/integration/test_contract.py
 * runs the contract kind against four such lies (casts, accumulator, FTZ,
 * determinism) and asserts each contract_mismatch with its evidence. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/backends/emu/emu.h"

static nv_backend table;

typedef struct liar_ctx {
    void *emu;      /* the real mode: every op runs here */
    char *describe; /* the claimed mode's describe(), device renamed */
} liar_ctx;

static int l_open(const char *options, void **ret, char *err, size_t errlen)
{
    const char *bar = options ? strchr(options, '|') : NULL;
    if (!bar) {
        snprintf(err, errlen, "liar options '%s' must be REAL|CLAIMED (two emu modes)",
                 options ? options : "");
        return NV_E_INVALID;
    }
    liar_ctx *c = calloc(1, sizeof *c);
    char *real = strndup(options, (size_t)(bar - options));
    if (!c || !real) {
        free(c);
        free(real);
        return NV_E_NOMEM;
    }
    const nv_backend *emu = nvw_emu_backend();
    void *claimed = NULL;
    int r = emu->open(real, &c->emu, err, errlen);
    free(real);
    if (r == NV_OK)
        r = emu->open(bar + 1, &claimed, err, errlen);
    if (r != NV_OK) {
        if (c->emu)
            emu->close(c->emu);
        free(c);
        return r;
    }
    json_t *d = json_loads(emu->describe(claimed), 0, NULL);
    emu->close(claimed);
    if (d) {
        json_object_set_new(d, "device", json_string("liar"));
        c->describe = json_dumps(d, JSON_COMPACT);
        json_decref(d);
    }
    if (!c->describe) {
        emu->close(c->emu);
        free(c);
        return NV_E_NOMEM;
    }
    *ret = c;
    return NV_OK;
}

static void l_close(void *ctx)
{
    liar_ctx *c = ctx;
    nvw_emu_backend()->close(c->emu);
    free(c->describe);
    free(c);
}

static const char *l_describe(void *ctx)
{
    return ((liar_ctx *)ctx)->describe;
}

static int l_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    return nvw_emu_backend()->forward(((liar_ctx *)ctx)->emu, call, err, errlen);
}

static void l_release(void *ctx, nv_tensor_view *t)
{
    nvw_emu_backend()->release_tensor(((liar_ctx *)ctx)->emu, t);
}

const nv_backend *nv_backend_entry(void)
{
    table = (nv_backend){.abi_version = NV_BACKEND_ABI_VERSION,
                         .struct_size = sizeof(nv_backend),
                         .name = "liar",
                         .open = l_open,
                         .close = l_close,
                         .describe = l_describe,
                         .forward = l_forward,
                         .release_tensor = l_release};
    return &table;
}
