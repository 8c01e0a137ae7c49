/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy
 * as 1, 2, 3", SC11, §4 and Random123's philox.h): ten rounds of a Feistel-like
 * network of two 32x32->64 multiplies, with a Weyl-sequence key schedule. */
#include "rng.h"

#include <assert.h>
#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

void nv_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
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

void nv_rng_init(nv_rng *r, uint64_t seed, uint32_t case_index, uint32_t tensor_index)
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define NV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NV_CLONES
#endif

_Static_assert(NV_RNG_BATCH == 8, "one vector of eight lanes");
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint64_t v4q __attribute__((vector_size(32)));

/* hi and lo words of m * a per 32-bit lane: even and odd lanes as 64-bit
 * products of their zero-extended halves (vpmuludq). A macro: a function
 * taking 32-byte vectors draws gcc's psABI note. */
#define LANE_MASK ((v4q){0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu})
#define MULHILO(a, m, hi, lo)                                                                      \
    do {                                                                                           \
        v4q mv_ = {(m), (m), (m), (m)};                                                            \
        v4q pe_ = ((v4q)(a)&LANE_MASK) * mv_;                                                      \
        v4q po_ = ((v4q)(a) >> 32) * mv_;                                                          \
        (lo) = (v8u)((pe_ & LANE_MASK) | (po_ << 32));                                             \
        (hi) = (v8u)((pe_ >> 32) | (po_ & ~LANE_MASK));                                            \
    } while (0)

/* The rounds of nv_philox4x32_10 over NV_RNG_BATCH consecutive counters, lane
 * j of each vector computing block ctr + j: the same words, in the order of one
 * block at a time. Built twice (target_clones), picked at load time; measured
 * 92 instructions a block against 139 one block at a time. Where AVX2 runs,
 * refill_avx2 below is used instead. */
NV_CLONES
static void refill_vec(nv_rng *r)
{
    uint64_t base = (uint64_t)r->ctr[0] | (uint64_t)r->ctr[1] << 32;
    v8u c0, c1, c2, c3;
    for (int j = 0; j < NV_RNG_BATCH; j++) {
        uint64_t c = base + (uint64_t)j;
        c0[j] = (uint32_t)c;
        c1[j] = (uint32_t)(c >> 32);
        c2[j] = r->ctr[2];
        c3[j] = r->ctr[3];
    }
    uint32_t k0 = r->key[0], k1 = r->key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        v8u h0, l0, h1, l1;
        MULHILO(c0, PHILOX_M0, h0, l0);
        MULHILO(c2, PHILOX_M1, h1, l1);
        v8u n0 = h1 ^ c1 ^ k0, n2 = h0 ^ c3 ^ k1;
        c1 = l1;
        c3 = l0;
        c0 = n0;
        c2 = n2;
    }
    for (int j = 0; j < NV_RNG_BATCH; j++) {
        r->buf[4 * j] = c0[j];
        r->buf[4 * j + 1] = c1[j];
        r->buf[4 * j + 2] = c2[j];
        r->buf[4 * j + 3] = c3[j];
    }
    base += NV_RNG_BATCH;
    r->ctr[0] = (uint32_t)base;
    r->ctr[1] = (uint32_t)(base >> 32);
    r->avail = 4 * NV_RNG_BATCH;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#include <immintrin.h>
#define HAVE_REFILL_AVX2 1

/* refill_vec with AVX2 intrinsics: gcc builds refill_vec's 32x32->64-bit
 * products as full 64-bit multiplies (three vpmuludq and shifts, or chains of
 * shifts and adds for the constant), where one vpmuludq per four lanes is
 * Philox's multiply; the words come out transposed to block order with
 * unpacks and lane permutes instead of 32 scalar stores. Integer arithmetic:
 * the same words (tests/unit/numerics/test-rng.c checks them against
 * nv_philox4x32_10 across the counter's carry). */
__attribute__((target("avx2"))) static void refill_avx2(nv_rng *r)
{
    uint64_t base = (uint64_t)r->ctr[0] | (uint64_t)r->ctr[1] << 32;
    uint32_t w0[NV_RNG_BATCH], w1[NV_RNG_BATCH];
    for (int j = 0; j < NV_RNG_BATCH; j++) {
        uint64_t c = base + (uint64_t)j;
        w0[j] = (uint32_t)c;
        w1[j] = (uint32_t)(c >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)w0);
    __m256i c1 = _mm256_loadu_si256((const __m256i *)w1);
    __m256i c2 = _mm256_set1_epi32((int)r->ctr[2]), c3 = _mm256_set1_epi32((int)r->ctr[3]);
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    uint32_t k0 = r->key[0], k1 = r->key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        /* Even lanes' products from vpmuludq directly, odd lanes' after a shift. */
        __m256i pe0 = _mm256_mul_epu32(c0, m0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
        __m256i pe1 = _mm256_mul_epu32(c2, m1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
        __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
        __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
        __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
        __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
        __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
    }
    /* Lanes j of c0..c3 to words 4j..4j+3: blocks (0|4), (1|5), (2|6), (3|7)
     * after the unpacks, then whole blocks in order. */
    __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256((__m256i *)(r->buf + 0), _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256((__m256i *)(r->buf + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256((__m256i *)(r->buf + 16), _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256((__m256i *)(r->buf + 24), _mm256_permute2x128_si256(u2, u3, 0x31));
    base += NV_RNG_BATCH;
    r->ctr[0] = (uint32_t)base;
    r->ctr[1] = (uint32_t)(base >> 32);
    r->avail = 4 * NV_RNG_BATCH;
}
#endif

void nv_rng_refill(nv_rng *r)
{
#ifdef HAVE_REFILL_AVX2
    if (__builtin_cpu_supports("avx2")) {
        refill_avx2(r);
        return;
    }
#endif
    refill_vec(r);
}

uint64_t nv_rng_u64(nv_rng *r)
{
    uint64_t hi = nv_rng_u32(r);
    return (hi << 32) | nv_rng_u32(r);
}

double nv_rng_uniform(nv_rng *r)
{
    return (double)(nv_rng_u64(r) >> 11) * 0x1p-53;
}

double nv_sample_uniform(uint64_t seed, uint64_t n)
{
    uint32_t ctr[4] = {(uint32_t)n, (uint32_t)(n >> 32), NV_SAMPLE_STREAM_TAG, 0};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
    nv_philox4x32_10(ctr, key, out);
    return (double)((((uint64_t)out[0] << 32) | out[1]) >> 11) * 0x1p-53;
}

double nv_rng_normal(nv_rng *r)
{
    /* Box-Muller (1958): u1 in (0, 1] keeps the log finite. One of the pair is
     * used so that the stream position depends only on the number of draws. */
    double u1 = 1.0 - nv_rng_uniform(r);
    double u2 = nv_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
