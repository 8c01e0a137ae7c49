/* Exact references: hand-computed values (each expected value derived by hand
 * or from a closed form evaluated in MPFR), IEEE special values, overflow to the
 * output dtype, strided views. */
#include "ref_test.h"

static void test_hand_reductions(void)
{
    res r;
    nv_tensor *in[3];
    in[0] = vec(NV_DT_FP64, 3, (double[]){1e16, 1, -1e16});
    run("sum", NULL, 1, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == 1 && r.lo->data[0] == 0 && r.abs->data[0] == 2e16 + 1,
           "sum [1e16, 1, -1e16] = 1 exactly, abs_sum 2e16+1");
    res_free(&r);
    nv_tensor_free(in[0]);
    in[0] = vec(NV_DT_FP32, 4, (double[]){1, 2, 3, 4});
    run("mean", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 2.5 && r.lo->data[0] == 0, "mean [1,2,3,4] = 2.5");
    res_free(&r);
    run("var", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 1.25 && r.lo->data[0] == 0, "var [1,2,3,4] population = 1.25");
    res_free(&r);
    run("var", "{\"correction\": 1, \"algorithm\": \"welford\"}", 1, in, NV_DT_FP64, &r);
    mpfr_t e;
    mpfr_init2(e, OP);
    mpfr_set_ui(e, 5, MPFR_RNDN);
    mpfr_div_ui(e, e, 3, MPFR_RNDN);
    tap_ok(close_to(r.hi->data[0], r.lo->data[0], e, 105), "var sample = 5/3 to 2^-105");
    res_free(&r);
    run("max", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 4, "max = 4");
    res_free(&r);
    nv_tensor_free(in[0]);
    in[0] = vec(NV_DT_FP32, 2, (double[]){3, 4});
    run("norm2", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 5 && r.lo->data[0] == 0, "norm2 [3, 4] = 5");
    res_free(&r);
    nv_tensor_free(in[0]);
    in[0] = vec(NV_DT_FP32, 3, (double[]){0.7, 0.7, 0.7});
    run("softmax", NULL, 1, in, NV_DT_FP32, &r);
    mpfr_set_ui(e, 1, MPFR_RNDN);
    mpfr_div_ui(e, e, 3, MPFR_RNDN);
    bool ok = true;
    for (int i = 0; i < 3; i++)
        ok &= close_to(r.hi->data[i], r.lo->data[i], e, 104);
    tap_ok(ok, "softmax of equal entries = 1/3 to 2^-104");
    res_free(&r);
    run("logsumexp", NULL, 1, in, NV_DT_FP32, &r);
    mpfr_set_ui(e, 3, MPFR_RNDN);
    mpfr_log(e, e, MPFR_RNDN);
    mpfr_add_d(e, e, 0.7, MPFR_RNDN);
    tap_ok(close_to(r.hi->data[0], r.lo->data[0], e, 104), "logsumexp = 0.7 + ln 3");
    res_free(&r);
    run("log_softmax", NULL, 1, in, NV_DT_FP32, &r);
    mpfr_set_ui(e, 3, MPFR_RNDN);
    mpfr_log(e, e, MPFR_RNDN);
    mpfr_neg(e, e, MPFR_RNDN);
    tap_ok(close_to(r.hi->data[1], r.lo->data[1], e, 104), "log_softmax = -ln 3");
    res_free(&r);
    nv_tensor_free(in[0]);
    mpfr_clear(e);
}

