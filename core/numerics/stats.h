/* Goodness-of-fit statistics for the serving kind's sampling check
 * (docs/SERVING.md "Repeated sampling"): the chi-square survival function,
 * its noncentral form for the power of the test, and the G-test of observed
 * counts against a reference distribution with small categories pooled. */
#ifndef NUMVAL_STATS_H
#define NUMVAL_STATS_H

#include <stdint.h>

/* The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) /
 * Gamma(a) (DLMF 8.2.4), a > 0, x >= 0: the series of DLMF 8.7.1 below x < a + 1,
 * the continued fraction of DLMF 8.9.2 (modified Lentz) above, as Numerical
 * Recipes 3rd ed. §6.2 does. Relative accuracy about 1e-14 where Q > 1e-300;
 * NaN for arguments outside the domain. */
double nv_gamma_q(double a, double x);

/* P(X > x) for X chi-square with k > 0 degrees of freedom: Q(k/2, x/2). */
double nv_chi2_sf(double x, double k);

/* The x with nv_chi2_sf(x, k) = p, 0 < p < 1 (bisection to a relative 1e-12). */
double nv_chi2_isf(double p, double k);

/* P(X > x) for X noncentral chi-square, k degrees of freedom, noncentrality
 * lambda >= 0: the Poisson mixture sum_j e^(-lambda/2) (lambda/2)^j / j!
 * Q(k/2 + j, x/2) (Johnson, Kotz & Balakrishnan, Continuous Univariate
 * Distributions vol. 2, 2nd ed., eq. 29.2), summed past the Poisson mode until
 * a term is below 1e-17 of the sum. */
double nv_ncx2_sf(double x, double k, double lambda);

/* The G-test (Sokal & Rohlf, Biometry, 4th ed., 2012, §17.2; Williams'
 * correction, Biometrika 63, 1976) of counts obs[0..n) against probabilities
 * p[0..n) (summing to 1; p = 0 categories are left out, the caller judges an
 * observation there): categories of expected count N p < min_expected are
 * pooled into one (Cochran 1954's rule of 5), and a pool that still expects
 * fewer goes into the smallest kept category. group[i] receives the pooled
 * category of i (-1 for p = 0). */
typedef struct nv_gtest {
    int64_t samples;  /* N = sum of obs over p > 0 */
    int categories;   /* after pooling */
    int df;           /* categories - 1 */
    double g;         /* 2 sum O ln(O / E), over pooled categories */
    double williams;  /* q = 1 + (k^2 - 1) / (6 N (k - 1)) */
    double g_adj;     /* g / q: the statistic judged */
    double p;         /* nv_chi2_sf(g_adj, df); 1 when df = 0 */
} nv_gtest;

/* Returns 0, or -EINVAL for n < 1 or a negative count or probability. */
int nv_gtest_run(const int64_t *obs, const double *p, int n, double min_expected, int *group,
                 nv_gtest *ret);

/* The power of a level-alpha chi-square test with df degrees of freedom and N
 * samples against every alternative at total-variation distance >= tv from
 * the null: at least P(chi2'(df, lambda) > chi2_isf(alpha, df)) with lambda =
 * N (2 tv)^2, the smallest Pearson noncentrality N sum (p' - p)^2 / p of such
 * an alternative (Cauchy-Schwarz: (sum |p' - p|)^2 <= sum (p' - p)^2 / p), the
 * asymptotic (Pitman) power of the G and X^2 tests alike (Agresti,
 * Categorical Data Analysis, 3rd ed., §1.5.5 and §16.3.5). */
double nv_gtest_power(int df, int64_t samples, double alpha, double tv);

/* The smallest N with nv_gtest_power(df, N, alpha, tv) >= power. */
int64_t nv_gtest_samples_for(int df, double alpha, double tv, double power);

#endif
