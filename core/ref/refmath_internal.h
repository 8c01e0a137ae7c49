/* refmath internals shared by refmath.c (API, fp64 fast path) and refmath_mpfr.c
 * (MPFR evaluation and rounding). Only core/ref uses this header. */
#ifndef NUMVAL_REFMATH_INTERNAL_H
#define NUMVAL_REFMATH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "refmath.h"

/* Internal function id for x^y next to the nv_fn ids. */
#define RM_FN_POW ((nv_fn)NV_FN_COUNT)

/* Exact results of special inputs (NaN, infinities, zeros, domain edges) that the
 * fast path and MPFR paths share. Returns true and sets *ret when f(x) is one. */
bool rm_special(nv_fn f, double x, double *ret);

/* The MPFR results, all with the "exact value described" contract below:
 *   rm_mpfr_pair   f(x) (or x^y for RM_FN_POW) as hi + lo (refmath.h contract);
 *   rm_mpfr_round  f(x) correctly rounded to dt under r, from the >= 128-bit value;
 *   rm_mpfr_direct the oracle: MPFR evaluating straight at dt's precision where
 *                  it can (libm-like functions, normal range), else rm_mpfr_round. */
void rm_mpfr_pair(nv_fn f, double x, double y, double *ret_hi, double *ret_lo);
double rm_mpfr_round(nv_fn f, double x, double y, nv_dtype dt, nv_rounding r);
double rm_mpfr_direct(nv_fn f, double x, nv_dtype dt, nv_rounding r);

/* Whether x is a multiple of half the quantum of dt at x's binade: the superset
 * of every rounding boundary of dt (representable values and midpoints). */
bool rm_on_half_quantum(double x, const nv_dtype_info *in);

/* The batched decision of refmath_batch.c: the inputs where special_inl
 * returns false are the finite nonzero x (ALL), the finite x > 0 (POSITIVE:
 * log, log2, sqrt, rsqrt), the finite nonzero x > -1 (ABOVE_M1: log1p). */
enum { RM_DOMAIN_ALL, RM_DOMAIN_POSITIVE, RM_DOMAIN_ABOVE_M1 };

/* The rules of the scalar path that the batch also applies where its value
 * v leaves the cell decision (rm_batch_far in refmath.c fills them; zeroed,
 * none applies):
 *   round: |v| > 2^1000 (not NaN) gives fast_try's stand-in, rounded:
 *          over[v < 0], as does a decided cell past max_finite (the
 *          format's overflow under nearest even, round_cell's
 *          nv_dtype_round); |v| < 2^-960 gives under[sign] with fast_try's sign
 *          rule (v's sign, tiny_sign(f) for a zero v, undecided for a
 *          negative exact value of a positive x or a sign unknown);
 *          sat: x in the saturated tail [sat_lo, sat_hi] (bounds of |x|, or
 *          of x for SAT_SIGNED) gives sat_val with x's sign (SAT_ODD) or as
 *          it is: e^x within 2^-35 of 1 below |x| < 2^-36, 1 - |tanh| and
 *          erfc below 2^-32 past 13 and 4.5, e^x - 1 within 2^-36 of -1
 *          below -25, all nearer than the half quantum 2^-(p+2) >= 2^-30
 *          beside 1 of every batch target (p <= 28): the correctly
 *          rounded value under nearest even is that limit, as the scalar
 *          tail's pair decides it; near: |x| < near_below, where f(x) lies
 *          strictly between x (1 - 2^-50) and x (tanh below 2^-27: x - tanh x
 *          < |x|^3 / 3), gives the rounding of that interval where it holds
 *          one cell (x on a boundary: the cell below it, toward zero).
 *   pair:  x >= far_over or x <= far_under gives far_pair's fixed pair;
 *          |x| < tail_below is left undecided (eval_one's pair there is its
 *          tail's, which v alone does not give). */
enum { RM_SAT_NONE, RM_SAT_ABS, RM_SAT_ODD, RM_SAT_SIGNED };

typedef struct rm_batch {
    double eps;        /* fast_eval's bound for the function */
    double max_finite; /* of the target */
    int64_t emin, mant_bits;
    int domain;
    bool round; /* nv_ref_round_n under nearest even; else nv_ref_eval_n's pair */
    bool far;   /* the rules above are filled */
    int tiny_sign, sat;
    double over[2], under[2]; /* [0] for a positive value, [1] negative */
    double sat_lo, sat_hi, sat_val;
    double far_over, far_under, tail_below;
    double near_below; /* round: |x| below it has |f(x)| in (|x| (1 - 2^-50), |x|) */
} rm_batch;

/* The decision's parameters for target in with bound eps, domain ALL. */
static inline rm_batch rm_batch_for(const nv_dtype_info *in, double eps, bool round)
{
    return (rm_batch){.eps = eps, .max_finite = in->max_finite, .emin = in->emin,
                      .mant_bits = in->mant_bits, .domain = RM_DOMAIN_ALL, .round = round,
                      .far_over = __builtin_inf(), .far_under = -__builtin_inf()};
}

/* Whether f batches (a function whose fast path is fast_eval alone, no tail)
 * into the target in (fast_target's), and its batch parameters into *b. */
bool rm_batch_setup(nv_fn f, const nv_dtype_info *in, bool round, rm_batch *b);

/* For k < n (x[k], v[k] = fast_eval's value): where the fast path decides,
 * out[k] = the rounded value (round) or v[k] with lo_out[k] = 0 (the pair),
 * undecided[k] = 0; elsewhere undecided[k] = 1 and out[k] is left as it was.
 * Returns the count decided. */
int rm_decide_n(const rm_batch *b, const double *x, const double *v, int n, double *out,
                double *lo_out, uint8_t *undecided);

/* The vector values of refmath_mvec.c for nv_ref_round_n under nearest even:
 * whether f has them here (libmvec present, AVX2, the FP environment at its
 * default) into target in, with the decision's parameters into *b; then
 * v[k] = f(x[k]) for k < len, within b->eps relative where the decision
 * reads them (its range and domain test). */
bool rm_mvec_setup(nv_fn f, const nv_dtype_info *in, rm_batch *b);
void rm_mvec_values(nv_fn f, const double *x, int len, double *v);

/* nv_ref_eval_n's pairs for tanh and erf in their tails (refmath_tail_pairs.c):
 * whether the vector path runs here for f into target in; then, for k < n,
 * where it decides, hi[k], lo[k] = eval_one's pair and undecided[k] = 0;
 * elsewhere undecided[k] = 1 and hi[k], lo[k] are left as they were. Returns
 * the count decided. */
bool rm_tail_pairs_setup(nv_fn f, const nv_dtype_info *in);
int rm_tail_pairs_n(nv_fn f, const nv_dtype_info *in, const double *x, int n, double *hi,
                    double *lo, uint8_t *undecided);

#endif
