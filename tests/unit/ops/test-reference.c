/* Exact references: hand-computed values and MPFR cross-checks at high precision
 * on random inputs (the MPFR oracles here are written from the formulas, not
 * from the product code). */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "tap.h"
#include "worker/ops/catalog.h"

#define OP 400 /* oracle precision in bits */

typedef struct res {
    nv_tensor *hi, *lo, *abs;
} res;

/* Run op on inputs; outputs allocated with the inferred shape in out_dt. */
static int run(const char *op, const char *attrs, int n, nv_tensor **in, nv_dtype out_dt, res *r)
{
    nv_op_attrs a;
    char *msg = NULL;
    json_t *j = attrs ? json_loads(attrs, 0, NULL) : NULL;
    int rc = nv_op_parse_attrs(nv_op_find(op), j, &a, &msg);
    json_decref(j);
    free(msg);
    if (rc < 0)
        return rc;
    int nd;
    int64_t sh[NV_MAX_DIMS];
    char err[256];
    rc = nv_op_infer(nv_op_find(op), &a, n, (const nv_tensor *const *)in, &nd, sh, err, sizeof err);
    if (rc < 0) {
        tap_diag("infer %s: %s", op, err);
        return rc;
    }
    r->hi = nv_tensor_new(out_dt, nd, sh);
    r->lo = nv_tensor_new(out_dt, nd, sh);
    r->abs = nv_tensor_new(out_dt, nd, sh);
    return nv_op_reference(nv_op_find(op), &a, n, (const nv_tensor *const *)in, r->hi, r->lo,
                           r->abs);
}

static void res_free(res *r)
{
    nv_tensor_free(r->hi);
    nv_tensor_free(r->lo);
    nv_tensor_free(r->abs);
}

static nv_tensor *vec(nv_dtype dt, int64_t n, const double *v)
{
    nv_tensor *t = nv_tensor_new(dt, 1, &n);
    memcpy(t->data, v, sizeof(double) * (size_t)n);
    return t;
}

static nv_tensor *mat(nv_dtype dt, int64_t r, int64_t c, const double *v)
{
    int64_t s[2] = {r, c};
    nv_tensor *t = nv_tensor_new(dt, 2, s);
    memcpy(t->data, v, sizeof(double) * (size_t)(r * c));
    return t;
}

/* |hi + lo - exact| <= 2^-e |exact| (or == 0 when exact is 0). A double-double
 * holds about 106 bits (lo is rounded to 53 bits below hi), so 2^-104 is the
 * tightest check that a correct pair always passes; looser exponents below are
 * the documented accuracy of the reference (ref_reduce.c). */
static bool close_to(double hi, double lo, mpfr_srcptr exact, int e)
{
    mpfr_t d;
    mpfr_init2(d, OP + 64);
    mpfr_set_d(d, hi, MPFR_RNDN);
    mpfr_add_d(d, d, lo, MPFR_RNDN);
    mpfr_sub(d, d, exact, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_t b;
    mpfr_init2(b, OP);
    mpfr_abs(b, exact, MPFR_RNDN);
    mpfr_mul_2si(b, b, -e, MPFR_RNDN);
    bool ok = mpfr_cmp(d, b) <= 0;
    mpfr_clears(d, b, (mpfr_ptr)0);
    return ok;
}

/* ---- hand-computed cases ---- */

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

/* ---- MPFR cross-checks on random inputs ---- */

static uint64_t rs = 88172645463325252ull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1p-53;
}

