/* compare: metrics on hand-computed cases, NaN/Inf rules, the Higham bound, first
 * mismatches, p99 resolution, and the vectorised fp32 kernel against the scalar
 * general path (two implementations of one definition). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/compare.h"

static nv_tolerance ulp_tol(double k)
{
    nv_tolerance t;
    memset(&t, 0, sizeof(t));
    t.metric = NV_TOL_ULP;
    t.max_ulp = k;
    t.reason_code = NV_REASON_APPROXIMATION_ERROR;
    strcpy(t.reason, "test");
    return t;
}

static void test_ulp_by_hand(void)
{
    /* ulp(1) = 2^-23 and ulp(2) = 2^-22 in fp32 (IEEE 754 binary32, p = 24). */
    double exact[] = {1.0, 2.0, 1.0, 1.0, 0x1p-140};
    double lo[] = {0, 0, 0x1p-30, -0x1p-40, 0};
    double got[] = {1 + 0x1p-23, 2 - 0x1p-23, 1.0, 1 - 0x1p-24, 0x1p-140 + 0x1p-148};
    nv_compare_input in = {.dtype = NV_DT_FP32, .n = 5, .got = got, .exact = exact, .exact_lo = lo};
    nv_tolerance t = ulp_tol(1);
    nv_compare_result r;
    int rc = nv_compare(&in, &t, &r);
    /* Errors in ulps by hand: 1; 2^-23/2^-22 = 0.5; 2^-30/2^-23 = 2^-7;
     * exact just below 1 has ulp 2^-24: (2^-24 - 2^-40)/2^-24 = 1 - 2^-16;
     * subnormal ulp 2^-149: 2^-148/2^-149 = 2. */
    tap_ok(rc == 0 && r.max_ulp == 2 && r.mismatches == 1 && r.n_first == 1 &&
               r.first[0].index == 4 && r.first[0].ulp_err == 2 &&
               r.failure == NV_FAIL_ULP_EXCEEDED,
           "ulp errors by hand: max 2 at the subnormal, one mismatch (max %g)", r.max_ulp);
    double mean = (1 + 0.5 + 0x1p-7 + (1 - 0x1p-16) + 2) / 5;
    tap_ok(fabs(r.mean_ulp - mean) <= 1e-15, "mean ulp %.17g == %.17g", r.mean_ulp, mean);
    tap_ok(r.max_abs == 0x1p-23 && r.compared == 5, "max abs 2^-23");
    /* max rel: the subnormal's 2^-148 / 2^-140 = 2^-8 beats 2^-23 / 1. */
    tap_ok(r.max_rel == 0x1p-8, "max rel 2^-8 (%a)", r.max_rel);
    tap_ok(r.headroom == 2, "headroom = max err/allowed = 2 (%g)", r.headroom);
}

static void test_specials(void)
{
    double exact[] = {NAN, 1.0, NAN, INFINITY, INFINITY, 3e38, INFINITY, 0.0};
    double got[] = {NAN, NAN, 1.0, INFINITY, -INFINITY, INFINITY, 3e38, -0.0};
    nv_compare_input in = {.dtype = NV_DT_FP32, .n = 8, .got = got, .exact = exact};
    nv_tolerance t = ulp_tol(1);
    nv_compare_result r;
    nv_compare(&in, &t, &r);
    tap_ok(r.nan_mismatches == 2 && r.inf_mismatches == 3 && r.mismatches == 5,
           "NaN vs NaN passes, NaN/number pairs and inf sign/finite pairs fail (%lld nan, %lld "
           "inf)",
           (long long)r.nan_mismatches, (long long)r.inf_mismatches);
    tap_ok(r.failure == NV_FAIL_NAN_MISMATCH && r.first[0].index == 1 && r.first[2].index == 4 &&
               r.first[2].kind == NV_FAIL_INF_MISMATCH && r.first[3].index == 5,
           "failure class is the first in index order; first[] in index order");
    tap_ok(r.max_ulp == 0, "-0 against +0 is no error");
    tap_ok(strcmp(nv_failure_class_name(NV_FAIL_INF_MISMATCH), "inf_mismatch") == 0, "class names");
}

