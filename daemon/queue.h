/* The job queue: lifecycle queued -> leased -> running -> passed | failed |
 * error | cancelled over the store, long-poll waiters woken by submissions and
 * requeues, lease expiry, and tolerance resolution for claimed specs.
 *
 * Every function that depends on time takes `now` (ms) from the caller, so the
 * lease logic runs under a fake clock in tests. loop may be NULL (tests): then
 * there are no timers and no waiters. */
#ifndef NUMVAL_DAEMON_QUEUE_H
#define NUMVAL_DAEMON_QUEUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/store/store.h"
#include "tolerance.h" /* nvd_mode_match */

typedef struct nvd_queue nvd_queue;
typedef struct nvd_waiter nvd_waiter;

typedef struct nvd_queue_opts {
    int max_depth;          /* queued jobs beyond which submit says -EAGAIN */
    int64_t lease_ms;       /* lease length granted by claim and heartbeat */
    int64_t expiry_tick_ms; /* how often leases are checked (loop only) */
} nvd_queue_opts;

int nvd_queue_new(uv_loop_t *loop, nvd_store *s, const nvd_queue_opts *o, nvd_queue **ret);
/* Stop timers and drop waiters (their callbacks are not called). */
void nvd_queue_free(nvd_queue *q);

/* Insert a queued job; wakes waiters. -EAGAIN when the queue is full. */
int nvd_queue_submit(nvd_queue *q, const nvd_job_new *j, int64_t now, int64_t *ret_id);
int64_t nvd_queue_depth(const nvd_queue *q);
/* Recount the queued jobs from the store. The depth is kept in memory as
 * submissions, claims and requeues happen; a failed group commit rolls those
 * back on disk, so the committer calls this after one (commit.c). */
int nvd_queue_resync(nvd_queue *q);

/* Lease the next job for device. describe (may be NULL) is the worker's device
 * description; its "mode" object selects tolerances. *ret = {"id","attempt",
 * "lease_token","lease_ms","spec"} with spec carrying "tolerance_by_dtype".
 * -ENOENT when nothing is queued for the device. */
int nvd_queue_claim(nvd_queue *q, const char *device, const json_t *describe, int64_t now,
                    json_t **ret);
int nvd_queue_cancel(nvd_queue *q, int64_t id, int64_t now);
/* Expire leases (see nvd_store_leases_expire); wakes waiters on requeue. */
int nvd_queue_expire(nvd_queue *q, int64_t now, int *ret_requeued, int *ret_errored);

/* Park until a job may be available for device or ms pass; fn runs once
 * (timed_out tells which) after the waiter is gone. */
typedef void (*nvd_wait_fn)(void *ud, bool timed_out);
int nvd_queue_wait(nvd_queue *q, const char *device, uint64_t ms, nvd_wait_fn fn, void *ud,
                   nvd_waiter **ret);
/* Remove a waiter without calling it. NULL is a no-op. */
void nvd_queue_unwait(nvd_waiter *w);
int nvd_queue_waiting(const nvd_queue *q);

#endif