static double nrand(void)
{
    double u = urand() + 0x1p-60, v = urand();
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* fp32 values: normal, or cancelling pairs of wide magnitudes. */
static void fill(double *x, int n, int kind)
{
    for (int i = 0; i < n; i++) {
        if (kind == 0)
            x[i] = (float)nrand();
        else if (kind == 1)
            x[i] = (float)(ldexp(nrand(), (int)(urand() * 80) - 40));
        else
            x[i] = (i % 2) ? -x[i - 1] + (float)(nrand() * 1e-3) : (float)(1e6 * nrand());
        x[i] = (float)x[i];
    }
}

static void mp_sum(const double *x, int n, mpfr_ptr s)
{
    mpfr_set_zero(s, 1);
    for (int i = 0; i < n; i++)
        mpfr_add_d(s, s, x[i], MPFR_RNDN);
}

static void test_random_sums(void)
{
    enum { N = 1000 };
    double *x = malloc(sizeof(double) * N);
    mpfr_t s, m, t, v;
    mpfr_inits2(4000, s, m, t, v, (mpfr_ptr)0); /* exact for these sums */
    int ok_sum = 0, ok_var = 0, ok_norm = 0, ok_mean = 0, trials = 0;
    for (int kind = 0; kind < 3; kind++)
        for (int rep = 0; rep < 5; rep++, trials++) {
            fill(x, N, kind);
            nv_tensor *in[1] = {vec(NV_DT_FP32, N, x)};
            res r;
            run("sum", NULL, 1, in, NV_DT_FP32, &r);
            mp_sum(x, N, s);
            ok_sum += close_to(r.hi->data[0], r.lo->data[0], s, 104);
            res_free(&r);
            run("mean", NULL, 1, in, NV_DT_FP32, &r);
            mpfr_div_ui(m, s, N, MPFR_RNDN);
            ok_mean += close_to(r.hi->data[0], r.lo->data[0], m, 100);
            res_free(&r);
            /* two-pass in MPFR: sum (x - mean)^2 / (n - 1) */
            mpfr_set_zero(v, 1);
            for (int i = 0; i < N; i++) {
                mpfr_set_d(t, x[i], MPFR_RNDN);
                mpfr_sub(t, t, m, MPFR_RNDN);
                mpfr_sqr(t, t, MPFR_RNDN);
                mpfr_add(v, v, t, MPFR_RNDN);
            }
            mpfr_div_ui(t, v, N - 1, MPFR_RNDN);
            run("var", "{\"correction\": 1}", 1, in, NV_DT_FP32, &r);
            ok_var += close_to(r.hi->data[0], r.lo->data[0], t, 100);
            res_free(&r);
            mpfr_set_zero(v, 1);
            for (int i = 0; i < N; i++) {
                mpfr_set_d(t, x[i], MPFR_RNDN);
                mpfr_sqr(t, t, MPFR_RNDN);
                mpfr_add(v, v, t, MPFR_RNDN);
            }
            mpfr_sqrt(v, v, MPFR_RNDN);
            run("norm2", NULL, 1, in, NV_DT_FP32, &r);
            ok_norm += close_to(r.hi->data[0], r.lo->data[0], v, 98);
            res_free(&r);
            nv_tensor_free(in[0]);
        }
    tap_ok(ok_sum == trials, "sum vs MPFR exact sum to 2^-104 (normal, wide, cancelling) %d/%d",
           ok_sum, trials);
    tap_ok(ok_mean == trials, "mean vs MPFR to 2^-100 %d/%d", ok_mean, trials);
    tap_ok(ok_var == trials, "var vs MPFR two-pass to 2^-100 %d/%d", ok_var, trials);
    tap_ok(ok_norm == trials, "norm2 vs MPFR to 2^-98 %d/%d", ok_norm, trials);
    mpfr_clears(s, m, t, v, (mpfr_ptr)0);
    free(x);
}

/* The softmax family's exponentials come from a double-double exp accurate to
 * 2^-96 (ref_composed.c), hence 2^-94 for the composed results. */
static void test_random_softmax(void)
{
    enum { N = 300 };
    double x[N];
    mpfr_t s, t, e[N];
    mpfr_inits2(OP, s, t, (mpfr_ptr)0);
    for (int i = 0; i < N; i++)
        mpfr_init2(e[i], OP);
    int ok_sm = 0, ok_lsm = 0, ok_lse = 0, trials = 0;
    for (int rep = 0; rep < 6; rep++, trials++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)(nrand() * (1 + 10 * rep));
        mpfr_set_zero(s, 1);
        for (int i = 0; i < N; i++) { /* no max shift: MPFR's range makes it unnecessary */
            mpfr_set_d(e[i], x[i], MPFR_RNDN);
            mpfr_exp(e[i], e[i], MPFR_RNDN);
            mpfr_add(s, s, e[i], MPFR_RNDN);
        }
        nv_tensor *in[1] = {vec(NV_DT_FP32, N, x)};
        res r;
        run("softmax", NULL, 1, in, NV_DT_BF16, &r);
        bool ok = true;
        for (int i = 0; i < N; i++) {
            mpfr_div(t, e[i], s, MPFR_RNDN);
            ok &= close_to(r.hi->data[i], r.lo->data[i], t, 94);
        }
        ok_sm += ok;
        res_free(&r);
        run("log_softmax", NULL, 1, in, NV_DT_FP32, &r);
        ok = true;
        mpfr_log(s, s, MPFR_RNDN);
        for (int i = 0; i < N; i++) {
            mpfr_set_d(t, x[i], MPFR_RNDN);
            mpfr_sub(t, t, s, MPFR_RNDN);
            ok &= close_to(r.hi->data[i], r.lo->data[i], t, 94);
        }
        ok_lsm += ok;
        res_free(&r);
        run("logsumexp", NULL, 1, in, NV_DT_FP32, &r);
        ok_lse += close_to(r.hi->data[0], r.lo->data[0], s, 94);
        res_free(&r);
        nv_tensor_free(in[0]);
    }
    tap_ok(ok_sm == trials, "softmax vs MPFR to 2^-94 %d/%d", ok_sm, trials);
    tap_ok(ok_lsm == trials, "log_softmax vs MPFR to 2^-94 %d/%d", ok_lsm, trials);
    tap_ok(ok_lse == trials, "logsumexp vs MPFR to 2^-94 %d/%d", ok_lse, trials);
    for (int i = 0; i < N; i++)
        mpfr_clear(e[i]);
    mpfr_clears(s, t, (mpfr_ptr)0);
}

