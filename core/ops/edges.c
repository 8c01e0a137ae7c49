/* Domain edges of input 0 per op and dtype, for the "domain_edges" input class:
 * the values where the correctly rounded result changes regime in dt (overflow to
 * Inf, underflow to subnormal and to zero, saturation to +-1 or 0, poles and the
 * neighbourhood of 1 for logarithms), each given with its dt neighbours so the
 * threshold itself is bracketed even though it is located in fp64.
 *
 * Thresholds, for a format with precision p = mant_bits + 1 (IEEE 754-2019 §4.3.1
 * rounding to nearest, ties to even; §7.4 overflow):
 *   overflow:  |v| >= max_finite + ulp(max_finite) / 2 = 2^emax (2 - 2^-p) rounds to Inf;
 *   zero:      |v| <= min_subnormal / 2 rounds to 0 (the tie goes to the even 0);
 *   subnormal: |v| < min_normal;
 *   one:       1 - 2^-(p+1) <= v < 1 rounds to 1 (spacing below 1 is 2^-p; the tie
 *              goes to the even 1). */
#include <float.h>
#include <math.h>

#include "ops_internal.h"

typedef struct edges {
    nv_dtype dt;
    const nv_dtype_info *di;
    double *out;
    int n, max;
} edges;

double nvo_dt_step(nv_dtype dt, double x, int dir)
{
    nv_round_mode m = {dir > 0 ? NV_ROUND_UP : NV_ROUND_DOWN, false, false};
    double y = nextafter(x, dir > 0 ? INFINITY : -INFINITY);
    return nv_dtype_round(dt, y, &m, 0);
}

static void add(edges *e, double v)
{
    if (e->n >= e->max || isnan(v))
        return;
    for (int i = 0; i < e->n; i++)
        if (e->out[i] == v && signbit(e->out[i]) == signbit(v))
            return;
    e->out[e->n++] = v;
}

/* t rounded to dt and k dt neighbours on each side. */
static void around(edges *e, double t, int k)
{
    if (!isfinite(t))
        return;
    double c = nv_dtype_round(e->dt, t, &NV_ROUND_DEFAULT, 0);
    if (!isfinite(c))
        c = copysign(e->di->max_finite, t);
    add(e, c);
    double up = c, dn = c;
    for (int i = 0; i < k; i++) {
        up = nvo_dt_step(e->dt, up, 1);
        dn = nvo_dt_step(e->dt, dn, -1);
        if (isfinite(up))
            add(e, up);
        if (isfinite(dn))
            add(e, dn);
    }
}

static edges start(nv_dtype dt, double *out, int max)
{
    edges e = {.dt = dt, .di = nv_dtype_get(dt), .out = out, .max = max};
    return e;
}

static int prec(const edges *e)
{
    return e->di->mant_bits + 1;
}

/* ln of the overflow threshold 2^emax (2 - 2^-p). */
static double ln_overflow(const edges *e)
{
    return (e->di->emax + 1) * M_LN2 + log1p(-ldexp(1, -(prec(e) + 1)));
}

static void tiny_and_huge(edges *e, bool neg)
{
    add(e, 0.0);
    add(e, e->di->min_subnormal);
    add(e, e->di->min_normal);
    add(e, e->di->max_finite);
    if (neg) {
        add(e, -0.0);
        add(e, -e->di->min_subnormal);
        add(e, -e->di->min_normal);
        add(e, -e->di->max_finite);
    }
}

#define START                                                                                      \
    if (!nv_dtype_get(dt) || !nv_dtype_get(dt)->is_float || max <= 0)                              \
        return 0;                                                                                  \
    edges e = start(dt, out, max)

int nvo_edges_generic(nv_dtype dt, double *out, int max)
{
    START;
    tiny_and_huge(&e, true);
    add(&e, 1.0);
    add(&e, -1.0);
    return e.n;
}

/* Reductions and matmul: zeros, the subnormal boundary and +-1, but not
 * max_finite, whose sums and squares overflow any same-width accumulator (an
 * input-class question, not a domain edge). */
int nvo_edges_reduce(nv_dtype dt, double *out, int max)
{
    START;
    add(&e, 0.0);
    add(&e, -0.0);
    add(&e, e.di->min_subnormal);
    add(&e, -e.di->min_subnormal);
    add(&e, e.di->min_normal);
    add(&e, -e.di->min_normal);
    add(&e, 1.0);
    add(&e, -1.0);
    add(&e, 0.5);
    return e.n;
}

