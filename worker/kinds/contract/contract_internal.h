/* The contract kind's probes (contract.h): each measures one family of
 * properties of a device from its outputs alone and returns them as JSON in the
 * vocabulary of describe()'s "contract" (docs/CONTRACT.md). The probe code never
 * reads describe(); judge.c alone compares the two. Internal to
 * worker/kinds/contract. */
#ifndef NUMVAL_WORKER_KINDS_CONTRACT_INTERNAL_H
#define NUMVAL_WORKER_KINDS_CONTRACT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/dtype.h"
#include "core/spec/contractspec.h"
#include "numval/backend.h"

/* One open device context. err holds the last refusal's message. */
typedef struct ct_dev {
    const nv_backend *t;
    void *ctx;
    char err[512];
} ct_dev;

/* One call of op on n_in inputs of dtypes in_dt, each rows x cols elements
 * (rows == 0: a vector of cols), the elements given as encodings; the output,
 * out_n elements of out_dt, as encodings into out. Returns NV_OK, or the
 * backend's NV_E_* code (d->err says why), or NV_E_DEVICE when the output has
 * another dtype or element count than asked. */
int ct_call(ct_dev *d, const char *op, const char *attrs, int n_in, const nv_dtype *in_dt,
            const uint64_t *const *in, int64_t rows, int64_t cols, nv_dtype out_dt, int64_t out_n,
            uint64_t *out);

/* ct_call with a shape per input: input k is shapes[2k] x shapes[2k + 1]
 * (rows 0: a vector), as for ct_call. */
int ct_call_shaped(ct_dev *d, const char *op, const char *attrs, int n_in, const nv_dtype *in_dt,
                   const uint64_t *const *in, const int64_t *shapes, nv_dtype out_dt,
                   int64_t out_n, uint64_t *out);

/* True when a code means "the device does not offer this" (dtype, op, attrs). */
bool ct_refused(int r);

/* The encoding of x in dt, x a value of dt (round to nearest even otherwise). */
uint64_t ct_enc(nv_dtype dt, double x);
/* Exact decode, no DAZ. */
double ct_dec(nv_dtype dt, uint64_t bits);

/* An encoding as JSON text "0x..." with the dtype's width, and its value. */
json_t *ct_bits_json(nv_dtype dt, uint64_t bits);

/* The rounding mode names of describe() ("rne", "rtz", "up", "down", "stochastic"). */
const char *ct_rounding_name(nv_rounding r);

/* x as a JSON number, or "nan", "inf", "-inf". */
json_t *ct_num_json(double x);

/* Hex-float text of x ("0x1.8p+0"), for evidence (malloc'd in a json string). */
json_t *ct_real_json(double x);

/* What earlier probes measured that later ones need to model the device. */
typedef struct ct_known {
    bool rounding_known;
    nv_rounding rounding; /* the arithmetic rounding (conversion fp32 -> bf16 or fp64 -> fp32) */
    bool saturate;        /* overflow saturates (the same conversion) */
    bool ftz, daz;        /* of fp32 arithmetic */
} ct_known;

/* Conversions from src to dst: exhaustive over src's encodings when src has at
 * most 16 bits, else the boundary set (every value, midpoint and its
 * neighbours, the overflow threshold, specials) of dst. NULL on ENOMEM or when
 * the device refuses the cast: *ret_refused then says which. */
json_t *ct_probe_conversion(ct_dev *d, nv_dtype src, nv_dtype dst, bool *ret_refused);

/* Elementwise arithmetic in dt: FTZ, DAZ, fma fused or split, correctly
 * rounded add/mul/div/sqrt, NaN propagation, signed zeros, maximum/minimum. */
json_t *ct_probe_arithmetic(ct_dev *d, nv_dtype dt, uint64_t seed, bool *ret_refused);

/* Accumulation of sum over dt: effective significand bits and range of the
 * accumulator, determinism over repeats, and the reduction order fitted
 * against the order families of docs/CONTRACT.md. */
json_t *ct_probe_accumulation(ct_dev *d, nv_dtype dt, const ct_known *k, int repeats, uint64_t seed,
                              bool *ret_refused);
/* The same for matmul (A [rows, K] times a column of ones: every product exact,
 * so the accumulator alone shows), plus whether products enter the
 * accumulation unrounded ("products": "fused" or "rounded"). */
json_t *ct_probe_matmul(ct_dev *d, nv_dtype dt, const ct_known *k, int repeats, uint64_t seed,
                        bool *ret_refused);

/* Transcendental functions in dt: max ULP per function (exhaustive for <= 16
 * bits, a sweep of sweep points for wider), correct rounding, host-libm
 * identity, monotonicity, special values; and the dtype's kind. */
json_t *ct_probe_transcendental(ct_dev *d, nv_dtype dt, const ct_known *k, int64_t sweep,
                                uint64_t seed, bool *ret_refused);

/* The row sums of rows x cols values of dt (out: rows encodings), by sum over
 * the last axis, or (mm) by matmul with a column of ones, every product exact. */
int ct_sum_rows(ct_dev *d, bool mm, nv_dtype dt, const double *x, int64_t rows, int64_t cols,
                uint64_t *out);

/* Leaves of the tree probe (fprev.h): 32 x 31 / 2 rows of 32 in one call. */
#define CT_TREE_N 32

/* The summation tree of sum (mm false) or matmul over CT_TREE_N terms, for an
 * accumulator of p bits (p_lower: only a bound) and the measured rounding:
 * {"tree": text, "max_fan_in", "nodes", "matches": [families], "evidence"}, or
 * "tree" "indistinguishable" / "unrecognized" with "why". *ret_width: the most
 * terms a node adds with one rounding, minus one (0 when not revealed);
 * *ret_kinds: fprev.h's node-kind bits. NULL on ENOMEM. */
json_t *ct_probe_tree(ct_dev *d, bool mm, nv_dtype dt, int p, bool p_lower, const ct_known *k,
                      int *ret_width, int *ret_kinds);

/* Whether the adder's alignment truncates: {"alignment": "truncate" | "round" |
 * "indistinguishable", "evidence" or "why"}. */
json_t *ct_probe_alignment(ct_dev *d, bool mm, nv_dtype dt, int p, bool p_lower,
                           const ct_known *k);

/* Exact sum a + b rounded to dt under mode (IEEE 754-2019 §5.4.1, exact-zero
 * sign per §6.3), as the accumulation model needs it. */
double ct_add(nv_dtype dt, double a, double b, const nv_round_mode *m);

/* The measured contract per dtype in describe()'s vocabulary, from the probe
 * sections of measured (new reference; NULL on ENOMEM). dtypes: the spec's. */
json_t *ct_summary(const json_t *measured, const bool *dtypes);

/* Declared vs measured: the list of contract_mismatch failures (new reference),
 * and appended to judged_list every field both sides state (each one check,
 * {"field", "declared", "measured"}). */
json_t *ct_judge(const json_t *declared_describe, const json_t *measured, json_t *judged_list);

#endif
