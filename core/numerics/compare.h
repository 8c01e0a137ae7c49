/* Comparison of device values against exact references (docs/DESIGN.md "Numerics"):
 * NaN positions must match, infinities must match in sign, finite values are
 * judged by the tolerance; metrics in ULPs of the output dtype (glibc libm-test:
 * |got - exact| / ulp(exact)), absolute and relative. */
#ifndef NUMVAL_COMPARE_H
#define NUMVAL_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"
#include "tolerance.h"

#define NV_COMPARE_FIRST 16

typedef enum nv_failure_class {
    NV_FAIL_NONE = 0,
    NV_FAIL_NAN_MISMATCH,
    NV_FAIL_INF_MISMATCH,
    NV_FAIL_ULP_EXCEEDED,   /* ulp and allclose metrics */
    NV_FAIL_BOUND_EXCEEDED, /* bound metric */
    NV_FAIL_SIGNED_ZERO,    /* a zero of the wrong sign where the op defines it */
    /* An output the device got wrong whose accumulation exceeds the range of the
     * accumulator it declares (nv_compare_input.peak): reported apart, not a
     * mismatch (docs/TOLERANCES.md "Intermediate overflow"). */
    NV_FAIL_INTERMEDIATE_OVERFLOW,
} nv_failure_class;

const char *nv_failure_class_name(nv_failure_class c);

typedef struct nv_compare_input {
    nv_dtype dtype;          /* output dtype: ULPs are of this format */
    int64_t n;               /* element count */
    const double *got;       /* device values, decoded */
    const double *exact;     /* exact reference, high part */
    const double *exact_lo;  /* low part (double-double) or NULL */
    const double *abs_sum;   /* bound metric: sum |x_i| of each output's reduction, or NULL */
    int64_t reduction_len;   /* bound metric: n of g(n) */
    /* Judge the sign of zero results (the op defines it: nv_op_zero_sign_judged,
     * core/ops/catalog.h): a device zero whose sign differs from the exact
     * value's, itself within the tolerance, is a signed_zero_mismatch. The sign
     * of the exact value is that of the correctly rounded result, also when it
     * underflows to zero (IEEE 754-2019 §6.3; §7.5: a zero result of underflow
     * keeps the sign of the exact value). false: -0 and +0 are equal. */
    bool zero_sign;
    /* Bound metric: abs_sum[i] 2^abs_exp[i] is the scale when it exceeds fp64's
     * range (nv_ref_out, core/ref/reference.h); NULL: abs_sum is the scale. */
    const double *abs_exp;
    /* The intermediate-overflow rule: peak[i] is the accumulator demand of output
     * i (nv_ref_out), acc_dtype the accumulator the device declares (its unit
     * roundoff u) and acc_range the dtype whose overflow threshold T (max_finite
     * + ulp(max_finite)/2, IEEE 754-2019 §7.4) is the accumulator's range. An
     * output the device gets wrong (a NaN or Inf mismatch, or beyond the
     * tolerance) while peak[i] min((1 + u)^reduction_len, 2) >= T is counted as an
     * intermediate overflow, not as a mismatch: the exact partial results do not
     * fit the declared accumulator in some order. NULL: no such rule. */
    const double *peak;
    nv_dtype acc_dtype, acc_range;
} nv_compare_input;

typedef struct nv_mismatch {
    int64_t index;
    double got, exact, ulp_err, abs_err, allowed;
    nv_failure_class kind;
} nv_mismatch;

/* Element-wise ULP error histogram with fixed edges, so that cases add up:
 * bucket 0 counts errors of exactly 0, bucket k (1..NV_ULP_HIST_EDGES-1) errors
 * in (edge[k-1], edge[k]] with edges 0, 2^-3, 2^-2, 2^-1, 1, 2, ..., 2^24 (upper
 * edges inclusive: 0.5 ulp is correct rounding, 1 ulp faithful), and the last
 * bucket errors above 2^24 ulp. */
#define NV_ULP_HIST_EDGES 29
#define NV_ULP_HIST_BUCKETS (NV_ULP_HIST_EDGES + 1)
double nv_ulp_hist_edge(int k); /* k in [0, NV_ULP_HIST_EDGES) */

