/* Input generators: see inputs.h. Each class draws from one Philox stream keyed
 * by (seed, case, tensor) and consumes it in element order, so a tensor's values
 * depend only on the request, never on threads or on other tensors. */
#include "inputs.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "normal_mvec.h"
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
    [NV_IN_OFFSET] = "offset",
    [NV_IN_SWEEP] = "sweep",
    [NV_IN_EXHAUSTIVE] = "exhaustive",
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

/* "exhaustive" enumerates 2^bits encodings: up to 16 bits (65536 values; bf16 and
 * fp16 whole), and fp32's 2^32 for operand 0 of a tensor of at least 2^32
 * elements (a unary op's case, which worker/kinds/op runs in blocks). */
#define EXHAUSTIVE_MAX_BITS 16

static bool exhaustive_fp32(nv_dtype dt, int64_t n)
{
    return dt == NV_DT_FP32 && n >= (INT64_C(1) << 32);
}

int nv_input_class_check(nv_input_class c, nv_dtype dt, int64_t n, char *msg, size_t len)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    if (!di || (int)c < 0 || c >= NV_IN_COUNT) {
        snprintf(msg, len, "unknown input class or dtype");
        return -EINVAL;
    }
    if (c != NV_IN_EXHAUSTIVE)
        return 0;
    if (dt == NV_DT_FP32 && !exhaustive_fp32(dt, n)) {
        snprintf(msg, len,
                 "input class 'exhaustive' over 'fp32' enumerates all 4294967296 encodings: "
                 "give a unary op the shape [65536, 65536]; the tensor has %lld elements (or use "
                 "'sweep': every k-th encoding across its range)",
                 (long long)n);
        return -EINVAL;
    }
    if (di->bits > EXHAUSTIVE_MAX_BITS && dt != NV_DT_FP32) {
        snprintf(msg, len,
                 "input class 'exhaustive' enumerates every encoding and takes dtypes of at most "
                 "%d bits and fp32; '%s' has %d (use 'sweep': every k-th encoding across its "
                 "range)",
                 EXHAUSTIVE_MAX_BITS, di->name, di->bits);
        return -EINVAL;
    }
    int64_t all = (int64_t)1 << di->bits;
    if (n < all) {
        snprintf(msg, len,
                 "input class 'exhaustive' needs at least %lld elements for every encoding of "
                 "'%s'; the tensor has %lld (use a shape of at least %lld elements)",
                 (long long)all, di->name, (long long)n, (long long)all);
        return -EINVAL;
    }
    return 0;
}

/* Generation context shared by the class generators. */
typedef nv_input_gen gen;

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
    nv_dtype dt = g->rq.dtype;
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
    /* fp32 inside its range: C's conversion is IEEE 754 §5.4.2 under round to
     * nearest even (the FP environment's default, which emu_round relies on
     * too), the value round_to gives, without its call. */
    double v = dt == NV_DT_FP32 && fabs(x) <= FLT_MAX ? (double)(float)x
                                                      : round_to(dt, x, NV_ROUND_NEAREST_EVEN);
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

/* gen_normal for count values, with the same draws: each value is one Philox
 * block's four words (nv_rng_normal's two nv_rng_u64), so whole batches of
 * NV_RNG_BATCH blocks are read straight from nv_rng_refill's buffer, and fp32
 * without bounds (fit's only step there is the conversion) converts in place. */
