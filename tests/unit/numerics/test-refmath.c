/* refmath: the fast path (fp64 + error bound) must give exactly what MPFR alone
 * gives (MPFR rounding straight to the target precision, an independent code
 * path), on random inputs, on constructed hard cases whose expected rounding
 * follows from monotonicity, on special values and at overflow/underflow edges. */
#include <mpfr.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/ref/refmath.h"

static uint64_t lcg = 0x9e3779b97f4a7c15ULL;
static uint64_t next_u64(void)
{
    lcg ^= lcg << 13;
    lcg ^= lcg >> 7;
    lcg ^= lcg << 17;
    return lcg;
}

/* A random fp32 value with |x| in [2^lo, 2^hi), random sign. */
static double rand_f32(int lo, int hi)
{
    uint32_t m = (uint32_t)(next_u64() & 0x7fffff);
    int e = lo + (int)(next_u64() % (uint64_t)(hi - lo));
    float f = ldexpf(1.0f + (float)m * 0x1p-23f, e);
    return (next_u64() & 1) ? -(double)f : (double)f;
}

static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16,     NV_DT_FP16,
                               NV_DT_TF32, NV_DT_FP8_E4M3, NV_DT_FP8_E5M2};
#define N_DTS (int)(sizeof(dts) / sizeof(dts[0]))
static const nv_rounding rms[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                  NV_ROUND_DOWN};

/* Fast path + MPFR fallback, and the pair of nv_ref_eval, against MPFR alone. */
static int check_one(nv_fn f, double x, nv_dtype dt, int verbose)
{
    int bad = 0;
    double hi, lo;
    nv_ref_eval(f, x, dt, &hi, &lo);
    for (int r = 0; r < 4; r++) {
        double want = nv_ref_round_mpfr(f, x, dt, rms[r]);
        double got = nv_ref_round(f, x, dt, rms[r]);
        double gotp = nv_ref_round_pair(hi, lo, dt, rms[r]);
        if (!TAP_SAME_DOUBLE(want, got) || !TAP_SAME_DOUBLE(want, gotp)) {
            if (verbose && bad == 0)
                tap_diag("%s(%a) %s rnd %d: mpfr %a fast %a pair %a (%a + %a)", nv_fn_name(f), x,
                         nv_dtype_name(dt), r, want, got, gotp, hi, lo);
            bad++;
        }
    }
    return bad;
}

/* exp near 0 goes through its tail pair 1 + expm1(x): every binade from the
 * subnormals to past the tail's 2^-36 threshold, both signs, a binade's ends and
 * random mantissas, against MPFR alone. */
static void test_exp_near_zero(void)
{
    int bad = 0, n = 0;
    uint64_t fast0, mp0, fast1, mp1;
    nv_ref_stats(&fast0, &mp0);
    for (int e = -149; e <= -30; e++) {
        for (int j = 0; j < 6; j++) {
            double m = j == 0 ? 1.0 : j == 1 ? 2.0 - 0x1p-23 : 1.0 + (double)(next_u64() >> 41) * 0x1p-23;
            double x = ldexp(m, e);
            if (j == 5)
                x = nextafter(ldexp(1.0, e), 0); /* just below the power of two */
            for (int sg = 0; sg < 2; sg++, n++)
                for (int d = 0; d < N_DTS; d++)
                    bad += check_one(NV_FN_EXP, sg ? -x : x, dts[d], bad < 3);
        }
    }
    nv_ref_stats(&fast1, &mp1);
    tap_ok(bad == 0, "exp near 0 (%d inputs 2^-149..2^-30, both signs) x %d dtypes x 4 roundings: "
           "fast path == MPFR (%d differ; fast %llu, mpfr %llu)", n, N_DTS, bad,
           (unsigned long long)(fast1 - fast0), (unsigned long long)(mp1 - mp0));
}

/* tanh near 0, where glibc returns x (a rounding boundary of every format):
 * refmath's pair (RN(tanh x), RN(tanh x - RN(tanh x))) from its double-double
 * Taylor sum, for fp32 values of every binade 2^-149..2^-20 (both signs, a binade's ends and
 * random mantissas) and random doubles down to 2^-300, is the exact value's
 * (MPFR at 1200 bits) bit for bit, MPFR called for a few in a thousand at
 * most, and rounds as MPFR alone does. */
