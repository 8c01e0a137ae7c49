/* Philox4x32-10 counter-based RNG (Salmon et al., "Parallel Random Numbers: As
 * Easy as 1, 2, 3", SC11). A stream is keyed by (seed, case, tensor) so every
 * input is a pure function of those, independent of threads and call order. */
#ifndef NUMVAL_RNG_H
#define NUMVAL_RNG_H

#include <stdint.h>

/* One Philox4x32-10 block: ctr[4] encrypted under key[2]. out may alias ctr. */
void nv_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Blocks computed at once: the words come out in the same order as one block at
 * a time (counter 0, 1, 2, ...), eight blocks' rounds interleaved so that the
 * compiler vectorises them. */
#define NV_RNG_BATCH 8

typedef struct nv_rng {
    uint32_t key[2];
    uint32_t ctr[4]; /* the counter of the next block to compute */
    uint32_t buf[4 * NV_RNG_BATCH];
    int avail; /* unread words left in buf */
} nv_rng;

/* Stream for (seed, case_index, tensor_index): key = seed (64 bits), counter high
 * words = case and tensor index, low word counts blocks. */
void nv_rng_init(nv_rng *r, uint64_t seed, uint32_t case_index, uint32_t tensor_index);
/* The next NV_RNG_BATCH blocks into buf (nv_rng_u32 calls it). */
void nv_rng_refill(nv_rng *r);

/* The stream's next word: word k of block j is word 4 j + k. */
static inline uint32_t nv_rng_u32(nv_rng *r)
{
    if (r->avail == 0)
        nv_rng_refill(r);
    return r->buf[4 * NV_RNG_BATCH - r->avail--];
}
uint64_t nv_rng_u64(nv_rng *r);
double nv_rng_uniform(nv_rng *r);  /* [0, 1) with 53 random bits */
double nv_rng_normal(nv_rng *r);   /* standard normal (Box-Muller on two uniforms) */

/* The sample op's uniform for a draw at counter n under seed (docs/TOLERANCES.md
 * "Selections"): one block out = Philox4x32-10(ctr = {lo32(n), hi32(n),
 * 0x706d6173, 0}, key = {lo32(seed), hi32(seed)}), u = ((out[0] << 32 | out[1])
 * >> 11) 2^-53, in [0, 1) on a grid of 2^-53, as nv_rng_uniform draws from a
 * stream. The constant word ("samp" in ASCII, little-endian) keeps these
 * counters apart from the input streams' (case, tensor) words. */
#define NV_SAMPLE_STREAM_TAG 0x706d6173u
double nv_sample_uniform(uint64_t seed, uint64_t n);

#endif
