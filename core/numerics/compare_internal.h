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

/* ---- the vector kernel of the per-element rules (compare_vec.c) ---- */
#define NVC_VEC_CHUNK 256

typedef struct nvc_vec_args {
    const double *got, *hi, *lo; /* lo may be NULL */
    double max_finite, atol, rtol, max_ulp;
    int64_t emin, mant_bits; /* of the output dtype, a float of at most 23 fraction bits */
    bool allclose;           /* else the ulp metric */
    bool zero_exact;         /* ulp_in(0) = 2^(emin - mant_bits): an exact zero is ordinary */
} nvc_vec_args;

typedef struct nvc_vec_out {
    double ue[NVC_VEC_CHUNK];
    uint32_t bin[NVC_VEC_CHUNK]; /* hist_bin((float)ue) */
    uint8_t bkt[NVC_VEC_CHUNK];  /* compare.c's ulp_bucket(ue) */
    uint8_t fin[NVC_VEC_CHUNK];  /* 0 for a skipped pair (ue, bin, bkt then 0) */
    int n_skip;                  /* of the chunk's pairs, those skipped */
    double max[5];               /* of ue, err, rel, allowed, headroom */
} nvc_vec_out;

/* Elements [k0, k0 + n) (n a multiple of 4, at most NVC_VEC_CHUNK) by the
 * scalar rules' arithmetic: true with *o filled when every one is a finite,
 * passing pair whose ulp is a normal double (a zero on either side as
 * compare_vec.c says) or a passing special pair (skipped); false otherwise
 * (*o is then garbage: the caller applies the scalar rules to the chunk). */
bool nvc_chunk_vec(const nvc_vec_args *a, int64_t k0, int n, nvc_vec_out *o);

#endif