static void test_allclose(void)
{
    double exact[] = {1.0, 1.0, 100.0};
    double got[] = {1.0005, 1.002, 100.05};
    nv_compare_input in = {.dtype = NV_DT_FP64, .n = 3, .got = got, .exact = exact};
    nv_tolerance t = ulp_tol(0);
    t.metric = NV_TOL_ALLCLOSE;
    t.atol = 1e-3;
    t.rtol = 1e-3;
    nv_compare_result r;
    nv_compare(&in, &t, &r);
    /* allowed: 2e-3, 2e-3, 0.101; errors 5e-4 pass, 2e-3 equals allowed (passes:
     * allclose is <=, numpy semantics) up to rounding of 1.002 - 1, 0.05 pass. */
    tap_ok(r.max_allowed == 1e-3 + 1e-3 * 100.0, "allclose allowance atol + rtol |exact|");
    tap_ok(r.mismatches == (fabs(1.002 - 1.0) > 2e-3), "allclose mismatches as <= decides");
}

static void test_bound(void)
{
    /* n = 1000, c = 1, g = n - 1 (Higham §4.2), u = 2^-24 (fp32), sum|x| = 1000:
     * allowed = 999 * 2^-24 * 1000 + ulp(1)/2 = 0.059545... + 2^-24. */
    double exact[] = {1.0, 1.0};
    double got[] = {1.05, 1.07};
    double abs_sum[] = {1000, 1000};
    nv_compare_input in = {.dtype = NV_DT_FP32,
                           .n = 2,
                           .got = got,
                           .exact = exact,
                           .abs_sum = abs_sum,
                           .reduction_len = 1000};
    nv_tolerance t = ulp_tol(0);
    t.metric = NV_TOL_BOUND;
    t.c = 1;
    t.growth = NV_GROWTH_N;
    nv_compare_result r;
    int rc = nv_compare(&in, &t, &r);
    double allowed = 999 * 0x1p-24 * 1000 + 0x1p-24;
    tap_ok(rc == 0 && r.mismatches == 1 && r.first[0].index == 1 &&
               r.failure == NV_FAIL_BOUND_EXCEEDED && fabs(r.max_allowed - allowed) < 1e-15,
           "bound n: 0.05 inside %.6f, 0.07 outside", allowed);
    t.growth = NV_GROWTH_LOG2N; /* ceil(log2 1000) = 10 */
    nv_compare(&in, &t, &r);
    tap_ok(r.mismatches == 2 && fabs(r.max_allowed - (10 * 0x1p-24 * 1000 + 0x1p-24)) < 1e-15,
           "bound log2n: both outside 10 u sum|x|");
    t.growth = NV_GROWTH_SQRTN;
    t.has_u_dtype = 1;
    t.u_dtype = NV_DT_BF16; /* u = 2^-8 */
    nv_compare(&in, &t, &r);
    tap_ok(r.mismatches == 0 && fabs(r.max_allowed - (sqrt(1000) * 0x1p-8 * 1000 + 0x1p-24)) < 1e-9,
           "bound sqrtn with u of bf16");
    in.abs_sum = NULL;
    tap_ok(nv_compare(&in, &t, &r) == -EINVAL, "bound metric without abs_sum is -EINVAL");
}

