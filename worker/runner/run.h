/* The job runner: expands a job spec into cases, runs them on a backend in
 * parallel, compares against references and builds the result JSON. */
#ifndef NUMVAL_WORKER_RUN_H
#define NUMVAL_WORKER_RUN_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/numerics/tensor.h"

typedef void (*nvw_progress_fn)(void *ud, int64_t done, int64_t total);

typedef struct nvw_failure {
    int case_index;
    const json_t *case_json; /* the case as it appears in the result */
    const json_t *manifest;  /* spec, seed, device, build, mode, tolerance, mismatches */
    int n_tensors;
    const char *const *names;        /* "input:0", "output:0" ... */
    const nv_tensor *const *tensors; /* exact inputs and device outputs */
} nvw_failure;

/* Called serially for each failed case; may store an artifact and return its id
 * (malloc'd), which the runner writes into the case JSON as "artifact". */
typedef int (*nvw_failure_fn)(void *ud, const nvw_failure *f, char **ret_artifact_id);

typedef struct nvw_run_opts {
    int threads; /* 0: all cores */
    nvw_progress_fn progress;
    nvw_failure_fn on_failure;
    void *ud;
    atomic_int *cancel; /* polled between cases (another thread sets it); may be NULL */

} nvw_run_opts;

/* Run a job. Returns 0 when the job ran (verdict inside *ret_result, a new
 * reference), -EINVAL for a bad spec (*ret_err: malloc'd message naming the JSON
 * pointer), another negative errno for an infrastructure error (*ret_err set). */
int nvw_run_job(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err);

#endif
