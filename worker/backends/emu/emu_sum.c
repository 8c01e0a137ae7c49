/* Ordered accumulation: the emu's reductions and dot products add their terms in
 * the order the mode declares, every partial sum rounded to the accumulate dtype.
 * The error of each order is analysed in Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., ch. 4 (recursive: (n-1)u; pairwise: ceil(log2 n)u). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/blocksum.h"
#include "emu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMU_HAVE_AVX2_FMA 1 /* the fp32 dot-product fast path's AVX2 kernel */
#endif

typedef struct sum_seq {
    emu_call *c;
    nv_dtype dt;
    const double *x, *y; /* decoded terms x[i * sx] (y[i * sy]; y NULL: a sum) */
    int64_t sx, sy;
    const emu_vec *vx, *vy; /* or terms read through emu_vec_at (vy == vx: squares) */
    bool fused;             /* a product and fma=on */
    bool blocked;           /* accum_block > 1 or accum_align=truncate: nv_block_sum's adder */
} sum_seq;

/* One rounding of the block t[0..n) under the call's mode (blocksum.h). */
static double block(const sum_seq *s, const double *t, int n)
{
    emu_call *c = s->c;
    uint32_t rnd = c->rm.rounding == NV_ROUND_STOCHASTIC ? (uint32_t)emu_splitmix(&c->sr_state) : 0;
    return nv_block_sum(t, n, s->dt, &c->rm, rnd, c->m->accum_truncate);
}

/* a + b in the accumulator: with accum_align=truncate the adder's alignment. */
static double acc_add(const sum_seq *s, double a, double b)
{
    if (!s->c->m->accum_truncate)
        return emu_add(s->c, s->dt, a, b);
    const double t[2] = {a, b};
    return block(s, t, 2);
}

/* randtree:S: [lo, lo + n) split at 1 + h mod (n - 1), h drawn from S, lo and n
 * (splitmix64 of S * golden ^ lo << 32 ^ n): an arbitrary binary tree, the same
 * on every call, for testing the tree reveal of the contract kind. */
int64_t emu_randtree_split(uint64_t seed, int64_t lo, int64_t n)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)lo << 32) ^ (uint64_t)n;
    return 1 + (int64_t)(emu_splitmix(&z) % (uint64_t)(n - 1));
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A fresh order per call: i -> (a i + b) mod n with gcd(a, n) = 1, a permutation
 * drawn from the per-call stream (*ret_a, *ret_b), then left to right (as
 * atomics land). */
static void random_perm(const sum_seq *s, uint64_t n, uint64_t *ret_a, uint64_t *ret_b)
{
    uint64_t a = 1 + emu_splitmix(&s->c->order_state) % (n > 1 ? n - 1 : 1);
    while (gcd64(a, n) != 1)
        a = a % (n - 1) + 1;
    *ret_a = a;
    *ret_b = emu_splitmix(&s->c->order_state) % n;
}

/* Plain fp32 / fp64 sequential sums of decoded terms: the hardware adds are
 * the emulated ones. */
static double fast_d(const sum_seq *s, int64_t n)
{
    if (s->dt == NV_DT_FP64) {
        double acc = s->x[0];
        for (int64_t i = 1; i < n; i++)
            acc += s->x[i * s->sx];
        return acc;
    }
    float acc = (float)s->x[0];
    for (int64_t i = 1; i < n; i++)
        acc += (float)s->x[i * s->sx];
    return acc;
}

/* The same of emu_vec terms. */
static double fast_v(const sum_seq *s, int64_t n)
{
    const emu_vec *v = s->vx;
    if (s->dt == NV_DT_FP64) {
        double acc = emu_vec_at(v, 0);
        for (int64_t i = 1; i < n; i++)
            acc += emu_vec_at(v, i);
        return acc;
    }
    float acc = (float)emu_vec_at(v, 0);
    for (int64_t i = 1; i < n; i++)
        acc += (float)emu_vec_at(v, i);
    return acc;
}

/* The same of the values of an fp32 view: its floats are the values its
 * decoding gives; daz a constant in each caller below, so that each loop is
 * its own. */
