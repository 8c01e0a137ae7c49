/* Supervisor: spawns one numval-worker per slot of each [device NAME] in the
 * config (uv_spawn), restarts it with exponential backoff when it exits, and
 * quarantines the device after crash_limit exits within crash_window_ms; the
 * state and last crash reason are stored with the device (GET /api/v1/devices).
 * The workers authenticate with a worker token minted at start, given to each
 * child in its environment (NUMVAL_TOKEN), never on its command line. Each
 * child also gets NUMVAL_PARENT_PID (the worker sets a parent-death signal, so
 * it does not outlive a killed numvald) and NUMVAL_WORKER_ID (sent with its
 * claims): a live child whose lease was lost (stopped, hung) is killed and
 * restarted. */
#ifndef NUMVAL_DAEMON_SUPERVISOR_H
#define NUMVAL_DAEMON_SUPERVISOR_H

#include "app.h"

int nvd_supervisor_new(nvd_app *app, nvd_supervisor **ret);
/* SIGTERM every worker (SIGKILL after 5 s), close the handles, then call done.
 * s NULL: done is called at once. */
void nvd_supervisor_stop(nvd_supervisor *s, void (*done)(void *ud), void *ud);
/* A claim by the worker that sent worker_id was granted job_id under
 * lease_token; a worker that is not one of our children is ignored. sv NULL
 * (no supervisor) is a no-op. */
void nvd_supervisor_leased(nvd_supervisor *sv, const char *worker_id, int64_t job_id,
                           const char *lease_token);
void nvd_supervisor_free(nvd_supervisor *s); /* after the loop ran; NULL is a no-op */
/* numval-worker next to this program in the build tree, or installed beside it,
 * else "numval-worker" (from PATH). malloc'd, NULL on ENOMEM. */
char *nvd_supervisor_default_worker(void);

#endif
