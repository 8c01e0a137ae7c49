/* emu backward (worker/backends/emu_backward*.c) through the backend table:
 * gradients from the saved rounded output (tanh in bf16 against the fp32
 * formula evaluated here on the device's own bf16 output), the declared
 * "saved" lists and gradient dtype, bf16 vs fp32 accumulation of a long
 * backward sum (hand-derived stagnation value), inference-only refusal and
 * argument errors. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "test-emu.h"
#include "worker/backends/loader.h"

/* Backward of op with inputs in[], saved (as the emu declares), gy; the first
 * gradient decoded into *ret (caller frees), or NULL with *ret_rc. */
static nv_tensor *backward(emu_t *e, const char *op, int n, const nv_tensor *const *in, int n_saved,
                           const nv_tensor *const *saved, const nv_tensor *gy, int n_grads,
                           int which, int *ret_rc, char *err)
{
    nv_tensor_view iv[4], sv[4], gv, out[4];
    memset(out, 0, sizeof out);
    for (int i = 0; i < n; i++)
        nvw_view_from_tensor(in[i], &iv[i]);
    for (int i = 0; i < n_saved; i++)
        nvw_view_from_tensor(saved[i], &sv[i]);
    nvw_view_from_tensor(gy, &gv);
    nv_backward_call c = {.op = op,
                          .attrs_json = "{}",
                          .n_inputs = n,
                          .inputs = iv,
                          .n_saved = n_saved,
                          .saved = sv,
                          .grad_output = &gv,
                          .n_grads = n_grads,
                          .grad_inputs = out};
    int rc = e->tb->backward(e->ctx, &c, err, ERRLEN);
    nv_tensor *g = rc == NV_OK ? nvw_tensor_from_view(&out[which], false) : NULL;
    if (g && out[which].dtype != (int32_t)in[which]->dtype)
        rc = 99; /* gradient dtype must be the input's */
    for (int i = 0; rc == NV_OK && i < n_grads; i++)
        e->tb->release_tensor(e->ctx, &out[i]);
    for (int i = 0; i < n; i++)
        nvw_view_free(&iv[i]);
    for (int i = 0; i < n_saved; i++)
        nvw_view_free(&sv[i]);
    nvw_view_free(&gv);
    *ret_rc = rc;
    return g;
}

static void test_tanh_from_y(void)
{
    emu_t e;
    char err[ERRLEN];
    emu_start(&e, "", err);
    double xs[4] = {0.5, 1.75, 3.0, -2.25}, gs[4] = {1, -0.75, 2, 0.5};
    nv_tensor *x = mk1(NV_DT_BF16, 4, xs), *gy = mk1(NV_DT_BF16, 4, gs);
    nv_tensor *y = run1(&e, "tanh", "{}", NV_DT_BF16, x);
    int rc;
    const nv_tensor *in[1] = {x}, *sv[1] = {y};
    nv_tensor *g = backward(&e, "tanh", 1, in, 1, sv, gy, 1, 0, &rc, err);
    int same = g != NULL;
    for (int k = 0; g && k < 4; k++) {
        /* fp32 steps on the saved bf16 y, then the bf16 store (C float arithmetic,
         * FLT_EVAL_METHOD 0: each operation rounded to fp32). */
        float yf = (float)y->data[k], t = yf * yf, d = 1.0f - t, v = (float)gy->data[k] * d;
        double want = nv_dtype_round(NV_DT_BF16, v, &NV_ROUND_DEFAULT, 0);
        same &= g->data[k] == want;
    }
    tap_ok(rc == NV_OK && same, "tanh backward in bf16 = bf16(gy (1 - y*y)) from the rounded y");
    nv_tensor_free(g);
    nv_tensor_free(y);
    nv_tensor_free(x);
    nv_tensor_free(gy);
    const char *d = e.tb->describe(e.ctx);
    json_error_t je;
    json_t *dj = json_loads(d, 0, &je);
    json_t *saved = json_object_get(dj, "saved"), *want = json_pack("[s]", "output:0");
    tap_ok(json_equal(json_object_get(saved, "tanh"), want) &&
               json_array_size(json_object_get(saved, "layer_norm")) == 3 &&
               !strcmp(json_string_value(json_object_get(dj, "gradient_dtype")), "input") &&
               json_is_false(json_object_get(dj, "inference_only")),
           "describe: saved lists (tanh output, layer_norm inputs), gradient dtype, not "
           "inference-only");
    json_decref(want);
    json_decref(dj);
    emu_stop(&e);
}