static void test_tanh_near_zero(void)
{
    int bad = 0, pair_bad = 0, n = 0;
    uint64_t mp0, mp1, mp_sum = 0;
    mpfr_t t, u;
    mpfr_inits2(1200, t, u, (mpfr_ptr)0); /* D = tanh x - x to 53 bits at x = 2^-300 */
    for (int k = 0; k < 2 * 129 * 6 + 400; k++) {
        double x;
        if (k < 2 * 129 * 6) {
            int e = -149 + k / 12, j = k / 2 % 6;
            double m = j == 0 ? 1.0 : j == 1 ? 2.0 - 0x1p-23 : 1.0 + (double)(next_u64() >> 41) * 0x1p-23;
            x = j == 5 ? (double)nextafterf(ldexpf(1.0f, e), 0) : ldexp(m, e);
            if (e < -126 && j == 1)
                x = ldexp(1.0, e); /* fewer bits in the subnormal range */
            if (k & 1)
                x = -x;
        } else {
            x = ldexp(1.0 + (double)(next_u64() >> 12) * 0x1p-52, -300 + (int)(next_u64() % 280));
        }
        double hi, lo;
        nv_ref_stats(NULL, &mp0);
        nv_ref_eval(NV_FN_TANH, x, NV_DT_FP32, &hi, &lo);
        nv_ref_stats(NULL, &mp1);
        mp_sum += mp1 - mp0;
        mpfr_set_d(t, x, MPFR_RNDN);
        mpfr_tanh(t, t, MPFR_RNDN);
        double whi = mpfr_get_d(t, MPFR_RNDN);
        mpfr_sub_d(u, t, whi, MPFR_RNDN);
        double wlo = mpfr_get_d(u, MPFR_RNDN);
        /* An interval the double-double leaves undecided (D at an fp64 midpoint
         * to 2^-98, as for x whose cube /3 has few bits) goes to MPFR, whose
         * pair keeps what its 128 bits resolve: only the rounding is checked. */
        if (mp1 == mp0 && (!TAP_SAME_DOUBLE(hi, whi) || !TAP_SAME_DOUBLE(lo, wlo))) {
            if (pair_bad++ < 3)
                tap_diag("tanh(%a): pair %a + %a, MPFR %a + %a", x, hi, lo, whi, wlo);
        }
        for (int d = 0; d < N_DTS && k < 2 * 129 * 6; d++)
            bad += check_one(NV_FN_TANH, x, dts[d], bad < 3);
        n++;
    }
    mpfr_clears(t, u, (mpfr_ptr)0);
    tap_ok(pair_bad == 0 && mp_sum <= (uint64_t)n / 256,
           "tanh near 0 (%d inputs 2^-300..2^-20): the pair is tanh x rounded twice (%d differ), "
           "%llu left to MPFR", n, pair_bad, (unsigned long long)mp_sum);
    tap_ok(bad == 0, "tanh near 0, fp32 values x %d dtypes x 4 roundings: fast path == MPFR (%d differ)",
           N_DTS, bad);
}

/* exp, exp2 and expm1 far past fp64's range: the pair is refmath.h's fixed one
 * ((DBL_MAX, 2^970) past the overflow threshold, (0, 2^-1074) below half the
 * smallest subnormal) and rounds as MPFR alone does, on both sides of where
 * the fixed pair starts. */
