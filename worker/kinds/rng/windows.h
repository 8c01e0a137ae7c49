/* The window test of RNG jobs (docs/JOBS.md "RNG jobs"): which windows of w
 * consecutive values two segments of generator output share, at any shift.
 * An interface of its own (not rng_internal.h) so its power can be tested on
 * synthetic streams (tests/unit/worker/test-rng_windows.c). */
#ifndef NUMVAL_WORKER_RNG_WINDOWS_H
#define NUMVAL_WORKER_RNG_WINDOWS_H

#include <stdint.h>

/* Windows of w consecutive values shared between distinct segments, each of n
 * values (bitwise, every pair of segments, any shift): `shared` windows that
 * occur in another segment (each occurrence counted), the first such pair by
 * (segment, position) of its first occurrence. A window repeated inside one
 * segment only is not counted. */
typedef struct rg_overlap {
    int64_t shared;
    int seg_a, seg_b;
    int64_t pos_a, pos_b;
} rg_overlap;

/* 0, or -ENOMEM. */
int rg_windows(const float *const *segs, int nseg, int64_t n, int w, rg_overlap *ret);

/* The bound on a false alarm of rg_windows for independent values of `bits`
 * random bits: C(M, 2) 2^(-bits w), M = nseg (n - w + 1) windows (at most 1). */
double rg_false_alarm(int nseg, int64_t n, int w, int bits);

#endif