typedef struct nv_compare_result {
    int64_t compared, mismatches, nan_mismatches, inf_mismatches;
    int64_t zero_sign_mismatches; /* of the mismatches: zeros of the wrong sign */
    double max_ulp, mean_ulp, p99_ulp; /* over finite pairs; p99 from a log-binned histogram:
                                        * 8 bins per octave, reported as the upper edge of its
                                        * bin (at most 12.5% above, capped at max_ulp; below
                                        * 2^-30 ulp reads 0) */
    double max_abs, max_rel;
    double max_allowed;      /* largest allowance any element had (abs units) */
    double headroom;         /* max over elements of err / allowed: <= 1 passes */
    nv_failure_class failure; /* first class seen in index order, NONE when passed */
    int n_first;
    nv_mismatch first[NV_COMPARE_FIRST]; /* lowest indices */
    /* Bound metric with growth "probabilistic": lambda of this comparison (the
     * union bound over compared outputs x reduction_len terms), the probability
     * it is set for, and the headroom under the deterministic worst case
     * 2 (n - 1) u abs_sum + ulp/2 reported beside the default's (Higham §4.2).
     * Other metrics: lambda = p_fail = 0, headroom_worst_case = headroom. */
    double lambda, p_fail, headroom_worst_case;
    /* Outputs counted under the intermediate-overflow rule (not in mismatches),
     * the lowest-index one (kind NV_FAIL_INTERMEDIATE_OVERFLOW, valid when the
     * count is > 0) and its peak. */
    int64_t intermediate_overflows;
    nv_mismatch first_overflow;
    double first_overflow_peak;
    /* Over the same elements as max_ulp/mean_ulp (the finite pairs judged by
     * value); nonfinite counts the pairs with a NaN or Inf on either side.
     * Filled by nv_compare only (has_ulp_hist). */
    bool has_ulp_hist;
    int64_t ulp_hist[NV_ULP_HIST_BUCKETS];
    int64_t nonfinite;
} nv_compare_result;

/* Compare in one pass. Returns 0 or -EINVAL (bad tolerance for this input, e.g.
 * bound metric without abs_sum). */
int nv_compare(const nv_compare_input *in, const nv_tolerance *tol, nv_compare_result *ret);

/* Comparison in parts (the blocked op cases of worker/kinds/op): the elements
 * [base, base + in->n) of a comparison of n_total elements, each part with its
 * own arrays, give exactly nv_compare's result over the whole once merged in
 * index order. The maxima, counts, histograms and first mismatches merge as
 * they are; the mean is a sum in index order, so a part keeps its ulp errors
 * (ue, one double per element of the part) and the merge adds them one by one
 * (floating-point addition does not associate: any other order may change the
 * mean's last bits). A part without ue (NULL) sums in place: consecutive
 * nv_compare_part_run calls on one such part are one pass, but merging it adds
 * its sum as one term. */
#define NV_COMPARE_P99_BINS 1272 /* compare.c's log-binned histogram */
typedef struct nv_compare_part {
    nv_compare_result r; /* indices are the whole comparison's */
    uint64_t p99_hist[NV_COMPARE_P99_BINS];
    double sum_ulp;
    uint64_t finite;
    double *ue;   /* caller's buffer of the part's element count, or NULL */
    int64_t n_ue; /* ulp errors written to ue */
    /* NULL, or set after init: a buffer of the part's element count that
     * nv_compare_part_run fills with nv_compare_elem's outputs of each
     * element (one pass for both; -EINVAL where nv_compare_elem is). */
    struct nv_compare_elem_out *elems;
} nv_compare_part;

/* An empty part; ue (borrowed, may be NULL) as above. */
void nv_compare_part_init(nv_compare_part *p, double *ue);
/* Add elements base.. (in's arrays hold them from index 0) of a comparison of
 * n_total elements to p. Returns 0 or -EINVAL as nv_compare. */
int nv_compare_part_run(const nv_compare_input *in, int64_t base, int64_t n_total,
                        const nv_tolerance *tol, nv_compare_part *p);
/* Merge part p, the next in index order, into acc (a part without ue). */
void nv_compare_part_merge(nv_compare_part *acc, const nv_compare_part *p);
/* The result of the whole from acc: what nv_compare returns. */
void nv_compare_part_finish(const nv_compare_part *acc, int64_t n_total, const nv_tolerance *tol,
                            nv_compare_result *ret);

/* Element k of a comparison by nv_compare's per-element rules: finite is a pair
 * judged by value (one that counts in max_ulp), ulp_err its error (NaN/Inf
 * pairs: 0 when they match, inf when not), mismatch whether nv_compare counts
 * it in mismatches. Metric "bound" and a peak (the intermediate-overflow rule)
 * are -EINVAL here. */
typedef struct nv_compare_elem_out {
    bool finite, mismatch;
    double ulp_err, exact, exact_lo;
} nv_compare_elem_out;
int nv_compare_elem(const nv_compare_input *in, int64_t k, const nv_tolerance *tol,
                    nv_compare_elem_out *ret);
/* Elements k0 .. k0 + n - 1 into ret[0 .. n): nv_compare_elem's outputs, the
 * ordinary ones by the vector kernel. Returns 0 or -EINVAL as nv_compare_elem. */
int nv_compare_elems(const nv_compare_input *in, int64_t k0, int64_t n, const nv_tolerance *tol,
                     nv_compare_elem_out *ret);

/* Same metrics for fp32 pairs where ref is the exact value as fp32 (benchmarks,
 * bulk tensors): the single-pass, vectorisable kernel. Metric "bound" is -EINVAL
 * here (no abs_sum). max_rel is computed in fp32 (within 2^-23 of nv_compare's),
 * and ulp errors above 2^23 (got and ref more than a factor 2 apart) are rounded
 * to fp32 precision; everything else equals nv_compare on the same pairs. */
int nv_compare_f32(const float *got, const float *ref, int64_t n, const nv_tolerance *tol,
                   nv_compare_result *ret);

#endif