static void test_exp_far(void)
{
    static const double xs[] = {709.5, 709.78, 709.79, 710, 711.5, 1e4, 2.5e8, 0x1.fffffep127,
                                -745.0, -745.13, -745.14, -746, -1e4, -0x1.fffffep127,
                                1024.5, 1025, 1076.5, -1074.5, -1075.5, -1077, -1e6};
    static const nv_fn fs[] = {NV_FN_EXP, NV_FN_EXP2, NV_FN_EXPM1};
    int bad = 0, fixed_bad = 0;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        for (size_t k = 0; k < 3; k++) {
            for (int d = 0; d < N_DTS; d++)
                bad += check_one(fs[k], xs[i], dts[d], bad < 3);
            double hi, lo, x = xs[i];
            nv_ref_eval(fs[k], x, NV_DT_FP32, &hi, &lo);
            bool over = fs[k] == NV_FN_EXP2 ? x >= 1025 : x >= 710;
            bool under = fs[k] == NV_FN_EXP ? x <= -746 : fs[k] == NV_FN_EXP2 && x <= -1077;
            if ((over && !(hi == 0x1.fffffffffffffp1023 && lo == 0x1p970)) ||
                (under && !(hi == 0 && !signbit(hi) && lo == 0x1p-1074))) {
                if (fixed_bad++ < 3)
                    tap_diag("%s(%a): pair %a + %a", nv_fn_name(fs[k]), x, hi, lo);
            }
        }
    tap_ok(bad == 0 && fixed_bad == 0,
           "exp, exp2, expm1 far past fp64's range: rounding == MPFR alone (%d differ), "
           "the fixed pair where it applies (%d not)", bad, fixed_bad);
}

static void test_random(void)
{
    for (int f = 0; f < NV_FN_COUNT; f++) {
        int bad = 0;
        uint64_t fast0, mp0, fast1, mp1;
        nv_ref_stats(&fast0, &mp0);
        for (int i = 0; i < 600; i++) {
            /* Mostly ordinary magnitudes, some tiny and huge, to reach tails. */
            int k = i % 10;
            double x = k < 7 ? rand_f32(-6, 4) : k < 9 ? rand_f32(4, 8) : rand_f32(-30, 30);
            for (int d = 0; d < N_DTS; d++)
                bad += check_one((nv_fn)f, x, dts[d], bad < 3);
        }
        nv_ref_stats(&fast1, &mp1);
        tap_ok(bad == 0,
               "%s: fast path == MPFR on 600 fp32 inputs x 6 dtypes x 4 roundings "
               "(%d differ; fast %llu, mpfr %llu)",
               nv_fn_name((nv_fn)f), bad, (unsigned long long)(fast1 - fast0),
               (unsigned long long)(mp1 - mp0));
    }
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        double x = rand_f32(-10, 10);
        for (int f = 0; f < NV_FN_COUNT; f++)
            bad += check_one((nv_fn)f, x, NV_DT_FP64, bad < 3);
    }
    tap_ok(bad == 0, "fp64 target: 128-bit MPFR path == MPFR at 53 bits (%d differ)", bad);
}

/* x_dn < g(m) < x_up: the doubles around the preimage of m under the increasing
 * function whose inverse MPFR computes (log for exp, atanh for tanh, erf^-1 has
 * no MPFR function so erf uses a bisection on MPFR erf). */
static void preimage(nv_fn f, double m, double *x_dn, double *x_up)
{
    mpfr_t a, b;
    mpfr_inits2(53, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, m, MPFR_RNDN);
    if (f == NV_FN_EXP) {
        mpfr_log(b, a, MPFR_RNDD);
    } else if (f == NV_FN_TANH) {
        mpfr_atanh(b, a, MPFR_RNDD);
    } else if (f == NV_FN_SIGMOID) { /* logit(m) = log(m / (1 - m)) */
        mpfr_t c;
        mpfr_init2(c, 400);
        mpfr_ui_sub(c, 1, a, MPFR_RNDN);
        mpfr_div(c, a, c, MPFR_RNDN);
        mpfr_log(c, c, MPFR_RNDN);
        mpfr_set(b, c, MPFR_RNDD);
        mpfr_clear(c);
    } else { /* erf: largest double with erf(x) < m, by bisection */
        double lo = 0, hi = 6;
        mpfr_t e;
        mpfr_init2(e, 200);
        while (nextafter(lo, hi) < hi) {
            double mid = lo + (hi - lo) / 2;
            mpfr_set_d(b, mid, MPFR_RNDN);
            mpfr_erf(e, b, MPFR_RNDN);
            if (mpfr_cmp_d(e, m) < 0)
                lo = mid;
            else
                hi = mid;
        }
        mpfr_set_d(b, lo, MPFR_RNDN);
        mpfr_clear(e);
    }
    *x_dn = mpfr_get_d(b, MPFR_RNDN);
    *x_up = nextafter(*x_dn, INFINITY);
    mpfr_clears(a, b, (mpfr_ptr)0);
}

