/* A deliberately wrong backward: the emu device, except that
 * sigmoid's backward uses the input x where the saved output y belongs
 * (gy x (1 - x)), and layer_norm's input gradient drops the mean term
 * (rstd (g - xhat mean(g xhat)) without - mean(g)). The gradient job must fail
 * the device check naming these ops and elements. With the option
 * "undeclared_random" ("plugin:/path.so?undeclared_random") the device sums in a
 * random order (emu reduce=random) but its describe() lists no
 * non-deterministic op: a repeated gradient case must fail "determinism".
 * The options "grad_fp32", "grad_fp32_coarse" and "grad_fp32_lie" declare
 * describe()'s "gradient_dtype": "fp32". The first delivers fp32 gradients (the
 * emu's backward on fp32 copies of every operand, which hold bf16 and fp16
 * values exactly); the second fp32 tensors holding the input dtype's gradients
 * (the emu's own, widened: bf16 precision in an fp32 container); the third the
 * input dtype's tensors. The device check judges the first two in fp32 (the
 * first passes, the second fails gradient_mismatch) and refuses the third
 * (bad_output). */
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
    bool grad_fp32;  /* deliver fp32 gradients */
    bool grad_widen; /* deliver the emu's gradients widened to fp32 */
} bad_ctx;

static int bad_open(const char *options, void **ret, char *err, size_t errlen)
{
    bool lie = options && strcmp(options, "undeclared_random") == 0;
    bool fp32 = options && strncmp(options, "grad_fp32", 9) == 0;
    bad_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NV_E_NOMEM;
    int r = nvw_emu_backend()->open(lie    ? "reduce=random"
                                    : fp32 ? ""
                                           : options,
                                    &c->emu, err, errlen);
    if (r != NV_OK) {
        free(c);
        return r;
    }
    c->grad_fp32 = fp32 && strcmp(options, "grad_fp32") == 0;
    c->grad_widen = fp32 && strcmp(options, "grad_fp32_coarse") == 0;
    if (lie || fp32) {
        json_error_t je;
        json_t *d = json_loads(nvw_emu_backend()->describe(c->emu), 0, &je);
        if (lie)
            json_object_set_new(d, "nondeterministic_ops", json_array());
        else
            json_object_set_new(d, "gradient_dtype", json_string("fp32"));
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

/* An fp32 copy of view v (its values are exact in fp32 for every dtype the
 * gradient jobs run: fp32, bf16, fp16). */
static int fp32_copy(const nv_tensor_view *v, nv_tensor_view *ret)
{
    nv_tensor *t = nvw_tensor_from_view(v, false);
    if (!t)
        return NV_E_NOMEM;
    if (t->dtype != NV_DT_FP64)
        t->dtype = NV_DT_FP32;
    int r = nvw_view_from_tensor(t, ret);
    nv_tensor_free(t);
    return r < 0 ? NV_E_NOMEM : NV_OK;
}

/* The emu's backward on fp32 copies of inputs, saved tensors and grad_output:
 * gradients computed and stored in fp32. */
static int backward_fp32(bad_ctx *bc, nv_backward_call *c, char *err, size_t errlen)
{
    nv_tensor_view in[8], sv[8], gy;
    int n_in = 0, n_sv = 0, r = c->n_inputs <= 8 && c->n_saved <= 8 ? NV_OK : NV_E_INVALID;
    bool have_gy = false;
    for (; r == NV_OK && n_in < c->n_inputs; n_in++)
        if ((r = fp32_copy(&c->inputs[n_in], &in[n_in])) != NV_OK)
            break;
    for (; r == NV_OK && n_sv < c->n_saved; n_sv++)
        if ((r = fp32_copy(&c->saved[n_sv], &sv[n_sv])) != NV_OK)
            break;
    if (r == NV_OK)
        have_gy = (r = fp32_copy(c->grad_output, &gy)) == NV_OK;
    if (r == NV_OK) {
        nv_backward_call c32 = *c;
        c32.inputs = in, c32.saved = sv, c32.grad_output = &gy;
        r = nvw_emu_backend()->backward(bc->emu, &c32, err, errlen);
    }
    for (int k = 0; k < n_in; k++)
        nvw_view_free(&in[k]);
    for (int k = 0; k < n_sv; k++)
        nvw_view_free(&sv[k]);
    if (have_gy)
        nvw_view_free(&gy);
    return r;
}

static int bad_double_backward(void *ctx, nv_double_backward_call *c, char *err, size_t errlen)
{
    return nvw_emu_backend()->double_backward(((bad_ctx *)ctx)->emu, c, err, errlen);
}

/* Gradient g (the emu's, contiguous) re-encoded as fp32 in place of its data. */
static int widen(nv_tensor_view *g)
{
    nv_tensor *t = nvw_tensor_from_view(g, false);
    nv_tensor_view w;
    int r = t ? NV_OK : NV_E_NOMEM;
    if (t) {
        t->dtype = NV_DT_FP32;
        r = nvw_view_from_tensor(t, &w) < 0 ? NV_E_NOMEM : NV_OK;
    }
    if (r == NV_OK) {
        free(g->data); /* the emu's release_tensor is free() */
        *g = w;
    }
    nv_tensor_free(t);
    return r;
}

static int bad_backward(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    bad_ctx *bc = ctx;
    if (bc->grad_fp32)
        return backward_fp32(bc, c, err, errlen);
    int r = nvw_emu_backend()->backward(bc->emu, c, err, errlen);
    if (r != NV_OK)
        return r;
    for (int k = 0; bc->grad_widen && r == NV_OK && k < c->n_grads; k++)
        r = widen(&c->grad_inputs[k]);
    if (bc->grad_widen)
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
    table.double_backward = bad_double_backward;
    table.graph = NULL; /* the emu's would be handed this plugin's context */
    return &table;
}