static void test_first_and_p99(void)
{
    enum { N = 1000 };
    static double exact[N], lo[N], got[N];
    /* exact 1.5 + 2^-54 (ulp 2^-52 in fp64): got 1.5 is 0.25 ulp off, got
     * 1.5 + 2^-50 is 3.75 ulps off. */
    for (int i = 0; i < N; i++) {
        exact[i] = 1.5;
        lo[i] = 0x1p-54;
        got[i] = 1.5;
    }
    for (int i = 0; i < 40; i++)
        got[N - 1 - 7 * i] = 1.5 + 0x1p-50;
    nv_compare_input in = {.dtype = NV_DT_FP64, .n = N, .got = got, .exact = exact, .exact_lo = lo};
    nv_tolerance t = ulp_tol(1);
    nv_compare_result r;
    nv_compare(&in, &t, &r);
    int ok = r.mismatches == 40 && r.n_first == NV_COMPARE_FIRST;
    for (int k = 0; k < NV_COMPARE_FIRST; k++)
        ok &= r.first[k].index == N - 1 - 7 * (39 - k);
    tap_ok(ok, "first[] holds the 16 lowest mismatch indices in order");
    /* 4% of errors are 3.75 ulps: p99 lies in their bin [3.75, 4), capped at the
     * max 3.75. */
    tap_ok(r.p99_ulp == 3.75, "p99 = 3.75 when 4%% of errors are 3.75 ulps (%g)", r.p99_ulp);
    for (int i = 0; i < 40; i++)
        got[N - 1 - 7 * i] = 1.5;
    for (int i = 0; i < 10; i++)
        got[i] = 1.5 + 0x1p-50;
    nv_compare(&in, &t, &r);
    /* Exactly 1%: the 990th value is 0.25; its bin is [0.25, 0.28125). */
    tap_ok(r.p99_ulp >= 0.25 && r.p99_ulp <= 0.25 * 1.125, "p99 %g within 1/8 octave above 0.25",
           r.p99_ulp);
}

static uint64_t lcg = 12345;
static uint32_t rnd32(void)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(lcg >> 32);
}

static int same_result(const nv_compare_result *a, const nv_compare_result *b)
{
    int ok = a->compared == b->compared && a->mismatches == b->mismatches &&
             a->nan_mismatches == b->nan_mismatches && a->inf_mismatches == b->inf_mismatches &&
             a->max_ulp == b->max_ulp && a->p99_ulp == b->p99_ulp && a->max_abs == b->max_abs &&
             a->max_allowed == b->max_allowed && a->failure == b->failure &&
             a->n_first == b->n_first;
    /* max_rel: the fp32 kernel divides in fp32 (compare.h), within 2^-23. */
    ok &= a->max_rel == b->max_rel || fabs(a->max_rel - b->max_rel) <= 0x1p-23 * b->max_rel;
    /* mean: the fp32 kernel sums 256 terms a lane in fp32 (compare.c):
     * gamma_255 < 2^-16 relative (Higham §4.2); the rest is order only. */
    ok &= fabs(a->mean_ulp - b->mean_ulp) <= 0x1p-16 * fabs(b->mean_ulp);
    /* headroom: ue * (1/k) against err / (k ulp): two roundings apart. */
    ok &= fabs(a->headroom - b->headroom) <= 1e-15 * b->headroom || a->headroom == b->headroom;
    for (int k = 0; ok && k < a->n_first; k++)
        ok &= a->first[k].index == b->first[k].index && a->first[k].kind == b->first[k].kind;
    return ok;
}

static void test_f32_kernel(void)
{
    enum { N = 100003 };
    float *g = malloc(N * sizeof(float)), *e = malloc(N * sizeof(float));
    double *gd = malloc(N * sizeof(double)), *ed = malloc(N * sizeof(double));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t b = rnd32();
            float v;
            b = round == 3 ? b : (b & 0x807fffffu) | ((100 + rnd32() % 60) << 23);
            memcpy(&v, &b, 4);
            e[i] = v;
            uint32_t k = rnd32() % 100;
            float w = k < 90   ? v
                      : k < 97 ? nextafterf(v, INFINITY)
                               : nextafterf(nextafterf(v, 0), 0);
            g[i] = k == 99 && round >= 1 ? v * 1.5f : w;
            if (round == 2 && i % 9000 == 5)
                g[i] = (i % 18000 == 5) ? NAN : INFINITY;
            if (round == 2 && i % 7777 == 3)
                e[i] = 0;
            gd[i] = g[i];
            ed[i] = e[i];
        }
        nv_tolerance t = ulp_tol(round == 1 ? 0 : 1);
        if (round == 3) {
            t.metric = NV_TOL_ALLCLOSE;
            t.atol = 1e-30;
            t.rtol = 1e-6;
        }
        nv_compare_result a, b;
        nv_compare_input in = {.dtype = NV_DT_FP32, .n = N, .got = gd, .exact = ed};
        int rc = nv_compare_f32(g, e, N, &t, &a) | nv_compare(&in, &t, &b);
        if (!same_result(&a, &b))
            tap_diag(
                "f32: mm %lld max %a p99 %a abs %a rel %a allowed %a mean %a head %a fail %d nf %d"
                "\n# gen: mm %lld max %a p99 %a abs %a rel %a allowed %a mean %a head %a fail %d "
                "nf %d",
                (long long)a.mismatches, a.max_ulp, a.p99_ulp, a.max_abs, a.max_rel, a.max_allowed,
                a.mean_ulp, a.headroom, a.failure, a.n_first, (long long)b.mismatches, b.max_ulp,
                b.p99_ulp, b.max_abs, b.max_rel, b.max_allowed, b.mean_ulp, b.headroom, b.failure,
                b.n_first);
        tap_ok(rc == 0 && same_result(&a, &b),
               "fp32 kernel == general path, round %d (%lld mismatches, max %g, p99 %g, mean %g)",
               round, (long long)a.mismatches, a.max_ulp, a.p99_ulp, a.mean_ulp);
    }
    free(g);
    free(e);
    free(gd);
    free(ed);
}