static void test_hand_norms(void)
{
    res r;
    nv_tensor *in[3];
    mpfr_t e;
    mpfr_init2(e, OP);
    /* x = [1,2,3,4]: mean 2.5, var 1.25, y = (x - 2.5) / sqrt(1.25) = (2x - 5) / sqrt 5. */
    in[0] = vec(NV_DT_FP32, 4, (double[]){1, 2, 3, 4});
    in[1] = vec(NV_DT_FP32, 4, (double[]){1, 1, 1, 2});
    in[2] = vec(NV_DT_FP32, 4, (double[]){0, 0, 0, 0.5});
    run("layer_norm", "{\"eps\": 0}", 3, in, NV_DT_FP32, &r);
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        mpfr_set_ui(e, 5, MPFR_RNDN);
        mpfr_sqrt(e, e, MPFR_RNDN);
        mpfr_ui_div(e, 1, e, MPFR_RNDN);
        mpfr_mul_si(e, e, 2 * (i + 1) - 5, MPFR_RNDN);
        mpfr_mul_d(e, e, in[1]->data[i], MPFR_RNDN);
        mpfr_add_d(e, e, in[2]->data[i], MPFR_RNDN);
        ok &= close_to(r.hi->data[i], r.lo->data[i], e, 104);
    }
    tap_ok(ok, "layer_norm [1,2,3,4] = w (2x-5)/sqrt 5 + b");
    res_free(&r);
    /* rms_norm [3, 4], eps 0: rms = sqrt(12.5); y = x w / sqrt(12.5). */
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    in[0] = vec(NV_DT_FP32, 2, (double[]){3, 4});
    in[1] = vec(NV_DT_FP32, 2, (double[]){1, -2});
    run("rms_norm", "{\"eps\": 0}", 2, in, NV_DT_FP32, &r);
    mpfr_set_d(e, 12.5, MPFR_RNDN);
    mpfr_rec_sqrt(e, e, MPFR_RNDN);
    mpfr_mul_si(e, e, -8, MPFR_RNDN);
    tap_ok(close_to(r.hi->data[1], r.lo->data[1], e, 104) && r.hi->data[0] > 0.8485 &&
               r.hi->data[0] < 0.8486,
           "rms_norm [3, 4] w [1, -2] = [3, -8] / sqrt 12.5");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    nv_tensor_free(in[2]);
    /* cross_entropy: logits [[0, 0], [ln 3 ~ 0, 0]], targets [1, 0]. */
    in[0] = mat(NV_DT_FP32, 2, 2, (double[]){0, 0, 1, 0});
    int32_t dummy = 0;
    (void)dummy;
    in[1] = vec(NV_DT_INT32, 2, (double[]){1, 0});
    run("cross_entropy", NULL, 2, in, NV_DT_FP32, &r);
    mpfr_set_ui(e, 2, MPFR_RNDN);
    mpfr_log(e, e, MPFR_RNDN);
    bool ok0 = close_to(r.hi->data[0], r.lo->data[0], e, 104);
    mpfr_set_d(e, 1, MPFR_RNDN);
    mpfr_exp(e, e, MPFR_RNDN);
    mpfr_add_ui(e, e, 1, MPFR_RNDN);
    mpfr_log(e, e, MPFR_RNDN);
    mpfr_sub_ui(e, e, 1, MPFR_RNDN); /* log(e + 1) - 1 */
    bool ok1 = close_to(r.hi->data[1], r.lo->data[1], e, 104);
    tap_ok(ok0 && ok1, "cross_entropy: ln 2 and ln(e + 1) - 1");
    res_free(&r);
    run("cross_entropy", "{\"reduction\": \"mean\"}", 2, in, NV_DT_FP32, &r);
    mpfr_t l2;
    mpfr_init2(l2, OP);
    mpfr_set_ui(l2, 2, MPFR_RNDN);
    mpfr_log(l2, l2, MPFR_RNDN);
    mpfr_add(e, e, l2, MPFR_RNDN);
    mpfr_div_ui(e, e, 2, MPFR_RNDN);
    tap_ok(r.hi->ndim == 0 && close_to(r.hi->data[0], r.lo->data[0], e, 104),
           "cross_entropy mean of the two losses");
    res_free(&r);
    in[1]->data[1] = 2;
    tap_ok(run("cross_entropy", NULL, 2, in, NV_DT_FP32, &r) == NV_E_INVALID,
           "target out of [0, C) refused");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    mpfr_clears(e, l2, (mpfr_ptr)0);
}

