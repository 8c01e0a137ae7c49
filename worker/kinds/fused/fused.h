/* The fused kind (docs/JOBS.md "Fused jobs"): per case, one graph run three
 * ways on the same inputs (reference, unfused device node by node, fused device
 * through the backend's graph entry with capture), every node compared against
 * the reference, and the first node whose fused output leaves its tolerance
 * while its inputs were still within theirs named. What the kind table
 * (worker/kinds/kinds.c) and the benches reach the kind through. */
#ifndef NUMVAL_WORKER_KINDS_FUSED_H
#define NUMVAL_WORKER_KINDS_FUSED_H

#include <jansson.h>
#include <stddef.h>

#include "worker/repro/cmd.h"
#include "worker/repro/gate.h"
#include "worker/runner/run.h"

/* Same contract as nvw_run_job (worker/kinds/kinds.h), for a spec with "kind":
 * "fused". A backend without a graph entry is refused: -ENOTSUP with *ret_err
 * saying so. */
int nvw_run_fused(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err);

/* `numval-worker repro|minimize` on a fused artifact (repro_cmd.c); exit codes
 * as in worker/repro/cmd.h. */
int nvw_fused_repro_main(const nvw_cmd *c);
int nvw_fused_minimize_main(const nvw_cmd *c);

/* Agent mode (gate.c): the signature key of a failure from its manifest (first
 * divergent op and its judged dtype, case dtype, class), the gate +
 * minimization of a kept failure, and the replay of a suite case. */
void nvw_fused_failure_key(const json_t *manifest, char *key, size_t len);
void nvw_fused_gate(const nvw_gate_env *env, const nvw_gate_case *k);
void nvw_fused_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c);

#endif