/* The fp32 kernel counts errors of 0, 1/2, 1 and 2 ulps in the kernel and bins
 * the rest in its merge: the percentile where those meet. A share q of 3-ulp
 * errors (a bin of its own) among 1-ulp ones puts p99 at 3 ulps for q > 1% and
 * at the 1-ulp bin (its upper edge, 1.125) up to 1%, so a count lost or doubled on either side moves it; the
 * spread lays the 3s one to a vector, a whole vector of them, or none in
 * most vectors, and half-ulp errors (refs at a binade's foot) join in. */
static void test_f32_hot_bins(void)
{
    enum { N = 40000 };
    float *g = malloc(N * sizeof(float)), *e = malloc(N * sizeof(float));
    double *gd = malloc(N * sizeof(double)), *ed = malloc(N * sizeof(double));
    const int per_10k[] = {90, 99, 100, 101, 110};
    for (int layout = 0; layout < 3; layout++) {
        for (int q = 0; q < 5; q++) {
            int n3 = per_10k[q] * N / 10000;
            for (int i = 0; i < N; i++) {
                float v = 1.0f + (float)(rnd32() % 1000) * 0x1p-12f;
                int three = layout == 0   ? (i % 8 == 3 && i / 8 < n3)
                            : layout == 1 ? (i < n3)
                                          : (i * 7919 % N < n3);
                float w = v;
                for (int k = 0; k < (three ? 3 : 1); k++)
                    w = nextafterf(w, INFINITY);
                if (!three && layout == 2 && i % 5 == 0) {
                    v = 1.0f; /* 1 - 2^-24 is half an ulp of 1 away */
                    w = nextafterf(1.0f, 0);
                }
                e[i] = v;
                g[i] = w;
                gd[i] = g[i];
                ed[i] = e[i];
            }
            nv_tolerance t = ulp_tol(4);
            nv_compare_result a, b;
            nv_compare_input in = {.dtype = NV_DT_FP32, .n = N, .got = gd, .exact = ed};
            int rc = nv_compare_f32(g, e, N, &t, &a) | nv_compare(&in, &t, &b);
            double want = per_10k[q] > 100 ? 3 : 1.125; /* the 1-ulp bin's upper edge */
            tap_ok(rc == 0 && same_result(&a, &b) && a.p99_ulp == want,
                   "fp32 kernel's bins, layout %d, %d of 10000 at 3 ulps: p99 %g (general %g, "
                   "want %g)",
                   layout, per_10k[q], a.p99_ulp, b.p99_ulp, want);
        }
    }
    free(g);
    free(e);
    free(gd);
    free(ed);
}

/* Signed zero (IEEE 754-2019 §6.3): with zero_sign, a device zero of the other
 * sign than the exact value fails on its own class, after the value checks; the
 * exact sign of a result that underflows to zero is that of the exact value. */
