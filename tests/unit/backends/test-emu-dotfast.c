/* The emu's fp32 dot-product fast path (emu_sum.c, emu_dot_fast) against the
 * general path it replaces, bit for bit:
 *  - the step: emu_fma in fp32 under RNE (the emu's correctly rounded fused
 *    multiply-add, IEEE 754-2019 §5.4.1) equals C's fmaf on every non-NaN fp32
 *    triple of an edge set (zeros of both signs, subnormals, the normal
 *    boundary, max finite, Inf) and on random and cancelling triples;
 *    the same under the three directed roundings (§4.3.2: fmaf under
 *    fesetround as the oracle);
 *  - the kernel: emu_dot_fast equals emu_sum element by element on shapes that
 *    hit every tile edge, in the forward and both transposed backward layouts,
 *    on ordinary values and on values that overflow, cancel and turn NaN;
 *  - it declines (returns 0) where it is not provably the same: NaN or
 *    non-fp32 operands, fma=off, another order, another dtype, directed
 *    rounding. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/backends/emu/emu_internal.h"
#include "core/numerics/rng.h"

static emu_mode mode;

static emu_call call_fp32(void)
{
    emu_call c;
    memset(&c, 0, sizeof c);
    c.m = &mode;
    c.out = c.storage = c.compute = c.accum = NV_DT_FP32;
    c.rm.rounding = NV_ROUND_NEAREST_EVEN;
    c.plain = true;
    return c;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* emu_fma(fp32) vs fmaf on one triple; counts mismatches, shows the first. */
static void fma_pair(emu_call *c, float a, float b, float s, int64_t *bad)
{
    float slow = (float)emu_fma(c, NV_DT_FP32, a, b, s), fast = fmaf(a, b, s);
    if (fbits(slow) != fbits(fast) && (*bad)++ == 0)
        tap_diag("fma(%a, %a, %a): emu %a (0x%08x), fmaf %a (0x%08x)", a, b, s, slow, fbits(slow),
                 fast, fbits(fast));
}

static void test_fma_step(void)
{
    emu_call c = call_fp32();
    static const float base[] = {0.0f,         0x1p-149f,     0x1.fffffcp-127f, 0x1p-126f,
                                 0x1.000002p-126f, 0x1p-75f,  0x1.8p-74f,       0x1p-64f,
                                 1.0f,         0x1.000002p0f, 0x1.fffffep-1f,   3.0f,
                                 0x1.555556p-2f, 0x1p64f,     0x1.fffffep127f,  0x1p127f,
                                 INFINITY};
    int nb = (int)(sizeof base / sizeof base[0]);
    float e[2 * 17];
    for (int i = 0; i < nb; i++)
        e[2 * i] = base[i], e[2 * i + 1] = -base[i];
    int ne = 2 * nb;
    int64_t bad = 0, n = 0;
    for (int i = 0; i < ne; i++)
        for (int j = 0; j < ne; j++)
            for (int k = 0; k < ne; k++, n++)
                fma_pair(&c, e[i], e[j], e[k], &bad);
    tap_ok(bad == 0, "emu_fma(fp32) == fmaf on all %lld edge triples (%lld differ)", (long long)n,
           (long long)bad);
    /* By hand: a b = 1.5 2^-74 + 1.5 2^-97 exactly, 1.5 ulps (fp32 ulp 2^-97) above
     * 1.5 2^-74; adding s = -(2^-126 - 2^-149) puts the sum just below the midpoint
     * between +1 and +2 ulps, so RNE gives 0x1.800002p-74. (Rounding to fp64 first
     * lands exactly on that midpoint, which ties to the even 0x1.800004p-74.) */
    float hand = (float)emu_fma(&c, NV_DT_FP32, 0x1.8p-74f, 0x1.000002p0f, -0x1.fffffcp-127f);
    tap_ok(hand == 0x1.800002p-74f, "emu_fma(0x1.8p-74, 0x1.000002p0, -0x1.fffffcp-127) = %a "
                                    "(hand: 0x1.800002p-74)", hand);

    nv_rng g;
    nv_rng_init(&g, 11, 3, 4);
    bad = 0;
    for (n = 0; n < 2000000; n++) { /* random non-NaN bit patterns: every binade */
        uint32_t u[3];
        for (int t = 0; t < 3; t++)
            do
                u[t] = nv_rng_u32(&g);
            while (isnan(bitsf(u[t])));
        fma_pair(&c, bitsf(u[0]), bitsf(u[1]), bitsf(u[2]), &bad);
    }
    tap_ok(bad == 0, "emu_fma(fp32) == fmaf on 2e6 random bit patterns (%lld differ)",
           (long long)bad);

    bad = 0;
    for (n = 0; n < 1000000; n++) { /* s ~ -a b: the sum cancels, exact tails decide */
        float a = (float)(nv_rng_normal(&g) * ldexp(1, (int)(nv_rng_u32(&g) % 200) - 100));
        float b = (float)nv_rng_normal(&g);
        float s = -(a * b);
        s = bitsf(fbits(s) + (uint32_t)(nv_rng_u32(&g) % 5) - 2u);
        if (!isnan(s))
            fma_pair(&c, a, b, s, &bad);
    }
    tap_ok(bad == 0, "emu_fma(fp32) == fmaf on 1e6 cancelling triples (%lld differ)",
           (long long)bad);
}