static void test_hand_elementwise(void)
{
    res r;
    nv_tensor *in[3];
    in[0] = vec(NV_DT_FP64, 4, (double[]){-0.0, NAN, 1, 1e16});
    in[1] = vec(NV_DT_FP64, 4, (double[]){0.0, 1, NAN, 1});
    run("maximum", NULL, 2, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == 0 && !signbit(r.hi->data[0]) && isnan(r.hi->data[1]) &&
               isnan(r.hi->data[2]) && r.hi->data[3] == 1e16,
           "maximum: -0 < +0, NaN propagates (IEEE 754-2019 §9.6)");
    res_free(&r);
    run("minimum", NULL, 2, in, NV_DT_FP64, &r);
    tap_ok(signbit(r.hi->data[0]) && isnan(r.hi->data[1]) && isnan(r.hi->data[2]),
           "minimum: -0, NaN propagates");
    res_free(&r);
    run("add", NULL, 2, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[3] == 1e16 && r.lo->data[3] == 1, "add 1e16 + 1 = hi 1e16, lo 1");
    res_free(&r);
    run("relu", NULL, 1, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == 0 && !signbit(r.hi->data[0]) && isnan(r.hi->data[1]),
           "relu(-0) = +0, relu(NaN) = NaN");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    double a = 1 + 0x1p-30, b = 1 - 0x1p-30;
    in[0] = vec(NV_DT_FP64, 1, &a);
    in[1] = vec(NV_DT_FP64, 1, &b);
    in[2] = vec(NV_DT_FP64, 1, (double[]){-1});
    run("fma", NULL, 3, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == -0x1p-60 && r.lo->data[0] == 0,
           "fma (1+2^-30)(1-2^-30) - 1 = -2^-60 exactly");
    res_free(&r);
    run("mul", NULL, 2, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == 1 && r.lo->data[0] == -0x1p-60, "mul: hi 1, lo -2^-60");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    nv_tensor_free(in[2]);
    in[0] = vec(NV_DT_FP32, 1, (double[]){1});
    in[1] = vec(NV_DT_FP32, 1, (double[]){3});
    mpfr_t e;
    mpfr_init2(e, OP);
    mpfr_set_ui(e, 1, MPFR_RNDN);
    mpfr_div_ui(e, e, 3, MPFR_RNDN);
    run("div", NULL, 2, in, NV_DT_FP32, &r);
    bool ok32 = close_to(r.hi->data[0], r.lo->data[0], e, 104);
    res_free(&r);
    run("div", NULL, 2, in, NV_DT_FP64, &r);
    tap_ok(ok32 && close_to(r.hi->data[0], r.lo->data[0], e, 104),
           "div 1/3 to 2^-104 in fp32 (fma remainder) and fp64 (MPFR) outputs");
    res_free(&r);
    in[0]->data[0] = 0.1f;
    run("cast", "{\"to\": \"bf16\"}", 1, in, NV_DT_BF16, &r);
    tap_ok(r.hi->data[0] == (double)0.1f && r.lo->data[0] == 0, "cast: exact value is the input");
    res_free(&r);
    run("exp", NULL, 1, in, NV_DT_FP32, &r);
    mpfr_set_d(e, (double)0.1f, MPFR_RNDN);
    mpfr_exp(e, e, MPFR_RNDN);
    tap_ok(close_to(r.hi->data[0], r.lo->data[0], e, 50) && r.abs->data[0] == r.hi->data[0],
           "exp through refmath, abs_sum = |exact|");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    mpfr_clear(e);
}

