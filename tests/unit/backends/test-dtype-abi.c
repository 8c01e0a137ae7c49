/* The dtype codes of the plugin ABI (enum nv_dt in include/numval/backend.h, which
 * the numerics core's nv_dtype is): their fixed numbers checked at compile time
 * for every code, and the count, so that a dtype added to the core without its row
 * in docs/BACKEND_ABI.md stops the build, and a renumbering (an ABI break) too. At run time: each code's format is the
 * one docs/BACKEND_ABI.md documents (name, width, storage, exponent and fraction
 * bits), and a third-party plugin built against backend.h alone
 * (plugin_thirdparty.c) computes neg through the loader in every signed float
 * dtype, so its codes and numval's agree on the bytes too. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "numval/backend.h"
#include "tests/unit/tap.h"
#include "worker/backends/loader.h"

#define ABI_CODE(code, number) _Static_assert((code) == (number), #code " is not " #number);
ABI_CODE(NV_DT_FP64, 0)
ABI_CODE(NV_DT_FP32, 1)
ABI_CODE(NV_DT_TF32, 2)
ABI_CODE(NV_DT_BF16, 3)
ABI_CODE(NV_DT_FP16, 4)
ABI_CODE(NV_DT_FP8_E4M3, 5)
ABI_CODE(NV_DT_FP8_E5M2, 6)
ABI_CODE(NV_DT_FP6_E2M3, 7)
ABI_CODE(NV_DT_FP6_E3M2, 8)
ABI_CODE(NV_DT_FP4_E2M1, 9)
ABI_CODE(NV_DT_E8M0, 10)
ABI_CODE(NV_DT_INT8, 11)
ABI_CODE(NV_DT_INT32, 12)
_Static_assert(NV_DT_COUNT == 13, "a new nv_dtype needs its NV_DT_* code in "
                                  "include/numval/backend.h and a row in docs/BACKEND_ABI.md");

/* docs/BACKEND_ABI.md "Dtype codes", row by row. */
static const struct {
    int code;
    const char *name;
    int bits, storage, exp_bits, mant_bits, is_float, has_inf, has_nan;
} abi[] = {
    {NV_DT_FP64, "fp64", 64, 8, 11, 52, 1, 1, 1},
    {NV_DT_FP32, "fp32", 32, 4, 8, 23, 1, 1, 1},
    {NV_DT_TF32, "tf32", 32, 4, 8, 10, 1, 1, 1},
    {NV_DT_BF16, "bf16", 16, 2, 8, 7, 1, 1, 1},
    {NV_DT_FP16, "fp16", 16, 2, 5, 10, 1, 1, 1},
    {NV_DT_FP8_E4M3, "fp8_e4m3", 8, 1, 4, 3, 1, 0, 1},
    {NV_DT_FP8_E5M2, "fp8_e5m2", 8, 1, 5, 2, 1, 1, 1},
    {NV_DT_FP6_E2M3, "fp6_e2m3", 6, 1, 2, 3, 1, 0, 0},
    {NV_DT_FP6_E3M2, "fp6_e3m2", 6, 1, 3, 2, 1, 0, 0},
    {NV_DT_FP4_E2M1, "fp4_e2m1", 4, 1, 2, 1, 1, 0, 0},
    {NV_DT_E8M0, "e8m0", 8, 1, 8, 0, 1, 0, 1},
    {NV_DT_INT8, "int8", 8, 1, 0, 0, 0, 0, 0},
    {NV_DT_INT32, "int32", 32, 4, 0, 0, 0, 0, 0},
};
#define N_ABI ((int)(sizeof abi / sizeof abi[0]))

