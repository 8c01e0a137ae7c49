/* One op on one side (serving_internal.h): the device through nv_backend's op
 * entry (every backend has one: emu, plugins, exec harnesses), or the exact
 * reference (core/ref) computed from the side's own upstream values. A
 * selection (argmax, sample) returns int32 indices on every side. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/ops/catalog.h"
#include "core/ref/reference.h"
#include "serving_internal.h"
#include "worker/backends/views/views.h"

static int fail(sv_exec *x, int rc, const char *op, const char *fmt, const char *detail)
{
    x->rc = rc;
    char msg[SV_ERRLEN / 2];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "");
    snprintf(x->err, sizeof x->err, "op '%s': %s", op, msg);
    return -1;
}

static int run_device(sv_exec *x, const char *op, const char *attrs, int n,
                      const nv_tensor *const *in, int nd, const int64_t *shape, nv_dtype odt,
                      nv_tensor **ret)
{
    nv_tensor_view iv[NV_OP_MAX_INPUTS], out = {0};
    int k = 0, r = 0;
    for (; r == 0 && k < n; k++)
        r = nvw_view_from_tensor(in[k], &iv[k]);
    if (r < 0) {
        for (int i = 0; i + 1 < k; i++)
            nvw_view_free(&iv[i]);
        return fail(x, -ENOMEM, op, "no memory for the inputs%s", NULL);
    }
    nv_op_call call = {.op = op,
                       .attrs_json = attrs ? attrs : "{}",
                       .out_dtype = (int32_t)odt,
                       .n_inputs = n,
                       .inputs = iv,
                       .n_outputs = 1,
                       .outputs = &out};
    char err[SV_ERRLEN / 2] = "";
    int br = x->table->forward(x->ctx, &call, err, sizeof err);
    x->status = br;
    for (int i = 0; i < n; i++)
        nvw_view_free(&iv[i]);
    bool fits = br == NV_OK && out.data && out.dtype == (int32_t)odt && out.ndim == nd;
    for (int d = 0; fits && d < nd; d++)
        fits = out.shape[d] == shape[d];
    nv_tensor *t = fits ? nvw_tensor_from_view(&out, false) : NULL;
    if (out.data && x->table->release_tensor)
        x->table->release_tensor(x->ctx, &out);
    if (br != NV_OK)
        return fail(x, 1, op, "the backend returned an error: '%s'", err);
    if (!fits)
        return fail(x, 1, op, "the output's dtype or shape differs from the model's%s", NULL);
    if (!t)
        return fail(x, -ENOMEM, op, "out of memory%s", NULL);
    *ret = t;
    return 0;
}

/* The reference: inputs tagged fp32 (fp64 for fp64 cases) as graph_ref.c
 * does, so the catalog's same-dtype rules hold for values that are doubles;
 * deciding fp32 rounding keeps transcendentals on refmath's fast path. */
static int run_reference(sv_exec *x, const nv_op_def *def, const nv_op_attrs *a, int n,
                         const nv_tensor *const *in, int nd, const int64_t *shape, nv_tensor **ret)
{
    nv_dtype wide = x->dt == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    nv_tensor v[NV_OP_MAX_INPUTS];
    const nv_tensor *vp[NV_OP_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        v[i] = *in[i];
        if (v[i].dtype != NV_DT_INT32)
            v[i].dtype = wide;
        vp[i] = &v[i];
    }
    bool select = def->kind == NV_OPK_SELECT; /* int32 indices: nothing to round */
    nv_tensor *hi = nv_tensor_new(select ? NV_DT_INT32 : wide, nd, shape);
    if (!hi)
        return fail(x, -ENOMEM, def->name, "out of memory%s", NULL);
    int r = nv_op_reference(def, a, n, vp, hi, NULL, NULL);
    if (r < 0) {
        nv_tensor_free(hi);
        x->rc = r == NV_E_NOMEM ? -ENOMEM : r;
        snprintf(x->err, sizeof x->err, "op '%s': the reference failed (code %d)", def->name, r);
        return -1;
    }
    if (x->side == SV_RDT && !select)
        for (int64_t q = 0; q < hi->numel; q++)
            hi->data[q] = nv_dtype_round(x->dt, hi->data[q], &NV_ROUND_DEFAULT, 0);
    if (!select)
        hi->dtype = x->dt;
    *ret = hi;
    return 0;
}

int sv_op(sv_exec *x, const char *op, const char *attrs, int n, const nv_tensor *const *in,
          nv_tensor **ret)
{
    const nv_op_def *def = nv_op_find(op);
    if (!def || n > NV_OP_MAX_INPUTS)
        return fail(x, NV_E_INVALID, op, "not a catalog op%s", NULL);
    json_error_t je;
    json_t *aj = attrs ? json_loads(attrs, 0, &je) : NULL;
    nv_op_attrs a;
    char *msg = NULL;
    int r = nv_op_parse_attrs(def, aj, &a, &msg);
    json_decref(aj);
    if (r < 0) {
        fail(x, NV_E_INVALID, op, "bad attrs: %s", msg);
        free(msg);
        return -1;
    }
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[SV_ERRLEN / 2] = "";
    if (nv_op_infer(def, &a, n, in, &nd, shape, err, sizeof err) < 0)
        return fail(x, NV_E_SHAPE, op, "%s", err);
    if (x->side == SV_DEV)
        return run_device(x, op, attrs, n, in, nd, shape,
                          def->kind == NV_OPK_SELECT ? NV_DT_INT32 : x->dt, ret);
    return run_reference(x, def, &a, n, in, nd, shape, ret);
}