static void test_hand_matmul(void)
{
    res r;
    nv_tensor *in[4];
    in[0] = mat(NV_DT_FP32, 2, 3, (double[]){1, 2, 3, 4, 5, 6});
    in[1] = mat(NV_DT_FP32, 3, 2, (double[]){7, 8, 9, 10, 11, 12});
    run("matmul", NULL, 2, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 58 && r.hi->data[1] == 64 && r.hi->data[2] == 139 &&
               r.hi->data[3] == 154 && r.abs->data[0] == 58,
           "2x3 x 3x2 = [[58, 64], [139, 154]]");
    res_free(&r);
    in[2] = vec(NV_DT_FP32, 1, (double[]){0.5});
    in[3] = vec(NV_DT_FP32, 1, (double[]){3});
    run("matmul", "{\"scale\": \"tensor\"}", 4, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 87 && r.hi->data[3] == 231, "tensor scales 0.5 and 3: x1.5");
    res_free(&r);
    nv_tensor_free(in[2]);
    nv_tensor_free(in[3]);
    in[2] = vec(NV_DT_FP32, 2, (double[]){1, 2});  /* per row of A */
    in[3] = vec(NV_DT_FP32, 2, (double[]){10, 1}); /* per column of B */
    run("matmul", "{\"scale\": \"channel\"}", 4, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 580 && r.hi->data[1] == 64 && r.hi->data[2] == 2780 &&
               r.hi->data[3] == 308,
           "channel scales: C[i][j] sa_i sb_j");
    res_free(&r);
    for (int i = 0; i < 4; i++)
        nv_tensor_free(in[i]);
    /* MX: A e4m3 [1, 64] of ones, B [64, 1] of 1.5; block 32, scales
     * 2^(e - 127): A blocks 2^3, 2^-1; B blocks 2^0, 2^2.
     * C = 32 * 1.5 * (8 * 1) + 32 * 1.5 * (0.5 * 4) = 384 + 96 = 480. */
    int64_t sa_s[2] = {1, 64}, sb_s[2] = {64, 1};
    in[0] = nv_tensor_new(NV_DT_FP8_E4M3, 2, sa_s);
    in[1] = nv_tensor_new(NV_DT_FP8_E4M3, 2, sb_s);
    for (int k = 0; k < 64; k++) {
        in[0]->data[k] = 1;
        in[1]->data[k] = 1.5;
    }
    int64_t s2[2] = {1, 2}, s3[2] = {2, 1};
    in[2] = nv_tensor_new(NV_DT_E8M0, 2, s2);
    in[3] = nv_tensor_new(NV_DT_E8M0, 2, s3);
    in[2]->data[0] = nv_dtype_decode(NV_DT_E8M0, 130, false);
    in[2]->data[1] = nv_dtype_decode(NV_DT_E8M0, 126, false);
    in[3]->data[0] = nv_dtype_decode(NV_DT_E8M0, 127, false);
    in[3]->data[1] = nv_dtype_decode(NV_DT_E8M0, 129, false);
    run("matmul", "{\"scale\": \"block:32\"}", 4, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 480 && r.abs->data[0] == 480, "MX block:32 e8m0 scales: 480");
    res_free(&r);
    for (int i = 0; i < 4; i++)
        nv_tensor_free(in[i]);
}

/* Exact values beyond the output dtype's overflow threshold T = 2^emax (2 - 2^-p)
 * become the overflow result (IEEE 754-2019 §7.4; OFP8 e4m3fn: NaN). */
