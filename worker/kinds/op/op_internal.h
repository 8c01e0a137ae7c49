/* Internal interface of the op runner (run.c, case.c, result.c). */
#ifndef NUMVAL_WORKER_OP_INTERNAL_H
#define NUMVAL_WORKER_OP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "core/numerics/compare.h"
#include "core/spec/jobspec.h"
#include "worker/backends/loader.h"
#include "worker/runner/job.h"

/* One op job being run: shared, read-only while cases run except where noted. */
typedef struct nvw_op_job {
    nvw_job_base b; /* spec, backend, describe(), options, case slots, lock */
    nv_jobspec *spec;
    bool op_nondeterministic; /* the op is listed in describe's "nondeterministic_ops" */
} nvw_op_job;

/* Run case i on the backend context ctx. Returns the case JSON (new reference),
 * or NULL on ENOMEM. Errors of the backend or the reference become a case with
 * verdict "error"; wrong results a case with verdict "failed". */
json_t *nvw_case_run(nvw_op_job *job, void *ctx, int64_t i);

/* The tolerance the case is judged by: the job's "tolerance", else
 * "tolerance_by_dtype" for the case dtype, else the op's shipped default. */
int nvw_case_tolerance(const nvw_op_job *job, nv_dtype dt, nv_dtype out_dt, nv_tolerance *ret);

/* Metrics, tolerance and first mismatches of a comparison into case JSON cj.
 * in[0..n_in) are the case inputs (views), shown at each mismatch when the op is
 * elementwise (or, when first_in is not NULL, first_in[k] at mismatch k: a case
 * run in blocks keeps them); out_ndim/out_shape map linear indices back to
 * multi-indices. */
int nvw_case_metrics(json_t *cj, const nvw_op_job *job, const nv_compare_result *cmp,
                     const nv_tolerance *tol, int n_in, nv_tensor *const *in, int out_ndim,
                     const int64_t *out_shape, const double (*first_in)[NV_JOB_MAX_TENSORS]);

/* The accumulator a case of spec s is judged by under the intermediate-overflow
 * rule: nv_op_accumulator over the entry of describe()'s "contract" (may be
 * NULL) for the case dtype dt, else for the output dtype. */
typedef struct nvw_accumulator {
    nv_dtype dtype, range;
    bool declared; /* by the device's contract, else the default tolerance's assumption */
} nvw_accumulator;
void nvw_case_accumulator(const json_t *contract, const nv_jobspec *s, nv_dtype dt, nv_dtype out_dt,
                          nvw_accumulator *ret);

/* "intermediate_overflow" of case JSON cj (outputs counted under the rule, the
 * accumulator, the first of them). Returns 0 or -ENOMEM. */
int nvw_case_overflow(json_t *cj, const nv_compare_result *cmp, const nvw_accumulator *acc,
                      int out_ndim, const int64_t *out_shape);

/* The failure manifest of a case for on_failure (new reference, NULL on ENOMEM). */
json_t *nvw_case_manifest(const nvw_op_job *job, const json_t *cj);

/* The whole result of a job from its cases (new reference, NULL on ENOMEM). */
json_t *nvw_job_result(const nvw_op_job *job);

#endif