static inline double fast_f32(const sum_seq *s, int64_t n, bool daz)
{
    const void *enc = s->vx->enc;
    int64_t st = s->vx->st;
    if (s->dt == NV_DT_FP64) {
        double acc = emu_decode_f32(enc, 0, daz);
        for (int64_t i = 1; i < n; i++)
            acc += emu_decode_f32(enc, i * st, daz);
        return acc;
    }
    float acc = emu_decode_f32(enc, 0, daz);
    for (int64_t i = 1; i < n; i++)
        acc += emu_decode_f32(enc, i * st, daz);
    return acc;
}

static double fast_f(const sum_seq *s, int64_t n)
{
    if (s->vx->map)
        return fast_v(s, n);
    return s->vx->daz ? fast_f32(s, n, true) : fast_f32(s, n, false);
}

/* Term i of an fp32 view: its value, mapped where the emu_vec says. */
static inline double f32_term(const emu_vec *v, int64_t i)
{
    double x = emu_decode_f32(v->enc, i * v->st, v->daz);
    return v->map ? v->map(v->map_ud, x) : x;
}

/* The orders three times, each with its own reads inlined: over decoded terms
 * (emu_sum, the kernels' path), over emu_vec terms (emu_sum_vec) and over the
 * values of an fp32 view (emu_sum_vec's common case: no per-term dispatch on
 * the dtype). */
#define T(name) name##_d
#define X(s, i) ((s)->x[(i) * (s)->sx])
#define Y(s, i, x) ((s)->y[(i) * (s)->sy])
#define HAS_Y(s) ((s)->y != NULL)
#include "emu_sum_order.h"
#undef T
#undef X
#undef Y
#undef HAS_Y

#define T(name) name##_v
#define X(s, i) emu_vec_at((s)->vx, i)
#define Y(s, i, x) ((s)->vy == (s)->vx ? (x) : emu_vec_at((s)->vy, i))
#define HAS_Y(s) ((s)->vy != NULL)
#include "emu_sum_order.h"
#undef T
#undef X

#define T(name) name##_f
#define X(s, i) f32_term((s)->vx, i)
#include "emu_sum_order.h"
#undef T
#undef X
#undef Y
#undef HAS_Y

double emu_sum(emu_call *c, nv_dtype dt, const double *x, int64_t sx, const double *y, int64_t sy,
               int64_t n)
{
    if (n <= 0)
        return 0.0;
    sum_seq s = {.c = c, .dt = dt, .x = x, .y = y, .sx = sx, .sy = sy};
    s.fused = y && c->m->fma;
    s.blocked = c->m->accum_block > 1 || c->m->accum_truncate;
    return sum_d(&s, n);
}

double emu_sum_vec(emu_call *c, nv_dtype dt, const emu_vec *x, const emu_vec *y, int64_t n)
{
    if (n <= 0)
        return 0.0;
    sum_seq s = {.c = c, .dt = dt, .vx = x, .vy = y};
    s.fused = y && c->m->fma;
    s.blocked = c->m->accum_block > 1 || c->m->accum_truncate;
    bool f32 = !x->d && x->dt == NV_DT_FP32 && (!y || y == x);
    return f32 ? sum_f(&s, n) : sum_v(&s, n);
}

/* ---- the fp32 fused dot-product fast path ----
 * With accumulate dtype fp32, round to nearest even, no FTZ, no saturation,
 * fma=on and the sequential order, emu_sum's dot product is
 *     acc = RN(x0 y0);  acc = RN(xk yk + acc) for k = 1 .. n-1,
 * each step correctly rounded to fp32 (emu_mul, emu_fma: IEEE 754-2019 §5.4.1).
 * When every operand is an fp32 value, that is exactly C's fmaf (C11 7.12.13.1:
 * one rounding of the exact x y + z), and the first step is fmaf(x0, y0, -0)
 * (x + -0 = x for every x, -0 + -0 = -0, +0 + -0 = +0 under RNE, §6.3), so the
 * hardware's fused multiply-add gives the same bits. NaN operands are left to
 * the general path (which NaN payload an instruction propagates is not fixed by
 * IEEE 754, §6.2.3); NaNs that arise inside (Inf * 0, Inf - Inf) are the
 * default NaN on both paths. The k order of every element is the declared one:
 * the kernel only computes several elements at once. */
#ifdef EMU_HAVE_AVX2_FMA
#include <immintrin.h>
#endif

