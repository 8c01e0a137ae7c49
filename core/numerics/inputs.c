/* Input generators: see inputs.h. Each class draws from one Philox stream keyed
 * by (seed, case, tensor) and consumes it in element order, so a tensor's values
 * depend only on the request, never on threads or on other tensors. */
#include "inputs.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "rng.h"

static const char *const class_names[NV_IN_COUNT] = {
    [NV_IN_NORMAL] = "normal",
    [NV_IN_UNIFORM] = "uniform",
    [NV_IN_NEAR_ZERO] = "near_zero",
    [NV_IN_LARGE] = "large",
    [NV_IN_SPECIALS] = "specials",
    [NV_IN_MIDPOINTS] = "midpoints",
    [NV_IN_CANCELLATION] = "cancellation",
    [NV_IN_DOMAIN_EDGES] = "domain_edges",
};

const char *nv_input_class_name(nv_input_class c)
{
    if ((int)c < 0 || c >= NV_IN_COUNT)
        return NULL;
    return class_names[c];
}

int nv_input_class_from_name(const char *name, nv_input_class *ret)
{
    assert(ret);
    if (!name)
        return -EINVAL;
    for (int c = 0; c < NV_IN_COUNT; c++) {
        if (strcmp(name, class_names[c]) == 0) {
            *ret = (nv_input_class)c;
            return 0;
        }
    }
    return -EINVAL;
}

/* Generation context shared by the class generators. */
typedef struct gen {
    const nv_input_request *rq;
    const nv_dtype_info *di;
    nv_rng rng;
    double lo, hi; /* real domain of this input */
} gen;

static double round_to(nv_dtype dt, double x, nv_rounding rounding)
{
    nv_round_mode m = {.rounding = rounding, .saturate = true, .ftz = false};
    return nv_dtype_round(dt, x, &m, 0);
}

double nv_inputs_neighbour(nv_dtype dt, double x, int dir)
{
    if (isnan(x) || isinf(x))
        return x;
    /* The next double beyond x rounded outward is the next value of dt: x is in
     * dt and dt's grid is a subset of fp64's (dtype.h). */
    if (dir > 0)
        return round_to(dt, nextafter(x, INFINITY), NV_ROUND_UP);
    return round_to(dt, nextafter(x, -INFINITY), NV_ROUND_DOWN);
}

/* Map x into [lo, hi] (reflecting at a finite edge, wrapping when both are
 * finite), round it to the dtype, and step back inside when rounding left. */
static double fit(const gen *g, double x)
{
    nv_dtype dt = g->rq->dtype;
    if (isnan(x))
        return x;
    double lo = g->lo, hi = g->hi;
    if (x < lo || x > hi) {
        if (isfinite(lo) && isfinite(hi))
            x = lo + fmod(fabs(x - lo), hi - lo);
        else if (isfinite(lo))
            x = lo + fabs(x - lo);
        else
            x = hi - fabs(hi - x);
    }
    double v = round_to(dt, x, NV_ROUND_NEAREST_EVEN);
    if (v < lo)
        v = round_to(dt, lo, NV_ROUND_UP);
    if (v > hi)
        v = round_to(dt, hi, NV_ROUND_DOWN);
    return v;
}

/* A random sign allowed by the domain. */
static double signed_in_domain(gen *g, double mag)
{
    bool neg = nv_rng_u32(&g->rng) & 1;
    if (g->lo >= 0)
        neg = false;
    else if (g->hi <= 0)
        neg = true;
    return neg ? -mag : mag;
}

static double gen_normal(gen *g)
{
    double v = nv_rng_normal(&g->rng);
    if (!g->di->is_float)
        v *= 16; /* integers: a spread of small values, not just -2..2 */
    return fit(g, v);
}

static double gen_uniform(gen *g)
{
    double a = fmax(g->lo, -4), b = fmin(g->hi, 4);
    if (!(a < b)) {
        if (isfinite(g->lo)) {
            a = g->lo;
            b = isfinite(g->hi) ? g->hi : g->lo + 4;
        } else {
            b = g->hi;
            a = g->hi - 4;
        }
    }
    return fit(g, a + (b - a) * nv_rng_uniform(&g->rng));
}

static double gen_near_zero(gen *g)
{
    const nv_dtype_info *di = g->di;
    double u = nv_rng_uniform(&g->rng);
    bool sub = nv_rng_u32(&g->rng) & 1;
    if (!di->is_float)
        return fit(g, signed_in_domain(g, (double)(nv_rng_u32(&g->rng) % 2)));
    double mag;
    if (sub && di->has_subnormals && di->min_subnormal < di->min_normal) {
        /* A random subnormal: a multiple k of the smallest one, 1 <= k < 2^mant. */
        double steps = di->min_normal / di->min_subnormal - 1;
        mag = di->min_subnormal * (1 + floor(u * steps));
    } else {
        /* The lowest 8 binades of normals: 2^e (1 + f), e in [emin, emin + 8). */
        int e = di->emin + (int)(nv_rng_u32(&g->rng) % 8);
        mag = ldexp(1 + u, e);
    }
    return fit(g, signed_in_domain(g, mag));
}

