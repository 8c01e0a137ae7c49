/* Loader: spec parsing, plugin loading and the ABI check, view conversions. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/backends/loader.h"

#define ERRLEN 512

static float f32(double x)
{
    return (float)x;
}

/* A contiguous fp32 tensor from values. */
static nv_tensor *vec(int ndim, const int64_t *shape, const double *v)
{
    nv_tensor *t = nv_tensor_new(NV_DT_FP32, ndim, shape);
    for (int64_t i = 0; t && i < t->numel; i++)
        t->data[i] = v[i];
    return t;
}

/* Run a one-output op through a loaded table and decode the result. */
static nv_tensor *run_op(const nv_backend *tb, void *ctx, const char *op, int n,
                         const nv_tensor *const *in, char *err)
{
    nv_tensor_view views[4], out;
    for (int i = 0; i < n; i++)
        if (nvw_view_from_tensor(in[i], &views[i]) < 0)
            return NULL;
    nv_op_call call = {.op = op,
                       .attrs_json = "{}",
                       .out_dtype = NV_DT_FP32,
                       .n_inputs = n,
                       .inputs = views,
                       .n_outputs = 1,
                       .outputs = &out};
    int r = tb->forward(ctx, &call, err, ERRLEN);
    for (int i = 0; i < n; i++)
        nvw_view_free(&views[i]);
    if (r != NV_OK)
        return NULL;
    nv_tensor *t = nvw_tensor_from_view(&out, false);
    tb->release_tensor(ctx, &out);
    return t;
}

static void test_good_plugin(void)
{
    char err[ERRLEN] = "";
    nvw_backend *b = NULL;
    int r = nvw_backend_load("plugin:" PLUGIN_OK "?flavour=green", &b, err, sizeof(err));
    tap_ok(r == 0 && b, "good plugin loads (%s)", err);
    if (!b)
        return;
    const nv_backend *tb = nvw_backend_table(b);
    tap_ok(!strcmp(tb->name, "plugin-test"), "table name is the plugin's");
    tap_ok(!strcmp(nvw_backend_options(b), "flavour=green"), "options after '?' are kept");
    tap_ok(!strcmp(nvw_backend_kind(b), "plugin"), "kind is plugin");
    void *ctx = NULL;
    r = tb->open(nvw_backend_options(b), &ctx, err, sizeof(err));
    tap_ok(r == 0, "open with options");
    tap_ok(strstr(tb->describe(ctx), "\"options\": \"flavour=green\"") != NULL,
           "options reach open(): %s", tb->describe(ctx));

    int64_t sh[1] = {4};
    double xv[4] = {0, 1, -1, 0.5};
    double yv[4] = {1, 0x1p-30, 3, -0.5};
    nv_tensor *x = vec(1, sh, xv), *y = vec(1, sh, yv);
    const nv_tensor *in1[1] = {x}, *in2[2] = {x, y};
    nv_tensor *o = run_op(tb, ctx, "neg", 1, in1, err);
    tap_ok(o && o->data[0] == 0 && signbit(o->data[0]) && o->data[1] == -1 && o->data[2] == 1,
           "neg through the plugin: -x, with -0");
    nv_tensor_free(o);
    o = run_op(tb, ctx, "add", 2, in2, err);
    /* 1 + 2^-30 rounds to 1 in fp32 (24-bit significand). */
    tap_ok(o && o->data[0] == 1 && o->data[1] == 1 && o->data[2] == 2 && o->data[3] == 0,
           "add through the plugin");
    nv_tensor_free(o);
    o = run_op(tb, ctx, "exp", 1, in1, err);
    /* e and 1/e to nearest fp32: 0x402DF854 and 0x3EBC5AB2. */
    tap_ok(o && o->data[0] == 1 && o->data[1] == f32(2.71828182845904524) &&
               o->data[2] == f32(0.36787944117144233),
           "exp through the plugin: 1, e, 1/e rounded to fp32");
    nv_tensor_free(o);
    int64_t sh2[2] = {2, 3};
    double mv[6] = {1, 2, 3, 4, 5, 6};
    nv_tensor *m = vec(2, sh2, mv);
    const nv_tensor *in3[1] = {m};
    o = run_op(tb, ctx, "sum", 1, in3, err);
    tap_ok(o && o->ndim == 1 && o->shape[0] == 2 && o->data[0] == 6 && o->data[1] == 15,
           "sum along the last axis through the plugin");
    nv_tensor_free(o);
    o = run_op(tb, ctx, "tanh", 1, in1, err);
    tap_ok(!o && strstr(err, "'tanh'"), "an op the plugin lacks errors: %s", err);
    nv_tensor_free(m);
    nv_tensor_free(x);
    nv_tensor_free(y);
    tb->close(ctx);
    nvw_backend_free(b);
}