/* Directed rounding: the emu's fp32 fma (computed under the default rounding,
 * as its error-free transformations need) against fmaf under fesetround. */
static void test_fma_directed(void)
{
    static const struct {
        nv_rounding rm;
        int fe;
        const char *name;
    } dir[3] = {{NV_ROUND_TOWARD_ZERO, FE_TOWARDZERO, "toward zero"},
                {NV_ROUND_UP, FE_UPWARD, "up"},
                {NV_ROUND_DOWN, FE_DOWNWARD, "down"}};
    nv_rng g;
    nv_rng_init(&g, 12, 3, 4);
    for (int d = 0; d < 3; d++) {
        emu_call c = call_fp32();
        c.plain = false, c.rm.rounding = dir[d].rm;
        int64_t bad = 0;
        for (int64_t n = 0; n < 300000; n++) {
            uint32_t u[3];
            for (int t = 0; t < 3; t++)
                do
                    u[t] = nv_rng_u32(&g);
                while (isnan(bitsf(u[t])));
            float a = bitsf(u[0]), b = bitsf(u[1]), s = bitsf(u[2]);
            if (n % 2) { /* half of them cancelling: s next to -a b */
                a = (float)nv_rng_normal(&g), b = (float)nv_rng_normal(&g);
                s = bitsf(fbits(-(a * b)) + (uint32_t)(nv_rng_u32(&g) % 5) - 2u);
            }
            float slow = (float)emu_fma(&c, NV_DT_FP32, a, b, s);
            fesetround(dir[d].fe);
            float fast = fmaf(a, b, s);
            fesetround(FE_TONEAREST);
            if (fbits(slow) != fbits(fast) && !(isnan(slow) && isnan(fast)) && bad++ == 0)
                tap_diag("%s: fma(%a, %a, %a): emu %a, fmaf %a", dir[d].name, a, b, s, slow, fast);
        }
        tap_ok(bad == 0, "emu_fma(fp32) rounding %s == fmaf on 3e5 triples (%lld differ)",
               dir[d].name, (long long)bad);
    }
}

/* Random operand values: ordinary (normals scaled over 2^+-20, 10% zeros) or
 * wide (random bit patterns with exponents near the top and bottom of fp32,
 * some Inf), as fp32 values held in doubles. */
static void fill(double *v, int64_t n, bool wide, nv_rng *g)
{
    for (int64_t i = 0; i < n; i++) {
        double u = nv_rng_uniform(g);
        if (!wide) {
            v[i] = u < 0.1 ? 0.0 : (float)(nv_rng_normal(g) * ldexp(1, (int)(u * 40) - 20));
            continue;
        }
        uint32_t bits = nv_rng_u32(g);
        uint32_t ex = u < 0.4 ? (bits >> 8) % 8 : u < 0.8 ? 246 + (bits >> 8) % 9 : 127;
        float f = bitsf((bits & 0x807fffffu) | (ex << 23));
        v[i] = u > 0.995 ? (bits & 1 ? INFINITY : -INFINITY) : f;
    }
}

