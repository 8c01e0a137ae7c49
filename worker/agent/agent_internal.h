/* Internals of agent mode (the folder's own files). */
#ifndef NUMVAL_WORKER_AGENT_INTERNAL_H
#define NUMVAL_WORKER_AGENT_INTERNAL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "http_client.h"
#include "worker/runner/run.h"

/* One claimed job while it runs. */
typedef struct nvw_agent_job {
    nvw_http *http;
    const char *backend_spec;
    const char *job_id;  /* text form of job_id_json, for logs and manifests */
    json_t *job_id_json; /* the id exactly as the server sent it */
    const char *lease_token;
    json_int_t attempt;
    const json_t *spec;
    atomic_llong done, total; /* progress from the runner thread */
    atomic_int cancel;        /* set by the main thread, polled by the runner between cases */
    atomic_int n_artifacts;   /* uploaded so far */
    int max_artifacts;
    double minimize_deadline_s; /* gate + minimization of the job's failures, in all */
} nvw_agent_job;

/* nvw_failure_fn for the runner (ud: nvw_agent_job): builds the failure
 * artifact (manifest, exact inputs, device outputs), uploads it and returns its
 * content id (malloc'd) in *ret_artifact_id. Negative errno when no artifact
 * was stored; the case keeps its verdict either way. */
int nvw_agent_on_failure(void *ud, const nvw_failure *f, char **ret_artifact_id);

/* The compressed artifact of a failure of job j (nvw_failure_artifact with the
 * job's backend, spec, id and attempt). *ret_buf malloc'd; sha[65] the id. */
int nvw_agent_artifact(const nvw_agent_job *j, const nvw_failure *f, uint8_t **ret_buf,
                       size_t *ret_len, char sha[65]);

/* nvw_fetch_fn for suite jobs (ud: nvw_agent_job): GET the artifact from
 * numvald, retried with backoff, its SHA-256 checked against sha (fetch.c). */
int nvw_agent_fetch(void *ud, const char *sha, uint8_t **ret, size_t *ret_len, char *msg,
                    size_t msglen);

/* ---- build backends (build_backend.c) ---- */
/* 0 when this worker may load spec, the backend a claimed job's build names:
 * emu always; a plugin or exec program only when its resolved path lies under
 * one of dirs (resolved absolute paths, n_dirs of them), an exec command only
 * of plain words. Else -EPERM with the reason and what to do in err. */
int nvw_agent_build_backend_check(const char *spec, char *const *dirs, int n_dirs, char *err,
                                  size_t errlen);

/* ---- start-up (startup.c) ---- */
/* The token in path: one line, the file a regular one readable by its owner
 * alone (else -EPERM, logged). *ret malloc'd. */
int nvw_agent_token_file(const char *path, char **ret);
/* A malloc'd copy of environment variable name (NULL when unset or empty),
 * removed from the environment so that the jobs' child processes do not get it. */
char *nvw_agent_take_env(const char *name);
/* Under a supervisor (NUMVAL_PARENT_PID set): SIGTERM when it dies
 * (PR_SET_PDEATHSIG); -ESRCH when it is already gone. 0 when not supervised. */
int nvw_agent_parent_death(void);

/* Sleep up to ms milliseconds, returning early when *stop (may be NULL) becomes
 * non-zero or the worker is stopping (SIGTERM, SIGINT). */
void nvw_agent_sleep(long ms, atomic_int *stop);

#endif
