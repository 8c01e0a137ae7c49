/* The minimizer (DESIGN.md "Failures, reproducers, the permanent suite"): delta
 * debugging (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing
 * Input", IEEE TSE 28(2), 2002) over an op case, keeping its failure signature
 * fixed: a probe counts as "still failing" only when it fails with the stored
 * failure class (op, attrs, dtypes and mode do not change between probes), so a
 * probe that fails differently is another bug and is rejected.
 *
 * Phases, each a ddmin over its own unit, every probe in a forked child:
 *  1. shape: slices along each dim (prefix and suffix bisection, then ddmin of
 *     chunks), for ops whose inputs all share one shape;
 *  2. elements: which elements stay non-neutral; the rest are replaced by the
 *     op's neutral value (nvw_neutral_value), so positions (and a fault that
 *     only exists at some position or length) are kept;
 *  3. values: each remaining element toward 1, -1, 2, 1/2 or its nearest power
 *     of two (never changing dtype).
 * The result is re-verified (the gate's run count) before it is reported. */
#ifndef NUMVAL_WORKER_MINIMIZE_H
#define NUMVAL_WORKER_MINIMIZE_H

#include <stdatomic.h>
#include <stdio.h>

#include "repro.h"

typedef struct nvw_min_opts {
    int budget;           /* most probes (0: 2000) */
    double deadline_s;    /* wall-clock limit (0: 300 s) */
    int gate_runs;        /* reproduction gate runs (0: 5) */
    bool plain_ddmin;     /* baseline: one ddmin deleting elements of the flattened
                             input (no neutral values, no shape phases) */
    FILE *progress;       /* one line per accepted step and per 50 probes; may be NULL */
    atomic_int *cancel;   /* stop (stop "cancelled") when it becomes non-zero; may be NULL */

} nvw_min_opts;

typedef struct nvw_min_result {
    int gate_runs, gate_failed, gate_bits; /* reproduction gate */
    bool flaky; /* failed in fewer than half the gate runs: not minimized */
    int probes; /* probes the minimization ran (gate excluded) */
    double seconds;
    const char *stop;                            /* "done", "budget", "deadline" or "cancelled" */
    int64_t numel_before, numel_after;           /* all input elements */
    int64_t nonneutral_before, nonneutral_after; /* elements not at the neutral value */
    bool verified; /* the minimized case failed the same way in every re-run */
    int n_in;
    nv_tensor *in[NV_JOB_MAX_TENSORS]; /* the minimized inputs (owned) */
    nvw_probe_out last;                /* the final verification probe */
} nvw_min_result;

/* ---- the engine, shared by op and gradient cases (worker/kinds/gradient/minimize.c) ---- */

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

/* The phases of minimize.h's comment (window, neutral elements, values) on
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

/* Gate and minimize the case of env->rc. Returns 0 with *ret filled (free with
 * nvw_min_result_done), or a negative errno for an infrastructure error (a
 * probe could not be started). A flaky case returns 0 with ret->flaky set. */
int nvw_minimize(const nvw_probe_env *env, const nvw_min_opts *o, nvw_min_result *ret);
void nvw_min_result_done(nvw_min_result *r);

/* Count of elements of the inputs not equal to their neutral value (inputs that
 * cannot be neutralized count whole). */
int64_t nvw_nonneutral(const nvw_repro *rc, int n_in, nv_tensor *const *in);

/* The minimized case as a new artifact: the original manifest with "shape",
 * "failure_class", "max_ulp", "mismatches" of the final probe, "signature",
 * "repro_rate", "minimized_from" (the original's content id) and "minimized"
 * (method, probes, seconds, element counts, the non-neutral elements), the
 * minimized inputs and the final device output. Compressed bytes in *ret_buf
 * (malloc'd), content id in sha. */
int nvw_minimized_artifact(const nvw_repro *rc, const nvw_min_result *m, uint8_t **ret_buf,
                           size_t *ret_len, char sha[65]);

#endif