bool emu_dot_fast_applies(const emu_call *c, nv_dtype dt)
{
    return c->plain && dt == NV_DT_FP32 && c->m->fma && c->m->order == EMU_ORDER_SEQUENTIAL &&
           c->m->accum_block == 1 && !c->m->accum_truncate;
}

/* x as an fp32 value, false when it is not one (or is NaN). */
static inline bool as_f32(double x, float *ret)
{
    float f = (float)x;
    *ret = f;
    return (double)f == x;
}

/* Rows [i0, i1), columns [j0, j1) of C with scalar fmaf. */
static void dot_f32_scalar(const float *a, const float *b, double *out, int64_t i0, int64_t i1,
                           int64_t j0, int64_t j1, int64_t K, int64_t N)
{
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            float acc = -0.0f;
            for (int64_t k = 0; k < K; k++)
                acc = fmaf(a[i * K + k], b[k * N + j], acc);
            out[i * N + j] = acc;
        }
}

#ifdef EMU_HAVE_AVX2_FMA
/* 4 rows x 8*nv columns (nv 1 or 2) of C at (i0, j0), accumulators in registers
 * for the whole k loop; _mm256_fmadd_ps is one correctly rounded fma per lane. */
__attribute__((target("avx2,fma"))) static inline void
dot_f32_tile(const float *a, const float *b, double *out, int64_t i0, int64_t j0, int64_t K,
             int64_t N, int nv)
{
    __m256 acc[4][2];
    for (int r = 0; r < 4; r++)
        acc[r][0] = acc[r][1] = _mm256_set1_ps(-0.0f);
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(b + k * N + j0);
        __m256 b1 = nv > 1 ? _mm256_loadu_ps(b + k * N + j0 + 8) : b0;
        for (int r = 0; r < 4; r++) {
            __m256 av = _mm256_broadcast_ss(a + (i0 + r) * K + k);
            acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++) {
            float t[8];
            _mm256_storeu_ps(t, acc[r][v]);
            for (int l = 0; l < 8; l++)
                out[(i0 + r) * N + j0 + 8 * v + l] = t[l];
        }
}

__attribute__((target("avx2,fma"))) static void dot_f32_avx2(const float *a, const float *b,
                                                             double *out, int64_t M, int64_t K,
                                                             int64_t N)
{
    int64_t M4 = M - M % 4, N16 = N - N % 16, N8 = N - N % 8;
    for (int64_t i = 0; i < M4; i += 4) {
        for (int64_t j = 0; j < N16; j += 16)
            dot_f32_tile(a, b, out, i, j, K, N, 2);
        if (N8 > N16)
            dot_f32_tile(a, b, out, i, N16, K, N, 1);
    }
    dot_f32_scalar(a, b, out, 0, M4, N8, N, K, N);
    dot_f32_scalar(a, b, out, M4, M, 0, N, K, N);
}
#endif

int emu_dot_fast(const emu_call *c, nv_dtype dt, const double *a, int64_t asi, int64_t ask,
                 const double *b, int64_t bsk, int64_t bsj, double *out, int64_t M, int64_t K,
                 int64_t N)
{
    if (!emu_dot_fast_applies(c, dt) || K < 1 || M < 1 || N < 1)
        return 0;
    float *af = malloc((size_t)(M * K + K * N) * sizeof(float));
    if (!af)
        return 0;
    float *bf = af + M * K;
    /* Without early exits, so that the conversions vectorize; a transposed
     * operand is read in its memory order. */
    bool ok = true;
    if (ask < asi)
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                ok &= as_f32(a[i * asi + k * ask], &af[i * K + k]);
    else
        for (int64_t k = 0; k < K; k++)
            for (int64_t i = 0; i < M; i++)
                ok &= as_f32(a[i * asi + k * ask], &af[i * K + k]);
    if (ok && bsj < bsk)
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++)
                ok &= as_f32(b[k * bsk + j * bsj], &bf[k * N + j]);
    else if (ok)
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++)
                ok &= as_f32(b[k * bsk + j * bsj], &bf[k * N + j]);
    if (ok) {
#ifdef EMU_HAVE_AVX2_FMA
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            dot_f32_avx2(af, bf, out, M, K, N);
        else
#endif
            dot_f32_scalar(af, bf, out, 0, M, 0, N, K, N);
    }
    free(af);
    return ok;
}
