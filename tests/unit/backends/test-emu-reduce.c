/* emu reductions and matmul against hand-computed values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-emu.h"
#include "tests/unit/tap.h"

static void test_small_reductions(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    emu_start(&e, "", err);
    int64_t sh[2] = {2, 4};
    double v[8] = {1, 2, 3, 4, 10, -10, 0.5, 0.25};
    nv_tensor *x = mk(NV_DT_FP32, 2, sh, v);
    nv_tensor *o = run1(&e, "sum", NULL, NV_DT_FP32, x);
    tap_ok(o && o->ndim == 1 && o->data[0] == 10 && o->data[1] == 0.75, "sum rows: 10, 0.75");
    nv_tensor_free(o);
    o = run1(&e, "sum", "{\"axis\": 0}", NV_DT_FP32, x);
    tap_ok(o && o->shape[0] == 4 && o->data[0] == 11 && o->data[1] == -8 && o->data[3] == 4.25,
           "sum along axis 0: 11, -8, 3.5, 4.25");
    nv_tensor_free(o);
    o = run1(&e, "mean", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == 2.5 && o->data[1] == 0.1875, "mean rows: 2.5, 0.1875");
    nv_tensor_free(o);
    o = run1(&e, "max", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == 4 && o->data[1] == 10, "max rows: 4, 10");
    nv_tensor_free(o);
    /* Population variance of 1..4 is 5/4; sample variance 5/3 rounded to fp32. */
    o = run1(&e, "var", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == 1.25, "var two-pass of 1..4 = 1.25");
    nv_tensor_free(o);
    o = run1(&e, "var", "{\"algorithm\": \"welford\", \"correction\": 1}", NV_DT_FP32, x);
    tap_ok(o && o->data[0] == (double)(float)(5.0 / 3.0), "var Welford sample of 1..4 = fl(5/3)");
    nv_tensor_free(o);
    /* norm2 of (1,2,3,4) = sqrt(30), correctly rounded from an exact sum of squares. */
    o = run1(&e, "norm2", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == (double)(float)sqrt(30.0), "norm2 of 1..4 = fl(sqrt 30)");
    nv_tensor_free(o);
    nv_tensor_free(x);

    /* softmax of (1, 2, 3): four rounded steps (x - max, exp, sum, divide) in fp32,
     * each within 1/2 ulp: 4 ulp allows their worst accumulation. */
    double sv[3] = {1, 2, 3};
    x = mk1(NV_DT_FP32, 3, sv);
    o = run1(&e, "softmax", NULL, NV_DT_FP32, x);
    double den = exp(-2.0) + exp(-1.0) + 1;
    double want[3] = {exp(-2.0) / den, exp(-1.0) / den, 1 / den};
    double worst = 0;
    for (int i = 0; o && i < 3; i++)
        worst = fmax(worst, ulp_err32(o->data[i], want[i]));
    tap_ok(o && worst <= 4, "softmax(1,2,3) within 4 ulp of exact (%.2f)", worst);
    nv_tensor_free(o);
    o = run1(&e, "logsumexp", NULL, NV_DT_FP32, x);
    tap_ok(o && ulp_err32(o->data[0], 3 + log(den)) <= 4, "logsumexp(1,2,3) = 3 + log(%g)", den);
    nv_tensor_free(o);
    o = run1(&e, "log_softmax", NULL, NV_DT_FP32, x);
    tap_ok(o && ulp_err32(o->data[2], -log(den)) <= 4, "log_softmax(1,2,3)[2] = -log(%g)", den);
    nv_tensor_free(o);

    /* layer_norm of (1,2,3,4), weight 2, bias 1: (x - 2.5) / sqrt(1.25 + 1e-5) * 2 + 1.
     * Rounded steps: mean, deviation, variance, rsqrt, two products, add: 8 ulp. */
    double lv[4] = {1, 2, 3, 4}, wv[4] = {2, 2, 2, 2}, bv[4] = {1, 1, 1, 1};
    nv_tensor *lx = mk1(NV_DT_FP32, 4, lv), *w = mk1(NV_DT_FP32, 4, wv),
              *b = mk1(NV_DT_FP32, 4, bv);
    const nv_tensor *ln[3] = {lx, w, b};
    o = run(&e, "layer_norm", NULL, NV_DT_FP32, 3, ln, &rc, err);
    worst = 0;
    for (int i = 0; o && i < 4; i++)
        worst = fmax(worst, ulp_err32(o->data[i], (lv[i] - 2.5) / sqrt(1.25 + 1e-5) * 2 + 1));
    tap_ok(o && worst <= 8, "layer_norm within 8 ulp of exact (%.2f)", worst);
    nv_tensor_free(o);
    o = run(&e, "rms_norm", NULL, NV_DT_FP32, 2, ln, &rc, err);
    worst = 0;
    for (int i = 0; o && i < 4; i++)
        worst = fmax(worst, ulp_err32(o->data[i], lv[i] / sqrt(7.5 + 1e-5) * 2));
    tap_ok(o && worst <= 8, "rms_norm within 8 ulp of exact (%.2f)", worst);
    nv_tensor_free(o);

    /* cross_entropy of logits [[0, 0], [0, ln 3]] with targets [1, 0]: log 2 and log 4. */
    int64_t cs[2] = {2, 2};
    double cl[4] = {0, 0, 0, log(3.0)}, tv[2] = {1, 0};
    nv_tensor *logits = mk(NV_DT_FP32, 2, cs, cl), *tg = mk1(NV_DT_INT32, 2, tv);
    const nv_tensor *ce[2] = {logits, tg};
    o = run(&e, "cross_entropy", NULL, NV_DT_FP32, 2, ce, &rc, err);
    tap_ok(o && ulp_err32(o->data[0], log(2.0)) <= 4 && ulp_err32(o->data[1], log(4.0)) <= 4,
           "cross_entropy: log 2, log 4 (4 ulp: max, subtract, exp, sum, log, subtract)");
    nv_tensor_free(o);
    tg->data[1] = 2;
    o = run(&e, "cross_entropy", NULL, NV_DT_FP32, 2, ce, &rc, err);
    tap_ok(!o && rc == NV_E_INVALID && strstr(err, "'2'"), "target out of range refused: %s", err);
    nv_tensor_free(logits);
    nv_tensor_free(tg);
    nv_tensor_free(lx);
    nv_tensor_free(w);
    nv_tensor_free(b);
    nv_tensor_free(x);
    emu_stop(&e);
}