static void test_overflow(void)
{
    res r;
    double fmax = 0x1.fffffep127, half_ulp = 0x1p103; /* T = fmax + half_ulp */
    nv_tensor *in[2] = {vec(NV_DT_FP32, 3, (double[]){fmax, fmax, -fmax}),
                        vec(NV_DT_FP32, 3, (double[]){half_ulp, half_ulp / 2, -fmax})};
    run("add", NULL, 2, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == INFINITY && r.lo->data[0] == 0 && isfinite(r.hi->data[1]) &&
               r.hi->data[2] == -INFINITY,
           "fp32 add: the tie at T overflows, below T stays finite, -Inf below -T");
    res_free(&r);
    run("exp", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == INFINITY && r.hi->data[2] == 0, "exp(fmax) = Inf, exp(-fmax) = 0");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    in[0] = vec(NV_DT_FP64, 2, (double[]){1000, 709});
    run("exp", NULL, 1, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == INFINITY && isfinite(r.hi->data[1]),
           "fp64 exp(1000) = Inf, exp(709) finite");
    res_free(&r);
    nv_tensor_free(in[0]);
    /* e4m3fn: max 448, T = 464 ties to the even 448; beyond it NaN. MX fp4 e2m1:
     * max 6, always saturating (MX v1.0 §5.3): 100 -> 6, while 6.5 (below
     * T = 7) stays exact. */
    in[0] = vec(NV_DT_FP32, 4, (double[]){464, 464.0009765625, -500, 100});
    run("cast", "{\"to\": \"fp8_e4m3\"}", 1, in, NV_DT_FP8_E4M3, &r);
    tap_ok(r.hi->data[0] == 464 && isnan(r.hi->data[1]) && isnan(r.hi->data[2]),
           "cast to e4m3fn: 464 stays (ties to 448), beyond it NaN");
    res_free(&r);
    in[0]->data[0] = 6.5;
    run("cast", "{\"to\": \"fp4_e2m1\"}", 1, in, NV_DT_FP4_E2M1, &r);
    tap_ok(r.hi->data[0] == 6.5 && r.hi->data[2] == -6 && r.hi->data[3] == 6,
           "cast to fp4_e2m1: beyond T saturates to +-6, 6.5 stays exact");
    res_free(&r);
    in[0]->data[0] = INFINITY;
    in[0]->data[1] = -INFINITY;
    run("cast", "{\"to\": \"fp4_e2m1\"}", 1, in, NV_DT_FP4_E2M1, &r);
    tap_ok(r.hi->data[0] == 6 && r.hi->data[1] == -6, "cast +-Inf to fp4_e2m1: +-6 (MX saturates)");
    res_free(&r);
    run("cast", "{\"to\": \"fp8_e4m3\"}", 1, in, NV_DT_FP8_E4M3, &r);
    tap_ok(isnan(r.hi->data[0]) && isnan(r.hi->data[1]),
           "cast +-Inf to e4m3fn: NaN (no infinities)");
    res_free(&r);
    nv_tensor_free(in[0]);
    in[0] = vec(NV_DT_FP8_E4M3, 2, (double[]){448, 448});
    in[1] = vec(NV_DT_FP8_E4M3, 2, (double[]){448, -448});
    run("add", NULL, 2, in, NV_DT_FP8_E4M3, &r);
    tap_ok(isnan(r.hi->data[0]) && r.hi->data[1] == 0, "e4m3 448 + 448 overflows to NaN (OFP8)");
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
}

/* IEEE special values through the composed reductions (PyTorch semantics), and
 * the ranges fp64 squares would overflow. */
