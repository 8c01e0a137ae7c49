/* The op minimizer: the reproduction gate, then the delta-debugging engine of
 * worker/repro/ddmin.h over an op case's inputs, keeping its failure signature
 * fixed: a probe counts as "still failing" only when it fails with the stored
 * failure class (op, attrs, dtypes and mode do not change between probes), so a
 * probe that fails differently is another bug and is rejected. Every probe runs
 * in a forked child; the shape phase applies to ops whose inputs all share one
 * shape, and the element phase uses the op's neutral value (nvw_neutral_value).
 * The result is re-verified (the gate's run count) before it is reported. */

#ifndef NUMVAL_WORKER_MINIMIZE_H
#define NUMVAL_WORKER_MINIMIZE_H

#include <stdio.h>

#include "repro.h"
#include "worker/repro/ddmin.h"

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