/* layer_norm's bias gradient sums gy over the rows. With 4096 rows of gy = 1:
 * fp32 accumulation gives 4096 exactly; bf16 (8 significant bits) stagnates at
 * 256, since 256 + 1 = 257 needs 9 bits and ties to even 256. */
static void test_accumulation(void)
{
    int64_t sh[2] = {4096, 2};
    double *ones = malloc(sizeof(double) * 8192), *xs = malloc(sizeof(double) * 8192);
    for (int k = 0; k < 8192; k++)
        ones[k] = 1, xs[k] = k % 2 ? 1 : -1;
    double w2[2] = {1, 1}, b2[2] = {0, 0};
    const char *modes[2] = {"accum=fp32", "accum=bf16"};
    double want[2] = {4096, 256};
    for (int m = 0; m < 2; m++) {
        emu_t e;
        char err[ERRLEN];
        emu_start(&e, modes[m], err);
        nv_tensor *x = mk(NV_DT_BF16, 2, sh, xs), *gy = mk(NV_DT_BF16, 2, sh, ones);
        nv_tensor *w = mk1(NV_DT_BF16, 2, w2), *b = mk1(NV_DT_BF16, 2, b2);
        const nv_tensor *in[3] = {x, w, b};
        int rc;
        nv_tensor *gb = backward(&e, "layer_norm", 3, in, 3, in, gy, 3, 2, &rc, err);
        tap_ok(rc == NV_OK && gb && gb->data[0] == want[m] && gb->data[1] == want[m],
               "%s: layer_norm bias gradient over 4096 rows = %g (got %g)", modes[m], want[m],
               gb ? gb->data[0] : NAN);
        nv_tensor_free(gb);
        nv_tensor_free(x);
        nv_tensor_free(gy);
        nv_tensor_free(w);
        nv_tensor_free(b);
        emu_stop(&e);
    }
    free(ones);
    free(xs);
}

static void test_refusals(void)
{
    emu_t e;
    char err[ERRLEN];
    emu_start(&e, "inference_only=on", err);
    double v[2] = {1, 2};
    nv_tensor *x = mk1(NV_DT_FP32, 2, v);
    const nv_tensor *in[1] = {x};
    int rc;
    nv_tensor *g = backward(&e, "tanh", 1, in, 1, in, x, 1, 0, &rc, err);
    json_error_t je;
    json_t *dj = json_loads(e.tb->describe(e.ctx), 0, &je);
    tap_ok(rc == NV_E_UNSUPPORTED && strstr(err, "inference-only") &&
               json_is_true(json_object_get(dj, "inference_only")),
           "inference_only=on: describe says so, backward refused: %s", err);
    json_decref(dj);
    nv_tensor_free(g);
    emu_stop(&e);
    emu_start(&e, "", err);
    double w3[3] = {1, 2, 3};
    nv_tensor *gy = mk1(NV_DT_FP32, 3, w3);
    g = backward(&e, "tanh", 1, in, 1, in, gy, 1, 0, &rc, err);
    tap_ok(rc == NV_E_SHAPE, "grad_output of the wrong shape: NV_E_SHAPE (%s)", err);
    nv_tensor_free(g);
    g = backward(&e, "tanh", 1, in, 0, in, x, 1, 0, &rc, err);
    tap_ok(rc == NV_E_INVALID && strstr(err, "saved"), "missing saved tensor: %s", err);
    nv_tensor_free(g);
    g = backward(&e, "cast", 1, in, 0, in, x, 1, 0, &rc, err);
    tap_ok(rc == NV_E_UNSUPPORTED, "cast has no backward: %s", err);
    nv_tensor_free(g);
    nv_tensor_free(gy);
    nv_tensor_free(x);
    emu_stop(&e);
}

int main(void)
{
    test_tanh_from_y();
    test_accumulation();
    test_refusals();
    return tap_done();
}
