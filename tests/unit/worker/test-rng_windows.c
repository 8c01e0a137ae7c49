/* The window test of RNG jobs (worker/kinds/rng/windows.h) on synthetic
 * streams: the power docs/JOBS.md "RNG jobs" states (any copied run of at
 * least w values between two segments is found, at any shift, with every
 * shared window counted; a run of w - 1 is not) and no alarm on independent
 * 24-bit uniforms, whose false-alarm bound the test recomputes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "tests/unit/tap.h"
#include "worker/kinds/rng/windows.h"

#define NSEG 4
#define N 4096

static float seg[NSEG][N];

/* Independent fp32 uniforms with 24 random bits, as torch.rand and emu give. */
static void fill(uint64_t seed)
{
    nv_rng r;
    for (int s = 0; s < NSEG; s++) {
        nv_rng_init(&r, seed, 7, (uint32_t)s);
        for (int i = 0; i < N; i++)
            seg[s][i] = (float)(nv_rng_u32(&r) >> 8) * 0x1p-24f;
    }
}

static int64_t shared(int w, rg_overlap *o)
{
    const float *p[NSEG] = {seg[0], seg[1], seg[2], seg[3]};
    return rg_windows(p, NSEG, N, w, o) == 0 ? o->shared : -1;
}

int main(void)
{
    rg_overlap o;
    for (int w = 2; w <= 8; w += 3) {
        fill(1);
        tap_ok(shared(w, &o) == 0, "w = %d: independent streams share no window", w);
    }
    /* a run of L values of segment 0 copied into segment 2 at another place:
     * L - w + 1 windows on each side */
    static const int shifts[][2] = {{100, 3000}, {4000, 0}, {17, 17}};
    for (int k = 0; k < 3; k++)
        for (int w = 2; w <= 6; w += 2) {
            int from = shifts[k][0], to = shifts[k][1], len = w;
            if (from + len > N || to + len > N)
                continue;
            fill(2);
            memcpy(&seg[2][to], &seg[0][from], (size_t)len * sizeof(float));
            int64_t got = shared(w, &o);
            tap_ok(got == 2 && o.seg_a == 0 && o.seg_b == 2 && o.pos_a == from && o.pos_b == to,
                   "w = %d: a run of exactly w values from 0@%d to 2@%d is found (%lld shared, "
                   "first %d@%lld = %d@%lld)",
                   w, from, to, (long long)got, o.seg_a, (long long)o.pos_a, o.seg_b,
                   (long long)o.pos_b);
            fill(2);
            memcpy(&seg[2][to], &seg[0][from], (size_t)(len - 1) * sizeof(float));
            tap_ok(shared(w, &o) == 0, "w = %d: a run of w - 1 values is below the test", w);
        }
    /* a whole stream shifted: segment 1 = segment 0 from position 256 on */
    fill(3);
    memcpy(seg[1], &seg[0][256], (N - 256) * sizeof(float));
    int64_t got = shared(3, &o);
    tap_ok(got == 2 * (N - 256 - 3 + 1) && o.pos_a == 256 && o.pos_b == 0,
           "a stream shifted by 256: every one of its %d windows counted twice (%lld)", N - 256 - 2,
           (long long)got);
    /* repeats inside one segment are not an overlap */
    fill(4);
    memcpy(&seg[3][2000], &seg[3][10], 8 * sizeof(float));
    tap_ok(shared(3, &o) == 0, "a run repeated inside one segment is not counted");
    /* the stated false-alarm bound: C(M, 2) 2^-72 for 16 draws of 4096, w = 3 */
    double m = 16.0 * (4096 - 3 + 1), want = m * (m - 1) / 2 * 0x1p-72;
    double b = rg_false_alarm(16, 4096, 3, 24);
    tap_ok(b == want && b > 4.5e-13 && b < 4.6e-13, "false-alarm bound for the default job: %g", b);
    tap_ok(rg_false_alarm(64, 1 << 16, 2, 4) == 1.0, "the bound is capped at 1");
    return tap_done();
}