static void test_signed_zero(void)
{
    /* -0 for x - x (must be +0); +0 for -0 * 1; +0 for -2^-200 (fp32 rounds it to
     * -0); -0 for +2^-150 (the tie rounds to +0); a right -0; a plain value. */
    double exact[] = {0.0, -0.0, -0x1p-200, 0x1p-150, -0.0, 1.0, -0x1.8p-148};
    double got[] = {-0.0, 0.0, 0.0, -0.0, -0.0, 1.0, 0.0};
    nv_compare_input in = {
        .dtype = NV_DT_FP32, .n = 7, .got = got, .exact = exact, .zero_sign = true};
    nv_tolerance t = ulp_tol(1);
    nv_compare_result r;
    nv_compare(&in, &t, &r);
    /* The last: exact -3 2^-149, got +0, 3 ulps: a value error, judged first. */
    tap_ok(r.zero_sign_mismatches == 4 && r.mismatches == 5 && r.nan_mismatches == 0 &&
               r.failure == NV_FAIL_SIGNED_ZERO && r.first[0].index == 0 &&
               r.first[0].kind == NV_FAIL_SIGNED_ZERO && r.first[0].ulp_err == 0 &&
               r.first[4].index == 6 && r.first[4].kind == NV_FAIL_ULP_EXCEEDED,
           "zero of the wrong sign: signed_zero_mismatch (%lld), a wrong value stays ulp_exceeded",
           (long long)r.zero_sign_mismatches);
    tap_ok(signbit(r.first[1].exact) && r.first[1].exact == 0,
           "the reported exact value keeps its -0");
    tap_ok(strcmp(nv_failure_class_name(NV_FAIL_SIGNED_ZERO), "signed_zero_mismatch") == 0,
           "class name signed_zero_mismatch");
    in.zero_sign = false;
    nv_compare(&in, &t, &r);
    tap_ok(r.zero_sign_mismatches == 0 && r.mismatches == 1, "not judged: -0 equals +0");
    in.zero_sign = true;
    in.dtype = NV_DT_E8M0; /* no zero at all, let alone a signed one */
    in.n = 1;
    double one = 1.0;
    in.got = in.exact = &one;
    nv_compare(&in, &t, &r);
    tap_ok(r.mismatches == 0, "unsigned formats: nothing to judge");
}

static nv_tolerance prob_tol(void)
{
    nv_tolerance t = ulp_tol(0);
    t.metric = NV_TOL_BOUND;
    t.c = 1;
    t.growth = NV_GROWTH_PROBABILISTIC;
    t.has_u_dtype = 1;
    t.u_dtype = NV_DT_FP32;
    return t;
}

/* Higham & Mary 2019: gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2/(1-u)) - 1,
 * P(|theta| > gamma~) <= 2 exp(-lambda^2 (1-u)^2 / 2) per term; lambda chosen so
 * that M n such terms fail with probability 1e-9 (union bound). Checked by hand:
 * the probability the lambda reported implies, the allowance at both sides of
 * its edge, the cap by the worst case 2 (n - 1) u, and the worst-case headroom. */
