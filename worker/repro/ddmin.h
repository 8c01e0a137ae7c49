/* The minimizer's engine (DESIGN.md "Failures, reproducers, the permanent
 * suite"): delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating
 * Failure-Inducing Input", IEEE TSE 28(2), 2002) over a set of tensors whose
 * failure the caller's test decides, so the failure signature stays the
 * caller's business: a probe counts as "still failing" only when it fails with
 * the stored signature, and one that fails differently is another bug. Used by
 * the op and gradient minimizers (worker/kinds/op/minimize.c,
 * worker/kinds/gradient/minimize.c).
 *
 * Phases, each a ddmin over its own unit:
 *  1. shape: slices along each dim (prefix and suffix bisection, then ddmin of
 *     chunks), where a slice exists (the problem's own, or every tensor sliced
 *     alike when all share one shape);
 *  2. elements: which elements stay non-neutral; the rest are replaced by the
 *     tensor's neutral value, so positions (and a fault that only exists at some
 *     position or length) are kept;
 *  3. values: each remaining element toward 1, -1, 2, 1/2 or its nearest power
 *     of two (never changing dtype). */
#ifndef NUMVAL_WORKER_REPRO_DDMIN_H
#define NUMVAL_WORKER_REPRO_DDMIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/numerics/tensor.h"
#include "core/spec/jobspec.h"

/* Options of a minimization (the op and gradient minimizers; gate_runs is the
 * caller's reproduction gate and re-verification). */
typedef struct nvw_min_opts {
    int budget;           /* most probes (0: 2000) */
    double deadline_s;    /* wall-clock limit (0: 300 s) */
    int gate_runs;        /* reproduction gate runs (0: 5) */
    bool plain_ddmin;     /* baseline: one ddmin deleting elements of the flattened
                             input (no neutral values, no shape phases) */
    FILE *progress;       /* one line per accepted step and per 50 probes; may be NULL */
    atomic_int *cancel;   /* stop (stop "cancelled") when it becomes non-zero; may be NULL */
} nvw_min_opts;

#define NVW_DD_MAX_TENSORS (NV_JOB_MAX_TENSORS + 1)

/* A minimization problem: a set of tensors whose failure the caller's test
 * decides (the signature stays the caller's business). */
typedef struct nvw_dd_problem {
    int n; /* tensors, 1..NVW_DD_MAX_TENSORS */
    void *ud;
    /* 1: cand fails with the stored signature; 0: it does not; negative errno:
       infrastructure error (the minimization stops with it). One probe. */
    int (*test)(void *ud, nv_tensor *const *cand);
    /* May be NULL. false: cand is not a valid case (rejected without a probe). */
    bool (*valid)(void *ud, nv_tensor *const *cand);
    /* May be NULL (nothing neutralized). The value that removes an element of
       tensor i, NAN when tensor i must not be neutralized. */
    double (*neutral)(void *ud, int i);
    /* May be NULL: then every tensor is sliced along d when all share one shape.
       Else the candidate with tensor 0 restricted to idx[0..k) along dim d and
       the other tensors to match (new tensors in out[0..n)); -EINVAL when no
       such candidate exists. */
    int (*slice)(void *ud, nv_tensor *const *cur, int d, const int64_t *idx, int64_t k,
                 nv_tensor **out);
} nvw_dd_problem;

/* The phases above (window, neutral elements, values) on

 * cur[0..p->n) (owned; replaced in place by smaller candidates that still
 * fail). start: the monotonic time (nvw_dd_now) the deadline counts from.
 * *ret_probes: probes run; *ret_stop: "done", "budget", "deadline" or
 * "cancelled". Returns 0 or a negative errno. */
int nvw_dd_minimize(const nvw_dd_problem *p, const nvw_min_opts *o, nv_tensor **cur, double start,
                    int *ret_probes, const char **ret_stop);
double nvw_dd_now(void); /* monotonic seconds */

/* Elements of t[0..p->n) not at their tensor's neutral value. */
int64_t nvw_dd_nonneutral(const nvw_dd_problem *p, nv_tensor *const *t);

/* src restricted to the indices idx[0..n) along dim d (a new tensor). */
int nvw_dd_slice_tensor(const nv_tensor *src, int d, const int64_t *idx, int64_t n,
                        nv_tensor **ret);

/* Whether v is the neutral value nv (a zero of the same sign). */
bool nvw_dd_is_neutral(double v, double nv);

/* Contiguous copies of src[0..n) into dst (-ENOMEM: none kept), and freeing
 * t[0..n) (each set NULL). */
int nvw_dd_copy_set(nv_tensor *const *src, int n, nv_tensor **dst);
void nvw_dd_free_set(nv_tensor **t, int n);

#endif
