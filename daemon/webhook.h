/* Webhooks: numvald POSTs a JSON event to each [webhook NAME] that asked for it
 * (docs/API.md "Webhooks", docs/DEPLOY.md "Webhooks").
 *
 * Delivery (webhook.c, the daemon's one file that sees libcurl) runs off the
 * event loop: one thread per webhook takes its deliveries in order, one
 * attempt at a time under the webhook's timeout, retrying a failed one
 * (transport error or a status other than 2xx) after backoff_ms, doubled after
 * each failure up to 5 minutes, at most max_attempts times, then dropping it
 * with a log line. A receiver that is down costs its own thread's time and a
 * bounded queue (max_queue, oldest dropped first), never the loop.
 *
 * An event is emitted on the loop while the write that caused it may still be
 * uncommitted: it is held until the group commit (commit.c calls
 * nvd_webhooks_release), and dropped if that commit fails, so a receiver is
 * never told of a suite case the disk does not have.
 *
 * The event sources (webhook_events.c) are the result upload (promotions, and
 * a regression check against the build's predecessor on the threadpool) and
 * the scheduler (a slot that could not submit, or whose jobs did not all
 * pass). */
#ifndef NUMVAL_DAEMON_WEBHOOK_H
#define NUMVAL_DAEMON_WEBHOOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

typedef struct nvd_webhooks nvd_webhooks;
struct nvd_app;

/* Start one delivery thread per configured webhook (none: an object that
 * drops every event). cfg must outlive the object. 0, -ENOMEM, or a
 * pthread/libcurl failure as a negative errno. */
int nvd_webhooks_new(const nvd_config *cfg, nvd_webhooks **ret);
/* Stop the threads (an attempt in flight is aborted) and free; pending and
 * queued deliveries are dropped, logged with their count. NULL: no-op. */
void nvd_webhooks_free(nvd_webhooks *w);

/* Loop thread only. Emit event (one NVD_EV_* bit) with data (stolen) to the
 * webhooks that asked for it, held until the next nvd_webhooks_release. The
 * body is {"event", "id", "created_at", "data"}. w may be NULL. */
void nvd_webhooks_emit(nvd_webhooks *w, unsigned event, json_t *data);
/* Loop thread only: the group commit is done (committed true) or failed. Held
 * events are queued for delivery, or dropped. w may be NULL. */
void nvd_webhooks_release(nvd_webhooks *w, bool committed);

/* Counters for /metrics and tests: deliveries that got a 2xx, attempts that
 * failed, deliveries dropped (attempts exhausted or queue full). */
typedef struct nvd_webhook_stats {
    uint64_t delivered, failed_attempts, dropped;
} nvd_webhook_stats;
void nvd_webhooks_stats(nvd_webhooks *w, nvd_webhook_stats *ret);

/* ---- event sources (webhook_events.c), loop thread only ---- */

/* A result of job_id was stored (and is being committed): new_suite_ids
 * (array of integers, may be NULL) are the suite cases it created. Emits
 * "promoted" for each, and for an op, gradient or fused job of a build with
 * failed cases starts the regression check against the build's predecessor. */
void nvd_webhooks_on_result(struct nvd_app *app, int64_t job_id, const json_t *new_suite_ids);
/* A cron slot of schedule fired: job_ids (array of integers) were submitted,
 * err is the submission's error or NULL. Emits "schedule_failed" at once when
 * err is set, else when its jobs are all done and one did not pass. */
void nvd_webhooks_on_slot(struct nvd_app *app, const char *schedule, int64_t slot,
                          const char *device, const json_t *job_ids, const char *err);
/* At start-up: watch the recorded cron slots (the latest 64) whose jobs still
 * run, so their "schedule_failed" is sent after a restart too. A slot whose jobs
 * all ended before the restart was reported by the run that saw them end. */
int nvd_webhooks_events_resume(struct nvd_app *app);
/* Close the slot watcher's timer (on shutdown, before the loop's last run). */
void nvd_webhooks_events_stop(void);

#endif