static void test_probabilistic(void)
{
    const double u = 0x1p-24, abs = 4096;
    enum { M = 3 };
    const int64_t n = 4096;
    double exact[M] = {1, 1, 1}, got[M], abs_sum[M] = {abs, abs, abs};
    nv_tolerance t = prob_tol();
    nv_compare_input in = {.dtype = NV_DT_FP32,
                           .n = M,
                           .got = got,
                           .exact = exact,
                           .abs_sum = abs_sum,
                           .reduction_len = n};
    double lam = sqrt(2 * log(2.0 * M * (double)n / 1e-9)) / (1 - u);
    double gt = expm1(lam * sqrt((double)n) * u + (double)n * u * u / (1 - u));
    double allowed = gt * abs + 0x1p-24; /* ulp(1)/2 in fp32 */
    got[0] = 1 + allowed * (1 - 1e-6);
    got[1] = 1 + allowed * (1 + 1e-6);
    got[2] = 1;
    nv_compare_result r;
    int rc = nv_compare(&in, &t, &r);
    double p = 2 * M * (double)n * exp(-r.lambda * r.lambda * (1 - u) * (1 - u) / 2);
    tap_ok(rc == 0 && fabs(r.lambda - lam) < 1e-12 && fabs(p - 1e-9) < 1e-15 && r.p_fail == 1e-9,
           "lambda %.6f: 2 M n exp(-lambda^2 (1-u)^2/2) = %.3g for M = 3, n = 4096", r.lambda, p);
    tap_ok(r.mismatches == 1 && r.first[0].index == 1 &&
               fabs(r.max_allowed - allowed) < 1e-12 * allowed,
           "allowance gamma~ sum|x| + ulp/2 = %.6g: inside passes, outside fails", allowed);
    double worst = 2 * (double)(n - 1) * u * abs + 0x1p-24;
    tap_ok(fabs(r.headroom_worst_case - (got[1] - 1) / worst) < 1e-9 &&
               r.headroom_worst_case < 0.07 && r.headroom > 1,
           "headroom %.3g under it, %.3g under the worst case 2 (n-1) u sum|x|", r.headroom,
           r.headroom_worst_case);
    /* n = 4: lambda sqrt(4) u is above 2 (4 - 1) u, so the worst case caps it. */
    in.reduction_len = 4;
    got[0] = 1 + 6 * u * abs * (1 - 1e-6) + 0x1p-24;
    got[1] = 1 + 6 * u * abs * (1 + 1e-6) + 0x1p-24;
    nv_compare(&in, &t, &r);
    tap_ok(r.mismatches == 1 && r.first[0].index == 1 &&
               fabs(r.max_allowed - (6 * u * abs + 0x1p-24)) < 1e-15,
           "short reductions: never above the deterministic 2 (n - 1) u sum|x|");
    /* A scale beyond fp64's range: 0.75 2^1030 (fp64 u = 2^-53, n = 2 caps at 2u). */
    double e64[1] = {1e300}, g64[1], a64[1] = {0.75}, x64[1] = {1030};
    nv_tolerance t64 = prob_tol();
    t64.u_dtype = NV_DT_FP64;
    nv_compare_input w = {.dtype = NV_DT_FP64,
                          .n = 1,
                          .got = g64,
                          .exact = e64,
                          .abs_sum = a64,
                          .reduction_len = 2,
                          .abs_exp = x64};
    double al = ldexp(2 * 0x1p-53 * 0.75, 1030) + (nextafter(1e300, INFINITY) - 1e300) / 2;
    g64[0] = 1e300 + al / 2;
    rc = nv_compare(&w, &t64, &r);
    tap_ok(rc == 0 && r.mismatches == 0 && isfinite(r.max_allowed) &&
               fabs(r.max_allowed - al) < 1e-12 * al,
           "abs_sum 0.75 2^1030 (beyond fp64): allowance %.4g, finite", r.max_allowed);
}

/* The intermediate-overflow rule: a wrong output whose accumulator demand reaches
 * the declared accumulator's overflow threshold (fp32: 2^128 - 2^103, within a
 * slack of min((1 + u)^n, 2)) is counted apart, not as a mismatch. */