static void test_plain_matmul(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    emu_start(&e, "", err);
    int64_t s2[2] = {2, 2};
    double av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8};
    nv_tensor *a = mk(NV_DT_FP32, 2, s2, av), *b = mk(NV_DT_FP32, 2, s2, bv);
    const nv_tensor *in[2] = {a, b};
    nv_tensor *o = run(&e, "matmul", NULL, NV_DT_FP32, 2, in, &rc, err);
    tap_ok(o && o->data[0] == 19 && o->data[1] == 22 && o->data[2] == 43 && o->data[3] == 50,
           "matmul [[1,2],[3,4]] [[5,6],[7,8]] = [[19,22],[43,50]] (%s)", o ? "" : err);
    nv_tensor_free(o);
    int64_t s3[3] = {2, 2, 2};
    double a3[8] = {1, 2, 3, 4, 1, 0, 0, 1}, b3[8] = {5, 6, 7, 8, 5, 6, 7, 8};
    nv_tensor *ba = mk(NV_DT_FP32, 3, s3, a3), *bb = mk(NV_DT_FP32, 3, s3, b3);
    const nv_tensor *bi[2] = {ba, bb};
    o = run(&e, "bmm", NULL, NV_DT_FP32, 2, bi, &rc, err);
    tap_ok(o && o->ndim == 3 && o->data[3] == 50 && o->data[4] == 5 && o->data[7] == 8,
           "bmm: batch 0 product, batch 1 identity (%s)", o ? "" : err);
    nv_tensor_free(o);
    nv_tensor_free(ba);
    nv_tensor_free(bb);
    nv_tensor_free(a);
    nv_tensor_free(b);
    emu_stop(&e);
}

