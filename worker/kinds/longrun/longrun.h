/* Long-run jobs (issue 7, docs/JOBS.md "Long-run jobs"): a small model trained
 * over several seeds on the host fp64 reference and on the device (the
 * backend's own forward and backward ops under the AMP policy, with dynamic
 * gradient scaling), judged statistically against seed-to-seed variation. */
#ifndef NUMVAL_WORKER_RUN_LONGRUN_H
#define NUMVAL_WORKER_RUN_LONGRUN_H

#include <jansson.h>

#include "core/spec/longrunspec.h"
#include "worker/runner/run.h"

/* Same contract as nvw_run_job (run.h), for a spec with "kind": "longrun". A
 * backend without a backward entry is refused: -ENOTSUP, *ret_err says so. */
int nvw_run_longrun(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err);

#endif