static void gen_normal_n(gen *g, double *out, int64_t count)
{
    nv_rng *r = &g->rng;
    int64_t k = 0;
    if (r->avail % 4 != 0) { /* not at a block's start: one by one (never so here) */
        for (; k < count; k++)
            out[k] = gen_normal(g);
        return;
    }
    bool plain32 = g->rq.dtype == NV_DT_FP32 && g->lo == -INFINITY && g->hi == INFINITY;
    bool vec = plain32 && nvi_normal_mvec_ready();
    double scale = g->di->is_float ? 1 : 16;
    for (; k < count && r->avail > 0; k++)
        out[k] = gen_normal(g);
    uint8_t und[NV_RNG_BATCH];
    for (; count - k >= NV_RNG_BATCH; k += NV_RNG_BATCH) {
        nv_rng_refill(r);
        r->avail = 0;
        if (vec)
            nvi_normal_f32_batch(r->buf, NV_RNG_BATCH, out + k, und);
        for (int j = 0; j < NV_RNG_BATCH; j++) {
            if (vec && !und[j])
                continue;
            const uint32_t *w = r->buf + 4 * j;
            uint64_t a = (uint64_t)w[0] << 32 | w[1], b = (uint64_t)w[2] << 32 | w[3];
            /* nv_rng_normal's expression, term for term. */
            double u1 = 1.0 - (double)(a >> 11) * 0x1p-53;
            double u2 = (double)(b >> 11) * 0x1p-53;
            double v = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
            if (scale != 1)
                v *= scale;
            out[k + j] = plain32 && fabs(v) <= FLT_MAX ? (double)(float)v : fit(g, v);
        }
    }
    for (; k < count; k++)
        out[k] = gen_normal(g);
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

/* Unary ops: specials at even positions, normal values at odd ones. Operand t
 * of an elementwise op of 2 or 3 operands (cross_arity): position i holds tuple
 * k = i mod L^arity of the specials list plus one normal value (L entries),
 * digit t of k in base L, so that every ordered pair or triple of specials, and
 * each special against a normal value in both orders, meets at fixed positions
 * of all operands: (NaN, x) and (x, NaN), (+Inf, -Inf), (+0, -0) and (-0, +0).
 * IEEE 754-2019 defines each: §6.2 NaN propagation, §7.2 invalid operations
 * (inf - inf, 0 x inf, fma(0, inf, c)), §6.3 the sign of zero sums and products,
 * §9.6 maximum/minimum. Specials are not held to the domain: NaN, Inf and
 * signed zeros outside it test the op's special-case rules (§9.2), e.g.
 * log(-Inf) = NaN. */
static void gen_specials(gen *g, double *out, int64_t count)
{
    int64_t i0 = g->pos;
    double sp[16];
    int ns = specials_list(g->di, sp);
    for (int k = 0; k < ns; k++)
        sp[k] = nv_dtype_round(g->rq.dtype, sp[k], &NV_ROUND_DEFAULT, 0);
    int arity = g->rq.domain.cross_arity;
    int t = g->rq.tensor_index;
    if (arity < 2 || t < 0 || t >= arity) {
        for (int64_t k = 0; k < count; k++) {
            int64_t i = i0 + k;
            out[k] = i % 2 == 0 ? sp[(i / 2) % ns] : gen_normal(g);
        }
        return;
    }
    int64_t L = ns + 1, tuples = 1, place = 1;
    for (int a = 0; a < arity; a++)
        tuples *= L;
    for (int a = 0; a < t; a++)
        place *= L;
    for (int64_t k = 0; k < count; k++) {
        int64_t d = ((i0 + k) % tuples) / place % L;
        out[k] = d < ns ? sp[d] : gen_normal(g);
    }
}

/* A midpoint between two neighbours of the narrower target dtype (IEEE 754 §4.3.1:
 * the ties of round-to-nearest), exactly representable in the wider input dtype,
 * or one input ulp beside it. */
static double narrow_midpoint(gen *g, int64_t i)
{
    const nv_dtype_info *ti = nv_dtype_get(g->rq.target);
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
    double v = round_to(g->rq.dtype, mid, NV_ROUND_NEAREST_EVEN);
    if (i % 3 == 1)
        v = nv_inputs_neighbour(g->rq.dtype, v, +1);
    else if (i % 3 == 2)
        v = nv_inputs_neighbour(g->rq.dtype, v, -1);
    return fit(g, v);
}

/* A value of dtype with its last significand bit set: a midpoint of the format
 * one bit narrower. */
static double odd_value(gen *g)
{
    double v = gen_normal(g);
    if (!g->di->is_float || v == 0 || !isfinite(v))
        return v;
    double ulp = nv_dtype_ulp(g->rq.dtype, v);
    double k = v / ulp;
    if (fmod(k, 2) == 0)
        v = fit(g, v + ulp);
    return v;
}

/* The partner's stream of a tie (gen_midpoints): tensor 0's values, regenerated
 * from this request with tensor_index 0 (inputs.h tie_partner). */
static int gen_next(gen *g, double *out, int64_t count);

static int gen_midpoints(gen *g, double *out, int64_t count)
{
    const nv_input_request *rq = &g->rq;
    const nv_dtype_info *ti = nv_dtype_get(rq->target);
    if (ti && ti->is_float && g->di->is_float && ti->mant_bits < g->di->mant_bits) {
        for (int64_t k = 0; k < count; k++)
            out[k] = narrow_midpoint(g, g->pos + k);
        return 0;
    }
    if (rq->domain.tie_partner) {
        /* y = +-ulp(x)/2 puts x + y and x - y exactly on a tie of the output
         * dtype (same as the input's here). */
        int r = gen_next(g->partner, out, count);
        if (r < 0)
            return r;
        for (int64_t k = 0; k < count; k++) {
            double x = out[k];
            double h = isfinite(x) ? nv_dtype_ulp(rq->dtype, x) / 2 : 0;
            double y = round_to(rq->dtype, h, NV_ROUND_NEAREST_EVEN);
            if (y != h)
                y = 2 * h; /* below the subnormal grid: no tie exists */
            out[k] = signed_in_domain(g, y);
        }
        return 0;
    }
    for (int64_t k = 0; k < count; k++)
        out[k] = odd_value(g);
    return 0;
}

/* Runs of reduction_len: groups of four (+big, small, -big, small) whose bigs
 * cancel exactly, so the sum is the sum of the small ones (Higham §4.2: the
 * error of recursive summation scales with sum |x_i|, not with |sum x_i|). */
static void gen_cancellation(gen *g, double *out, int64_t count)
{
    const nv_dtype_info *di = g->di;
    int64_t run = g->rq.reduction_len > 1 ? g->rq.reduction_len : g->n;
    int ebig =
        di->is_float ? (di->mant_bits + 4 < di->emax / 2 ? di->mant_bits + 4 : di->emax / 2) : 10;
    double big = g->carry; /* the run's big value, kept across ranges */
    for (int64_t k = 0; k < count; k++) {
        int64_t j = (g->pos + k) % run;
        int64_t grp = j / 4 * 4;
        bool whole = grp + 4 <= run;
        int pos = (int)(j % 4);
        if (whole && pos == 0) {
            big = fit(g, signed_in_domain(g, ldexp(1 + nv_rng_uniform(&g->rng), ebig)));
            out[k] = big;
        } else if (whole && pos == 2) {
            double nb = round_to(g->rq.dtype, -big, NV_ROUND_NEAREST_EVEN);
            out[k] = (nb >= g->lo && nb <= g->hi) ? nb : big;
        } else {
            out[k] = gen_normal(g);
        }
    }
    g->carry = big;
}

/* Up to 512 edges per op and dtype (tanh's regime changes in fp64: 397). */
#define MAX_EDGES 512

static void gen_domain_edges(gen *g, double *out, int64_t count)
{
    static _Thread_local double edges[MAX_EDGES], list[3 * MAX_EDGES];
    int ne = 0, nl = 0;
    if (g->rq.domain.edges)
        ne = g->rq.domain.edges(g->rq.dtype, edges, MAX_EDGES);
    if (ne > MAX_EDGES)
        ne = MAX_EDGES;
    for (int k = 0; k < ne; k++) {
        double e = round_to(g->rq.dtype, edges[k], NV_ROUND_NEAREST_EVEN);
        list[nl++] = e;
        list[nl++] = nv_inputs_neighbour(g->rq.dtype, e, +1);
        list[nl++] = nv_inputs_neighbour(g->rq.dtype, e, -1);
    }
    for (int64_t k = 0; k < count; k++)
        out[k] = nl > 0 ? list[(g->pos + k) % nl] : gen_normal(g);
}

/* The offset-to-spread ratio R of "offset" in dt: 10^4 (|mean| >> sigma, so that
 * E[x^2] - E[x]^2 in fp32 loses about R^2 2^-24 = 6 times the variance to
 * cancellation, Chan, Golub & LeVeque 1983; Higham §1.9), but at most 2^(p-4) so
 * that the spread stays 8 ulps of the offset or more (bf16: 16, fp16: 128). */
static double offset_ratio(const nv_dtype_info *di)
{
    if (!di->is_float)
        return di->bits == 8 ? 32 : 1e4;
    return fmax(1, fmin(1e4, ldexp(1, di->mant_bits + 1 - 4)));
}

/* Runs of reduction_len (rows along the reduction axis; the whole tensor when
 * there is none): each row draws an offset c with |c| in [R, 2R) and a sign the
 * domain allows, then x = c + N(0, 1). Per-channel parameters get normal values. */
static void gen_offset(gen *g, double *out, int64_t count)
{
    if (g->rq.domain.param) {
        for (int64_t k = 0; k < count; k++)
            out[k] = gen_normal(g);
        return;
    }
    int64_t run = g->rq.reduction_len > 1 ? g->rq.reduction_len : g->n;
    double R = offset_ratio(g->di), c = g->carry; /* the row's offset, kept across ranges */
    for (int64_t k = 0; k < count; k++) {
        if ((g->pos + k) % run == 0)
            c = signed_in_domain(g, R * (1 + nv_rng_uniform(&g->rng)));
        out[k] = fit(g, c + nv_rng_normal(&g->rng));
    }
    g->carry = c;
}

/* A dtype's encodings by magnitude ordinal: the non-negative finite values in
 * increasing order are ordinals 0 .. count - 1, encoded as ordinal x step (the
 * magnitude bits of an IEEE-like format order as its values, IEEE 754-2019
 * §3.4; tf32 keeps its 19 bits at the top of a 32-bit container), the sign bit
 * added for the negative ones. Integers: 0 .. 2^(bits-1) - 1 and their negative
 * counterparts -1 .. -2^(bits-1). */
typedef struct ordinals {
    uint64_t count, step, sign;
    bool is_int, two_signs;
} ordinals;

static ordinals ordinals_of(const gen *g)
{
    const nv_dtype_info *di = g->di;
    nv_dtype dt = g->rq.dtype;
    ordinals o = {.is_int = !di->is_float, .two_signs = di->is_signed, .step = 1};
    if (o.is_int) {
        o.count = (uint64_t)1 << (di->bits - 1);
        return o;
    }
    if (di->has_subnormals && di->min_subnormal < di->min_normal)
        o.step = nv_dtype_encode(dt, di->min_subnormal, &NV_ROUND_DEFAULT, 0);
    if (o.step == 0)
        o.step = 1;
    o.count = nv_dtype_encode(dt, di->max_finite, &NV_ROUND_DEFAULT, 0) / o.step + 1;
    o.sign = di->is_signed ? nv_dtype_encode(dt, -0.0, &NV_ROUND_DEFAULT, 0) : 0;
    return o;
}

static double ordinal_value(const gen *g, const ordinals *o, uint64_t k, bool neg)
{
    if (o->is_int)
        return neg ? -(double)k - 1 : (double)k;
    uint64_t e = k * o->step | (neg ? o->sign : 0);
    return g->rq.dtype == NV_DT_FP32 ? nv_dtype_decode_fp32((uint32_t)e)
                                     : nv_dtype_decode(g->rq.dtype, e, false);
}

/* Every k-th encoding, both signs: element i of n is sign i mod 2 (+ first) and
 * ordinal round(j (count - 1) / (m - 1)) of the m = ceil(n / 2) per sign, j = i / 2:
 * k = (count - 1) / (m - 1), from +-0 to +-max_finite; with m >= count every
 * encoding, cycled. Deterministic (no random draws): the seed does not change
 * it. Operand t > 0 of a multi-input op reads the sequence rotated by an odd
 * offset near 0.382 t n, which pairs each value with one far along the range and
 * of the other sign. Not held to the domain (like "specials"). */
/* The signed ordinal of a finite value x of the dtype: k for +x at
 * magnitude ordinal k, -k - 1 for -x (so -0 is -1, +0 is 0). */
static int64_t signed_ordinal(const gen *g, const ordinals *o, double x)
{
    uint64_t b = nv_dtype_encode(g->rq.dtype, x, &NV_ROUND_DEFAULT, 0);
    bool neg = o->two_signs && signbit(x);
    int64_t k = (int64_t)((neg ? b & ~o->sign : b) / o->step);
    return neg ? -k - 1 : k;
}

/* The value of the dtype nearest x on the side dir (> 0: the smallest >= x,
 * < 0: the largest <= x), within +-max_finite. */
static double bound_in_dtype(const gen *g, double x, int dir)
{
    double m = g->di->max_finite;
    x = x > m ? m : x < -m ? -m : x;
    double v = nv_dtype_round(g->rq.dtype, x, &NV_ROUND_DEFAULT, 0);
    if (v > m || v < -m)
        v = copysign(m, v);
    if ((dir > 0 && v < x) || (dir < 0 && v > x))
        v = nv_inputs_neighbour(g->rq.dtype, v, dir);
    if (v == 0 && x == 0)
        v = x; /* keeps the requested zero's sign */
    return v;
}

__extension__ typedef unsigned __int128 u128;

/* A job's "sweep" at a stride (nv_sweep, inputs.h): element i holds signed
 * ordinal first + (i * stride) mod span of [from, to] in the dtype; operand
 * t > 0 reads the sequence rotated as the default sweep does. */
static void gen_sweep_stride(gen *g, const ordinals *o, double *out, int64_t count)
{
    const nv_sweep *sw = &g->rq.sweep;
    int64_t first = signed_ordinal(g, o, bound_in_dtype(g, sw->from, 1));
    int64_t last = signed_ordinal(g, o, bound_in_dtype(g, sw->to, -1));
    if (!o->two_signs && first < 0)
        first = 0;
    /* In unsigned arithmetic: fp64's signed ordinals span more than int64. */
    uint64_t span = last >= first ? (uint64_t)last - (uint64_t)first + 1 : 1;
    int64_t n = g->n;
    int t = g->rq.tensor_index > 0 ? g->rq.tensor_index : 0;
    int64_t rot = n > 1 ? ((int64_t)((double)n * 0.381966 * t) | 1) % n : 0;
    uint64_t step = (uint64_t)sw->stride % span, off = 0, prev = 0;
    for (int64_t q = 0; q < count; q++) {
        int64_t i = g->pos + q;
        uint64_t p = (uint64_t)(t > 0 ? (i + rot) % n : i);
        /* (p step) mod span, from the previous element's when p follows it:
         * both terms are below span, so one subtraction reduces the sum
         * (taken before the add, which could pass 2^64). */
        if (q > 0 && p == prev + 1)
            off = off >= span - step ? off - (span - step) : off + step;
        else
            off = (uint64_t)(((u128)p * step) % span); /* p * step may pass 2^64 */
        prev = p;
        int64_t k = (int64_t)((uint64_t)first + off); /* first + off lies in [first, last] */
        out[q] = ordinal_value(g, o, (uint64_t)(k < 0 ? -k - 1 : k), k < 0);
    }
}

static void gen_sweep(gen *g, double *out, int64_t count)
{
    int64_t n = g->n;
    ordinals o = ordinals_of(g);
    if (g->rq.sweep.stride > 0 && !o.is_int) {
        gen_sweep_stride(g, &o, out, count);
        return;
    }
    int64_t m = o.two_signs ? (n + 1) / 2 : n;
    int t = g->rq.tensor_index > 0 ? g->rq.tensor_index : 0;
    int64_t rot = n > 1 ? ((int64_t)((double)n * 0.381966 * t) | 1) % n : 0;
    for (int64_t q = 0; q < count; q++) {
        int64_t i = g->pos + q;
        int64_t p = t > 0 ? (i + rot) % n : i;
        bool neg = o.two_signs && (p & 1);
        uint64_t j = (uint64_t)(o.two_signs ? p / 2 : p), k;
        if ((uint64_t)m >= o.count)
            k = j % o.count;
        else if (m < 2)
            k = 0;
        else {
            double f = (double)j * (double)(o.count - 1) / (double)(m - 1);
            k = f >= (double)(o.count - 1) ? o.count - 1 : (uint64_t)f;
        }
        out[q] = ordinal_value(g, &o, k, neg);
    }
}

/* Every encoding of a dtype of at most 16 bits, NaNs and infinities included:
 * with B = 2^bits, operand 0 holds encoding i mod B at element i; operand t > 0
 * holds (i / B^t + G_t (i mod B)) mod B (G_t odd, so each block of B elements
 * is again every encoding), and B^2 elements give every ordered pair of a
 * binary op. Deterministic; not held to the domain. */
static int gen_exhaustive(gen *g, double *out, int64_t count)
{
    static const uint64_t G[] = {0, 0x9E3779B9u, 0x85EBCA6Bu, 0xC2B2AE35u};
    if (g->di->bits > EXHAUSTIVE_MAX_BITS && !(exhaustive_fp32(g->rq.dtype, g->n) &&
                                               g->rq.tensor_index == 0))
        return -EINVAL;
    int bits = g->di->bits;
    uint64_t mask = ((uint64_t)1 << bits) - 1; /* B - 1: B is a power of two */
    int t = g->rq.tensor_index > 0 ? g->rq.tensor_index % 4 : 0;
    if (g->rq.dtype == NV_DT_FP32 && t == 0) { /* all 2^32 of them */
        for (int64_t k = 0; k < count; k++)
            out[k] = nv_dtype_decode_fp32((uint32_t)(g->pos + k));
        return 0;
    }
    for (int64_t k = 0; k < count; k++) {
        uint64_t u = (uint64_t)(g->pos + k), e = u & mask;
        if (t > 0) {
            uint64_t q = u;
            for (int a = 0; a < t; a++)
                q >>= bits;
            e = (q + G[t] * e) & mask;
        }
        out[k] = nv_dtype_decode(g->rq.dtype, e, false);
    }
    return 0;
}

/* Matmul scales (the tensors after the op's n_inputs): e8m0 powers of two
 * 2^k, k in [-4, 4] (OCP MX v1.0 §5.1: E8M0 encodes 2^(e - 127)), or fp32 scales
 * in [0.5, 2]. */
static void gen_scales(gen *g, double *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (g->rq.dtype == NV_DT_E8M0)
            out[i] = ldexp(1, (int)(nv_rng_u32(&g->rng) % 9) - 4);
        else
            out[i] =
                round_to(g->rq.dtype, 0.5 + 1.5 * nv_rng_uniform(&g->rng), NV_ROUND_NEAREST_EVEN);
    }
}

