/* Philox4x32-10 against the Random123 known-answer vectors, and the stream
 * helpers (reproducibility, independence of keys, distribution moments). */
#include <stdio.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/rng.h"

/* Random123 v1.14 tests/kat_vectors, the three "philox4x32 10" lines:
 * counter[4] key[2] -> output[4]. */
static const struct {
    uint32_t ctr[4], key[2], out[4];
} kat[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

static void test_kat(void)
{
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        nv_philox4x32_10(kat[i].ctr, kat[i].key, out);
        tap_ok(memcmp(out, kat[i].out, sizeof out) == 0, "Random123 KAT %zu: %08x %08x %08x %08x",
               i, out[0], out[1], out[2], out[3]);
    }
    uint32_t io[4];
    memcpy(io, kat[2].ctr, sizeof io);
    nv_philox4x32_10(io, kat[2].key, io);
    tap_ok(memcmp(io, kat[2].out, sizeof io) == 0, "output may alias the counter");
}

static void test_stream(void)
{
    nv_rng a, b;
    nv_rng_init(&a, 0x0123456789abcdefull, 7, 3);
    uint32_t ctr[4] = {0, 0, 7, 3}, key[2] = {0x89abcdef, 0x01234567}, blk[4];
    int ok = 1;
    for (uint32_t block = 0; block < 3; block++) {
        ctr[0] = block;
        nv_philox4x32_10(ctr, key, blk);
        for (int w = 0; w < 4; w++)
            ok &= nv_rng_u32(&a) == blk[w];
    }
    tap_ok(ok, "stream = Philox blocks of counter (block, 0, case, tensor) under key = seed");

    nv_rng_init(&a, 42, 1, 2);
    nv_rng_init(&b, 42, 1, 2);
    int same = 1;
    for (int i = 0; i < 1000; i++)
        same &= nv_rng_u64(&a) == nv_rng_u64(&b);
    tap_ok(same, "same (seed, case, tensor) gives the same stream");

    nv_rng c[4];
    nv_rng_init(&c[0], 42, 1, 2);
    nv_rng_init(&c[1], 43, 1, 2);
    nv_rng_init(&c[2], 42, 2, 2);
    nv_rng_init(&c[3], 42, 1, 3);
    uint32_t first[4];
    for (int i = 0; i < 4; i++)
        first[i] = nv_rng_u32(&c[i]);
    tap_ok(first[0] != first[1] && first[0] != first[2] && first[0] != first[3],
           "seed, case and tensor each change the stream");

    nv_rng_init(&a, 5, 0, 0);
    nv_rng_init(&b, 5, 0, 0);
    uint64_t hi = nv_rng_u32(&b), lo = nv_rng_u32(&b);
    tap_ok(nv_rng_u64(&a) == ((hi << 32) | lo), "u64 = two consecutive u32, high first");

    /* Across the carry of the low counter word, over two batches: block c of the
     * stream is Philox of the 64-bit counter c, one block at a time. */
    nv_rng_init(&a, 9, 0, 0);
    a.ctr[0] = 0xfffffffdu;
    uint32_t k9[2] = {9, 0};
    int carry_ok = 1;
    for (uint64_t c = 0xfffffffdu; c < UINT64_C(0xfffffffd) + 2 * NV_RNG_BATCH + 1; c++) {
        uint32_t cc[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
        nv_philox4x32_10(cc, k9, blk);
        for (int w = 0; w < 4; w++)
            carry_ok &= nv_rng_u32(&a) == blk[w];
    }
    tap_ok(carry_ok && a.ctr[1] == 1, "block counter carries into the second word, batch by batch");
}

/* Moments of 10^6 draws. Each bound is 5 standard errors of the statistic for a
 * correct generator (false alarm ~6e-7; the seed is fixed, so deterministic):
 * uniform mean: sd sqrt(1/12/N); normal mean: 1/sqrt(N); normal variance: about
 * sqrt(2/N); P(|z| < 1) = 0.682689: binomial sd sqrt(p(1-p)/N). */
static void test_moments(void)
{
    const int N = 1000000;
    nv_rng r;
    nv_rng_init(&r, 2024, 0, 0);
    double sum = 0;
    int out_of_range = 0;
    for (int i = 0; i < N; i++) {
        double u = nv_rng_uniform(&r);
        out_of_range += !(u >= 0 && u < 1);
        sum += u;
    }
    double mean = sum / N;
    tap_ok(out_of_range == 0 && fabs(mean - 0.5) <= 5 * sqrt(1.0 / 12 / N),
           "uniform in [0,1), mean %.6f", mean);
    nv_rng_init(&r, 2025, 0, 0);
    double s1 = 0, s2 = 0;
    long inside = 0;
    for (int i = 0; i < N; i++) {
        double z = nv_rng_normal(&r);
        s1 += z;
        s2 += z * z;
        inside += fabs(z) < 1;
    }
    double m = s1 / N, var = s2 / N - m * m, p = (double)inside / N;
    tap_ok(fabs(m) <= 5 / sqrt(N) && fabs(var - 1) <= 5 * sqrt(2.0 / N) &&
               fabs(p - 0.682689) <= 5 * sqrt(0.682689 * 0.317311 / N),
           "normal: mean %.5f, variance %.5f, P(|z|<1) %.5f", m, var, p);
}

int main(void)
{
    test_kat();
    test_stream();
    test_moments();
    return tap_done();
}
