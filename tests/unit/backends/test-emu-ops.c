/* emu op semantics: elementwise rounding, FMA, FTZ/DAZ, directed and stochastic
 * rounding, saturation, transcendental kinds, reductions, matmul with MX scales,
 * and the refusals of invalid input. Expected values are hand-computed or come
 * from an independent oracle (MPFR via nv_ref_round_mpfr, glibc libm, the dtype
 * module's rounding of exact double products). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-emu.h"
#include "tests/unit/tap.h"
#include "core/ref/refmath.h"
#include "core/numerics/rng.h"

static double *normals(int n, uint64_t seed, double scale)
{
    double *d = malloc((size_t)n * sizeof(double));
    nv_rng r;
    nv_rng_init(&r, seed, 0, 0);
    for (int i = 0; i < n; i++)
        d[i] = nv_rng_normal(&r) * scale;
    return d;
}

static void test_exact_transcendentals(void)
{
    char err[ERRLEN];
    emu_t e;
    emu_start(&e, "transcendental=exact", err);
    double v[3] = {0, 1, -1};
    nv_tensor *x = mk1(NV_DT_FP32, 3, v);
    nv_tensor *o = run1(&e, "exp", NULL, NV_DT_FP32, x);
    /* e and 1/e correctly rounded to fp32: 0x1.5bf0a8p+1 and 0x1.78b564p-2. */
    tap_ok(o && o->data[0] == 1 && o->data[1] == 0x1.5bf0a8p+1 && o->data[2] == 0x1.78b564p-2,
           "exact exp(0, 1, -1) in fp32 = 1, 0x1.5bf0a8p+1, 0x1.78b564p-2");
    nv_tensor_free(o);
    nv_tensor_free(x);

    /* 2000 random inputs per (function, dtype): equal to MPFR's correct rounding to
     * the output dtype, one rounding (no double rounding through fp32 for bf16). */
    static const struct {
        const char *op;
        nv_fn fn;
        double scale;
    } fns[] = {{"exp", NV_FN_EXP, 4},   {"log", NV_FN_LOG, 10},        {"tanh", NV_FN_TANH, 2},
               {"erf", NV_FN_ERF, 1.5}, {"sigmoid", NV_FN_SIGMOID, 4}, {"gelu", NV_FN_GELU_ERF, 3}};
    static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16};
    for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
        for (size_t k = 0; k < 3; k++) {
            int n = 2000;
            double *d = normals(n, 11 + f, fns[f].scale);
            if (fns[f].fn == NV_FN_LOG)
                for (int i = 0; i < n; i++)
                    d[i] = fabs(d[i]);
            nv_tensor *xi = mk1(dts[k], n, d);
            nv_tensor *oi = run1(&e, fns[f].op, NULL, dts[k], xi);
            int bad = 0;
            for (int i = 0; oi && i < n; i++) {
                double want =
                    nv_ref_round_mpfr(fns[f].fn, xi->data[i], dts[k], NV_ROUND_NEAREST_EVEN);
                bad += !TAP_SAME_DOUBLE(oi->data[i], want);
            }
            tap_ok(oi && bad == 0, "exact %s in %s equals MPFR's correct rounding (%d differ)",
                   fns[f].op, nv_dtype_name(dts[k]), bad);
            nv_tensor_free(oi);
            nv_tensor_free(xi);
            free(d);
        }
    }
    emu_stop(&e);
}

static void test_libm_and_fast(void)
{
    char err[ERRLEN];
    emu_t e;
    int n = 4000;
    double *d = normals(n, 5, 30);
    nv_tensor *x = mk1(NV_DT_FP32, n, d);
    emu_start(&e, "transcendental=libm", err);
    nv_tensor *o = run1(&e, "exp", NULL, NV_DT_FP32, x);
    int same = o != NULL;
    for (int i = 0; same && i < n; i++)
        same = TAP_SAME_DOUBLE(o->data[i], (double)expf((float)x->data[i]));
    tap_ok(same, "libm exp equals the host's expf");
    nv_tensor_free(o);
    emu_stop(&e);

    emu_start(&e, "transcendental=fast", err);
    o = run1(&e, "exp", NULL, NV_DT_FP32, x);
    double worst = 0;
    for (int i = 0; o && i < n; i++) {
        double want = exp(x->data[i]);
        if (want < 3e38 && want > 1e-37)
            worst = fmax(worst, ulp_err32(o->data[i], want));
    }
    /* emu_fast.c states 256 ulp for exp over all fp32 (x log2 e rounding). */
    tap_ok(o && worst > 1 && worst <= 256, "fast exp shows its real error: %.1f ulp", worst);
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(x);
    free(d);
}

