/* RNG jobs (docs/JOBS.md "RNG jobs"): the device's random number generators
 * driven through the backend's rng entry (seeding, state save and restore,
 * parallel streams, dropout, recomputation under activation checkpointing)
 * and judged here, check by check. */
#ifndef NUMVAL_WORKER_RNG_H
#define NUMVAL_WORKER_RNG_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Run an RNG job; same contract as nvw_run_job (worker/kinds/kinds.h). */
int nvw_run_rng(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err);

#endif