static void test_refusals(void)
{
    char err[ERRLEN] = "";
    nvw_backend *b = NULL;
    int r = nvw_backend_load("plugin:" PLUGIN_WRONG_ABI, &b, err, sizeof(err));
    tap_ok(r == -EINVAL && !b, "wrong-ABI plugin is refused");
    tap_ok(strstr(err, PLUGIN_WRONG_ABI) && strstr(err, "version 999") && strstr(err, "version 1"),
           "message names the file, its version and ours: %s", err);

    r = nvw_backend_load("plugin:" PLUGIN_NO_ENTRY, &b, err, sizeof(err));
    tap_ok(r == -EINVAL && strstr(err, "does not export 'nv_backend_entry'") &&
               strstr(err, "undefined symbol"),
           "plugin without the entry symbol is refused with dlerror: %s", err);

    r = nvw_backend_load("plugin:/nonexistent/dir/libnothing.so", &b, err, sizeof(err));
    tap_ok(r == -ENOENT && strstr(err, "'/nonexistent/dir/libnothing.so'"),
           "missing file refused naming it: %s", err);

    r = nvw_backend_load("plugin:libm.so.6", &b, err, sizeof(err));
    tap_ok(r == -EINVAL && strstr(err, "'libm.so.6'"), "bare library name refused: %s", err);

    r = nvw_backend_load("plugin", &b, err, sizeof(err));
    tap_ok(r == -EINVAL && strstr(err, "needs a path"), "plugin without path refused: %s", err);

    r = nvw_backend_load("cuda:0", &b, err, sizeof(err));
    tap_ok(r == -EINVAL && strstr(err, "'cuda'") && strstr(err, "'cuda:0'"),
           "unknown kind refused naming it: %s", err);

    r = nvw_backend_load("", &b, err, sizeof(err));
    tap_ok(r == -EINVAL, "empty spec refused: %s", err);

    r = nvw_backend_load("emu:reduce=pairwise,fma=off", &b, err, sizeof(err));
    tap_ok(r == 0 && !strcmp(nvw_backend_options(b), "reduce=pairwise,fma=off") &&
               !strcmp(nvw_backend_kind(b), "emu") && !strcmp(nvw_backend_table(b)->name, "emu"),
           "emu spec: options are the text after 'emu:'");
    nvw_backend_free(b);
    b = NULL;
    r = nvw_backend_load("emu", &b, err, sizeof(err));
    tap_ok(r == 0 && !strcmp(nvw_backend_options(b), ""), "bare 'emu' has empty options");
    nvw_backend_free(b);
    nvw_backend_free(NULL);
}

/* A transposed view with an offset survives tensor -> view -> tensor, in bf16. */
static void test_views(void)
{
    int64_t sh[2] = {2, 3};
    nv_tensor *t = nv_tensor_new(NV_DT_BF16, 2, sh);
    /* Storage holds the 3x2 matrix [[1,2],[3,4],[5,6]]; view it transposed from
     * offset 0: element [i][j] = storage[j*2 + i]. */
    double vals[6] = {1, 2, 3, 4, 5, -0.0078125};
    for (int i = 0; i < 6; i++)
        t->data[i] = vals[i];
    t->strides[0] = 1;
    t->strides[1] = 2;
    nv_tensor_view v;
    int r = nvw_view_from_tensor(t, &v);
    tap_ok(r == 0 && v.strides[0] == 1 && v.strides[1] == 2 && v.dtype == NV_DT_BF16,
           "view keeps strides and dtype");
    /* bf16 of 3.0 is 0x4040; element [1][0] is storage[1] = 2.0 = 0x4000. */
    uint16_t e01, e10;
    memcpy(&e01, (char *)v.data + 2 * 2, 2);
    memcpy(&e10, (char *)v.data + 1 * 2, 2);
    tap_ok(e01 == 0x4040 && e10 == 0x4000, "encoded bits at strided offsets (0x%04x 0x%04x)", e01,
           e10);
    nv_tensor *back = nvw_tensor_from_view(&v, false);
    double want[6] = {1, 3, 5, 2, 4, -0.0078125};
    int same = back && back->strides[0] == 3 && back->strides[1] == 1;
    for (int i = 0; same && i < 6; i++)
        same = back->data[i] == want[i];
    tap_ok(same, "decoded copy is contiguous and in logical order");
    nv_tensor_free(back);
    nvw_view_free(&v);
    tap_ok(v.data == NULL, "view_free clears data");

    /* Negative stride: a reversed vector. */
    int64_t n4[1] = {4};
    nv_tensor *u = nv_tensor_new(NV_DT_FP16, 1, n4);
    for (int i = 0; i < 4; i++)
        u->data[i] = i + 1;
    u->data[0] = 0x1p-24; /* the smallest fp16 subnormal */
    u->offset = 3;
    u->strides[0] = -1;
    r = nvw_view_from_tensor(u, &v);
    int64_t lo, hi;
    tap_ok(r == 0 && nvw_view_span(&v, &lo, &hi) && lo == -3 && hi == 0,
           "negative stride span [-3, 0]");
    back = nvw_tensor_from_view(&v, false);
    tap_ok(back && back->data[0] == 4 && back->data[3] == 0x1p-24, "reversed view decodes");
    nv_tensor_free(back);
    back = nvw_tensor_from_view(&v, true);
    tap_ok(back && back->data[3] == 0 && back->data[2] == 2, "daz reads the subnormal as zero");
    nv_tensor_free(back);
    nvw_view_free(&v);

    nv_tensor_view bad = {.dtype = 99, .ndim = 1, .shape = {1}, .strides = {1}, .data = &bad};
    tap_ok(nvw_tensor_from_view(&bad, false) == NULL, "unknown dtype view refused");
    nv_tensor_free(u);
    nv_tensor_free(t);
}

int main(void)
{
    test_good_plugin();
    test_refusals();
    test_views();
    return tap_done();
}