static void test_intermediate_overflow(void)
{
    double exact[] = {1, 1, 1, 1, 1, 1};
    double got[] = {INFINITY, NAN, INFINITY, 3, 1, INFINITY};
    double abs_sum[] = {1, 1, 1, 1, 1, 1};
    /* 0, 1: beyond the threshold; 2: below half of it; 3: a finite wrong value
     * beyond it; 4: right, beyond it; 5: a NaN demand. */
    double peak[] = {3.5e38, INFINITY, 1.6e38, 1e39, 1e39, NAN};
    nv_tolerance t = prob_tol();
    nv_compare_input in = {.dtype = NV_DT_FP32,
                           .n = 6,
                           .got = got,
                           .exact = exact,
                           .abs_sum = abs_sum,
                           .reduction_len = 100,
                           .peak = peak,
                           .acc_dtype = NV_DT_FP32,
                           .acc_range = NV_DT_FP32};
    nv_compare_result r;
    int rc = nv_compare(&in, &t, &r);
    tap_ok(rc == 0 && r.intermediate_overflows == 3 && r.first_overflow.index == 0 &&
               r.first_overflow.kind == NV_FAIL_INTERMEDIATE_OVERFLOW &&
               r.first_overflow_peak == 3.5e38 && r.mismatches == 2 && r.inf_mismatches == 2 &&
               r.first[0].index == 2 && r.first[1].index == 5,
           "overflows beyond the fp32 accumulator's range reported apart (%lld), "
           "below half of it and with a NaN demand mismatches (%lld)",
           (long long)r.intermediate_overflows, (long long)r.mismatches);
    /* 1.6e38 (1 + 2^-24)^100 is below 2^128 - 2^103; over 2 10^7 terms the slack
     * (1 + 2^-24)^n = 3.3 is capped at 2, which takes 1.75e38 above it. */
    peak[2] = 1.75e38;
    in.reduction_len = 20000000;
    nv_compare(&in, &t, &r);
    tap_ok(r.intermediate_overflows == 4 && r.mismatches == 1,
           "fp32 accumulator over 2 10^7 terms: slack 2 (capped), 1.75e38 excused");
    in.acc_dtype = NV_DT_BF16;
    in.reduction_len = 100;
    peak[2] = 1.6e38;
    nv_compare(&in, &t, &r);
    tap_ok(r.intermediate_overflows == 3 && r.mismatches == 2,
           "bf16 accumulator, n = 100: 1.6e38 (1 + 2^-8)^100 = 2.4e38 < 3.4e38 not excused");
    in.acc_dtype = in.acc_range = NV_DT_FP64;
    nv_compare(&in, &t, &r);
    tap_ok(r.intermediate_overflows == 1 && r.first_overflow.index == 1 && r.mismatches == 4,
           "a declared fp64 accumulator excuses only the demand beyond fp64's range");
    in.acc_range = NV_DT_INT8;
    tap_ok(nv_compare(&in, &t, &r) == -EINVAL, "an accumulator range that is no float: -EINVAL");
}

/* The fixed-edge histogram of the result: each edge is an upper edge (an error of
 * exactly 2^-3, 0.5 or 2^24 ulp counts in the bucket it closes, one just above in
 * the next), an exact result has its own bucket, and NaN/Inf pairs are counted
 * apart, matching or not. ulp(1) in fp32 is 2^-23 (IEEE 754 binary32, p = 24). */
static void test_ulp_histogram(void)
{
    double exact[] = {1, 1, 1, 1, 1, 1, 1, 1, NAN, 1, 0x1p-149};
    double got[] = {1,
                    1 + 0x1p-26,          /* 2^-3 ulp: bucket 1, (0, 2^-3] */
                    1 + 0x1p-26 + 0x1p-50, /* just above: bucket 2, (2^-3, 2^-2] */
                    1 + 0x1p-24,          /* 0.5 ulp: bucket 3 */
                    1 + 0x1p-23,          /* 1 ulp: bucket 4 */
                    1 + 0x1.8p-23,        /* 1.5 ulp: bucket 5, (1, 2] */
                    3,                    /* 2^24 ulp: bucket 28, the last edge */
                    4,                    /* 3 * 2^23 ulp: above the last edge */
                    NAN,                  /* matching NaN: nonfinite */
                    INFINITY,             /* Inf for 1: nonfinite (and a mismatch) */
                    0};                   /* 1 ulp of the smallest subnormal: bucket 4 */
    int n = (int)(sizeof(exact) / sizeof(exact[0]));
    nv_compare_input in = {.dtype = NV_DT_FP32, .n = n, .got = got, .exact = exact};
    nv_tolerance t = ulp_tol(1e9);
    nv_compare_result r;
    int rc = nv_compare(&in, &t, &r);
    int64_t want[NV_ULP_HIST_BUCKETS] = {0};
    want[0] = 1;
    want[1] = want[2] = want[3] = want[5] = want[28] = want[29] = 1;
    want[4] = 2;
    int same = rc == 0 && r.has_ulp_hist;
    for (int k = 0; same && k < NV_ULP_HIST_BUCKETS; k++)
        same = r.ulp_hist[k] == want[k];
    tap_ok(same, "ulp histogram: upper edges inclusive, exact results in bucket 0, beyond 2^24 last");
    tap_ok(r.nonfinite == 2 && r.mismatches == 1, "NaN/Inf pairs counted apart (%lld), one mismatch",
           (long long)r.nonfinite);
    tap_ok(nv_ulp_hist_edge(0) == 0 && nv_ulp_hist_edge(1) == 0.125 && nv_ulp_hist_edge(4) == 1 &&
               nv_ulp_hist_edge(NV_ULP_HIST_EDGES - 1) == 0x1p24,
           "edges 0, 2^-3 .. 2^24");
    nv_compare_result f;
    float g32[] = {1.0f}, e32[] = {1.0f};
    tap_ok(nv_compare_f32(g32, e32, 1, &t, &f) == 0 && !f.has_ulp_hist,
           "the fp32 kernel says it has no histogram");
}

