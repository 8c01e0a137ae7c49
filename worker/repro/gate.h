/* What agent mode hands a kind after a job (worker/agent/): the reproduction
 * gate and the minimization of a kept failure, and the replay of a suite case.
 * The kinds reach the agent only through these callbacks, never its headers. */
#ifndef NUMVAL_WORKER_REPRO_GATE_H
#define NUMVAL_WORKER_REPRO_GATE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/artifact.h"
#include "worker/backends/loader.h"

/* The job whose failures are gated. Everything is borrowed. */
typedef struct nvw_gate_env {
    const nvw_backend *b;     /* loaded once for all of the job's failures */
    const char *backend_spec; /* what probes record as their backend */
    const char *job_id;       /* named in log lines */
    const json_t *extra;      /* {"job_id", "attempt"} for minimized artifacts (NULL: ENOMEM) */
    atomic_int *cancel;       /* the job's cancel flag */
    int budget;               /* most probes of one failure's minimization */
    /* Store a minimized artifact under its content id sha: 0 or a negative errno. */
    int (*store)(void *ud, const uint8_t *buf, size_t len, const char *sha);
    void *ud;
} nvw_gate_env;

/* One kept failure: its artifact as the runner built it. */
typedef struct nvw_gate_case {
    const uint8_t *buf; /* the artifact's bytes */
    size_t len;
    const char *sha; /* their content id */
    int case_index;
    double deadline_s; /* for the gate and the minimization together */
    json_t *c;         /* the case in the job's result, annotated; may be NULL */
} nvw_gate_case;

/* Gate + minimize one failure of the kind, annotate its case ("signature",
 * "repro_rate", "flaky", "minimized_artifact" when one was verified and
 * stored, ...). Errors are logged: the case stands without the annotations. */
typedef void (*nvw_gate_fn)(const nvw_gate_env *env, const nvw_gate_case *k);

/* The gate's keys on case c (may be NULL): "signature" (sig, stolen; NULL gives
 * null), "repro_rate" {runs, failed, bit_identical} and "flaky". */
void nvw_gate_annotate(json_t *c, json_t *sig, int runs, int failed, int bits, bool flaky);

/* The backend a suite job replays its cases on. */
typedef struct nvw_replay_env {
    const nvw_backend *b;
    const char *backend_spec;
} nvw_replay_env;

/* Replay the stored case of artifact a (content id sha) into suite case JSON c:
 * "verdict" passed or failed (failed in any way, the stored signature or
 * another), what was replayed and how it compares with the stored failure; an
 * artifact that cannot be replayed is verdict "error" (nvw_replay_error). */
typedef void (*nvw_replay_fn)(const nvw_replay_env *env, const nv_artifact *a, const char *sha,
                              json_t *c);

/* Verdict "error" with message msg on case c. */
void nvw_replay_error(json_t *c, const char *msg);

#endif