/* fp8 e4m3 x e4m3, K = 64 in two MX blocks of 32 (OCP MX v1.0 §6: X_i 2^(s-127)),
 * fp32 accumulation. A row 0: 1.5 in block 0, -0.25 in block 1; row 1: k mod 4 as
 * 0, 0.5, 1, 1.5. B column 0: 2 everywhere; column 1: 1 for even k, -3 for odd k.
 * Scales sa[m][blk] = 2^(m - blk), sb[blk][n] = 2^(blk + n - 1).
 * Block sums (without scales): A0 B0: blk0 32*1.5*2 = 96, blk1 32*-0.25*2 = -16;
 * A0 B1: blk0 1.5*16*(1 - 3) = -48, blk1 -0.25*16*(-2) = 8;
 * A1 B0: per block 8*(0+0.5+1+1.5)*2 = 48;  A1 B1: per block 8*(0 - 1.5 + 1 - 4.5) = -40.
 * C[m][n] = sum_blk sa sb blocksum. */
static void test_mx_matmul(void)
{
    char err[ERRLEN];
    emu_t e;
    int rc;
    emu_start(&e, "", err);
    int64_t sa_sh[2] = {2, 64}, sb_sh[2] = {64, 2};
    double A[128], B[128];
    for (int k = 0; k < 64; k++) {
        A[k] = k < 32 ? 1.5 : -0.25;
        A[64 + k] = 0.5 * (k % 4);
        B[k * 2] = 2;
        B[k * 2 + 1] = k % 2 ? -3 : 1;
    }
    nv_tensor *a = mk(NV_DT_FP8_E4M3, 2, sa_sh, A), *b = mk(NV_DT_FP8_E4M3, 2, sb_sh, B);
    int64_t ssa[2] = {2, 2}, ssb[2] = {2, 2};
    double sav[4], sbv[4];
    for (int m = 0; m < 2; m++)
        for (int blk = 0; blk < 2; blk++)
            sav[m * 2 + blk] = ldexp(1, m - blk);
    for (int blk = 0; blk < 2; blk++)
        for (int n = 0; n < 2; n++)
            sbv[blk * 2 + n] = ldexp(1, blk + n - 1);
    nv_tensor *sa = mk(NV_DT_E8M0, 2, ssa, sav), *sb = mk(NV_DT_E8M0, 2, ssb, sbv);
    const nv_tensor *in[4] = {a, b, sa, sb};
    nv_tensor *o = run(&e, "matmul", "{\"scale\": \"block:32\"}", NV_DT_FP32, 4, in, &rc, err);
    double bs[2][2][2] = {{{96, -16}, {-48, 8}}, {{48, 48}, {-40, -40}}}; /* [m][n][blk] */
    int ok = o != NULL;
    for (int m = 0; ok && m < 2; m++)
        for (int n = 0; n < 2; n++) {
            double want = 0;
            for (int blk = 0; blk < 2; blk++)
                want += sav[m * 2 + blk] * sbv[blk * 2 + n] * bs[m][n][blk];
            ok = ok && o->data[m * 2 + n] == want;
            if (!ok)
                tap_diag("C[%d][%d] = %g, want %g", m, n, o->data[m * 2 + n], want);
        }
    tap_ok(ok, "MX block:32 fp8 e4m3 matmul equals the hand-computed product (%s)", o ? "" : err);
    nv_tensor_free(o);
    emu_stop(&e);
    /* A device that scales only per 64-element block re-quantizes: with sa[0][1] =
     * 2^-20, row 0's 64-block has amax 1.5, its e8m0 scale 2^(0 - 8) (MX §6.3, e4m3
     * emax 8), and block 1's -0.25 * 2^-20 / 2^-8 = -2^-14 is below half of e4m3's
     * smallest subnormal 2^-9: it rounds to zero and row 0 loses block 1. Row 1 and
     * every column of B re-quantize exactly (values k 2^e with few bits). */
    sa->data[1] = 0x1p-20;
    emu_start(&e, "scale=block:64", err);
    o = run(&e, "matmul", "{\"scale\": \"block:32\"}", NV_DT_FP32, 4, in, &rc, err);
    ok = o != NULL;
    int lost = 0;
    for (int m = 0; ok && m < 2; m++)
        for (int n = 0; n < 2; n++) {
            double exact = 0, want = 0;
            for (int blk = 0; blk < 2; blk++) {
                double term = sa->data[m * 2 + blk] * sbv[blk * 2 + n] * bs[m][n][blk];
                exact += term;
                want += (m == 0 && blk == 1) ? 0 : term;
            }
            ok = ok && o->data[m * 2 + n] == want;
            lost += o->data[m * 2 + n] != exact;
        }
    tap_ok(ok && lost == 2,
           "scale=block:64 device re-quantizes block:32 operands: row 0 loses "
           "its 2^-20 block (%s)",
           o ? "" : err);
    nv_tensor_free(o);
    emu_stop(&e);
    nv_tensor_free(a);
    nv_tensor_free(b);
    nv_tensor_free(sa);
    nv_tensor_free(sb);
}

