/* What compare.c and its fp32 kernel (compare_f32.c) share: the log-binned
 * histogram behind p99, the running sums of a pass, and the per-element rules
 * both apply (first mismatches, NaN/Inf pairs, the overflow neighbour). */
#ifndef NUMVAL_CORE_NUMERICS_COMPARE_INTERNAL_H
#define NUMVAL_CORE_NUMERICS_COMPARE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "compare.h"

/* ---- log-binned histogram of ulp errors ---- */
/* Bin = the float encoding of ulp_err >> 20 (8 exponent bits, 3 fraction bits:
 * 8 bins per octave), offset so that bin 0 holds everything below 2^-30 ulp
 * (reported as 0); the last bin holds inf (an error beyond fp32's range). */
#define HIST_BASE ((127 - 30) << 3)
#define HIST_BINS (2048 - HIST_BASE) /* up to the float encodings of inf */

typedef struct hist {
    uint64_t n[HIST_BINS];
} hist;
_Static_assert(HIST_BINS == NV_COMPARE_P99_BINS, "compare.h's p99 bins are these");

static inline unsigned hist_bin(float u)
{
    uint32_t b;
    memcpy(&b, &u, sizeof(b));
    int i = (int)((b & 0x7fffffffu) >> 20) - HIST_BASE;
    return i < 0 ? 0 : (unsigned)i; /* NaN never reaches here */
}

typedef struct acc {
    hist h;
    double sum_ulp;
    uint64_t finite;
} acc;

/* Upper edge of the bin holding the 99th percentile of count values. */
double nvc_hist_p99(const hist *h, uint64_t count, double max_ulp);
void nvc_result_init(nv_compare_result *r);
/* Counts nothing: records mismatch i among the first ones, and the failure
 * class if it is the first. */
void nvc_add_first(nv_compare_result *r, int64_t i, double got, double exact, double ulp_err,
                   double abs_err, double allowed, nv_failure_class kind);
/* Handles NaN/Inf pairs; returns true when the pair is special (done). */
bool nvc_special_pair(nv_compare_result *r, int64_t i, double g, double e);
/* The ulp metric's finite stand-in for an Inf one ulp beyond max_finite
 * (compare.c says when it applies), or g itself. */
double nvc_ulp_overflow_value(const nv_tolerance *tol, nv_dtype dt, double g, double e,
                              double lo);

#endif