/* IEEE 754-2019 §7.4: Inf is the overflow of the value one ulp above max_finite.
 * fp8 e5m2: max 57344, ulp 8192 there, so the neighbour is 65536 and round to
 * nearest overflows from 61440 on. An fma rounded twice (fp32, then e5m2) turns
 * the exact -61439.9996 into the tie -61440 and then into -Inf: 0.50000005 ulp
 * from the exact value, within a faithful 1 ulp, not within 0.5. */
static void test_overflow_neighbour(void)
{
    double exact[] = {-61439.999572753906, 57000.0, -61439.0, 61439.0};
    double got[] = {-INFINITY, INFINITY, INFINITY, 57344.0};
    nv_compare_input in = {.dtype = NV_DT_FP8_E5M2, .n = 1, .got = got, .exact = exact};
    nv_tolerance t1 = ulp_tol(1), th = ulp_tol(0.5);
    nv_compare_result r;
    memset(&r, 0, sizeof r);
    int rc = nv_compare(&in, &t1, &r);
    tap_ok(rc == 0 && r.mismatches == 0 && r.inf_mismatches == 0 &&
               r.max_ulp > 0.5 && r.max_ulp < 0.5000001,
           "e5m2: -Inf for exact -61439.9996 is %.9g ulp: passes a 1-ulp tolerance", r.max_ulp);
    tap_ok(nv_compare(&in, &th, &r) == 0 && r.mismatches == 1 && r.inf_mismatches == 1 &&
               r.failure == NV_FAIL_INF_MISMATCH,
           "and fails 0.5 ulp as an inf_mismatch (a correctly rounded result is -57344)");
    in.n = 4;
    tap_ok(nv_compare(&in, &t1, &r) == 0 && r.inf_mismatches == 2 && r.mismatches == 2 &&
               r.n_first == 2 && r.first[0].index == 1 && r.first[1].index == 2 &&
               isinf(r.first[0].got),
           "Inf for 57000 (1.04 ulp from 65536) and Inf of the wrong sign stay inf_mismatch; "
           "57344 for 61439 passes");
    nv_tolerance ac = {.metric = NV_TOL_ALLCLOSE, .atol = 1e9, .rtol = 1,
                       .reason_code = NV_REASON_APPROXIMATION_ERROR};
    in.n = 1;
    tap_ok(nv_compare(&in, &ac, &r) == 0 && r.inf_mismatches == 1,
           "allclose: Inf for a finite value is an inf_mismatch whatever atol");
    float fe[] = {3.4028234663852886e38f}, fg[] = {INFINITY};
    rc = nv_compare_f32(fg, fe, 1, &t1, &r);
    tap_ok(rc == 0 && r.mismatches == 0 && r.max_ulp == 1,
           "fp32 kernel: Inf for the reference max_finite is 1 ulp (%g): within 1 ulp",
           r.max_ulp);
    tap_ok(nv_compare_f32(fg, fe, 1, &th, &r) == 0 && r.inf_mismatches == 1,
           "and an inf_mismatch under 0.5 ulp");
}

int main(void)
{
    test_ulp_by_hand();
    test_specials();
    test_allclose();
    test_bound();
    test_first_and_p99();
    test_f32_kernel();
    test_f32_hot_bins();
    test_signed_zero();
    test_probabilistic();
    test_intermediate_overflow();
    test_ulp_histogram();
    test_overflow_neighbour();
    return tap_done();
}
