/* One fused case on given inputs (worker/kinds/fused/sub.c): the reproducer and the
 * minimizer of fused failures (worker/kinds/fused/repro.c, worker/kinds/fused/minimize.c) re-run a graph,
 * or a subgraph of it, on the exact stored inputs instead of generated ones,
 * through the same three executions and comparison as a fused job. */
#ifndef NUMVAL_WORKER_RUN_FUSED_SUB_H
#define NUMVAL_WORKER_RUN_FUSED_SUB_H

#include <jansson.h>

#include "core/numerics/tensor.h"
#include "numval/backend.h"
#include "worker/runner/run.h"

/* Run case 0 of fused job spec (kind "fused", one dtype at most, one input
 * class) on backend table/options (loaded by the caller; backend_spec is only
 * reported) with graph inputs given[0..n_given) in the order of the spec's
 * "graph"/"inputs" (contiguous tensors of each input's dtype and shape).
 * on_failure (may be NULL) is called as in a fused job: with the graph, the
 * inputs and every node's fused and unfused values. *ret_case: the case JSON
 * (new reference); *ret_mode (may be NULL): the backend's describe() "mode"
 * (new reference or NULL). Returns 0; -EINVAL (spec refused or inputs that do
 * not fit: *ret_err says which), -ENOTSUP (no graph entry), -ENODEV (the
 * backend did not open), -ENOMEM. */
int nvw_fused_run_given(const json_t *spec, const char *backend_spec, const nv_backend *table,
                        const char *options, nv_tensor *const *given, int n_given,
                        nvw_failure_fn on_failure, void *ud, json_t **ret_case, json_t **ret_mode,
                        char **ret_err);

#endif
