/* Serving jobs (docs/SERVING.md): a decoder-only LM served op by op through
 * the backend's op entry with a KV cache held by the kind, and the serving
 * checks (prefill vs decode, long context, batch invariance, sustained
 * batching, paged cache, sampling), and the reproducers of its failures. */
#ifndef NUMVAL_WORKER_SERVING_H
#define NUMVAL_WORKER_SERVING_H

#include <jansson.h>

#include "common/artifact.h"
#include "worker/repro/cmd.h"
#include "worker/repro/gate.h"
#include "worker/runner/run.h"

/* Run a serving job; same contract as nvw_run_job (worker/kinds/kinds.h). */
int nvw_run_serving(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                    json_t **ret_result, char **ret_err);

/* A serving failure's reproducer, a serving pair (docs/ARTIFACTS.md "Serving
 * pairs", pair_gate.c): `numval-worker repro|minimize` on it (exit codes as in
 * worker/repro/cmd.h), its signature key, the agent's gate and minimization,
 * the suite's replay. */
int nvw_serving_repro_main(const nvw_cmd *c);
int nvw_serving_minimize_main(const nvw_cmd *c);
void nvw_serving_failure_key(const json_t *manifest, char *key, size_t len);
void nvw_serving_gate(const nvw_gate_env *env, const nvw_gate_case *k);
void nvw_serving_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha,
                        json_t *c);

#endif
