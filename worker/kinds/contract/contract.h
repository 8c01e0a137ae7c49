/* The contract kind (docs/JOBS.md "Contract jobs", docs/CONTRACT.md): the measured
 * numerical contract of a device, from its outputs alone, in describe()'s
 * vocabulary, and its differences from the declared one. What the kind table
 * (worker/kinds/kinds.c) reaches the kind through. A contract job leaves no
 * failure artifacts: each mismatch carries its evidence inline. */
#ifndef NUMVAL_WORKER_KINDS_CONTRACT_H
#define NUMVAL_WORKER_KINDS_CONTRACT_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Same contract as nvw_run_job (worker/kinds/kinds.h), for a spec with "kind":
 * "contract". */
int nvw_run_contract(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                     json_t **ret_result, char **ret_err);

#endif
