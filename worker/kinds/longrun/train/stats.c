/* Statistics, gradient scaler and learning-rate schedule of long-run jobs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

double nvw_mean(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return n > 0 ? s / n : NAN;
}

double nvw_sd(const double *x, int n)
{
    if (n < 2)
        return 0;
    double m = nvw_mean(x, n), s = 0;
    for (int i = 0; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (n - 1));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double nvw_trimmed_mean(const double *x, int n, int trim)
{
    if (n <= 2 * trim || n > 4096)
        return nvw_mean(x, n);
    double tmp[4096];
    memcpy(tmp, x, (size_t)n * sizeof *x);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return nvw_mean(tmp + trim, n - 2 * trim);
}

/* Continued fraction of the incomplete beta (Numerical Recipes 3rd ed. §6.4,
 * modified Lentz's method). */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300, eps = 1e-16;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 10000; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps)
            break;
    }
    return h;
}

double nvw_betai(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double bt = exp(lbt);
    /* The continued fraction converges fast for x < (a + 1) / (a + b + 2); use
     * the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) beyond it. */
    if (x < (a + 1) / (a + b + 2))
        return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

double nvw_t_two_sided(double t, double df)
{
    if (isnan(t) || df <= 0)
        return NAN;
    if (isinf(t))
        return 0;
    return nvw_betai(df / 2, 0.5, df / (df + t * t));
}

void nvw_welch_test(const double *a, int na, const double *b, int nb, nvw_welch *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->mean_a = nvw_mean(a, na);
    ret->mean_b = nvw_mean(b, nb);
    ret->sd_a = nvw_sd(a, na);
    ret->sd_b = nvw_sd(b, nb);
    double va = ret->sd_a * ret->sd_a / na, vb = ret->sd_b * ret->sd_b / nb;
    double diff = ret->mean_a - ret->mean_b;
    if (va + vb == 0) {
        ret->t = diff == 0 ? 0 : copysign(INFINITY, diff);
        ret->df = na + nb - 2;
        ret->p = diff == 0 ? 1 : 0;
        return;
    }
    ret->t = diff / sqrt(va + vb);
    /* Welch-Satterthwaite: (va + vb)^2 / (va^2/(na-1) + vb^2/(nb-1)). */
    ret->df = (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
    ret->p = nvw_t_two_sided(ret->t, ret->df);
}

void nvw_paired_test(const double *a, const double *b, int n, nvw_paired *ret)
{
    memset(ret, 0, sizeof *ret);
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        double d = a[i] - b[i];
        sum += d;
        ret->positive += d > 0;
        ret->negative += d < 0;
    }
    ret->mean = n > 0 ? sum / n : 0;
    for (int i = 0; i < n; i++)
        ss += (a[i] - b[i] - ret->mean) * (a[i] - b[i] - ret->mean);
    ret->sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    ret->df = n - 1;
    if (ret->sd == 0) {
        ret->t = ret->mean == 0 ? 0 : copysign(INFINITY, ret->mean);
        ret->p = ret->mean == 0 ? 1 : 0;
        return;
    }
    ret->t = ret->mean / (ret->sd / sqrt((double)n));
    ret->p = nvw_t_two_sided(ret->t, ret->df);
}

void nvw_scaler_init(nvw_scaler *s, bool enabled, double init_scale, double growth, double backoff,
                     int interval)
{
    s->enabled = enabled;
    s->scale = init_scale;
    s->growth = growth;
    s->backoff = backoff;
    s->interval = interval;
    s->tracker = 0;
}

double nvw_scaler_scale(const nvw_scaler *s)
{
    return s->enabled ? s->scale : 1.0;
}

bool nvw_scaler_update(nvw_scaler *s, bool found_nonfinite)
{
    if (!s->enabled)
        return found_nonfinite;
    if (found_nonfinite) {
        s->scale *= s->backoff;
        s->tracker = 0;
        return true;
    }
    if (++s->tracker >= s->interval) {
        s->scale *= s->growth;
        s->tracker = 0;
    }
    return false;
}

double nvw_lr_at(nvw_lr_kind k, double base, int warmup, double min_ratio, int64_t t, int64_t total)
{
    if (warmup > 0 && t < warmup)
        return base * (double)(t + 1) / warmup;
    if (k == NVW_LR_CONSTANT)
        return base;
    int64_t span = total - warmup - 1;
    double frac = span > 0 ? (double)(t - warmup) / (double)span : 1.0;
    if (frac > 1)
        frac = 1;
    return base * (min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(3.14159265358979323846 * frac)));
}