static void test_rounding_knobs(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    /* fma: a = b = 1 + 2^-12, c = -(1 + 2^-11): a b = 1 + 2^-11 + 2^-24 exactly. Fused
     * gives 2^-24; unfused rounds a b to 1 + 2^-11 (a tie, to even) and gives 0. */
    double av = 1 + 0x1p-12, cv = -(1 + 0x1p-11);
    nv_tensor *a = mk1(NV_DT_FP32, 1, &av), *c = mk1(NV_DT_FP32, 1, &cv);
    const nv_tensor *in3[3] = {a, a, c};
    emu_start(&e, "fma=on", err);
    nv_tensor *o = run(&e, "fma", NULL, NV_DT_FP32, 3, in3, &rc, err);
    tap_ok(o && o->data[0] == 0x1p-24, "fma=on: fused product keeps 2^-24");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "fma=off", err);
    o = run(&e, "fma", NULL, NV_DT_FP32, 3, in3, &rc, err);
    tap_ok(o && o->data[0] == 0, "fma=off: rounded product loses it");
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);
    nv_tensor_free(c);

    /* FTZ: 2^-70 * 2^-70 = 2^-140, an fp32 subnormal. */
    double t70 = 0x1p-70, sub = 0x1p-140;
    a = mk1(NV_DT_FP32, 1, &t70);
    const nv_tensor *in2[2] = {a, a};
    emu_start(&e, "", err);
    o = run(&e, "mul", NULL, NV_DT_FP32, 2, in2, &rc, err);
    tap_ok(o && o->data[0] == 0x1p-140, "ftz=off keeps the subnormal product 2^-140");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "ftz=on", err);
    o = run(&e, "mul", NULL, NV_DT_FP32, 2, in2, &rc, err);
    tap_ok(o && o->data[0] == 0, "ftz=on flushes it to zero");
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);
    a = mk1(NV_DT_FP32, 1, &sub);
    emu_start(&e, "daz=on", err);
    o = run1(&e, "neg", NULL, NV_DT_FP32, a);
    tap_ok(o && o->data[0] == 0 && signbit(o->data[0]), "daz=on reads 2^-140 as zero: neg = -0");
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);

    /* Directed rounding: 1/3 in fp32 is 0x1.555556p-2 (RNE) or 0x1.555554p-2 (RTZ). */
    double one = 1, three = 3;
    a = mk1(NV_DT_FP32, 1, &one);
    c = mk1(NV_DT_FP32, 1, &three);
    const nv_tensor *dv[2] = {a, c};
    emu_start(&e, "rounding=rtz", err);
    o = run(&e, "div", NULL, NV_DT_FP32, 2, dv, &rc, err);
    tap_ok(o && o->data[0] == 0x1.555554p-2, "rounding=rtz: 1/3 = 0x1.555554p-2");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "rounding=up", err);
    o = run(&e, "div", NULL, NV_DT_FP32, 2, dv, &rc, err);
    tap_ok(o && o->data[0] == 0x1.555556p-2, "rounding=up: 1/3 = 0x1.555556p-2");
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);
    nv_tensor_free(c);

    /* Saturation: exp(12) = 162754.8 exceeds fp16's max 65504. */
    double twelve = 12;
    a = mk1(NV_DT_FP16, 1, &twelve);
    emu_start(&e, "", err);
    o = run1(&e, "exp", NULL, NV_DT_FP16, a);
    tap_ok(o && isinf(o->data[0]), "saturate=off: fp16 exp(12) overflows to inf");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "saturate=on", err);
    o = run1(&e, "exp", NULL, NV_DT_FP16, a);
    tap_ok(o && o->data[0] == 65504, "saturate=on: fp16 exp(12) = 65504");
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);
}