/* softmax [0, d] = [1, e^d] / (1 + e^d) over the whole range of the double-double
 * exp (d from -745 to 0, fp64): 2^-94 relative down to 2^-960; below, where the
 * low part falls into fp64's subnormals (a double-double's relative precision ends
 * there), the high part must be the correctly rounded value. */
static void test_softmax_range(void)
{
    mpfr_t y, t;
    mpfr_inits2(OP, y, t, (mpfr_ptr)0);
    int ok = 0, n = 0;
    for (double d = -745; d <= 0; d += 1.37 + urand(), n++) {
        nv_tensor *in[1] = {vec(NV_DT_FP64, 2, (double[]){0, d})};
        res r;
        run("softmax", NULL, 1, in, NV_DT_FP64, &r);
        mpfr_set_d(y, d, MPFR_RNDN);
        mpfr_exp(y, y, MPFR_RNDN);
        mpfr_add_ui(t, y, 1, MPFR_RNDN);
        mpfr_div(y, y, t, MPFR_RNDN);
        double hi = r.hi->data[1];
        bool good;
        if (mpfr_get_d(y, MPFR_RNDN) < 0x1p-960) /* lo reaches fp64's subnormals */
            good = hi == mpfr_get_d(y, MPFR_RNDN);
        else
            good = close_to(hi, r.lo->data[1], y, 94);
        if (!good)
            tap_diag("d = %.17g: hi %a lo %a, MPFR %a", d, hi, r.lo->data[1],
                     mpfr_get_d(y, MPFR_RNDN));
        ok += good;
        res_free(&r);
        nv_tensor_free(in[0]);
    }
    tap_ok(ok == n, "softmax [0, d], d in [-745, 0]: %d/%d", ok, n);
    mpfr_clears(y, t, (mpfr_ptr)0);
}

static void test_random_matmul(void)
{
    enum { M = 5, K = 40, NN = 6 };
    double a[M * K], b[K * NN];
    fill(a, M * K, 1);
    fill(b, K * NN, 0);
    nv_tensor *in[2] = {mat(NV_DT_FP32, M, K, a), mat(NV_DT_FP32, K, NN, b)};
    res r;
    run("matmul", NULL, 2, in, NV_DT_FP32, &r);
    mpfr_t s, t;
    mpfr_inits2(4000, s, t, (mpfr_ptr)0);
    int ok = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < NN; j++) {
            mpfr_set_zero(s, 1);
            for (int k = 0; k < K; k++) {
                mpfr_set_d(t, a[i * K + k], MPFR_RNDN);
                mpfr_mul_d(t, t, b[k * NN + j], MPFR_RNDN);
                mpfr_add(s, s, t, MPFR_RNDN);
            }
            ok += close_to(r.hi->data[i * NN + j], r.lo->data[i * NN + j], s, 104);
        }
    tap_ok(ok == M * NN, "matmul vs MPFR exact dot products %d/%d", ok, M * NN);
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    mpfr_clears(s, t, (mpfr_ptr)0);
}

/* add, sub, mul exact (hi + lo == exact, checked at 4000 bits); fma and div to
 * 2^-104 (a double-double's resolution). Exponents span 2^-400..2^400 for fp64
 * and 2^-60..2^60 for fp32, so that results stay in range: TwoProduct's low part
 * is exact only above 2^-969, and results beyond the output range become the
 * overflow value (tested in test_overflow). */