/* The next count values of g (every class but the index and scale roles reads
 * its position g->pos only through the element index). */
static int gen_next(gen *g, double *out, int64_t count)
{
    const nv_input_request *rq = &g->rq;
    const nv_input_domain *d = &rq->domain;
    int r = 0;
    if (d->role == NV_INPUT_INDEX) {
        int64_t range = rq->index_range > 0 ? rq->index_range : 1;
        for (int64_t k = 0; k < count; k++)
            out[k] = (double)(nv_rng_u64(&g->rng) % (uint64_t)range);
    } else if (d->role == NV_INPUT_SCALE) {
        gen_scales(g, out, count);
    } else {
        switch (rq->cls) {
        case NV_IN_NORMAL:
            gen_normal_n(g, out, count);
            break;
        case NV_IN_UNIFORM:
            for (int64_t k = 0; k < count; k++)
                out[k] = gen_uniform(g);
            break;
        case NV_IN_NEAR_ZERO:
            for (int64_t k = 0; k < count; k++)
                out[k] = gen_near_zero(g);
            break;
        case NV_IN_LARGE:
            for (int64_t k = 0; k < count; k++)
                out[k] = gen_large(g);
            break;
        case NV_IN_SPECIALS:
            gen_specials(g, out, count);
            break;
        case NV_IN_MIDPOINTS:
            r = gen_midpoints(g, out, count);
            break;
        case NV_IN_CANCELLATION:
            gen_cancellation(g, out, count);
            break;
        case NV_IN_DOMAIN_EDGES:
            gen_domain_edges(g, out, count);
            break;
        case NV_IN_OFFSET:
            gen_offset(g, out, count);
            break;
        case NV_IN_SWEEP:
        case NV_IN_EXHAUSTIVE:
            if (d->param) {
                for (int64_t k = 0; k < count; k++)
                    out[k] = gen_normal(g);
            } else if (rq->cls == NV_IN_EXHAUSTIVE) {
                r = gen_exhaustive(g, out, count);
            } else {
                gen_sweep(g, out, count);
            }
            break;
        default:
            r = -EINVAL;
        }
    }
    if (r == 0)
        g->pos += count;
    return r;
}