static void test_storage(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    int n = 3000;
    double *dx = normals(n, 21, 3), *dy = normals(n, 22, 3);
    nv_tensor *x = mk1(NV_DT_FP32, n, dx), *y = mk1(NV_DT_FP32, n, dy);
    const nv_tensor *in[2] = {x, y};
    emu_start(&e, "storage=bf16", err);
    nv_tensor *o = run(&e, "mul", NULL, NV_DT_FP32, 2, in, &rc, err);
    int bad = !o;
    for (int i = 0; o && i < n; i++) {
        /* fp32 inputs: the product is exact in fp64; the device rounds it to its
         * compute dtype fp32, then stores bf16. */
        double p = x->data[i] * y->data[i];
        double want = nv_dtype_round(
            NV_DT_BF16, nv_dtype_round(NV_DT_FP32, p, &NV_ROUND_DEFAULT, 0), &NV_ROUND_DEFAULT, 0);
        bad += o->data[i] != want;
    }
    tap_ok(!bad, "storage=bf16: fp32 products stored as bf16 (%d differ)", bad);
    nv_tensor_free(o);
    nv_tensor_free(x);
    nv_tensor_free(y);
    /* bf16 inputs, bf16 output: one correct rounding of the exact product. */
    x = mk1(NV_DT_BF16, n, dx);
    y = mk1(NV_DT_BF16, n, dy);
    in[0] = x;
    in[1] = y;
    o = run(&e, "mul", NULL, NV_DT_BF16, 2, in, &rc, err);
    bad = !o;
    for (int i = 0; o && i < n; i++)
        bad +=
            o->data[i] != nv_dtype_round(NV_DT_BF16, x->data[i] * y->data[i], &NV_ROUND_DEFAULT, 0);
    tap_ok(!bad, "bf16 x bf16 -> bf16 is the correctly rounded product (%d differ)", bad);
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(x);
    nv_tensor_free(y);
    free(dx);
    free(dy);

    /* Stochastic rounding to bf16 of -(1 + 2^-9): the neighbours are -1 and -(1 + 2^-7),
     * the far one taken with probability 1/4. 20000 draws: 4 sigma is 0.012. */
    n = 20000;
    double *dv = malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        dv[i] = 1 + 0x1p-9;
    x = mk1(NV_DT_FP32, n, dv);
    emu_start(&e, "storage=bf16,rounding=stochastic,seed=9", err);
    o = run1(&e, "neg", NULL, NV_DT_FP32, x);
    nv_tensor *o2 = run1(&e, "neg", NULL, NV_DT_FP32, x);
    int up = 0, other = 0, same = o && o2;
    for (int i = 0; o && i < n; i++) {
        up += o->data[i] == -(1 + 0x1p-7);
        other += o->data[i] != -1 && o->data[i] != -(1 + 0x1p-7);
        same = same && o->data[i] == o2->data[i];
    }
    tap_ok(o && other == 0 && fabs(up / (double)n - 0.25) < 0.012,
           "stochastic rounding: P(away) = %.4f ~ 1/4", up / (double)n);
    tap_ok(same, "stochastic rounding is reproducible for a seed");
    nv_tensor_free(o);
    nv_tensor_free(o2);
    emu_stop(&e);
    nv_tensor_free(x);
    free(dv);
}

static void test_refusals(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    emu_start(&e, "", err);
    double v[4] = {1, 2, 3, 4};
    nv_tensor *a = mk1(NV_DT_FP32, 3, v), *b = mk1(NV_DT_FP32, 4, v);
    const nv_tensor *in[2] = {a, b};
    nv_tensor *o = run(&e, "add", NULL, NV_DT_FP32, 2, in, &rc, err);
    tap_ok(!o && rc == NV_E_SHAPE && strstr(err, "[3]") && strstr(err, "[4]"),
           "add of [3] and [4]: NV_E_SHAPE: %s", err);
    nv_tensor *i8 = mk1(NV_DT_INT8, 3, v);
    in[0] = i8;
    o = run(&e, "exp", NULL, NV_DT_FP32, 1, in, &rc, err);
    tap_ok(!o && rc == NV_E_DTYPE && strstr(err, "int8"), "exp of int8: NV_E_DTYPE: %s", err);
    in[0] = a;
    o = run(&e, "softmax", "{\"axis\": 3}", NV_DT_FP32, 1, in, &rc, err);
    tap_ok(!o && rc == NV_E_SHAPE, "softmax axis 3 of a vector: NV_E_SHAPE: %s", err);
    o = run(&e, "no_such_op", NULL, NV_DT_FP32, 1, in, &rc, err);
    tap_ok(!o && rc == NV_E_UNSUPPORTED && strstr(err, "'no_such_op'"), "unknown op: %s", err);
    o = run(&e, "exp", "{\"bogus\": 1}", NV_DT_FP32, 1, in, &rc, err);
    tap_ok(!o && rc == NV_E_INVALID && strstr(err, "'bogus'"), "bad attr: %s", err);
    nv_tensor_free(i8);
    nv_tensor_free(a);
    nv_tensor_free(b);
    emu_stop(&e);
}

