/* The kind table: one row per job kind, the only way the runner entry
 * (nvw_run_job), the repro and minimize commands (worker/repro_cmd.c) and agent
 * mode (worker/agent/) reach a kind. Adding a kind is one folder under kinds/
 * and one row in kinds.c. */
#ifndef NUMVAL_WORKER_KINDS_H
#define NUMVAL_WORKER_KINDS_H

#include <jansson.h>
#include <stddef.h>

#include "common/artifact.h"
#include "worker/repro/cmd.h"
#include "worker/repro/gate.h"
#include "worker/runner/run.h"

typedef struct nvw_kind {
    const char *name; /* the job spec's "kind" */
    nvw_run_fn run;   /* run a job of the kind */
    /* `numval-worker repro|minimize` on an artifact of a job of the kind
     * (worker/repro/cmd.h); NULL: the kind leaves no artifacts. */
    int (*repro_main)(const nvw_cmd *c);
    int (*minimize_main)(const nvw_cmd *c);
    /* Agent mode: the key of a failure's signature from its manifest (the first
     * failure of each key is kept for the gate), and the gate + minimization of
     * a kept failure; NULL: the kind's failures keep their artifact only. */
    void (*failure_key)(const json_t *manifest, char *key, size_t len);
    nvw_gate_fn gate;
    /* Suite jobs: replay a stored case of the kind; NULL: not replayable. */
    nvw_replay_fn replay;
} nvw_kind;

/* The row named by spec's "kind" ("op" when it has none, as numval has always
 * read a spec without one), or NULL for a kind numval does not know. spec may be
 * NULL (op). */
const nvw_kind *nvw_kind_named(const json_t *spec, const char **ret_name);

/* The row of an artifact: its manifest's job spec (nvw_kind_named). */
const nvw_kind *nvw_kind_of_artifact(const nv_artifact *a, const char **ret_name);

/* The kinds whose artifacts suite jobs replay, for messages ("op, fused and
 * gradient"), into buf (len > 0; truncated to fit). */
void nvw_kind_replay_names(char *buf, size_t len);

/* Run a job of any kind: its row's run, or the op runner for a kind without one
 * (whose spec parser then says what is wrong with the spec). Returns 0 when the
 * job ran (verdict inside *ret_result, a new reference), -EINVAL for a bad spec
 * (*ret_err: malloc'd message naming the JSON pointer), another negative errno
 * for an infrastructure error (*ret_err set). */
int nvw_run_job(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err);

#endif