/* Hard cases: f(x) within about 2^-53 of a rounding midpoint m of the target,
 * far inside the fast path's error interval. Since f increases, f(x_dn) < m <
 * f(x_up) (up to the preimage rounding), so round-to-nearest gives the lower and
 * the upper neighbour of m: an expected value derived without the code. */
static void test_hard(void)
{
    static const nv_fn fns[] = {NV_FN_EXP, NV_FN_TANH, NV_FN_ERF, NV_FN_SIGMOID};
    static const nv_dtype hdts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16};
    int bad = 0, cases = 0;
    for (int fi = 0; fi < 4; fi++) {
        for (int di = 0; di < 3; di++) {
            const nv_dtype_info *in = nv_dtype_get(hdts[di]);
            for (int k = 0; k < 40; k++) {
                /* A midpoint in (0.55, 0.95): between two normals of the target. */
                double q = ldexp(1, -1 - in->mant_bits);
                double lo_rep = 0.55 + (double)(next_u64() % 1000) / 1000 * 0.4;
                lo_rep = floor(lo_rep / q) * q;
                double m = lo_rep + q / 2;
                double x_dn, x_up;
                preimage(fns[fi], m, &x_dn, &x_up);
                double up_rep = lo_rep + q;
                double g_dn = nv_ref_round(fns[fi], x_dn, hdts[di], NV_ROUND_NEAREST_EVEN);
                double g_up = nv_ref_round(fns[fi], x_up, hdts[di], NV_ROUND_NEAREST_EVEN);
                cases++;
                if (g_dn != lo_rep || g_up != up_rep) {
                    if (bad++ < 3)
                        tap_diag("%s %s m=%a: x %a -> %a (want %a), x %a -> %a (want %a)",
                                 nv_fn_name(fns[fi]), nv_dtype_name(hdts[di]), m, x_dn, g_dn,
                                 lo_rep, x_up, g_up, up_rep);
                }
                bad += check_one(fns[fi], x_dn, hdts[di], bad < 3) +
                       check_one(fns[fi], x_up, hdts[di], bad < 3);
            }
        }
    }
    tap_ok(bad == 0,
           "%d hard cases (exp/tanh/erf/sigmoid within 2^-53 of a midpoint of "
           "fp32/bf16/fp16) round to the neighbour monotonicity predicts",
           cases);
}

static void test_special(void)
{
    struct {
        nv_fn f;
        double x, want;
    } t[] = {
        {NV_FN_EXP, INFINITY, INFINITY},
        {NV_FN_EXP, -INFINITY, 0},
        {NV_FN_EXP, 0, 1},
        {NV_FN_EXP, -0.0, 1},
        {NV_FN_EXPM1, -INFINITY, -1},
        {NV_FN_EXPM1, -0.0, -0.0},
        {NV_FN_LOG, 0, -INFINITY},
        {NV_FN_LOG, -1, NAN},
        {NV_FN_LOG, 1, 0},
        {NV_FN_LOG2, 8, 3},
        {NV_FN_LOG1P, -1, -INFINITY},
        {NV_FN_LOG1P, -2, NAN},
        {NV_FN_SIN, INFINITY, NAN},
        {NV_FN_SIN, -0.0, -0.0},
        {NV_FN_COS, 0, 1},
        {NV_FN_TANH, -INFINITY, -1},
        {NV_FN_TANH, -0.0, -0.0},
        {NV_FN_ERF, INFINITY, 1},
        {NV_FN_SIGMOID, 0, 0.5},
        {NV_FN_SIGMOID, -INFINITY, 0},
        {NV_FN_SIGMOID, INFINITY, 1},
        {NV_FN_SILU, -0.0, -0.0},
        {NV_FN_SILU, -INFINITY, -0.0},
        {NV_FN_GELU_ERF, INFINITY, INFINITY},
        {NV_FN_GELU_TANH, -INFINITY, -0.0},
        {NV_FN_SQRT, -0.0, -0.0},
        {NV_FN_SQRT, -1, NAN},
        {NV_FN_SQRT, 4, 2},
        {NV_FN_RSQRT, -0.0, -INFINITY},
        {NV_FN_RSQRT, 0, INFINITY},
        {NV_FN_RSQRT, INFINITY, 0},
        {NV_FN_RSQRT, 0.25, 2},
        {NV_FN_RECIP, -0.0, -INFINITY},
        {NV_FN_RECIP, -INFINITY, -0.0},
        {NV_FN_EXP2, -3, 0.125},
        {NV_FN_EXP, NAN, NAN},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        for (int r = 0; r < 4; r++) {
            double got = nv_ref_round(t[i].f, t[i].x, NV_DT_FP32, rms[r]);
            double mp = nv_ref_round_mpfr(t[i].f, t[i].x, NV_DT_FP32, rms[r]);
            int ok = TAP_SAME_DOUBLE(got, t[i].want) && signbit(got) == signbit(t[i].want) &&
                     TAP_SAME_DOUBLE(mp, t[i].want);
            if (!ok && bad++ < 3)
                tap_diag("%s(%a) = %a / %a, want %a", nv_fn_name(t[i].f), t[i].x, got, mp,
                         t[i].want);
        }
    }
    tap_ok(bad == 0, "special values (IEEE 754 §9.2 limits, signed zeros, domain NaNs)");
}

