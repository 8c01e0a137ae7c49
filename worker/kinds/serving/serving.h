/* Serving jobs (docs/SERVING.md): a decoder-only LM served op by op through
 * the backend's op entry with a KV cache held by the kind, and the serving
 * checks (prefill vs decode, long context, batch invariance). */
#ifndef NUMVAL_WORKER_SERVING_H
#define NUMVAL_WORKER_SERVING_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Run a serving job; same contract as nvw_run_job (worker/kinds/kinds.h). */
int nvw_run_serving(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err);

#endif