static bool same(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

/* One shape in the three layouts emu_matmul and emu_bwd_matmul use. */
static void dot_case(int64_t M, int64_t K, int64_t N, bool wide, nv_rng *g)
{
    emu_call c = call_fp32();
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
    double *fast = malloc(sizeof(double) * (size_t)(M * N));
    fill(a, M * K, wide, g);
    fill(b, K * N, wide, g);
    /* layouts: A(i,k) = a[i*asi + k*ask], B(k,j) = b[k*bsk + j*bsj] */
    struct {
        const char *name;
        int64_t asi, ask, bsk, bsj;
    } lay[3] = {{"A B", K, 1, N, 1}, {"A B^T", K, 1, 1, K}, {"A^T B", 1, M, N, 1}};
    for (int l = 0; l < 3; l++) {
        int64_t bsk = lay[l].bsk, bsj = lay[l].bsj;
        if (l == 1) /* b read as [N, K] */
            bsk = 1, bsj = K;
        int done = emu_dot_fast(&c, NV_DT_FP32, a, lay[l].asi, lay[l].ask, b, bsk, bsj, fast, M,
                                K, N);
        int64_t bad = 0, nans = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double slow = emu_sum(&c, NV_DT_FP32, a + i * lay[l].asi, lay[l].ask, b + j * bsj,
                                      bsk, K);
                nans += isnan(slow);
                if (!same(slow, fast[i * N + j]) && bad++ == 0)
                    tap_diag("[%lld,%lld]: emu_sum %a, fast %a", (long long)i, (long long)j, slow,
                             fast[i * N + j]);
            }
        tap_ok(done == 1 && bad == 0,
               "emu_dot_fast == emu_sum bit for bit, %s %lldx%lldx%lld%s (%lld differ, %lld NaN)",
               lay[l].name, (long long)M, (long long)K, (long long)N, wide ? " wide" : "",
               (long long)bad, (long long)nans);
    }
    free(a), free(b), free(fast);
}

static void test_declines(void)
{
    emu_call c = call_fp32();
    double a[4] = {1, 2, 3, 4}, b[4] = {1, 0.5, 0.25, 2}, o[4];
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 1,
           "fast path taken on fp32 values");
    a[2] = NAN;
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0,
           "declines a NaN operand");
    a[2] = 1 + 0x1p-40; /* not an fp32 value */
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0,
           "declines an operand that is not an fp32 value");
    a[2] = 3;
    tap_ok(emu_dot_fast(&c, NV_DT_BF16, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0,
           "declines bf16 accumulation");
    mode.fma = false;
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0, "declines fma=off");
    mode.fma = true;
    mode.order = EMU_ORDER_PAIRWISE;
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0,
           "declines the pairwise order");
    mode.order = EMU_ORDER_SEQUENTIAL;
    c.plain = false, c.rm.rounding = NV_ROUND_TOWARD_ZERO;
    tap_ok(emu_dot_fast(&c, NV_DT_FP32, a, 2, 1, b, 2, 1, o, 2, 2, 2) == 0,
           "declines directed rounding");
}

int main(void)
{
    emu_mode_default(&mode);
    tap_ok(mode.fma && mode.order == EMU_ORDER_SEQUENTIAL,
           "the default mode is fma=on, sequential (the fast path's case)");
    test_fma_step();
    test_fma_directed();
    nv_rng g;
    nv_rng_init(&g, 5, 6, 7);
    static const int64_t shapes[][3] = {{4, 16, 16}, {8, 64, 32}, {5, 7, 23}, {1, 1, 1},
                                        {9, 300, 8}, {3, 2, 17},  {6, 33, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        dot_case(shapes[s][0], shapes[s][1], shapes[s][2], false, &g);
        dot_case(shapes[s][0], shapes[s][1], shapes[s][2], true, &g);
    }
    test_declines();
    return tap_done();
}
