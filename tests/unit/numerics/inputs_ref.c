/* The input generators as they were before blocked streaming and batched
 * Philox (core/numerics/inputs.c and rng.c at commit 4590ab8, one scalar Philox
 * block at a time), kept verbatim but for the names: the oracle that
 * test-inputs-stream.c holds the current generators to, value for value. */
#include "inputs_ref.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct ref_rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int avail;
} ref_rng;

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

static void ref_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static void ref_rng_init(ref_rng *r, uint64_t seed, uint32_t case_index, uint32_t tensor_index)
{
    assert(r);
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    /* ctr[0..1]: 64-bit block count; ctr[2..3]: which case and tensor. */
    r->ctr[0] = 0;
    r->ctr[1] = 0;
    r->ctr[2] = case_index;
    r->ctr[3] = tensor_index;
    r->avail = 0;
}

static uint32_t ref_rng_u32(ref_rng *r)
{
    if (r->avail == 0) {
        ref_philox(r->ctr, r->key, r->buf);
        if (++r->ctr[0] == 0)
            r->ctr[1]++;
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

static uint64_t ref_rng_u64(ref_rng *r)
{
    uint64_t hi = ref_rng_u32(r);
    return (hi << 32) | ref_rng_u32(r);
}

static double ref_rng_uniform(ref_rng *r)
{
    return (double)(ref_rng_u64(r) >> 11) * 0x1p-53;
}

static double ref_rng_normal(ref_rng *r)
{
    /* Box-Muller (1958): u1 in (0, 1] keeps the log finite. One of the pair is
     * used so that the stream position depends only on the number of draws. */
    double u1 = 1.0 - ref_rng_uniform(r);
    double u2 = ref_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* "exhaustive" enumerates 2^bits encodings: up to 16 bits (65536 values; bf16 and
 * fp16 whole). fp32's 2^32 belong to a bulk path of their own. */
#define EXHAUSTIVE_MAX_BITS 16

/* Generation context shared by the class generators. */
typedef struct gen {
    const nv_input_request *rq;
    const nv_dtype_info *di;
    ref_rng rng;
    double lo, hi; /* real domain of this input */
} gen;

static double round_to(nv_dtype dt, double x, nv_rounding rounding)
{
    nv_round_mode m = {.rounding = rounding, .saturate = true, .ftz = false};
    return nv_dtype_round(dt, x, &m, 0);
}

static double ref_neighbour(nv_dtype dt, double x, int dir)
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
    bool neg = ref_rng_u32(&g->rng) & 1;
    if (g->lo >= 0)
        neg = false;
    else if (g->hi <= 0)
        neg = true;
    return neg ? -mag : mag;
}

static double gen_normal(gen *g)
{
    double v = ref_rng_normal(&g->rng);
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
    return fit(g, a + (b - a) * ref_rng_uniform(&g->rng));
}

static double gen_near_zero(gen *g)
{
    const nv_dtype_info *di = g->di;
    double u = ref_rng_uniform(&g->rng);
    bool sub = ref_rng_u32(&g->rng) & 1;
    if (!di->is_float)
        return fit(g, signed_in_domain(g, (double)(ref_rng_u32(&g->rng) % 2)));
    double mag;
    if (sub && di->has_subnormals && di->min_subnormal < di->min_normal) {
        /* A random subnormal: a multiple k of the smallest one, 1 <= k < 2^mant. */
        double steps = di->min_normal / di->min_subnormal - 1;
        mag = di->min_subnormal * (1 + floor(u * steps));
    } else {
        /* The lowest 8 binades of normals: 2^e (1 + f), e in [emin, emin + 8). */
        int e = di->emin + (int)(ref_rng_u32(&g->rng) % 8);
        mag = ldexp(1 + u, e);
    }
    return fit(g, signed_in_domain(g, mag));
}

static double gen_large(gen *g)
{
    const nv_dtype_info *di = g->di;
    double u = ref_rng_uniform(&g->rng);
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
static void gen_specials(gen *g, double *out, int64_t n)
{
    double sp[16];
    int ns = specials_list(g->di, sp);
    for (int k = 0; k < ns; k++)
        sp[k] = nv_dtype_round(g->rq->dtype, sp[k], &NV_ROUND_DEFAULT, 0);
    int arity = g->rq->domain.cross_arity;
    int t = g->rq->tensor_index;
    if (arity < 2 || t < 0 || t >= arity) {
        for (int64_t i = 0; i < n; i++)
            out[i] = i % 2 == 0 ? sp[(i / 2) % ns] : gen_normal(g);
        return;
    }
    int64_t L = ns + 1, tuples = 1, place = 1;
    for (int a = 0; a < arity; a++)
        tuples *= L;
    for (int a = 0; a < t; a++)
        place *= L;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = (i % tuples) / place % L;
        out[i] = d < ns ? sp[d] : gen_normal(g);
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
        double k = ref_rng_u32(&g->rng) % (1u << (tm > 20 ? 20 : tm));
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
        int e = elo + (int)(ref_rng_u32(&g->rng) % (uint32_t)(ehi - elo + 1));
        double m = (double)((1ull << tm) + (ref_rng_u64(&g->rng) & ((1ull << tm) - 1)));
        mid = ldexp(m + 0.5, e - tm);
    }
    mid = signed_in_domain(g, mid);
    double v = round_to(g->rq->dtype, mid, NV_ROUND_NEAREST_EVEN);
    if (i % 3 == 1)
        v = ref_neighbour(g->rq->dtype, v, +1);
    else if (i % 3 == 2)
        v = ref_neighbour(g->rq->dtype, v, -1);
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
        int r = ref_inputs_generate(&r0, out, n);
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
            big = fit(g, signed_in_domain(g, ldexp(1 + ref_rng_uniform(&g->rng), ebig)));
            out[i] = big;
        } else if (whole && pos == 2) {
            double nb = round_to(g->rq->dtype, -big, NV_ROUND_NEAREST_EVEN);
            out[i] = (nb >= g->lo && nb <= g->hi) ? nb : big;
        } else {
            out[i] = gen_normal(g);
        }
    }
}

