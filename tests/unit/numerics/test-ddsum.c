/* ddsum: error-free transformations and exact sums, checked against MPFR sums at
 * a precision wide enough to hold every double exactly (the independent oracle). */
#include <mpfr.h>
#include <stdbool.h>
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
        double hi, lo, ehi, elo;
        nv_mag abs;
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

    double hi, lo;
    nv_mag abs;
    double strided[] = {1e300, 99, 1.0, 99, -1e300, 99, 0x1p-70, 99};
    nv_dd_sum(strided, 4, 2, &hi, &lo, &abs);
    /* By hand: 1e300 + 1 - 1e300 + 2^-70 = 1 + 2^-70; hi = 1, lo = 2^-70. */
    tap_ok(hi == 1.0 && lo == 0x1p-70, "strided sum 1e300 + 1 - 1e300 + 2^-70 (hi %a lo %a)", hi,
           lo);
    tap_ok(nv_mag_to_d(abs) == 2e300, "abs_sum of the same is 2e300");

    double sp[] = {1, INFINITY, 2};
    nv_dd_sum(sp, 3, 1, &hi, &lo, NULL);
    tap_ok(hi == INFINITY, "a +Inf term gives +Inf (IEEE 754 §6.1)");
    double sp2[] = {1, INFINITY, -INFINITY};
    nv_dd_sum(sp2, 3, 1, &hi, &lo, NULL);
    tap_ok(isnan(hi), "+Inf + -Inf gives NaN (IEEE 754 §7.2)");
    nv_dd_sum(sp, 0, 1, &hi, &lo, &abs);
    tap_ok(hi == 0 && lo == 0 && abs.m == 0, "empty sum is 0");
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
        double hi, lo, ehi, elo;
        nv_mag abs;
        nv_dd_dot(x, 1, y, 1, N, &hi, &lo, &abs);
        mpfr_oracle(x, y, N, &ehi, &elo);
        ok &= hi == ehi && fabs(lo - elo) <= 0x1p-105 * fabs(ehi);
    }
    tap_ok(ok, "nv_dd_dot equals the exact MPFR dot product (cancelling)");
}

/* Sums and dot products beyond fp64's exponent range, against the MPFR oracle
 * (4400 bits hold every product of two doubles and their sums). */