static int gen_init(gen *g, const nv_input_request *rq, int64_t n, gen *partner)
{
    *g = (gen){.rq = *rq, .di = nv_dtype_get(rq->dtype), .lo = -INFINITY, .hi = INFINITY, .n = n};
    if (!g->di || !nv_dtype_get(rq->target))
        return -EINVAL;
    if (rq->cls == NV_IN_EXHAUSTIVE && !rq->domain.param && rq->domain.role == NV_INPUT_VALUES &&
        g->di->bits > EXHAUSTIVE_MAX_BITS && !(exhaustive_fp32(rq->dtype, n) && rq->tensor_index == 0))
        return -EINVAL;
    nv_rng_init(&g->rng, rq->seed, rq->case_index, (uint32_t)rq->tensor_index);
    if (rq->domain.bounded) {
        g->lo = rq->domain.lo;
        g->hi = rq->domain.hi;
    }
    if (partner && rq->domain.role == NV_INPUT_VALUES && rq->cls == NV_IN_MIDPOINTS &&
        rq->domain.tie_partner) {
        nv_input_request r0 = *rq;
        r0.tensor_index = 0;
        r0.domain.tie_partner = false;
        int r = gen_init(partner, &r0, n, NULL);
        if (r < 0)
            return r;
        g->partner = partner;
    }
    return 0;
}

