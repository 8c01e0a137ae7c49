/* The op kind (docs/JOBS.md, kind "op"): one catalog op over dtypes, shapes,
 * layouts and input classes, each case compared with the exact reference. What
 * the kind table (worker/kinds/kinds.c) reaches the kind through. */
#ifndef NUMVAL_WORKER_KINDS_OP_H
#define NUMVAL_WORKER_KINDS_OP_H

#include <jansson.h>
#include <stddef.h>

#include "worker/repro/cmd.h"
#include "worker/repro/gate.h"
#include "worker/runner/run.h"

/* Run an op job: same contract as nvw_run_job (worker/kinds/kinds.h). */
int nvw_run_op(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
               json_t **ret_result, char **ret_err);

/* `numval-worker repro|minimize` on an op artifact (repro_cmd.c); exit codes as
 * in worker/repro/cmd.h. */
int nvw_op_repro_main(const nvw_cmd *c);
int nvw_op_minimize_main(const nvw_cmd *c);

/* Agent mode (gate.c): the signature key of a failure from its manifest (dtype,
 * output dtype, class), the gate + minimization of a kept failure, and the
 * replay of a suite case. */
void nvw_op_failure_key(const json_t *manifest, char *key, size_t len);
void nvw_op_gate(const nvw_gate_env *env, const nvw_gate_case *k);
void nvw_op_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c);

#endif