static void test_wide_range(void)
{
    const double M = 0x1.fffffffffffffp1023;
    double hi, lo, ehi, elo;
    nv_mag abs;
    /* Overflow threshold of fp64: max + ulp(max)/2 = 2^1024 - 2^970 rounds to
     * +Inf (the tie goes to the even 2^1024), one 2^-1074 below it to max. */
    double at[] = {M, 0x1p970};
    nv_dd_sum(at, 2, 1, &hi, &lo, &abs);
    tap_ok(hi == INFINITY && lo == 0, "max + 2^970 (the overflow threshold) rounds to +Inf");
    double below[] = {M, 0x1p970, -0x1p-1074};
    nv_dd_sum(below, 3, 1, &hi, &lo, &abs);
    /* lo is the remainder rounded toward zero, so hi + lo stays on the exact
     * side of the threshold that decides the overflow (reference.c). */
    tap_ok(hi == M && lo == 0x1.fffffffffffffp969,
           "one 2^-1074 below the threshold rounds to max, lo below 2^970 (hi %a lo %a)", hi, lo);
    /* Sums whose partial sums overflow, their value not: max + max - max - max/2. */
    double inter[] = {M, M, M, -M, -M, -M, -M / 2};
    nv_dd_sum(inter, 7, 1, &hi, &lo, &abs);
    tap_ok(hi == -M / 2 && lo == 0, "partial sums up to 3 max, value -max/2: exact");
    tap_ok(abs.e == 1027 && fabs(nv_mag_to_d(abs)) == INFINITY &&
               fabs(abs.m - M * 0x1p-1027 * 6.5) <= 0x1p-52,
           "abs_sum 6.5 max is held beyond fp64's range (m %a e %ld)", abs.m, abs.e);
    /* Products that overflow fp64 one by one and cancel: with a = 2^512 (1 + 2^-52),
     * a a - 2^512 2^512 (1 + 2^-51) + 1 = 2^1024 2^-104 + 1 = 2^920 + 1. */
    double a1 = 0x1.0000000000001p512;
    double x[] = {a1, -0x1p512, 1}, y[] = {a1, 0x1.0000000000002p512, 1};
    nv_dd_dot(x, 1, y, 1, 3, &hi, &lo, &abs);
    mpfr_oracle(x, y, 3, &ehi, &elo);
    tap_ok(hi == 0x1p920 && lo == 1 && hi == ehi && lo == elo,
           "products above 2^1024 that cancel to 2^920 + 1 (hi %a lo %a)", hi, lo);
    double x2[] = {0x1p600, -0x1p600, 3}, y2[] = {0x1p600, 0x1p600, 0.5};
    nv_dd_dot(x2, 1, y2, 1, 3, &hi, &lo, &abs);
    tap_ok(hi == 1.5 && lo == 0, "2^1200 - 2^1200 + 1.5 = 1.5 (hi %a)", hi);
    tap_ok(abs.e == 1202 && abs.m == 0.5,
           "its abs_sum 2^1201 + 1.5 as a magnitude 0.5 2^1202 (m %a e %ld)", abs.m, abs.e);
    /* Products below 2^-969 (TwoProduct's error term would underflow) and of
     * subnormals, exactly. */
    double x3[] = {0x1.0000000000001p-600, 0x1p-1074, -0x1.8p-500},
           y3[] = {0x1.0000000000003p-500, 0x1p-1074, 0x1.5555555555555p-600};
    nv_dd_dot(x3, 1, y3, 1, 3, &hi, &lo, &abs);
    mpfr_oracle(x3, y3, 3, &ehi, &elo);
    tap_ok(hi == ehi && lo == elo, "tiny products exactly (hi %a lo %a, oracle %a %a)", hi, lo, ehi,
           elo);
    /* Random products over the whole exponent range. */
    enum { N = 500 };
    static double a[N], b[N];
    int ok = 1;
    for (int trial = 0; trial < 20 && ok; trial++) {
        for (int i = 0; i < N; i++) {
            a[i] = rand_double(1000);
            b[i] = rand_double(1000);
        }
        for (int i = N / 2; i < N; i++) { /* cancel the first half */
            a[i] = a[i - N / 2];
            b[i] = -b[i - N / 2];
        }
        a[N - 1] = rand_double(20);
        nv_dd_dot(a, 1, b, 1, N, &hi, &lo, &abs);
        mpfr_oracle(a, b, N, &ehi, &elo);
        ok &= hi == ehi && (isinf(hi) || fabs(lo - elo) <= 0x1p-105 * fabs(ehi));
    }
    tap_ok(ok, "dot products with exponents in [-2000, 2000] equal the MPFR oracle");
    /* nv_mag arithmetic */
    nv_mag m1 = nv_mag_from_d(M), m2 = nv_mag_add(m1, m1);
    tap_ok(m2.e == 1025 && m2.m == M * 0x1p-1024 && nv_mag_to_d(m2) == INFINITY &&
               nv_mag_cmp(m2, m1) > 0 && nv_mag_to_d(nv_mag_mul(m2, nv_mag_from_d(0.25))) == M / 2,
           "nv_mag: max + max = 2 max beyond fp64, times 1/4 is max/2");
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

/* nv_xacc_add_n (exponent bins) against nv_xacc_add one by one: the same
 * value (as a pair, in MPFR and as a magnitude), specials and counts, on arrays
 * past the bins' flush length with every kind of double: both signs, the whole
 * exponent range, subnormals, zeros of both signs, exact cancellations (a bin
 * that sums to zero), runs of one exponent (a bin near its int64 limit: 1023
 * significands near 2^53), NaN and infinities. */
static uint64_t xs = 0x6A09E667F3BCC909ull;
static uint64_t xnext(void)
{
    xs ^= xs << 13;
    xs ^= xs >> 7;
    xs ^= xs << 17;
    return xs;
}

static double xrand(int kind)
{
    uint64_t u = xnext();
    switch (kind) {
    case 0: /* any finite double */
        u &= ~(UINT64_C(0x7ff) << 52) | ((u >> 52) % 2047) << 52;
        break;
    case 1: /* subnormal or zero */
        u &= UINT64_C(0x800fffffffffffff) >> (xnext() % 2 ? 0 : 40);
        break;
    case 2: /* one binade, full significands */
        u = (u & UINT64_C(0x800fffffffffffff)) | UINT64_C(0x3ff) << 52 | UINT64_C(0xfffff) << 32;
        break;
    default: { /* special */
        static const double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
        return sp[xnext() % 5];
    }
    }
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void test_add_n(void)
{
    enum { N = 9000 };
    static double x[N];
    int bad = 0, runs = 0;
    for (int rep = 0; rep < 60; rep++, runs++) {
        int n = 200 + (int)(xnext() % (N - 200));
        int mode = rep % 6;
        for (int i = 0; i < n; i++) {
            int kind = mode == 0 ? 0 : mode == 1 ? (xnext() % 3 ? 2 : 0) : mode == 2 ? 2
                       : mode == 3 ? (xnext() % 4 == 0 ? 1 : 0) : mode == 4 ? (xnext() % 50 ? 0 : 3)
                                                            : 2;
            x[i] = xrand(kind);
        }
        if (mode == 5) /* exact cancellation: the second half negates the first */
            for (int i = n / 2; i < n; i++)
                x[i] = -x[i - n / 2];
        if (rep % 12 == 11) /* one sign, one binade: a bin fills towards 2^63 */
            for (int i = 0; i < n; i++)
                x[i] = fabs(xrand(2));
        nv_xacc a, b;
        nv_xacc_init(&a);
        nv_xacc_init(&b);
        for (int i = 0; i < n; i++)
            nv_xacc_add(&a, x[i]);
        nv_xacc_add_n(&b, x, n);
        double ah, al, bh, bl;
        nv_xacc_get(&a, &ah, &al);
        nv_xacc_get(&b, &bh, &bl);
        mpfr_t ma, mb;
        mpfr_inits2(64, ma, mb, (mpfr_ptr)0);
        nv_xacc_get_mpfr(&a, ma);
        nv_xacc_get_mpfr(&b, mb);
        nv_mag ga = nv_xacc_get_mag(&a), gb = nv_xacc_get_mag(&b);
        bool same_mp = (mpfr_nan_p(ma) && mpfr_nan_p(mb)) || mpfr_equal_p(ma, mb);
        bad += memcmp(&ah, &bh, 8) != 0 || memcmp(&al, &bl, 8) != 0 || !same_mp ||
               nv_mag_cmp(ga, gb) != 0 || a.n != b.n || a.n_nan != b.n_nan ||
               a.n_pinf != b.n_pinf || a.n_ninf != b.n_ninf;
        mpfr_clears(ma, mb, (mpfr_ptr)0);
    }
    tap_ok(bad == 0, "nv_xacc_add_n = nv_xacc_add one by one on %d arrays of 200..9000 doubles "
           "(%d differ)", runs, bad);
}

int main(void)
{
    test_add_n();
    test_eft();
    test_exact_sum();
    test_exact_dot();
    test_wide_range();
    test_dd_acc();
    mpfr_free_cache();
    return tap_done();
}
