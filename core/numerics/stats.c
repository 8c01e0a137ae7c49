/* Chi-square distributions and the G-test (stats.h). */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define ITMAX 100000
#define EPS 1e-16
#define FPMIN 1e-300

/* P(a, x) by the series e^-x x^a / Gamma(a + 1) sum x^n / ((a+1)..(a+n))
 * (DLMF 8.7.1 via 8.2.7), for x < a + 1 where it converges fast. */
static double gamma_p_series(double a, double x)
{
    double ap = a, del = 1 / a, sum = del;
    for (int n = 0; n < ITMAX; n++) {
        ap += 1;
        del *= x / ap;
        sum += del;
        if (fabs(del) < fabs(sum) * EPS)
            break;
    }
    return sum * exp(-x + a * log(x) - lgamma(a));
}

/* Q(a, x) by the continued fraction e^-x x^a / Gamma(a) 1/(x+1-a- 1(1-a)/(x+3-a- ..))
 * (DLMF 8.9.2), evaluated by the modified Lentz method (Numerical Recipes §5.2,
 * §6.2 gcf), for x >= a + 1. */
static double gamma_q_cf(double a, double x)
{
    double b = x + 1 - a, c = 1 / FPMIN, d = 1 / b, h = d;
    for (int i = 1; i < ITMAX; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < FPMIN)
            d = FPMIN;
        c = b + an / c;
        if (fabs(c) < FPMIN)
            c = FPMIN;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < EPS)
            break;
    }
    return exp(-x + a * log(x) - lgamma(a)) * h;
}

double nv_gamma_q(double a, double x)
{
    if (!(a > 0) || !(x >= 0) || isinf(a))
        return NAN;
    if (x == 0)
        return 1;
    if (isinf(x))
        return 0;
    if (x < a + 1)
        return 1 - gamma_p_series(a, x);
    return gamma_q_cf(a, x);
}

double nv_chi2_sf(double x, double k)
{
    if (!(k > 0))
        return NAN;
    return x <= 0 ? 1 : nv_gamma_q(k / 2, x / 2);
}

double nv_chi2_isf(double p, double k)
{
    if (!(p > 0 && p < 1) || !(k > 0))
        return NAN;
    double lo = 0, hi = k + 10;
    while (nv_chi2_sf(hi, k) > p)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = (lo + hi) / 2;
        if (nv_chi2_sf(mid, k) > p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

double nv_ncx2_sf(double x, double k, double lambda)
{
    if (!(k > 0) || !(lambda >= 0))
        return NAN;
    if (lambda == 0)
        return nv_chi2_sf(x, k);
    double h = lambda / 2, sum = 0;
    /* Past the Poisson mode the weights fall faster than geometrically while
     * Q(k/2 + j, x/2) <= 1 rises: stop once a term is below 1e-17 of the sum
     * (the weights in logs, so none underflows before it matters). */
    for (int64_t j = 0; j < 1000000; j++) {
        double w = exp(-h + (double)j * log(h) - lgamma((double)j + 1));
        double term = w * nv_chi2_sf(x, k + 2 * (double)j);
        sum += term;
        if ((double)j > h + 1 && term <= 1e-17 * sum)
            break;
    }
    return sum;
}

typedef struct cat {
    double e;
    int i;
} cat;

static int by_expected_desc(const void *pa, const void *pb)
{
    const cat *a = pa, *b = pb;
    if (a->e != b->e)
        return a->e > b->e ? -1 : 1;
    return a->i - b->i;
}

int nv_gtest_run(const int64_t *obs, const double *p, int n, double min_expected, int *group,
                 nv_gtest *ret)
{
    if (n < 1)
        return -EINVAL;
    int64_t N = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (obs[i] < 0 || !(p[i] >= 0))
            return -EINVAL;
        if (p[i] > 0) {
            N += obs[i];
            m++;
        }
    }
    cat *c = malloc((size_t)(m > 0 ? m : 1) * sizeof *c);
    double *E = calloc((size_t)(m + 1), sizeof *E), *O = calloc((size_t)(m + 1), sizeof *O);
    if (!c || !E || !O) {
        free(c);
        free(E);
        free(O);
        return -ENOMEM;
    }
    m = 0;
    for (int i = 0; i < n; i++) {
        group[i] = -1;
        if (p[i] > 0)
            c[m++] = (cat){(double)N * p[i], i};
    }
    qsort(c, (size_t)m, sizeof *c, by_expected_desc);
    /* categories 0..kept-1 alone, the rest pooled in category kept */
    int kept = 0;
    while (kept < m && c[kept].e >= min_expected)
        kept++;
    double pool = 0;
    for (int j = kept; j < m; j++)
        pool += c[j].e;
    int pool_at = kept; /* the pooled category's index */
    if (kept < m && pool < min_expected && kept > 0)
        pool_at = kept - 1; /* the smallest kept one absorbs a pool still too small */
    int k = pool_at == kept && kept < m ? kept + 1 : kept;
    for (int j = 0; j < m; j++) {
        int g = j < kept ? j : pool_at;
        group[c[j].i] = g;
        E[g] += c[j].e;
        O[g] += (double)obs[c[j].i];
    }
    double G = 0;
    for (int g = 0; g < k; g++)
        if (O[g] > 0)
            G += O[g] * log(O[g] / E[g]);
    G *= 2;
    nv_gtest t = {.samples = N, .categories = k, .df = k > 0 ? k - 1 : 0, .g = G};
    t.williams = t.df > 0 && N > 0 ? 1 + ((double)k * k - 1) / (6.0 * (double)N * t.df) : 1;
    t.g_adj = G / t.williams;
    t.p = t.df > 0 ? nv_chi2_sf(t.g_adj, t.df) : 1;
    *ret = t;
    free(c);
    free(E);
    free(O);
    return 0;
}

double nv_gtest_power(int df, int64_t samples, double alpha, double tv)
{
    if (df < 1)
        return 0;
    double crit = nv_chi2_isf(alpha, df);
    return nv_ncx2_sf(crit, df, (double)samples * 4 * tv * tv);
}

int64_t nv_gtest_samples_for(int df, double alpha, double tv, double power)
{
    if (df < 1)
        return -1;
    int64_t lo = 1, hi = 2;
    while (nv_gtest_power(df, hi, alpha, tv) < power && hi < ((int64_t)1 << 40))
        hi *= 2;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (nv_gtest_power(df, mid, alpha, tv) >= power)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}
