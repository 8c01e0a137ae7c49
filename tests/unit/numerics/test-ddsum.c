/* ddsum: error-free transformations and exact sums, checked against MPFR sums at
 * a precision wide enough to hold every double exactly (the independent oracle). */
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/ref/ddsum.h"

static uint64_t lcg = 88172645463325252ULL;
static uint64_t next_u64(void)
{
    lcg ^= lcg << 13;
    lcg ^= lcg >> 7;
    lcg ^= lcg << 17;
    return lcg;
}
/* A double with random sign, significand and exponent in [-emax, emax]. */
static double rand_double(int emax)
{
    double m = (double)(next_u64() >> 11) * 0x1p-53 + 0.5;
    int e = (int)(next_u64() % (uint64_t)(2 * emax + 1)) - emax;
    return (next_u64() & 1 ? -1 : 1) * ldexp(m, e);
}

/* The oracle: exact sum in MPFR (2300 bits hold any sum of doubles exactly),
 * rounded to nearest fp64 for hi, and the remainder for lo. */
static void mpfr_oracle(const double *x, const double *y, int64_t n, double *hi, double *lo)
{
    mpfr_t s, t, r;
    mpfr_inits2(4400, s, t, (mpfr_ptr)0);
    mpfr_init2(r, 53);
    mpfr_set_zero(s, 1);
    for (int64_t i = 0; i < n; i++) {
        mpfr_set_d(t, x[i], MPFR_RNDN);
        if (y)
            mpfr_mul_d(t, t, y[i], MPFR_RNDN);
        mpfr_add(s, s, t, MPFR_RNDN);
    }
    mpfr_set(r, s, MPFR_RNDN);
    *hi = mpfr_get_d(r, MPFR_RNDN);
    mpfr_sub_d(s, s, *hi, MPFR_RNDN);
    *lo = mpfr_get_d(s, MPFR_RNDN);
    mpfr_clears(s, t, r, (mpfr_ptr)0);
}

static void test_eft(void)
{
    int ok_sum = 1, ok_prod = 1;
    mpfr_t a, b;
    mpfr_inits2(2200, a, b, (mpfr_ptr)0);
    for (int i = 0; i < 20000; i++) {
        double x = rand_double(60), y = rand_double(60), s, e;
        nv_two_sum(x, y, &s, &e);
        mpfr_set_d(a, x, MPFR_RNDN);
        mpfr_add_d(a, a, y, MPFR_RNDN);
        mpfr_set_d(b, s, MPFR_RNDN);
        mpfr_add_d(b, b, e, MPFR_RNDN);
        ok_sum &= mpfr_equal_p(a, b) && s == x + y;
        nv_two_prod(x, y, &s, &e);
        mpfr_set_d(a, x, MPFR_RNDN);
        mpfr_mul_d(a, a, y, MPFR_RNDN);
        mpfr_set_d(b, s, MPFR_RNDN);
        mpfr_add_d(b, b, e, MPFR_RNDN);
        ok_prod &= mpfr_equal_p(a, b) && s == x * y;
    }
    mpfr_clears(a, b, (mpfr_ptr)0);
    tap_ok(ok_sum, "two_sum is error-free on 20000 random pairs (MPFR)");
    tap_ok(ok_prod, "two_prod is error-free on 20000 random pairs (MPFR)");
}