static void test_specials(void)
{
    res r;
    nv_tensor *in[1] = {vec(NV_DT_FP32, 3, (double[]){-INFINITY, 0, 0})};
    run("softmax", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == 0 && r.hi->data[1] == 0.5 && r.hi->data[2] == 0.5,
           "softmax [-inf, 0, 0] = [0, 1/2, 1/2]");
    res_free(&r);
    run("log_softmax", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == -INFINITY && fabs(r.hi->data[1] + M_LN2) < 1e-15,
           "log_softmax [-inf, 0, 0] = [-inf, -ln 2, -ln 2]");
    res_free(&r);
    in[0]->data[1] = in[0]->data[2] = -INFINITY;
    run("logsumexp", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == -INFINITY, "logsumexp of all -inf = -inf");
    res_free(&r);
    run("softmax", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(isnan(r.hi->data[0]) && isnan(r.hi->data[2]), "softmax of all -inf = NaN");
    res_free(&r);
    in[0]->data[1] = INFINITY;
    run("logsumexp", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(r.hi->data[0] == INFINITY, "logsumexp with +inf = +inf");
    res_free(&r);
    in[0]->data[2] = NAN;
    run("max", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(isnan(r.hi->data[0]), "max propagates NaN");
    res_free(&r);
    run("sum", NULL, 1, in, NV_DT_FP32, &r);
    tap_ok(isnan(r.hi->data[0]), "sum with NaN (and -inf + inf) is NaN");
    res_free(&r);
    nv_tensor_free(in[0]);
    /* fp64 squares of 1e300 overflow: norm2 scales by a power of two first. */
    in[0] = vec(NV_DT_FP64, 2, (double[]){3e300, 4e300});
    run("norm2", NULL, 1, in, NV_DT_FP64, &r);
    tap_ok(isfinite(r.hi->data[0]) && fabs(r.hi->data[0] / 5e300 - 1) < 1e-15,
           "norm2 [3e300, 4e300] = 5e300 without overflow");
    res_free(&r);
    run("var", NULL, 1, in, NV_DT_FP64, &r);
    tap_ok(r.hi->data[0] == INFINITY, "var of [3e300, 4e300] = 2.5e599 overflows fp64 to Inf");
    res_free(&r);
    nv_tensor_free(in[0]);
    /* large mean, unit spread: population variance of [1e8+1, 1e8+2, 1e8+3] = 2/3 */
    in[0] = vec(NV_DT_FP64, 3, (double[]){1e8 + 1, 1e8 + 2, 1e8 + 3});
    run("var", NULL, 1, in, NV_DT_FP64, &r);
    mpfr_t e;
    mpfr_init2(e, OP);
    mpfr_set_ui(e, 2, MPFR_RNDN);
    mpfr_div_ui(e, e, 3, MPFR_RNDN);
    /* abs_sum = sqrt(Q S) / n with Q = 3e16 + 12e8 + 14, S = 2 */
    double q = 3e16 + 12e8 + 14, want_abs = sqrt(q * 2) / 3;
    tap_ok(close_to(r.hi->data[0], r.lo->data[0], e, 104) &&
               fabs(r.abs->data[0] / want_abs - 1) < 1e-12,
           "var of [1e8+1, 1e8+2, 1e8+3] = 2/3 exactly; abs_sum kappa-weighted");
    res_free(&r);
    nv_tensor_free(in[0]);
    mpfr_clear(e);
}

/* A strided view: x is the transpose of a contiguous [4, 3] buffer. */
static void test_views(void)
{
    int64_t s[2] = {4, 3};
    nv_tensor *buf = nv_tensor_new(NV_DT_FP32, 2, s);
    for (int i = 0; i < 12; i++)
        buf->data[i] = i; /* buf[r][c] = 3r + c */
    nv_tensor view = *buf;
    view.shape[0] = 3;
    view.shape[1] = 4;
    view.strides[0] = 1;
    view.strides[1] = 3; /* view[c][r] = 3r + c */
    nv_tensor *in[1] = {&view};
    res r;
    run("sum", NULL, 1, in, NV_DT_FP32, &r);
    /* row c of the view: sum_r (3r + c) = 18 + 4c */
    tap_ok(r.hi->data[0] == 18 && r.hi->data[1] == 22 && r.hi->data[2] == 26,
           "sum along the last axis of a transposed view");
    res_free(&r);
    run("softmax", "{\"axis\": 0}", 1, in, NV_DT_FP32, &r);
    double col = r.hi->data[0 * 4 + 1] + r.hi->data[1 * 4 + 1] + r.hi->data[2 * 4 + 1];
    tap_ok(fabs(col - 1) < 1e-15 && r.hi->data[2 * 4 + 1] > r.hi->data[1 * 4 + 1],
           "softmax along axis 0 of the view sums to 1 per column");
    res_free(&r);
    nv_tensor_free(buf);
}

/* One output of op through nv_op_reference_ex: its pair, its wide abs_sum as a
 * value (abs_sum 2^abs_exp, possibly beyond fp64: returned as mantissa and
 * exponent) and its peak. */
typedef struct wide {
    double hi, lo, abs_m, abs_e, peak;
} wide;

static int run_wide(const char *op, const char *attrs, int n, nv_tensor **in, nv_dtype out_dt,
                    int64_t k, wide *w)
{
    nv_op_attrs a;
    char *msg = NULL;
    json_t *j = attrs ? json_loads(attrs, 0, NULL) : NULL;
    int rc = nv_op_parse_attrs(nv_op_find(op), j, &a, &msg);
    json_decref(j);
    free(msg);
    int nd;
    int64_t sh[NV_MAX_DIMS];
    char err[256];
    if (rc == 0)
        rc = nv_op_infer(nv_op_find(op), &a, n, (const nv_tensor *const *)in, &nd, sh, err,
                         sizeof err);
    if (rc < 0)
        return rc;
    nv_ref_out o = {.hi = nv_tensor_new(out_dt, nd, sh),
                    .lo = nv_tensor_new(out_dt, nd, sh),
                    .abs_sum = nv_tensor_new(NV_DT_FP64, nd, sh),
                    .abs_exp = nv_tensor_new(NV_DT_FP64, nd, sh),
                    .peak = nv_tensor_new(NV_DT_FP64, nd, sh)};
    rc = nv_op_reference_ex(nv_op_find(op), &a, n, (const nv_tensor *const *)in, &o);
    *w = (wide){o.hi->data[k], o.lo->data[k], o.abs_sum->data[k], o.abs_exp->data[k],
                o.peak->data[k]};
    nv_tensor_free(o.hi);
    nv_tensor_free(o.lo);
    nv_tensor_free(o.abs_sum);
    nv_tensor_free(o.abs_exp);
    nv_tensor_free(o.peak);
    return rc;
}

/* References over fp64's whole exponent range (docs/TOLERANCES.md "References":
 * no intermediate range limits), expected values by hand. */
static void test_wide_range(void)
{
    const double M = 0x1.fffffffffffffp1023; /* fp64 max; T = M + 2^970 */
    wide w;
    /* sum: partial sums to 3M, value M; abs_sum 5M and peak beyond fp64. */
    nv_tensor *x = vec(NV_DT_FP64, 5, (double[]){M, M, M, -M, -M});
    run_wide("sum", NULL, 1, &x, NV_DT_FP64, 0, &w);
    tap_ok(w.hi == M && w.lo == 0 && w.abs_e == 1027 && fabs(w.abs_m - M * 0x1p-1027 * 5) < 1e-15 &&
               w.peak == INFINITY,
           "sum max+max+max-max-max = max; abs_sum 5 max as m 2^1027 (%a, %g), peak Inf", w.abs_m,
           w.abs_e);
    nv_tensor_free(x);
    /* The overflow threshold: M + 2^970 rounds to +Inf, 2^-1074 less to M. */
    x = vec(NV_DT_FP64, 3, (double[]){M, 0x1p970, 0});
    run_wide("sum", NULL, 1, &x, NV_DT_FP64, 0, &w);
    bool at = w.hi == INFINITY;
    x->data[2] = -0x1p-1074;
    run_wide("sum", NULL, 1, &x, NV_DT_FP64, 0, &w);
    tap_ok(at && w.hi == M && isfinite(w.abs_m),
           "sum at the overflow threshold is +Inf, one 2^-1074 below it max (hi %a)", w.hi);
    nv_tensor_free(x);
    /* mean: 1.5e308 * 3 - 1e308 = 3.5e308 (the sum overflows fp64), / 4 = 8.75e307. */
    x = vec(NV_DT_FP64, 4, (double[]){1.5e308, 1.5e308, 1.5e308, -1e308});
    mpfr_t e;
    mpfr_init2(e, OP);
    mpfr_set_d(e, 1.5e308, MPFR_RNDN);
    mpfr_mul_ui(e, e, 3, MPFR_RNDN);
    mpfr_sub_d(e, e, 1e308, MPFR_RNDN);
    mpfr_div_ui(e, e, 4, MPFR_RNDN);
    run_wide("mean", NULL, 1, &x, NV_DT_FP64, 0, &w);
    tap_ok(close_to(w.hi, w.lo, e, 104) && w.abs_e == 0 &&
               fabs(w.abs_m - (1.5e308 / 4 * 3 + 1e308 / 4)) <= 1e293 && w.peak == INFINITY,
           "mean whose sum overflows fp64: exact %.6g, abs_sum sum|x|/n = %.6g", w.hi, w.abs_m);
    nv_tensor_free(x);
    /* mean of two maxes is max. */
    x = vec(NV_DT_FP64, 2, (double[]){M, M});
    run_wide("mean", NULL, 1, &x, NV_DT_FP64, 0, &w);
    tap_ok(w.hi == M && w.lo == 0, "mean(max, max) = max");
    nv_tensor_free(x);
    /* matmul: products of 2^1024 (1 + 2^-51 + 2^-104) and 2^1024 (1 + 2^-51) each
     * overflow fp64 and cancel to 2^920; plus 1 * 1. */
    double a1 = 0x1.0000000000001p512;
    nv_tensor *in[2] = {mat(NV_DT_FP64, 1, 3, (double[]){a1, -0x1p512, 1}),
                        mat(NV_DT_FP64, 3, 1, (double[]){a1, 0x1.0000000000002p512, 1})};
    run_wide("matmul", "{\"acc\": \"fp64\"}", 2, in, NV_DT_FP64, 0, &w);
    tap_ok(w.hi == 0x1p920 && w.lo == 1 && w.abs_e == 1026 && w.peak == INFINITY,
           "matmul products beyond fp64 that cancel: 2^920 + 1 exactly (hi %a lo %a)", w.hi, w.lo);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    /* ... and products that overflow and add up: -2^1101 rounds to -Inf, not NaN. */
    in[0] = mat(NV_DT_FP64, 1, 2, (double[]){-0x1p600, -0x1p600});
    in[1] = mat(NV_DT_FP64, 2, 1, (double[]){0x1p500, 0x1p500});
    run_wide("matmul", "{\"acc\": \"fp64\"}", 2, in, NV_DT_FP64, 0, &w);
    tap_ok(w.hi == -INFINITY && w.abs_e == 1102 && w.abs_m == 0.5,
           "matmul -2^1100 - 2^1100 = -Inf (abs_sum 2^1101 as 0.5 2^1102)");
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    /* peak of matmul: sum |a b| or a larger operand (fp32 accumulator's view). */
    in[0] = mat(NV_DT_FP64, 1, 2, (double[]){1e300, 0});
    in[1] = mat(NV_DT_FP64, 2, 1, (double[]){1e-300, 5});
    run_wide("matmul", NULL, 2, in, NV_DT_FP64, 0, &w);
    tap_ok(fabs(w.hi - 1) < 1e-15 && w.peak == 1e300,
           "matmul 1e300 * 1e-300: exact 1, peak the operand 1e300");
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    /* norm2's peak is sum x^2 (beyond fp64 here), its value the norm. */
    x = vec(NV_DT_FP64, 2, (double[]){0x1p600, 0x1p600});
    run_wide("norm2", NULL, 1, &x, NV_DT_FP64, 0, &w);
    tap_ok(fabs(w.hi - 0x1p600 * sqrt(2)) <= 0x1p548 && w.peak == INFINITY &&
               w.abs_m == 0x1p600 * sqrt(2),
           "norm2(2^600, 2^600) = 2^600 sqrt 2, peak sum x^2 = 2^1201 (Inf)");
    nv_tensor_free(x);
    /* layer_norm of values near max with weight and bias near max: the value is
     * finite, its abs_sum |w| kappa (|xhat| + 1) + |b| beyond fp64. */
    int64_t sh[2] = {1, 2};
    nv_tensor *ln[3] = {nv_tensor_new(NV_DT_FP64, 2, sh), vec(NV_DT_FP64, 2, (double[]){M, M}),
                        vec(NV_DT_FP64, 2, (double[]){-M, M / 2})};
    ln[0]->data[0] = M;
    ln[0]->data[1] = -M;
    /* mean 0, var M^2, xhat = +-1 (eps negligible): y = (M - M, -M + M/2). */
    run_wide("layer_norm", NULL, 3, ln, NV_DT_FP64, 1, &w);
    tap_ok(fabs(w.hi + M / 2) <= 0x1p972 && w.abs_e > 1024 && w.peak == INFINITY,
           "layer_norm at fp64's max: y = -max/2 (%a), abs_sum beyond fp64 (e %g)", w.hi, w.abs_e);
    for (int i = 0; i < 3; i++)
        nv_tensor_free(ln[i]);
    /* fp32 sum: peak is sum |x| (for the accumulator rule), abs_exp 0. */
    x = vec(NV_DT_FP32, 3, (double[]){0x1.fffffep127, 0x1.fffffep127, -0x1.fffffep127});
    run_wide("sum", NULL, 1, &x, NV_DT_FP32, 0, &w);
    tap_ok(w.hi == 0x1.fffffep127 && w.peak == 3 * 0x1.fffffep127 && w.abs_e == 0,
           "fp32 sum max+max-max = max, peak 3 max (beyond fp32's range)");
    nv_tensor_free(x);
    mpfr_clear(e);
}

int main(void)
{
    test_hand_reductions();
    test_hand_norms();
    test_hand_elementwise();
    test_hand_matmul();
    test_overflow();
    test_wide_range();
    test_specials();
    test_views();
    return tap_done();
}