/* Up to 512 edges per op and dtype (tanh's regime changes in fp64: 397). */
#define MAX_EDGES 512

static void gen_domain_edges(gen *g, double *out, int64_t n)
{
    static _Thread_local double edges[MAX_EDGES], list[3 * MAX_EDGES];
    int ne = 0, nl = 0;
    if (g->rq->domain.edges)
        ne = g->rq->domain.edges(g->rq->dtype, edges, MAX_EDGES);
    if (ne > MAX_EDGES)
        ne = MAX_EDGES;
    for (int k = 0; k < ne; k++) {
        double e = round_to(g->rq->dtype, edges[k], NV_ROUND_NEAREST_EVEN);
        list[nl++] = e;
        list[nl++] = ref_neighbour(g->rq->dtype, e, +1);
        list[nl++] = ref_neighbour(g->rq->dtype, e, -1);
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = nl > 0 ? list[i % nl] : gen_normal(g);
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
static void gen_offset(gen *g, double *out, int64_t n)
{
    if (g->rq->domain.param) {
        for (int64_t i = 0; i < n; i++)
            out[i] = gen_normal(g);
        return;
    }
    int64_t run = g->rq->reduction_len > 1 ? g->rq->reduction_len : n;
    double R = offset_ratio(g->di), c = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i % run == 0)
            c = signed_in_domain(g, R * (1 + ref_rng_uniform(&g->rng)));
        out[i] = fit(g, c + ref_rng_normal(&g->rng));
    }
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
    nv_dtype dt = g->rq->dtype;
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
    return nv_dtype_decode(g->rq->dtype, k * o->step | (neg ? o->sign : 0), false);
}

/* Every k-th encoding, both signs: element i of n is sign i mod 2 (+ first) and
 * ordinal round(j (count - 1) / (m - 1)) of the m = ceil(n / 2) per sign, j = i / 2:
 * k = (count - 1) / (m - 1), from +-0 to +-max_finite; with m >= count every
 * encoding, cycled. Deterministic (no random draws): the seed does not change
 * it. Operand t > 0 of a multi-input op reads the sequence rotated by an odd
 * offset near 0.382 t n, which pairs each value with one far along the range and
 * of the other sign. Not held to the domain (like "specials"). */