int nv_inputs_stream_init(nv_input_stream *s, const nv_input_request *rq, int64_t n)
{
    if (!s || !rq || (int)rq->cls < 0 || rq->cls >= NV_IN_COUNT || n < 0)
        return -EINVAL;
    return gen_init(&s->g, rq, n, &s->partner);
}

int nv_inputs_stream_next(nv_input_stream *s, double *out, int64_t count)
{
    assert(out || count <= 0);
    if (!s || count < 0 || count > s->g.n - s->g.pos)
        return -EINVAL;
    return gen_next(&s->g, out, count);
}

/* Classes whose element i is a function of i alone: "normal" reads one
 * Philox block per value (nv_rng_normal's four words, then fit, a function of
 * the value), so value i is block i; "exhaustive" and "sweep" read the
 * position only (sweep's param form draws normals). Index and scale roles and
 * every other class draw a varying number of words. */
bool nv_inputs_stream_seekable(const nv_input_stream *s)
{
    const nv_input_request *rq = &s->g.rq;
    if (rq->domain.role != NV_INPUT_VALUES)
        return false;
    return rq->cls == NV_IN_NORMAL || rq->cls == NV_IN_EXHAUSTIVE || rq->cls == NV_IN_SWEEP;
}

int nv_inputs_stream_seek(nv_input_stream *s, int64_t pos)
{
    if (!s || !nv_inputs_stream_seekable(s) || pos < 0 || pos > s->g.n)
        return -EINVAL;
    s->g.pos = pos;
    s->g.rng.ctr[0] = (uint32_t)pos; /* block pos of the stream: nv_rng_init's counter */
    s->g.rng.ctr[1] = (uint32_t)((uint64_t)pos >> 32);
    s->g.rng.avail = 0;
    return 0;
}

int nv_inputs_generate(const nv_input_request *rq, double *out, int64_t n)
{
    assert(out || n <= 0);
    nv_input_stream s;
    int r = nv_inputs_stream_init(&s, rq, n);
    return r < 0 ? r : nv_inputs_stream_next(&s, out, n);
}
