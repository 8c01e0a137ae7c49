/* The fp32 "normal" class with glibc's vector log and cos (normal_mvec.c)
 * against the scalar expression (nv_rng_normal's, rounded to fp32):
 * - nvi_normal_f32_batch on 2^22 blocks of random Philox-like words: every
 *   decided lane equals the scalar value bit for bit, and the undecided ones
 *   are few (the 2^-44 interval meets an fp32 rounding boundary about once in
 *   2^19 values);
 * - the same on words chosen near the edges: u1 at 1 (log 0: v = 0) and near
 *   it, u2 near 1/4 and 3/4 (cos near its zeros, v tiny or 0);
 * - whole streams (nv_inputs_generate) with the vector values on and off give
 *   the same tensors, for several seeds, cases and tensor indices. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/inputs.h"
#include "core/numerics/normal_mvec.h"
#include "core/numerics/rng.h"

static uint64_t rs = 0xD1B54A32D192ED03ull;
static uint64_t next(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static double scalar32(const uint32_t *w)
{
    uint64_t a = (uint64_t)w[0] << 32 | w[1], b = (uint64_t)w[2] << 32 | w[3];
    double u1 = 1.0 - (double)(a >> 11) * 0x1p-53, u2 = (double)(b >> 11) * 0x1p-53;
    return (double)(float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

enum { B = 4096 };
static uint32_t words[4 * B];
static double out[B];
static uint8_t und[B];

/* Checks one batch; adds to *bad and *undecided. */
static void check(int64_t *bad, int64_t *undecided)
{
    nvi_normal_f32_batch(words, B, out, und);
    for (int k = 0; k < B; k++) {
        if (und[k]) {
            (*undecided)++;
            continue;
        }
        double s = scalar32(words + 4 * k);
        *bad += memcmp(&s, &out[k], sizeof s) != 0;
    }
}

int main(void)
{
    if (!nvi_normal_mvec_ready()) {
        tap_diag("no vector math here (libmvec or AVX2 missing): the scalar path alone runs");
        tap_ok(1, "skipped: vector Box-Muller not available");
        return tap_done();
    }
    int64_t bad = 0, undecided = 0, n = 0;
    for (int rep = 0; rep < 1024; rep++, n += B) {
        for (int i = 0; i < 4 * B; i++)
            words[i] = (uint32_t)next();
        check(&bad, &undecided);
    }
    tap_ok(bad == 0 && undecided < n / 1000,
           "random words: %lld values, decided ones = the scalar expression (%lld differ), %lld "
           "undecided", (long long)n, (long long)bad, (long long)undecided);
    bad = undecided = 0;
    for (int k = 0; k < B; k++) {
        uint32_t *w = words + 4 * k;
        /* u1 = 1 - (a >> 11) 2^-53: 1 itself, 1 - k 2^-53 for small k, and beyond */
        uint64_t a = next() % 4 == 0 ? (next() % 64) << 11 : next() >> (next() % 64);
        uint64_t quarter = (k % 2 ? UINT64_C(3) : UINT64_C(1)) << 62;
        uint64_t b = quarter + (next() % 4096) - 2048; /* u2 near 1/4 or 3/4 */
        if (k % 3 == 0)
            b = next();
        w[0] = (uint32_t)(a >> 32);
        w[1] = (uint32_t)a;
        w[2] = (uint32_t)(b >> 32);
        w[3] = (uint32_t)b;
    }
    check(&bad, &undecided);
    tap_ok(bad == 0, "edge words (u1 at and near 1, cos near its zeros): %d values, decided ones "
           "= the scalar expression (%lld differ, %lld undecided)", B, (long long)bad,
           (long long)undecided);
    enum { N = 300007 };
    static double va[N], vb[N];
    int same = 0, runs = 0;
    for (uint64_t seed = 1; seed < 4; seed++)
        for (uint32_t t = 0; t < 2; t++, runs++) {
            nv_input_request rq = {.dtype = NV_DT_FP32, .target = NV_DT_FP32,
                                   .cls = NV_IN_NORMAL, .seed = seed, .case_index = 3 * t,
                                   .tensor_index = (int)t};
            nv_inputs_vector_math(true);
            int r = nv_inputs_generate(&rq, va, N);
            nv_inputs_vector_math(false);
            r |= nv_inputs_generate(&rq, vb, N);
            nv_inputs_vector_math(true);
            same += r == 0 && memcmp(va, vb, sizeof va) == 0;
        }
    tap_ok(same == runs, "streams with the vector values on and off: %d of %d tensors of %d "
           "fp32 normals identical", same, runs, N);
    return tap_done();
}