/* norm2 scales by a power of two (LAPACK nrm2's idea), so squares of values near
 * fp32's max or min neither overflow nor underflow the fp32 accumulator; the
 * expected values by hand: sqrt(2) 2^127 and sqrt(2) 2^-140. Plain sums still
 * overflow where their partial sums do (the intermediate-overflow rule,
 * docs/TOLERANCES.md), and the contract declares the accumulator. */
static void test_accumulator_range(void)
{
    char err[ERRLEN];
    emu_t e;
    emu_start(&e, "", err);
    nv_tensor *x = mk1(NV_DT_FP32, 2, (double[]){0x1p127, 0x1p127});
    nv_tensor *o = run1(&e, "norm2", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == (double)(float)(sqrt(2.0) * 0x1p127),
           "norm2(2^127, 2^127) = fl(sqrt 2 2^127), no overflow of the squares");
    nv_tensor_free(o);
    nv_tensor_free(x);
    x = mk1(NV_DT_FP32, 2, (double[]){0x1p-140, -0x1p-140});
    o = run1(&e, "norm2", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == (double)(float)(sqrt(2.0) * 0x1p-140),
           "norm2(2^-140, -2^-140) = fl(sqrt 2 2^-140), no underflow of the squares");
    nv_tensor_free(o);
    nv_tensor_free(x);
    x = mk1(NV_DT_FP32, 3, (double[]){0x1.fffffep127, 0x1.fffffep127, -0x1.fffffep127});
    o = run1(&e, "sum", NULL, NV_DT_FP32, x);
    tap_ok(o && o->data[0] == INFINITY, "fp32 sum max + max - max overflows its fp32 accumulator");
    nv_tensor_free(o);
    nv_tensor_free(x);
    emu_stop(&e);
    static const char *const modes[] = {"", "accum=bf16", "storage=fp64"};
    static const char *const want[] = {"fp32", "bf16", "fp64"};
    for (int m = 0; m < 3; m++) {
        emu_start(&e, modes[m], err);
        json_t *d = json_loads(e.tb->describe(e.ctx), 0, NULL);
        json_t *c = json_object_get(json_object_get(d, "contract"), "bf16");
        const char *dt = NULL, *rg = NULL;
        json_unpack(json_object_get(c, "accumulator"), "{s:s, s:s}", "dtype", &dt, "range", &rg);
        json_t *mm = json_object_get(c, "matmul_accumulator");
        tap_ok(dt && rg && !strcmp(dt, want[m]) && !strcmp(rg, want[m]) && (m == 1) == (mm != NULL),
               "emu:%s declares its %s accumulator for bf16 (matmul's %s)", modes[m], want[m],
               mm ? "fixed too" : "follows its acc attribute");
        json_decref(d);
        emu_stop(&e);
    }
}

int main(void)
{
    test_small_reductions();
    test_plain_matmul();
    test_mx_matmul();
    test_accumulator_range();
    return tap_done();
}