static double gen_large(gen *g)
{
    const nv_dtype_info *di = g->di;
    double u = nv_rng_uniform(&g->rng);
    double top = di->is_float ? di->max_finite : (di->bits == 8 ? 127 : 2147483647.0);
    return fit(g, signed_in_domain(g, top * exp2(-4 * u)));
}

/* The specials list of dtype (formats without Inf or NaN skip them). */
static int specials_list(const nv_dtype_info *di, double *out)
{
    int n = 0;
    if (!di->is_float) {
        double top = di->bits == 8 ? 127 : 2147483647.0;
        out[n++] = 0;
        out[n++] = 1;
        out[n++] = -1;
        out[n++] = top;
        out[n++] = -top - 1;
        return n;
    }
    if (di->has_nan)
        out[n++] = NAN;
    if (di->has_inf) {
        out[n++] = INFINITY;
        out[n++] = -INFINITY;
    }
    out[n++] = 0.0;
    out[n++] = -0.0;
    out[n++] = di->min_subnormal;
    out[n++] = -di->min_subnormal;
    out[n++] = di->max_finite;
    out[n++] = -di->max_finite;
    return n;
}

/* Specials at even positions, normal values at odd ones. Specials are not held
 * to the domain: NaN, Inf and signed zeros outside it test the op's IEEE 754
 * special-case rules (§9.2), e.g. log(-Inf) = NaN. */
static void gen_specials(gen *g, double *out, int64_t n)
{
    double sp[16];
    int ns = specials_list(g->di, sp);
    for (int64_t i = 0; i < n; i++) {
        if (i % 2 == 0)
            out[i] = nv_dtype_round(g->rq->dtype, sp[(i / 2) % ns], &NV_ROUND_DEFAULT, 0);
        else
            out[i] = gen_normal(g);
    }
}

/* A midpoint between two neighbours of the narrower target dtype (IEEE 754 §4.3.1:
 * the ties of round-to-nearest), exactly representable in the wider input dtype,
 * or one input ulp beside it. */
static double narrow_midpoint(gen *g, int64_t i)
{
    const nv_dtype_info *ti = nv_dtype_get(g->rq->target);
    const nv_dtype_info *di = g->di;
    int tm = ti->mant_bits;
    double mid;
    if (i % 8 == 7 && ti->has_subnormals && ti->min_subnormal < ti->min_normal) {
        /* Subnormal range of the target: (k + 1/2) min_subnormal. */
        double k = nv_rng_u32(&g->rng) % (1u << (tm > 20 ? 20 : tm));
        mid = (k + 0.5) * ti->min_subnormal;
    } else {
        int elo = ti->emin > di->emin + 1 ? ti->emin : di->emin + 1;
        int ehi = ti->emax < di->emax ? ti->emax : di->emax;
        if (elo < -10)
            elo = -10;
        if (ehi > 10)
            ehi = 10;
        if (ehi < elo)
            ehi = elo;
        int e = elo + (int)(nv_rng_u32(&g->rng) % (uint32_t)(ehi - elo + 1));
        double m = (double)((1ull << tm) + (nv_rng_u64(&g->rng) & ((1ull << tm) - 1)));
        mid = ldexp(m + 0.5, e - tm);
    }
    mid = signed_in_domain(g, mid);
    double v = round_to(g->rq->dtype, mid, NV_ROUND_NEAREST_EVEN);
    if (i % 3 == 1)
        v = nv_inputs_neighbour(g->rq->dtype, v, +1);
    else if (i % 3 == 2)
        v = nv_inputs_neighbour(g->rq->dtype, v, -1);
    return fit(g, v);
}

/* A value of dtype with its last significand bit set: a midpoint of the format
 * one bit narrower. */
static double odd_value(gen *g)
{
    double v = gen_normal(g);
    if (!g->di->is_float || v == 0 || !isfinite(v))
        return v;
    double ulp = nv_dtype_ulp(g->rq->dtype, v);
    double k = v / ulp;
    if (fmod(k, 2) == 0)
        v = fit(g, v + ulp);
    return v;
}