static void test_exact_sum(void)
{
    enum { N = 4000 };
    static double x[N];
    int ok = 1;
    for (int trial = 0; trial < 30; trial++) {
        int emax = trial < 10 ? 30 : trial < 20 ? 300 : 1000;
        for (int i = 0; i < N / 2; i++) {
            x[i] = rand_double(emax);
            x[N / 2 + i] = -x[i] * (1 + (double)(next_u64() % 3) * 0x1p-52); /* cancels */
        }
        x[N - 1] = ldexp(1, -1074) * (double)(trial + 1); /* subnormal survives */
        double hi, lo, ehi, elo, abs;
        nv_dd_sum(x, N, 1, &hi, &lo, &abs);
        mpfr_oracle(x, NULL, N, &ehi, &elo);
        /* Both hi are the exact sum rounded once to fp64; lo agrees to 2^-105 |s|
         * (ours is rounded from 128 bits, the oracle's from the exact value). */
        ok &= hi == ehi && fabs(lo - elo) <= 0x1p-105 * fabs(ehi);
        if (!ok) {
            tap_diag("trial %d: hi %a lo %a, oracle %a %a", trial, hi, lo, ehi, elo);
            break;
        }
    }
    tap_ok(ok, "nv_dd_sum equals the exact MPFR sum under heavy cancellation");

    double hi, lo, abs;
    double strided[] = {1e300, 99, 1.0, 99, -1e300, 99, 0x1p-70, 99};
    nv_dd_sum(strided, 4, 2, &hi, &lo, &abs);
    /* By hand: 1e300 + 1 - 1e300 + 2^-70 = 1 + 2^-70; hi = 1, lo = 2^-70. */
    tap_ok(hi == 1.0 && lo == 0x1p-70, "strided sum 1e300 + 1 - 1e300 + 2^-70 (hi %a lo %a)", hi,
           lo);
    tap_ok(abs == 2e300, "abs_sum of the same is 2e300");

    double sp[] = {1, INFINITY, 2};
    nv_dd_sum(sp, 3, 1, &hi, &lo, NULL);
    tap_ok(hi == INFINITY, "a +Inf term gives +Inf (IEEE 754 §6.1)");
    double sp2[] = {1, INFINITY, -INFINITY};
    nv_dd_sum(sp2, 3, 1, &hi, &lo, NULL);
    tap_ok(isnan(hi), "+Inf + -Inf gives NaN (IEEE 754 §7.2)");
    nv_dd_sum(sp, 0, 1, &hi, &lo, &abs);
    tap_ok(hi == 0 && lo == 0 && abs == 0, "empty sum is 0");
    double big[] = {0x1.fffffffffffffp1023, 0x1.fffffffffffffp1023, -0x1.fffffffffffffp1023};
    nv_dd_sum(big, 3, 1, &hi, &lo, NULL);
    tap_ok(hi == 0x1.fffffffffffffp1023 && lo == 0,
           "intermediate overflow is harmless: max + max - max = max");
}

static void test_exact_dot(void)
{
    enum { N = 3000 };
    static double x[N], y[N];
    int ok = 1;
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++) {
            x[i] = rand_double(100);
            y[i] = rand_double(100);
        }
        /* Dot products that cancel: second half repeats the first with -y. */
        for (int i = N / 2; i < N; i++) {
            x[i] = x[i - N / 2];
            y[i] = -y[i - N / 2] * (trial & 1 ? 1 : 1 + 0x1p-40);
        }
        double hi, lo, ehi, elo, abs;
        nv_dd_dot(x, 1, y, 1, N, &hi, &lo, &abs);
        mpfr_oracle(x, y, N, &ehi, &elo);
        ok &= hi == ehi && fabs(lo - elo) <= 0x1p-105 * fabs(ehi);
    }
    tap_ok(ok, "nv_dd_dot equals the exact MPFR dot product (cancelling)");
}

static void test_dd_acc(void)
{
    /* Sum2's bound (ORO 2005 Prop. 4.5): |res - s| <= u|s| + gamma_{n-1}^2 sum|x|,
     * u = 2^-53; here n = 1000 so gamma^2 < 2^-86. */
    enum { N = 1000 };
    static double x[N];
    int ok = 1;
    for (int trial = 0; trial < 50; trial++) {
        nv_dd_acc a;
        nv_dd_acc_init(&a);
        for (int i = 0; i < N; i++) {
            x[i] = rand_double(20);
            nv_dd_acc_add(&a, x[i]);
        }
        double hi, lo, abs, ehi, elo;
        nv_dd_acc_get(&a, &hi, &lo, &abs);
        mpfr_oracle(x, NULL, N, &ehi, &elo);
        double err = fabs((hi - ehi) + (lo - elo));
        ok &= err <= 0x1p-53 * fabs(ehi) + 0x1p-86 * abs;
    }
    tap_ok(ok, "dd accumulator within the Sum2 error bound");
}

int main(void)
{
    test_eft();
    test_exact_sum();
    test_exact_dot();
    test_dd_acc();
    mpfr_free_cache();
    return tap_done();
}
