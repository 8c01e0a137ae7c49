/* Internal interface of the runner (run.c, worker/kinds/op/case.c, worker/kinds/op/result.c). */
#ifndef NUMVAL_WORKER_RUN_INTERNAL_H
#define NUMVAL_WORKER_RUN_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "worker/backends/loader.h"
#include "core/numerics/compare.h"
#include "core/spec/jobspec.h"
#include "worker/runner/run.h"

/* One job being run: shared, read-only while cases run except where noted. */
typedef struct nvw_job {
    const json_t *spec_json;
    nv_jobspec *spec;
    const char *backend_spec;
    const nv_backend *table;
    const char *options;
    json_t *describe;         /* parsed describe() of the backend, never NULL */
    bool op_nondeterministic; /* the op is listed in describe's "nondeterministic_ops" */
    const nvw_run_opts *opts;
    json_t **cases;       /* by case index; each slot written by one thread */
    pthread_mutex_t lock; /* serializes on_failure */
} nvw_job;

/* Run case i on the backend context ctx. Returns the case JSON (new reference),
 * or NULL on ENOMEM. Errors of the backend or the reference become a case with
 * verdict "error"; wrong results a case with verdict "failed". */
json_t *nvw_case_run(nvw_job *job, void *ctx, int64_t i);

/* A double as JSON: a number when finite, else "nan", "inf" or "-inf" (JSON has
 * no non-finite numbers). */
json_t *nvw_json_num(double x);

/* The tolerance the case is judged by: the job's "tolerance", else
 * "tolerance_by_dtype" for the case dtype, else the op's shipped default. */
int nvw_case_tolerance(const nvw_job *job, nv_dtype dt, nv_dtype out_dt, nv_tolerance *ret);

/* Metrics, tolerance and first mismatches of a comparison into case JSON cj.
 * in[0..n_in) are the case inputs (views), shown at each mismatch when the op is
 * elementwise; out_ndim/out_shape map linear indices back to multi-indices. */
int nvw_case_metrics(json_t *cj, const nvw_job *job, const nv_compare_result *cmp,
                     const nv_tolerance *tol, int n_in, nv_tensor *const *in, int out_ndim,
                     const int64_t *out_shape);

/* The failure manifest of a case for on_failure (new reference, NULL on ENOMEM). */
json_t *nvw_case_manifest(const nvw_job *job, const json_t *cj);

/* The whole result of a job from its cases (new reference, NULL on ENOMEM). */
json_t *nvw_job_result(const nvw_job *job);

#endif