static int gen_midpoints(gen *g, double *out, int64_t n)
{
    const nv_input_request *rq = g->rq;
    const nv_dtype_info *ti = nv_dtype_get(rq->target);
    if (ti && ti->is_float && g->di->is_float && ti->mant_bits < g->di->mant_bits) {
        for (int64_t i = 0; i < n; i++)
            out[i] = narrow_midpoint(g, i);
        return 0;
    }
    if (rq->domain.tie_partner) {
        /* y = +-ulp(x)/2 puts x + y and x - y exactly on a tie of the output
         * dtype (same as the input's here). */
        nv_input_request r0 = *rq;
        r0.tensor_index = 0;
        r0.domain.tie_partner = false;
        int r = nv_inputs_generate(&r0, out, n);
        if (r < 0)
            return r;
        for (int64_t i = 0; i < n; i++) {
            double x = out[i];
            double h = isfinite(x) ? nv_dtype_ulp(rq->dtype, x) / 2 : 0;
            double y = round_to(rq->dtype, h, NV_ROUND_NEAREST_EVEN);
            if (y != h)
                y = 2 * h; /* below the subnormal grid: no tie exists */
            out[i] = signed_in_domain(g, y);
        }
        return 0;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = odd_value(g);
    return 0;
}

/* Runs of reduction_len: groups of four (+big, small, -big, small) whose bigs
 * cancel exactly, so the sum is the sum of the small ones (Higham §4.2: the
 * error of recursive summation scales with sum |x_i|, not with |sum x_i|). */
static void gen_cancellation(gen *g, double *out, int64_t n)
{
    const nv_dtype_info *di = g->di;
    int64_t run = g->rq->reduction_len > 1 ? g->rq->reduction_len : n;
    int ebig =
        di->is_float ? (di->mant_bits + 4 < di->emax / 2 ? di->mant_bits + 4 : di->emax / 2) : 10;
    double big = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i % run;
        int64_t grp = j / 4 * 4;
        bool whole = grp + 4 <= run;
        int pos = (int)(j % 4);
        if (whole && pos == 0) {
            big = fit(g, signed_in_domain(g, ldexp(1 + nv_rng_uniform(&g->rng), ebig)));
            out[i] = big;
        } else if (whole && pos == 2) {
            double nb = round_to(g->rq->dtype, -big, NV_ROUND_NEAREST_EVEN);
            out[i] = (nb >= g->lo && nb <= g->hi) ? nb : big;
        } else {
            out[i] = gen_normal(g);
        }
    }
}

static void gen_domain_edges(gen *g, double *out, int64_t n)
{
    double edges[64], list[192];
    int ne = 0, nl = 0;
    if (g->rq->domain.edges)
        ne = g->rq->domain.edges(g->rq->dtype, edges, 64);
    if (ne > 64)
        ne = 64;
    for (int k = 0; k < ne; k++) {
        double e = round_to(g->rq->dtype, edges[k], NV_ROUND_NEAREST_EVEN);
        list[nl++] = e;
        list[nl++] = nv_inputs_neighbour(g->rq->dtype, e, +1);
        list[nl++] = nv_inputs_neighbour(g->rq->dtype, e, -1);
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = nl > 0 ? list[i % nl] : gen_normal(g);
}

/* Matmul scales (the tensors after the op's n_inputs): e8m0 powers of two
 * 2^k, k in [-4, 4] (OCP MX v1.0 §5.1: E8M0 encodes 2^(e - 127)), or fp32 scales
 * in [0.5, 2]. */
static void gen_scales(gen *g, double *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (g->rq->dtype == NV_DT_E8M0)
            out[i] = ldexp(1, (int)(nv_rng_u32(&g->rng) % 9) - 4);
        else
            out[i] =
                round_to(g->rq->dtype, 0.5 + 1.5 * nv_rng_uniform(&g->rng), NV_ROUND_NEAREST_EVEN);
    }
}

int nv_inputs_generate(const nv_input_request *rq, double *out, int64_t n)
{
    assert(out || n <= 0);
    if (!rq || (int)rq->cls < 0 || rq->cls >= NV_IN_COUNT || n < 0)
        return -EINVAL;
    gen g = {.rq = rq, .di = nv_dtype_get(rq->dtype), .lo = -INFINITY, .hi = INFINITY};
    if (!g.di || !nv_dtype_get(rq->target))
        return -EINVAL;
    nv_rng_init(&g.rng, rq->seed, rq->case_index, (uint32_t)rq->tensor_index);
    const nv_input_domain *d = &rq->domain;
    if (d->role == NV_INPUT_INDEX) {
        int64_t range = rq->index_range > 0 ? rq->index_range : 1;
        for (int64_t i = 0; i < n; i++)
            out[i] = (double)(nv_rng_u64(&g.rng) % (uint64_t)range);
        return 0;
    }
    if (d->role == NV_INPUT_SCALE) {
        gen_scales(&g, out, n);
        return 0;
    }
    if (d->bounded) {
        g.lo = d->lo;
        g.hi = d->hi;
    }
    switch (rq->cls) {
    case NV_IN_NORMAL:
    case NV_IN_UNIFORM:
    case NV_IN_NEAR_ZERO:
    case NV_IN_LARGE:
        for (int64_t i = 0; i < n; i++) {
            if (rq->cls == NV_IN_NORMAL)
                out[i] = gen_normal(&g);
            else if (rq->cls == NV_IN_UNIFORM)
                out[i] = gen_uniform(&g);
            else if (rq->cls == NV_IN_NEAR_ZERO)
                out[i] = gen_near_zero(&g);
            else
                out[i] = gen_large(&g);
        }
        return 0;
    case NV_IN_SPECIALS:
        gen_specials(&g, out, n);
        return 0;
    case NV_IN_MIDPOINTS:
        return gen_midpoints(&g, out, n);
    case NV_IN_CANCELLATION:
        gen_cancellation(&g, out, n);
        return 0;
    case NV_IN_DOMAIN_EDGES:
        gen_domain_edges(&g, out, n);
        return 0;
    default:
        return -EINVAL;
    }
}
