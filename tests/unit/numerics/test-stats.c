/* The chi-square functions and the G-test (core/numerics/stats.h) against
 * closed forms: chi-square with 1..4 degrees of freedom (Abramowitz & Stegun
 * 26.4.4, 26.4.5: sums of erfc and e^(-x/2) terms), the noncentral
 * chi-square with 1 degree of freedom ((Z + sqrt(lambda))^2, two normal
 * tails), the textbook 5% critical value of chi-square(1), and G statistics
 * worked by hand. */
#include <errno.h>
#include <math.h>

#include "core/numerics/stats.h"
#include "tests/unit/tap.h"

static int close_rel(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fabs(b);
}

static double sf1(double x) { return erfc(sqrt(x / 2)); }
static double sf2(double x) { return exp(-x / 2); }
static double sf3(double x) { return erfc(sqrt(x / 2)) + sqrt(2 * x / M_PI) * exp(-x / 2); }
static double sf4(double x) { return exp(-x / 2) * (1 + x / 2); }

static void test_chi2(void)
{
    /* both branches of nv_gamma_q: the series (x < a + 1) and the continued fraction */
    const double xs[] = {0.01, 0.5, 1, 2.5, 4, 9, 30, 80, 300};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        tap_ok(close_rel(nv_chi2_sf(x, 1), sf1(x), 1e-12), "chi2 sf(%g, 1) = erfc(sqrt(x/2)) = %.17g",
               x, nv_chi2_sf(x, 1));
        tap_ok(close_rel(nv_chi2_sf(x, 2), sf2(x), 1e-12), "chi2 sf(%g, 2) = exp(-x/2)", x);
        tap_ok(close_rel(nv_chi2_sf(x, 3), sf3(x), 1e-12), "chi2 sf(%g, 3) closed form", x);
        tap_ok(close_rel(nv_chi2_sf(x, 4), sf4(x), 1e-12), "chi2 sf(%g, 4) closed form", x);
    }
    tap_ok(nv_chi2_sf(0, 5) == 1 && nv_chi2_sf(-1, 5) == 1, "chi2 sf at and below 0 is 1");
    tap_ok(isnan(nv_gamma_q(0, 1)) && isnan(nv_gamma_q(1, -1)), "Q outside its domain is NaN");
    tap_ok(close_rel(nv_chi2_isf(0.05, 1), 3.841458820694124, 1e-10),
           "chi2 isf(0.05, 1) = 3.841458820694124 (the tables' 5%% point)");
    double c = nv_chi2_isf(1e-5, 39);
    tap_ok(close_rel(nv_chi2_sf(c, 39), 1e-5, 1e-9), "isf inverts sf (df 39, 1e-5: %.6f)", c);
}

static void test_ncx2(void)
{
    const double lam[] = {0.5, 4, 25, 100};
    const double xs[] = {1, 6, 20, 90};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++) {
            double l = lam[i], x = xs[j];
            double want = 0.5 * erfc((sqrt(x) - sqrt(l)) / M_SQRT2) +
                          0.5 * erfc((sqrt(x) + sqrt(l)) / M_SQRT2);
            tap_ok(close_rel(nv_ncx2_sf(x, 1, l), want, 1e-10),
                   "noncentral chi2 sf(%g, 1, %g) = P(|Z + sqrt(lambda)| > sqrt(x)) = %.12g", x,
                   l, want);
        }
    tap_ok(nv_ncx2_sf(7, 3, 0) == nv_chi2_sf(7, 3), "lambda 0 is the central distribution");
}

static void test_gtest(void)
{
    int64_t obs[2] = {30, 20};
    double p[2] = {0.5, 0.5};
    int group[5];
    nv_gtest t;
    int r = nv_gtest_run(obs, p, 2, 5, group, &t);
    double G = 2 * (30 * log(30.0 / 25) + 20 * log(20.0 / 25));
    double q = 1 + 3.0 / (6 * 50);
    tap_ok(r == 0 && t.df == 1 && close_rel(t.g, G, 1e-14) && close_rel(t.williams, q, 1e-14),
           "G of 30/20 against 1/2, 1/2: %.12g, Williams q %.6f", t.g, t.williams);
    tap_ok(close_rel(t.p, sf1(G / q), 1e-12), "p = chi2 sf(G / q, 1) = %.6g", t.p);

    /* N 100, expected 50, 30, 19, 0.5, 0.5: the last two pool to 1 < 5, which
     * goes into the smallest kept category: 3 categories, df 2 */
    int64_t o5[5] = {52, 29, 17, 1, 1};
    double p5[5] = {0.5, 0.3, 0.19, 0.005, 0.005};
    r = nv_gtest_run(o5, p5, 5, 5, group, &t);
    double G5 = 2 * (52 * log(52 / 50.0) + 29 * log(29 / 30.0) + 19 * log(19 / 20.0));
    tap_ok(r == 0 && t.categories == 3 && t.df == 2 && group[3] == 2 && group[4] == 2 &&
               close_rel(t.g, G5, 1e-13),
           "pooling: 3 categories, the small ones in the third, G %.6g", t.g);

    /* a pool of 6 expected stays a category of its own */
    int64_t o6[4] = {50, 44, 3, 3};
    double p6[4] = {0.5, 0.44, 0.03, 0.03};
    r = nv_gtest_run(o6, p6, 4, 5, group, &t);
    tap_ok(r == 0 && t.categories == 3 && group[2] == 2 && group[3] == 2 && close_rel(t.g, 0, 1) &&
               t.g < 1e-12,
           "a pool of 6 expected is one category; observed = expected gives G 0");
    double pz[2] = {1, 0};
    int64_t oz[2] = {10, 0};
    r = nv_gtest_run(oz, pz, 2, 5, group, &t);
    tap_ok(r == 0 && t.df == 0 && t.p == 1 && group[1] == -1, "p = 0 categories are left out");
    int64_t bad[1] = {-1};
    tap_ok(nv_gtest_run(bad, p, 1, 5, group, &t) == -EINVAL, "a negative count is refused");
}

static void test_power(void)
{
    double a = nv_gtest_power(10, 1000, 1e-5, 0.05), b = nv_gtest_power(10, 4000, 1e-5, 0.05);
    tap_ok(a < b && b <= 1, "power grows with the samples (%.4f, %.4f)", a, b);
    int64_t n = nv_gtest_samples_for(39, 1e-5, 0.05, 0.99);
    tap_ok(n > 1 && nv_gtest_power(39, n, 1e-5, 0.05) >= 0.99 &&
               nv_gtest_power(39, n - 1, 1e-5, 0.05) < 0.99,
           "df 39, alpha 1e-5, TV 0.05, power 0.99: %lld samples", (long long)n);
    /* df 1: the power has the closed form of the noncentral chi2(1) tails */
    double crit = nv_chi2_isf(0.01, 1), lam = 500 * 4 * 0.05 * 0.05;
    double want = 0.5 * erfc((sqrt(crit) - sqrt(lam)) / M_SQRT2) +
                  0.5 * erfc((sqrt(crit) + sqrt(lam)) / M_SQRT2);
    tap_ok(close_rel(nv_gtest_power(1, 500, 0.01, 0.05), want, 1e-9),
           "df 1 power = the normal tails at lambda = N (2 tv)^2 = %.6f", want);
}

int main(void)
{
    test_chi2();
    test_ncx2();
    test_gtest();
    test_power();
    return tap_done();
}