static void gen_sweep(gen *g, double *out, int64_t n)
{
    ordinals o = ordinals_of(g);
    int64_t m = o.two_signs ? (n + 1) / 2 : n;
    int t = g->rq->tensor_index > 0 ? g->rq->tensor_index : 0;
    int64_t rot = n > 1 ? ((int64_t)((double)n * 0.381966 * t) | 1) % n : 0;
    for (int64_t i = 0; i < n; i++) {
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
        out[i] = ordinal_value(g, &o, k, neg);
    }
}

/* Every encoding of a dtype of at most 16 bits, NaNs and infinities included:
 * with B = 2^bits, operand 0 holds encoding i mod B at element i; operand t > 0
 * holds (i / B^t + G_t (i mod B)) mod B (G_t odd, so each block of B elements
 * is again every encoding), and B^2 elements give every ordered pair of a
 * binary op. Deterministic; not held to the domain. */
static int gen_exhaustive(gen *g, double *out, int64_t n)
{
    static const uint64_t G[] = {0, 0x9E3779B9u, 0x85EBCA6Bu, 0xC2B2AE35u};
    if (g->di->bits > EXHAUSTIVE_MAX_BITS)
        return -EINVAL;
    uint64_t B = (uint64_t)1 << g->di->bits;
    int t = g->rq->tensor_index > 0 ? g->rq->tensor_index % 4 : 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = (uint64_t)i, e = u % B;
        if (t > 0) {
            uint64_t q = u;
            for (int a = 0; a < t; a++)
                q /= B;
            e = (q + G[t] * e) % B;
        }
        out[i] = nv_dtype_decode(g->rq->dtype, e, false);
    }
    return 0;
}

/* Matmul scales (the tensors after the op's n_inputs): e8m0 powers of two
 * 2^k, k in [-4, 4] (OCP MX v1.0 §5.1: E8M0 encodes 2^(e - 127)), or fp32 scales
 * in [0.5, 2]. */
static void gen_scales(gen *g, double *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (g->rq->dtype == NV_DT_E8M0)
            out[i] = ldexp(1, (int)(ref_rng_u32(&g->rng) % 9) - 4);
        else
            out[i] =
                round_to(g->rq->dtype, 0.5 + 1.5 * ref_rng_uniform(&g->rng), NV_ROUND_NEAREST_EVEN);
    }
}

int ref_inputs_generate(const nv_input_request *rq, double *out, int64_t n)
{
    assert(out || n <= 0);
    if (!rq || (int)rq->cls < 0 || rq->cls >= NV_IN_COUNT || n < 0)
        return -EINVAL;
    gen g = {.rq = rq, .di = nv_dtype_get(rq->dtype), .lo = -INFINITY, .hi = INFINITY};
    if (!g.di || !nv_dtype_get(rq->target))
        return -EINVAL;
    ref_rng_init(&g.rng, rq->seed, rq->case_index, (uint32_t)rq->tensor_index);
    const nv_input_domain *d = &rq->domain;
    if (d->role == NV_INPUT_INDEX) {
        int64_t range = rq->index_range > 0 ? rq->index_range : 1;
        for (int64_t i = 0; i < n; i++)
            out[i] = (double)(ref_rng_u64(&g.rng) % (uint64_t)range);
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
    case NV_IN_OFFSET:
        gen_offset(&g, out, n);
        return 0;
    case NV_IN_SWEEP:
    case NV_IN_EXHAUSTIVE:
        if (d->param) {
            for (int64_t i = 0; i < n; i++)
                out[i] = gen_normal(&g);
            return 0;
        }
        if (rq->cls == NV_IN_EXHAUSTIVE)
            return gen_exhaustive(&g, out, n);
        gen_sweep(&g, out, n);
        return 0;
    default:
        return -EINVAL;
    }
}