/* Layouts, the compute dtype, casts and fp64. */
static void test_layouts_and_dtypes(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    emu_start(&e, "", err);
    /* A transposed view of a 3x4 storage: exp must follow the strides. */
    int64_t sh[2] = {4, 3};
    double *d = normals(12, 31, 2);
    nv_tensor *t = mk(NV_DT_FP32, 2, sh, d);
    t->strides[0] = 1;
    t->strides[1] = 4; /* element [i][j] = storage[j*4 + i] */
    nv_tensor *o = run1(&e, "exp", NULL, NV_DT_FP32, t);
    int ok = o && o->ndim == 2 && o->shape[0] == 4 && o->shape[1] == 3;
    for (int i = 0; ok && i < 4; i++)
        for (int j = 0; j < 3; j++)
            ok = ok && o->data[i * 3 + j] == nv_ref_round_mpfr(NV_FN_EXP, t->data[j * 4 + i],
                                                               NV_DT_FP32, NV_ROUND_NEAREST_EVEN);
    tap_ok(ok, "exp of a transposed view follows its strides");
    nv_tensor_free(o);

    /* softmax along axis 0 of x equals softmax along the last axis of x^T: the same
     * operations in the same order on each row. */
    nv_tensor *c = mk(NV_DT_FP32, 2, sh, d); /* contiguous 4x3 */
    nv_tensor *ct = mk(NV_DT_FP32, 2, (int64_t[]){3, 4}, d);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            ct->data[j * 4 + i] = c->data[i * 3 + j];
    nv_tensor *o0 = run1(&e, "softmax", "{\"axis\": 0}", NV_DT_FP32, c);
    nv_tensor *o1 = run1(&e, "softmax", NULL, NV_DT_FP32, ct);
    ok = o0 && o1;
    for (int i = 0; ok && i < 4; i++)
        for (int j = 0; j < 3; j++)
            ok = o0->data[i * 3 + j] == o1->data[j * 4 + i];
    tap_ok(ok, "softmax axis 0 == softmax of the transpose along its last axis");
    nv_tensor_free(o0);
    nv_tensor_free(o1);
    nv_tensor_free(c);
    nv_tensor_free(ct);
    nv_tensor_free(t);
    free(d);

    /* cast fp32 -> bf16: 1 + 2^-8 + 2^-10 lies between 1 + 2^-7 and 1; RNE rounds up
     * (above the midpoint 1 + 2^-8), RTZ down. */
    double cv = 1 + 0x1p-8 + 0x1p-10;
    nv_tensor *x = mk1(NV_DT_FP32, 1, &cv);
    o = run1(&e, "cast", "{\"to\": \"bf16\"}", NV_DT_BF16, x);
    tap_ok(o && o->dtype == NV_DT_BF16 && o->data[0] == 1 + 0x1p-7, "cast to bf16 (rne)");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "rounding=rtz", err);
    o = run1(&e, "cast", "{\"to\": \"bf16\"}", NV_DT_BF16, x);
    tap_ok(o && o->data[0] == 1, "cast to bf16 (rtz)");
    nv_tensor_free(o);
    emu_stop(&e);

    /* compute=bf16: fp32 inputs are converted to bf16, added, rounded to bf16:
     * (1 + 2^-10) + (1 + 2^-10) -> 1 + 1 = 2 (the 2^-10 parts are lost). */
    double av = 1 + 0x1p-10;
    nv_tensor *a = mk1(NV_DT_FP32, 1, &av);
    const nv_tensor *in2[2] = {a, a};
    emu_start(&e, "compute=bf16", err);
    o = run(&e, "add", NULL, NV_DT_FP32, 2, in2, &rc, err);
    tap_ok(o && o->data[0] == 2, "compute=bf16 rounds inputs and result to bf16");
    nv_tensor_free(o);
    emu_stop(&e);
    emu_start(&e, "", err);
    o = run(&e, "add", NULL, NV_DT_FP32, 2, in2, &rc, err);
    tap_ok(o && o->data[0] == 2 + 0x1p-9, "default compute fp32 keeps 2 + 2^-9");
    nv_tensor_free(o);

    /* fp64: exact exp equals MPFR's correct rounding to fp64. */
    double *d64 = normals(200, 41, 5);
    nv_tensor *x64 = mk1(NV_DT_FP64, 200, d64);
    o = run1(&e, "exp", NULL, NV_DT_FP64, x64);
    int bad = !o;
    for (int i = 0; o && i < 200; i++)
        bad += o->data[i] !=
               nv_ref_round_mpfr(NV_FN_EXP, x64->data[i], NV_DT_FP64, NV_ROUND_NEAREST_EVEN);
    tap_ok(!bad, "fp64 exact exp equals MPFR (%d differ)", bad);
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(x64);
    free(d64);
    nv_tensor_free(a);
    nv_tensor_free(x);
}

int main(void)
{
    test_exact_transcendentals();
    test_libm_and_fast();
    test_rounding_knobs();
    test_storage();
    test_refusals();
    test_layouts_and_dtypes();
    return tap_done();
}
