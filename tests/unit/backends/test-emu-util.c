/* Helpers shared by the emu test binaries (no TAP state here: each binary's main
 * owns its plan). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test-emu.h"
#include "worker/backends/loader.h"

bool emu_start(emu_t *e, const char *mode, char *err)
{
    e->tb = nvw_emu_backend();
    e->ctx = NULL;
    return e->tb->open(mode, &e->ctx, err, ERRLEN) == NV_OK;
}

void emu_stop(emu_t *e)
{
    if (e->ctx)
        e->tb->close(e->ctx);
    e->ctx = NULL;
}

nv_tensor *mk(nv_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    nv_tensor *t = nv_tensor_new(dt, ndim, shape);
    for (int64_t i = 0; t && i < t->numel; i++)
        t->data[i] = nv_dtype_round(dt, v[i], &NV_ROUND_DEFAULT, 0);
    return t;
}

nv_tensor *mk1(nv_dtype dt, int64_t n, const double *v)
{
    return mk(dt, 1, &n, v);
}

nv_tensor *run(emu_t *e, const char *op, const char *attrs, nv_dtype out_dt, int n,
               const nv_tensor *const *in, int *ret_rc, char *err)
{
    nv_tensor_view views[8], out;
    memset(&out, 0, sizeof(out));
    for (int i = 0; i < n; i++)
        nvw_view_from_tensor(in[i], &views[i]);
    nv_op_call call = {.op = op,
                       .attrs_json = attrs ? attrs : "{}",
                       .out_dtype = out_dt,
                       .n_inputs = n,
                       .inputs = views,
                       .n_outputs = 1,
                       .outputs = &out};
    int rc = e->tb->forward(e->ctx, &call, err, ERRLEN);
    for (int i = 0; i < n; i++)
        nvw_view_free(&views[i]);
    if (ret_rc)
        *ret_rc = rc;
    if (rc != NV_OK)
        return NULL;
    nv_tensor *t = nvw_tensor_from_view(&out, false);
    e->tb->release_tensor(e->ctx, &out);
    return t;
}

nv_tensor *run1(emu_t *e, const char *op, const char *attrs, nv_dtype out_dt, const nv_tensor *x)
{
    char err[ERRLEN];
    const nv_tensor *in[1] = {x};
    nv_tensor *t = run(e, op, attrs, out_dt, 1, in, NULL, err);
    if (!t)
        printf("# %s failed: %s\n", op, err);
    return t;
}

double ulp_err32(double got, double exact)
{
    if (got == exact)
        return 0;
    return fabs(got - exact) / nv_dtype_ulp(NV_DT_FP32, exact);
}