int nvo_edges_exp(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, ln_overflow(&e), 2);                  /* exp -> Inf */
    around(&e, log(e.di->min_normal), 2);            /* exp -> subnormal */
    around(&e, log(e.di->min_subnormal) - M_LN2, 2); /* exp -> 0 */
    add(&e, 0.0);
    return e.n;
}

int nvo_edges_exp2(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, e.di->emax + 1 + log1p(-ldexp(1, -(prec(&e) + 1))) / M_LN2, 2);
    around(&e, e.di->emin, 2);
    around(&e, e.di->emin - e.di->mant_bits - 1, 2);
    add(&e, 0.0);
    return e.n;
}

int nvo_edges_expm1(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, ln_overflow(&e), 2);
    /* expm1(x) rounds to -1 once e^x <= 2^-(p+1) (half the spacing above -1). */
    around(&e, -(prec(&e) + 1) * M_LN2, 2);
    add(&e, e.di->min_subnormal);
    add(&e, -e.di->min_subnormal);
    add(&e, e.di->min_normal);
    add(&e, -e.di->min_normal);
    add(&e, 0.0);
    return e.n;
}

int nvo_edges_log(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, 1.0, 2); /* log(1 +- few ulp): the cancellation region */
    tiny_and_huge(&e, false);
    add(&e, INFINITY);
    add(&e, -e.di->min_subnormal); /* NaN */
    return e.n;
}

int nvo_edges_log1p(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, -1.0, 2); /* the pole and just above / below */
    tiny_and_huge(&e, true);
    return e.n;
}

/* tanh(x) rounds to 1 once 1 - tanh x = 2 / (e^2x + 1) <= 2^-(p+1). Below that
 * the result's ulp halves each time 1 - tanh x crosses a power of two 2^-k, at
 * x_k = ln(2^(k+1) - 1) / 2: those regime changes for k = 1 .. p (in fp32, 0.35
 * apart up to 9.0; they include where bf16 and fp16 round to 1, 3.47 and 4.5),
 * then 4, 4.5 .. 9, both signs. A tanh that saturates early (to exactly +-1 for
 * |x| > 4, where fp32's exact 1 - tanh 4 = 6.7e-4 is 11000 ulps) meets them at
 * fixed positions; the saturation threshold itself sits where the error is
 * 0.5 ulp. The threshold comes first: a short list keeps it. */
int nvo_edges_tanh(nv_dtype dt, double *out, int max)
{
    START;
    double t = log(ldexp(1, prec(&e) + 2) - 1) / 2;
    around(&e, t, 2);
    around(&e, -t, 2);
    add(&e, e.di->min_subnormal);
    add(&e, -e.di->min_subnormal);
    add(&e, 0.0);
    for (int k = 1; k <= prec(&e); k++) {
        double x = log(ldexp(1, k + 1) - 1) / 2;
        around(&e, x, 1);
        around(&e, -x, 1);
    }
    for (int j = 0; j <= 10; j++) {
        around(&e, 4 + j / 2.0, 1);
        around(&e, -(4 + j / 2.0), 1);
    }
    return e.n;
}

