/* The long-run kind (docs/JOBS.md "Long-run jobs"): a small model trained over
 * several seeds on the host fp64 reference and on the device (the backend's own
 * forward and backward ops under the AMP policy, with dynamic gradient
 * scaling), judged statistically against seed-to-seed variation. What the kind
 * table (worker/kinds/kinds.c) reaches the kind through. A long-run job leaves
 * no failure artifacts. */
#ifndef NUMVAL_WORKER_KINDS_LONGRUN_H
#define NUMVAL_WORKER_KINDS_LONGRUN_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Same contract as nvw_run_job (worker/kinds/kinds.h), for a spec with "kind":
 * "longrun". A backend without a backward entry is refused: -ENOTSUP, *ret_err
 * says so. */
int nvw_run_longrun(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err);

#endif