static void test_formats(void)
{
    for (int k = 0; k < N_ABI; k++) {
        const nv_dtype_info *di = nv_dtype_get((nv_dtype)abi[k].code);
        tap_ok(di && !strcmp(di->name, abi[k].name) && di->bits == abi[k].bits &&
                   di->storage_bytes == abi[k].storage && di->exp_bits == abi[k].exp_bits &&
                   di->mant_bits == abi[k].mant_bits && di->is_float == abi[k].is_float &&
                   di->has_inf == abi[k].has_inf && di->has_nan == abi[k].has_nan,
               "code %d is %s: %d bits in %d bytes, %d exponent and %d fraction bits", abi[k].code,
               abi[k].name, abi[k].bits, abi[k].storage, abi[k].exp_bits, abi[k].mant_bits);
    }
    nv_dtype dt;
    tap_ok(nv_dtype_from_name("e4m3fn", &dt) == 0 && (int)dt == NV_DT_FP8_E4M3,
           "alias e4m3fn is code NV_DT_FP8_E4M3");
    tap_ok(nv_dtype_get((nv_dtype)N_ABI) == NULL, "no dtype behind code %d", N_ABI);
}

/* neg of vals (rounded to dt) through the plugin; 1 when every result is -x
 * bit for bit in value and sign, 0 when not, a negative code when refused. */
static int neg_through(const nv_backend *tb, void *ctx, nv_dtype dt, const double *vals, int n,
                       char *err, size_t errlen)
{
    int64_t shape[2] = {2, n / 2};
    nv_tensor *x = nv_tensor_new(dt, 2, shape);
    if (!x)
        return NV_E_NOMEM;
    for (int i = 0; i < n; i++)
        x->data[i] = nv_dtype_round(dt, vals[i], &NV_ROUND_DEFAULT, 0);
    nv_tensor_view in, out;
    int r = nvw_view_from_tensor(x, &in);
    if (r < 0) {
        nv_tensor_free(x);
        return NV_E_NOMEM;
    }
    nv_op_call call = {.op = "neg",
                       .attrs_json = "{}",
                       .out_dtype = (int32_t)dt,
                       .n_inputs = 1,
                       .inputs = &in,
                       .n_outputs = 1,
                       .outputs = &out};
    err[0] = 0;
    r = tb->forward(ctx, &call, err, errlen);
    nvw_view_free(&in);
    if (r == NV_OK) {
        nv_tensor *y = nvw_tensor_from_view(&out, false);
        tb->release_tensor(ctx, &out);
        int same = y != NULL && out.dtype == (int32_t)dt;
        for (int i = 0; same && i < n; i++)
            same = TAP_SAME_DOUBLE(y->data[i], -x->data[i]) &&
                   !signbit(y->data[i]) == !signbit(-x->data[i]);
        nv_tensor_free(y);
        r = same;
    }
    nv_tensor_free(x);
    return r;
}

static void test_thirdparty(void)
{
    char err[512] = "";
    nvw_backend *b = NULL;
    int r = nvw_backend_load("plugin:" PLUGIN_THIRDPARTY, &b, err, sizeof err);
    tap_ok(r == 0 && b, "the plugin built against include/ alone loads (%s)", err);
    if (!b)
        return;
    const nv_backend *tb = nvw_backend_table(b);
    void *ctx = NULL;
    tap_ok(tb->open("", &ctx, err, sizeof err) == NV_OK, "it opens");
    /* Zeros of both signs, a subnormal-sized value, the format's extremes (which
     * round to its largest and smallest values), ordinary values. */
    double vals[8] = {0.0, -0.0, 1.5, -0.75, 1e300, -1e-300, 3.0, -2.0};
    for (int k = 0; k < N_ABI; k++) {
        nv_dtype dt = (nv_dtype)abi[k].code;
        const nv_dtype_info *di = nv_dtype_get(dt);
        int want_refused = !di->is_float || !di->is_signed;
        r = neg_through(tb, ctx, dt, vals, 8, err, sizeof err);
        if (want_refused)
            tap_ok(r == NV_E_DTYPE, "%s (code %d): neg refused with NV_E_DTYPE (%d: %s)",
                   abi[k].name, abi[k].code, r, err);
        else
            tap_ok(r == 1, "%s (code %d): neg through the plugin is -x for every element (%d: %s)",
                   abi[k].name, abi[k].code, r, err);
    }
    tb->close(ctx);
    nvw_backend_free(b);
}

int main(void)
{
    test_formats();
    test_thirdparty();
    return tap_done();
}
