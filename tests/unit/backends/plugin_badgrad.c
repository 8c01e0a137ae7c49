/* A deliberately wrong backward: the emu device, except that
 * sigmoid's backward uses the input x where the saved output y belongs
 * (gy x (1 - x)), and layer_norm's input gradient drops the mean term
 * (rstd (g - xhat mean(g xhat)) without - mean(g)). The gradient job must fail
 * the device check naming these ops and elements. With the option
 * "undeclared_random" ("plugin:/path.so?undeclared_random") the device sums in a
 * random order (emu reduce=random) but its describe() lists no
 * non-deterministic op: a repeated gradient case must fail "determinism". */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "worker/backends/emu/emu.h"
#include "worker/backends/loader.h"

static nv_backend table;

/* The emu context, and a describe() text of our own when it must lie. */
typedef struct bad_ctx {
    void *emu;
    char *describe;
} bad_ctx;

static int bad_open(const char *options, void **ret, char *err, size_t errlen)
{
    bool lie = options && strcmp(options, "undeclared_random") == 0;
    bad_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NV_E_NOMEM;
    int r = nvw_emu_backend()->open(lie ? "reduce=random" : options, &c->emu, err, errlen);
    if (r != NV_OK) {
        free(c);
        return r;
    }
    if (lie) {
        json_error_t je;
        json_t *d = json_loads(nvw_emu_backend()->describe(c->emu), 0, &je);
        json_object_set_new(d, "nondeterministic_ops", json_array());
        c->describe = json_dumps(d, JSON_COMPACT);
        json_decref(d);
    }
    *ret = c;
    return NV_OK;
}

static void bad_close(void *ctx)
{
    bad_ctx *c = ctx;
    nvw_emu_backend()->close(c->emu);
    free(c->describe);
    free(c);
}

static const char *bad_describe(void *ctx)
{
    bad_ctx *c = ctx;
    return c->describe ? c->describe : nvw_emu_backend()->describe(c->emu);
}

static int bad_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    return nvw_emu_backend()->forward(((bad_ctx *)ctx)->emu, call, err, errlen);
}

static void bad_release(void *ctx, nv_tensor_view *t)
{
    nvw_emu_backend()->release_tensor(((bad_ctx *)ctx)->emu, t);
}

/* Overwrite gradient view g (contiguous, dtype of x) with values v. */
static void store(nv_tensor_view *g, const double *v, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        nv_dtype dt = (nv_dtype)g->dtype;
        nv_dtype_store_bits(dt, g->data, e, nv_dtype_encode(dt, v[e], &NV_ROUND_DEFAULT, 0));
    }
}

static void wrong_sigmoid(nv_backward_call *c)
{
    nv_tensor *x = nvw_tensor_from_view(&c->inputs[0], false);
    nv_tensor *gy = nvw_tensor_from_view(c->grad_output, false);
    double *v = x && gy ? malloc(sizeof(double) * (size_t)(x->numel + 1)) : NULL;
    for (int64_t e = 0; v && e < x->numel; e++)
        v[e] = gy->data[e] * x->data[e] * (1 - x->data[e]); /* x where y belongs */
    if (v)
        store(&c->grad_inputs[0], v, x->numel);
    free(v);
    nv_tensor_free(x);
    nv_tensor_free(gy);
}

static void wrong_layer_norm(nv_backward_call *c)
{
    nv_tensor *x = nvw_tensor_from_view(&c->inputs[0], false);
    nv_tensor *w = nvw_tensor_from_view(&c->inputs[1], false);
    nv_tensor *gy = nvw_tensor_from_view(c->grad_output, false);
    double *v = x && w && gy ? malloc(sizeof(double) * (size_t)(x->numel + 1)) : NULL;
    int64_t n = x ? x->shape[x->ndim - 1] : 1;
    for (int64_t r = 0; v && r < x->numel / n; r++) {
        const double *xr = x->data + r * n, *gr = gy->data + r * n;
        double mu = 0, var = 0, mgx = 0;
        for (int64_t j = 0; j < n; j++)
            mu += xr[j] / (double)n;
        for (int64_t j = 0; j < n; j++)
            var += (xr[j] - mu) * (xr[j] - mu) / (double)n;
        double rstd = 1 / sqrt(var + 1e-5);
        for (int64_t j = 0; j < n; j++)
            mgx += gr[j] * w->data[j] * (xr[j] - mu) * rstd / (double)n;
        for (int64_t j = 0; j < n; j++) /* the - mean(g) term is missing */
            v[r * n + j] = rstd * (gr[j] * w->data[j] - (xr[j] - mu) * rstd * mgx);
    }
    if (v)
        store(&c->grad_inputs[0], v, x->numel);
    free(v);
    nv_tensor_free(x);
    nv_tensor_free(w);
    nv_tensor_free(gy);
}

static int bad_backward(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    int r = nvw_emu_backend()->backward(((bad_ctx *)ctx)->emu, c, err, errlen);
    if (r != NV_OK)
        return r;
    if (strcmp(c->op, "sigmoid") == 0)
        wrong_sigmoid(c);
    else if (strcmp(c->op, "layer_norm") == 0)
        wrong_layer_norm(c);
    return NV_OK;
}

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend();
    table.name = "badgrad";
    table.open = bad_open;
    table.close = bad_close;
    table.describe = bad_describe;
    table.forward = bad_forward;
    table.backward = bad_backward;
    table.release_tensor = bad_release;
    return &table;
}