/* Overflow and underflow edges of fp32 for exp, from the thresholds by hand:
 * RN overflows from 2^128 - 2^103 (max + half ulp), RZ never; the smallest
 * subnormal is 2^-149 and RN gives it from 2^-150 up. */
static void test_edges(void)
{
    double x_dn, x_up;
    preimage(NV_FN_EXP, 0x1p128 - 0x1p103, &x_dn, &x_up);
    double mx = 0x1.fffffep127;
    int ok = nv_ref_round(NV_FN_EXP, x_dn, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == mx &&
             nv_ref_round(NV_FN_EXP, x_up, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == INFINITY &&
             nv_ref_round(NV_FN_EXP, x_up, NV_DT_FP32, NV_ROUND_TOWARD_ZERO) == mx &&
             nv_ref_round(NV_FN_EXP, 1000, NV_DT_FP32, NV_ROUND_DOWN) == mx &&
             nv_ref_round(NV_FN_EXP, 1000, NV_DT_FP32, NV_ROUND_UP) == INFINITY;
    tap_ok(ok, "exp fp32 overflow threshold and saturation under RN/RZ/RD/RU");
    preimage(NV_FN_EXP, 0x1p-150, &x_dn, &x_up);
    ok = nv_ref_round(NV_FN_EXP, x_dn, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 0 &&
         nv_ref_round(NV_FN_EXP, x_up, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 0x1p-149 &&
         nv_ref_round(NV_FN_EXP, x_dn, NV_DT_FP32, NV_ROUND_UP) == 0x1p-149 &&
         nv_ref_round(NV_FN_EXP, -2000, NV_DT_FP32, NV_ROUND_UP) == 0x1p-149 &&
         nv_ref_round(NV_FN_EXP, -2000, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 0;
    tap_ok(ok, "exp fp32 underflow: half the smallest subnormal, far below it");
    preimage(NV_FN_EXP, 0x1p-25, &x_dn, &x_up);
    ok = nv_ref_round(NV_FN_EXP, x_dn, NV_DT_FP16, NV_ROUND_NEAREST_EVEN) == 0 &&
         nv_ref_round(NV_FN_EXP, x_up, NV_DT_FP16, NV_ROUND_NEAREST_EVEN) == 0x1p-24;
    tap_ok(ok, "exp fp16 subnormal threshold 2^-25");
    /* sigmoid(-100) = e^-100 (1 - 1e-44) = 26.55... 2^-149 (exp(149 ln 2 - 100)
     * in double has error ~1e-15; .55 is far from .5): RN gives 27 2^-149. */
    double k = exp(149 * log(2.0) - 100);
    ok = fabs(k - floor(k) - 0.5) > 0.01 &&
         nv_ref_round(NV_FN_SIGMOID, -100, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) ==
             nearbyint(k) * 0x1p-149;
    tap_ok(ok, "sigmoid(-100) in fp32 is the subnormal nearest e^-100");
    /* Saturation: 1 - sigmoid(100), 1 - erf(10), 1 - tanh(30) are below 2^-100:
     * RN gives 1, RD/RZ the fp32 below 1. */
    nv_fn sat[] = {NV_FN_SIGMOID, NV_FN_ERF, NV_FN_TANH};
    double sx[] = {100, 10, 30};
    ok = 1;
    for (int i = 0; i < 3; i++) {
        ok &= nv_ref_round(sat[i], sx[i], NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 1.0;
        ok &= nv_ref_round(sat[i], sx[i], NV_DT_FP32, NV_ROUND_DOWN) == 0x1.fffffep-1;
        ok &= nv_ref_round(sat[i], sx[i], NV_DT_FP32, NV_ROUND_UP) == 1.0;
        ok &= nv_ref_round_mpfr(sat[i], sx[i], NV_DT_FP32, NV_ROUND_TOWARD_ZERO) == 0x1.fffffep-1;
        ok &= nv_ref_round(sat[i], sx[i], NV_DT_FP64, NV_ROUND_DOWN) == 0x1.fffffffffffffp-1;
    }
    ok &= nv_ref_round(NV_FN_ERF, -10, NV_DT_BF16, NV_ROUND_UP) == -0x1.fep-1;
    tap_ok(ok, "sigmoid/erf/tanh saturation: RN 1, RD/RZ just below 1 (fp32, fp64)");
    /* silu, gelu for large x: x (1 - tiny): RD of an fp32 x is the fp32 below x. */
    ok = nv_ref_round(NV_FN_SILU, 64, NV_DT_FP32, NV_ROUND_DOWN) == 0x1.fffffep5 &&
         nv_ref_round(NV_FN_GELU_ERF, 64, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 64 &&
         nv_ref_round(NV_FN_GELU_TANH, 64, NV_DT_BF16, NV_ROUND_DOWN) == 0x1.fep5 &&
         nv_ref_round(NV_FN_GELU_ERF, -50, NV_DT_FP32, NV_ROUND_DOWN) == -0x1p-149 &&
         nv_ref_round(NV_FN_GELU_ERF, -50, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == 0;
    tap_ok(ok, "silu/gelu saturation on both sides");
}

/* sigmoid and silu at |x| < 2^-60 (their Taylor series, refmath_mpfr.c
 * comp_tiny), against 1 / (1 + e^-x) evaluated here at 2400 bits, rounded under
 * every rounding in fp64 and fp32, for x down to the smallest subnormal. */
static void test_tiny_composites(void)
{
    int bad = 0;
    mpfr_t y, t;
    mpfr_inits2(2400, y, t, (mpfr_ptr)0);
    mpfr_t r;
    double xs[] = {
        0x1p-61,    -0x1p-61,    0x1.23456789abcdep-300, -0x1.fp-900,           0x1p-1074,
        -0x1p-1074, 0x1.8p-1073, -0x1.4p-1060,           0x1.ffffffffffffep-62, -3e-200};
    nv_rounding rs[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP, NV_ROUND_DOWN};
    nv_dtype dts[] = {NV_DT_FP64, NV_DT_FP32};
    for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
            mpfr_set_d(t, -xs[i], MPFR_RNDN);
            mpfr_exp(y, t, MPFR_RNDN);
            mpfr_add_ui(y, y, 1, MPFR_RNDN);
            mpfr_ui_div(y, 1, y, MPFR_RNDN);
            if (f == 1)
                mpfr_mul_d(y, y, xs[i], MPFR_RNDN);
            nv_fn fn = f ? NV_FN_SILU : NV_FN_SIGMOID;
            for (int d = 0; d < 2; d++)
                for (int k = 0; k < 4; k++) {
                    const nv_dtype_info *di = nv_dtype_get(dts[d]);
                    mpfr_rnd_t mr = k == 0   ? MPFR_RNDN
                                    : k == 1 ? MPFR_RNDZ
                                    : k == 2 ? MPFR_RNDU
                                             : MPFR_RNDD;
                    /* y / q rounded to an integer, q the format's quantum at y
                     * (the subnormal quantum below emin): IEEE 754 §4.3 */
                    mpfr_init2(r, 2400);
                    long ey = (long)mpfr_get_exp(y) - 1;
                    long qe = (ey > di->emin ? ey : di->emin) - di->mant_bits;
                    mpfr_mul_2si(r, y, -qe, MPFR_RNDN);
                    mpfr_rint(r, r, mr);
                    mpfr_mul_2si(r, r, qe, MPFR_RNDN);
                    double want = mpfr_get_d(r, MPFR_RNDN);
                    if (want == 0)
                        want = copysign(0.0, xs[i]);
                    mpfr_clear(r);
                    double got = nv_ref_round(fn, xs[i], dts[d], rs[k]);
                    if (got != want || signbit(got) != signbit(want)) {
                        if (bad++ < 4)
                            tap_diag("%s(%a) %s rounding %d: %a, want %a", nv_fn_name(fn), xs[i],
                                     nv_dtype_name(dts[d]), k, got, want);
                    }
                }
            double hi, lo;
            nv_ref_eval(fn, xs[i], NV_DT_FP64, &hi, &lo);
            mpfr_sub_d(t, y, hi, MPFR_RNDN);
            mpfr_sub_d(t, t, lo, MPFR_RNDN);
            if (fabs(mpfr_get_d(t, MPFR_RNDN)) > 0x1p-100 * fabs(hi) + 0x1p-1074)
                bad++;
        }
    mpfr_clears(y, t, (mpfr_ptr)0);
    tap_ok(bad == 0, "sigmoid, silu at |x| < 2^-60: every rounding in fp64/fp32 and the pair (%d)",
           bad);
}

/* The pair of nv_ref_eval is within 2^-100 (MPFR) or 2^-36 relative of the
 * exact value computed here at 400 bits. */
static void test_pair_accuracy(void)
{
    int bad = 0;
    mpfr_t e, t;
    mpfr_inits2(400, e, t, (mpfr_ptr)0);
    for (int i = 0; i < 2000; i++) {
        double x = rand_f32(-4, 3), hi, lo;
        nv_ref_eval(NV_FN_EXP, x, NV_DT_FP64, &hi, &lo);
        mpfr_set_d(t, x, MPFR_RNDN);
        mpfr_exp(e, t, MPFR_RNDN);
        mpfr_sub_d(e, e, hi, MPFR_RNDN);
        mpfr_sub_d(e, e, lo, MPFR_RNDN);
        if (fabs(mpfr_get_d(e, MPFR_RNDN)) > 0x1p-100 * fabs(hi))
            bad++;
    }
    mpfr_clears(e, t, (mpfr_ptr)0);
    tap_ok(bad == 0, "nv_ref_eval(fp64) pair within 2^-100 of exp(x) (2000 inputs)");
}

/* pow: against MPFR's pow rounded straight to fp32 (24 bits, normal range) and
 * exact cases by hand. */
static void test_pow(void)
{
    int bad = 0;
    mpfr_t a, b, r;
    mpfr_inits2(64, a, b, (mpfr_ptr)0);
    mpfr_init2(r, 24);
    for (int i = 0; i < 3000; i++) {
        double x = fabs(rand_f32(-3, 3)), y = rand_f32(-3, 3);
        mpfr_set_d(a, x, MPFR_RNDN);
        mpfr_set_d(b, y, MPFR_RNDN);
        mpfr_pow(r, a, b, MPFR_RNDN);
        double want = mpfr_get_d(r, MPFR_RNDN);
        if (fabs(want) < 0x1p-126 || fabs(want) > 0x1p127)
            continue; /* outside fp32's normal range the 24-bit oracle does not apply */
        double got = nv_ref_pow_round(x, y, NV_DT_FP32, NV_ROUND_NEAREST_EVEN), hi, lo;
        nv_ref_pow(x, y, NV_DT_FP32, &hi, &lo);
        double gotp = nv_ref_round_pair(hi, lo, NV_DT_FP32, NV_ROUND_NEAREST_EVEN);
        if ((got != want || gotp != want) && bad++ < 3)
            tap_diag("pow(%a, %a): mpfr %a round %a pair %a", x, y, want, got, gotp);
    }
    mpfr_clears(a, b, r, (mpfr_ptr)0);
    tap_ok(bad == 0, "pow: fast path and pair == MPFR pow at 24 bits (3000 inputs)");
    double hi, lo;
    nv_ref_pow(3, 3, NV_DT_FP64, &hi, &lo);
    int ok = hi == 27 && lo == 0;
    /* 1.5^20 = 3^20 / 2^20 = 3486784401 / 2^20: 32 bits, exact in fp64. */
    nv_ref_pow(1.5, 20, NV_DT_FP64, &hi, &lo);
    ok &= hi == 3486784401.0 / 1048576 && lo == 0;
    ok &= nv_ref_pow_round(2, 0.5, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == (double)sqrtf(2.0f);
    ok &= isnan(nv_ref_pow_round(-8, 1.0 / 3, NV_DT_FP32, NV_ROUND_NEAREST_EVEN));
    ok &= nv_ref_pow_round(0, -1, NV_DT_FP32, NV_ROUND_NEAREST_EVEN) == INFINITY;
    /* 1.5^30 = 191751.06 > 65504: fp16 overflows (IEEE 754 §7.4). */
    ok &= nv_ref_pow_round(1.5, 30, NV_DT_FP16, NV_ROUND_NEAREST_EVEN) == INFINITY &&
          nv_ref_pow_round(1.5, 30, NV_DT_FP16, NV_ROUND_TOWARD_ZERO) == 65504;
    tap_ok(ok, "pow exact cases: 3^3, 1.5^20, sqrt 2, (-8)^(1/3) NaN, 0^-1 inf, fp16 overflow");
}

static void *thread_main(void *arg)
{
    int *bad = arg;
    for (int i = 0; i < 300; i++) {
        double x = 0.001 * i - 0.15;
        double a = nv_ref_round(NV_FN_ERF, x, NV_DT_FP64, NV_ROUND_NEAREST_EVEN);
        double b = nv_ref_round_mpfr(NV_FN_GELU_TANH, x, NV_DT_BF16, NV_ROUND_UP);
        *bad += a != nv_ref_round(NV_FN_ERF, x, NV_DT_FP64, NV_ROUND_NEAREST_EVEN) ||
                b != nv_ref_round(NV_FN_GELU_TANH, x, NV_DT_BF16, NV_ROUND_UP);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[3];
    int bad[3] = {0};
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, thread_main, &bad[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    tap_ok(bad[0] + bad[1] + bad[2] == 0, "three threads evaluate MPFR paths consistently");
}

/* nv_ref_eval_n gives nv_ref_eval's pair bit for bit, for every function and
 * a target decided by the fast path (fp32), by MPFR always (fp64), and inputs
 * through specials, tails and the bulk. */
static void test_eval_n(void)
{
    enum { N = 64 };
    double x[N], hi[N], lo[N];
    for (int i = 0; i < N; i++)
        x[i] = (i - N / 2) * 0.8125 + (i % 3) * 0x1p-20;
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 0.0, x[4] = -0.0, x[5] = 50;
    const nv_dtype dts[] = {NV_DT_FP32, NV_DT_FP64, NV_DT_BF16};
    int bad = 0;
    for (int f = 0; f <= NV_FN_COUNT; f++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            nv_ref_eval_n((nv_fn)f, x, N, dts[d], hi, lo);
            for (int i = 0; i < N; i++) {
                double h, l;
                nv_ref_eval((nv_fn)f, x[i], dts[d], &h, &l);
                bad += memcmp(&h, &hi[i], sizeof h) != 0 || memcmp(&l, &lo[i], sizeof l) != 0;
            }
        }
    tap_ok(bad == 0, "nv_ref_eval_n: nv_ref_eval's pairs bit for bit (%d differ)", bad);
}

int main(void)
{
    test_eval_n();
    test_special();
    test_edges();
    test_tiny_composites();
    test_hard();
    test_pair_accuracy();
    test_random();
    test_exp_near_zero();
    test_tanh_near_zero();
    test_exp_far();
    test_pow();
    test_threads();
    tap_ok(strcmp(nv_fn_name(NV_FN_GELU_TANH), "gelu_tanh") == 0 && nv_fn_name(NV_FN_COUNT) == NULL,
           "function names");
    mpfr_free_cache();
    return tap_done();
}