/* Solve f(x) = 0 for increasing f on [lo, hi] by bisection in fp64. */
static double bisect(double (*f)(double, double), double target, double lo, double hi)
{
    for (int i = 0; i < 200 && lo < hi; i++) {
        double mid = lo + (hi - lo) / 2;
        if (mid == lo || mid == hi)
            break;
        if (f(mid, target) < 0)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ln erfc(z) for z >= 0: libm's erfc (a few ulps) while it is a normal double,
 * beyond z = 26 the asymptotic series (Abramowitz & Stegun 7.1.23), whose
 * truncation error after 10 terms is below 10^-20 there. */
static double log_erfc(double z)
{
    if (z < 26)
        return log(erfc(z));
    double z2 = z * z, term = 1, series = 1;
    for (int k = 1; k <= 10; k++) {
        term *= -(2.0 * k - 1) / (2 * z2);
        series += term;
    }
    return -z2 - log(z * sqrt(M_PI)) + log(series);
}

static double f_erfc_sat(double x, double target) /* decreasing in x: negate */
{
    return -(log_erfc(x) - target);
}

/* erf(x) rounds to 1 once erfc(x) <= 2^-(p+1). */
int nvo_edges_erf(nv_dtype dt, double *out, int max)
{
    START;
    double t = bisect(f_erfc_sat, -(prec(&e) + 1) * M_LN2, 0, 40);
    around(&e, t, 2);
    around(&e, -t, 2);
    add(&e, e.di->min_subnormal);
    add(&e, -e.di->min_subnormal);
    add(&e, 0.0);
    return e.n;
}

/* sigmoid: 1 - s(x) = 1 / (1 + e^x) <= 2^-(p+1) rounds to 1; s(x) ~ e^x reaches
 * min_normal and min_subnormal / 2 on the negative side. */
int nvo_edges_sigmoid(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, log(ldexp(1, prec(&e) + 1) - 1), 2);
    around(&e, -log(1 / e.di->min_normal - 1), 2);
    around(&e, log(e.di->min_subnormal) - M_LN2, 2);
    add(&e, 0.0);
    return e.n;
}

/* ln(-x Phi(x)) for x < 0, Phi(x) = erfc(-x / sqrt 2) / 2. */
static double f_gelu_neg(double x, double target)
{
    return log(-x) + log_erfc(-x / M_SQRT2) - M_LN2 - target; /* increasing */
}

int nvo_edges_gelu(nv_dtype dt, double *out, int max)
{
    START;
    /* gelu(x) = x Phi(x) rounds to x once 1 - Phi(x) = erfc(x / sqrt 2) / 2 <= 2^-(p+1). */
    double t = M_SQRT2 * bisect(f_erfc_sat, -prec(&e) * M_LN2, 0, 40);
    around(&e, t, 2);
    around(&e, bisect(f_gelu_neg, log(e.di->min_normal), -60, -0.5), 2);
    around(&e, bisect(f_gelu_neg, log(e.di->min_subnormal) - M_LN2, -60, -0.5), 2);
    add(&e, 0.0);
    return e.n;
}

/* ln(-x e^x / (1 + e^x)) for x < 0. */
static double f_silu_neg(double x, double target)
{
    return log(-x) + x - log1p(exp(x)) - target; /* increasing */
}

int nvo_edges_silu(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, log(ldexp(1, prec(&e) + 1) - 1), 2);
    around(&e, bisect(f_silu_neg, log(e.di->min_normal), -1200, -1), 2);
    around(&e, bisect(f_silu_neg, log(e.di->min_subnormal) - M_LN2, -1200, -1), 2);
    add(&e, 0.0);
    return e.n;
}

int nvo_edges_sqrt(nv_dtype dt, double *out, int max)
{
    START;
    tiny_and_huge(&e, false);
    add(&e, -0.0);
    add(&e, 1.0);
    add(&e, INFINITY);
    add(&e, -e.di->min_subnormal); /* NaN */
    return e.n;
}

/* 1/x overflows once |x| < 1 / (2^emax (2 - 2^-p)). */
int nvo_edges_reciprocal(nv_dtype dt, double *out, int max)
{
    START;
    double t = ldexp(1 / (1 - ldexp(1, -(prec(&e) + 1))), -(e.di->emax + 1));
    around(&e, t, 2);
    around(&e, -t, 1);
    tiny_and_huge(&e, true);
    return e.n;
}

/* Large arguments and the dt values nearest multiples of pi/2 (where sin or cos
 * is near 0 and the argument reduction must be exact). */
int nvo_edges_trig(nv_dtype dt, double *out, int max)
{
    START;
    static const double k[] = {1, 2, 3, 4, 100, 1000, 10000, 1e6, 1e10};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        double t = k[i] * M_PI_2;
        if (t < e.di->max_finite)
            around(&e, t, 1);
    }
    if (1e4 < e.di->max_finite)
        around(&e, 1e4, 0);
    tiny_and_huge(&e, true);
    return e.n;
}

/* Base values for pow: x near 1 (with large exponents the result is sensitive to
 * every bit of x), 0 and -0 (pole / zero by the sign of y), negative bases (real
 * only for integer y), tiny and huge. */
int nvo_edges_pow(nv_dtype dt, double *out, int max)
{
    START;
    around(&e, 1.0, 2);
    add(&e, 0.0);
    add(&e, -0.0);
    add(&e, -1.0);
    add(&e, -2.0);
    add(&e, -0.5);
    add(&e, e.di->min_subnormal);
    add(&e, e.di->max_finite);
    add(&e, INFINITY);
    return e.n;
}
