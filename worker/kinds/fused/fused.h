/* Fused jobs (issue 5, docs/JOBS.md "Fused jobs"): per case, one graph run three
 * ways on the same inputs (reference, unfused device node by node, fused device
 * through the backend's graph entry with capture), every node compared against
 * the reference, and the first node whose fused output leaves its tolerance
 * while its inputs were still within theirs named. */
#ifndef NUMVAL_WORKER_RUN_FUSED_H
#define NUMVAL_WORKER_RUN_FUSED_H

#include <jansson.h>
#include <pthread.h>

#include "worker/backends/loader.h"
#include "core/spec/fusedspec.h"
#include "worker/runner/run.h"

/* Same contract as nvw_run_job (run.h), for a spec with "kind": "fused". A
 * backend without a graph entry is refused: -ENOTSUP with *ret_err saying so. */
int nvw_run_fused(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err);

/* ---- internal to run_fused*.c ---- */

typedef struct fjob {
    const json_t *spec_json;
    nv_fusedspec *s;
    char graph_hash[65];
    const char *backend_spec;
    const nv_backend *table;
    const char *options;
    json_t *describe;
    const nvw_run_opts *opts;
    json_t **cases;       /* by case index; each slot written by one thread */
    pthread_mutex_t lock; /* serializes on_failure */
    /* NULL, or the exact graph inputs (graph order, contiguous, the case's dtypes
     * and shapes) used instead of generated ones (worker/kinds/fused/sub.c). */
    nv_tensor *const *given;
} fjob;

/* Case i on context ctx: new reference, NULL on ENOMEM (worker/kinds/fused/case.c). */
json_t *nvw_fused_case(fjob *j, void *ctx, int64_t i);

#endif