static void test_random_elementwise(void)
{
    enum { N = 2000 };
    static const char *const ops[] = {"add", "sub", "mul", "div", "fma"};
    static const nv_dtype dts[] = {NV_DT_FP64, NV_DT_FP32};
    double v[3][N];
    mpfr_t ex, t;
    mpfr_inits2(4000, ex, t, (mpfr_ptr)0);
    for (size_t d = 0; d < 2; d++) {
        int span = dts[d] == NV_DT_FP64 ? 800 : 120;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < N; i++) {
                double x = ldexp(nrand(), (int)(urand() * span) - span / 2);
                v[k][i] = dts[d] == NV_DT_FP32 ? (double)(float)x : x;
            }
        for (size_t o = 0; o < 5; o++) {
            int n_in = o == 4 ? 3 : 2;
            nv_tensor *in[3];
            for (int k = 0; k < n_in; k++)
                in[k] = vec(dts[d], N, v[k]);
            res r;
            run(ops[o], NULL, n_in, in, dts[d], &r);
            int ok = 0;
            for (int i = 0; i < N; i++) {
                mpfr_set_d(ex, v[0][i], MPFR_RNDN);
                mpfr_set_d(t, v[1][i], MPFR_RNDN);
                switch (o) {
                case 0:
                    mpfr_add(ex, ex, t, MPFR_RNDN);
                    break;
                case 1:
                    mpfr_sub(ex, ex, t, MPFR_RNDN);
                    break;
                case 2:
                    mpfr_mul(ex, ex, t, MPFR_RNDN);
                    break;
                case 3:
                    mpfr_div(ex, ex, t, MPFR_RNDN);
                    break;
                default:
                    mpfr_mul(ex, ex, t, MPFR_RNDN);
                    mpfr_add_d(ex, ex, v[2][i], MPFR_RNDN);
                }
                double hi = r.hi->data[i], lo = r.lo->data[i];
                if (o < 3) {
                    mpfr_set_d(t, hi, MPFR_RNDN);
                    mpfr_add_d(t, t, lo, MPFR_RNDN);
                    ok += mpfr_equal_p(t, ex) || !isfinite(hi);
                } else
                    ok += close_to(hi, lo, ex, 104);
            }
            tap_ok(ok == N, "%s %s: %s vs MPFR on %d random operands (%d ok)", ops[o],
                   nv_dtype_name(dts[d]), o < 3 ? "exact" : "2^-104", N, ok);
            res_free(&r);
            for (int k = 0; k < n_in; k++)
                nv_tensor_free(in[k]);
        }
    }
    mpfr_clears(ex, t, (mpfr_ptr)0);
}

/* layer_norm in MPFR from the definition (two-pass mean and variance). */
static void test_random_layer_norm(void)
{
    enum { N = 200 };
    double x[N], w[N], b[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(100 + nrand()); /* large mean: centring matters */
        w[i] = (float)nrand();
        b[i] = (float)nrand();
    }
    nv_tensor *in[3] = {vec(NV_DT_FP32, N, x), vec(NV_DT_FP32, N, w), vec(NV_DT_FP32, N, b)};
    res r;
    run("layer_norm", NULL, 3, in, NV_DT_FP32, &r);
    mpfr_t m, v, t;
    mpfr_inits2(OP, m, v, t, (mpfr_ptr)0);
    mp_sum(x, N, m);
    mpfr_div_ui(m, m, N, MPFR_RNDN);
    mpfr_set_zero(v, 1);
    for (int i = 0; i < N; i++) {
        mpfr_set_d(t, x[i], MPFR_RNDN);
        mpfr_sub(t, t, m, MPFR_RNDN);
        mpfr_sqr(t, t, MPFR_RNDN);
        mpfr_add(v, v, t, MPFR_RNDN);
    }
    mpfr_div_ui(v, v, N, MPFR_RNDN);
    mpfr_add_d(v, v, 1e-5, MPFR_RNDN);
    mpfr_rec_sqrt(v, v, MPFR_RNDN);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        mpfr_set_d(t, x[i], MPFR_RNDN);
        mpfr_sub(t, t, m, MPFR_RNDN);
        mpfr_mul(t, t, v, MPFR_RNDN);
        mpfr_mul_d(t, t, w[i], MPFR_RNDN);
        mpfr_add_d(t, t, b[i], MPFR_RNDN);
        ok += close_to(r.hi->data[i], r.lo->data[i], t, 90);
    }
    tap_ok(ok == N, "layer_norm vs MPFR two-pass definition to 2^-90 %d/%d", ok, N);
    res_free(&r);
    for (int i = 0; i < 3; i++)
        nv_tensor_free(in[i]);
    mpfr_clears(m, v, t, (mpfr_ptr)0);
}

int main(void)
{
    test_hand_reductions();
    test_hand_norms();
    test_hand_elementwise();
    test_hand_matmul();
    test_overflow();
    test_specials();
    test_views();
    test_random_sums();
    test_random_softmax();
    test_softmax_range();
    test_random_matmul();
    test_random_layer_norm();
    test_random_elementwise();
    return tap_done();
}
