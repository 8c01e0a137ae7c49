/* numvald's scheduler: runs suites on cron schedules from the config
 *   [schedule nightly]
 *   cron = 0 2 * * *            (cron.h; UTC)
 *   suite = suites/nightly.json (a suite file: {"name", "jobs": [spec...]})
 *   device = emu0               (optional: the device the jobs are pinned to)
 * Each fired slot is recorded in the store before its jobs are submitted
 * (schema/003_longrun.sql), so a slot runs at most once, across restarts. When
 * numvald was down over several slots, the latest missed one runs once.
 * config.c parses the sections into nvd_config.schedules; the scheduler only
 * reads them. */
#ifndef NUMVAL_DAEMON_SCHEDULER_H
#define NUMVAL_DAEMON_SCHEDULER_H

#include <jansson.h>
#include <stdint.h>

struct nvd_app;
/* Start the scheduler's timer on the app's loop (no-op without schedules). */
int nvd_scheduler_start(struct nvd_app *app);
/* Close the timer (on shutdown). */
void nvd_scheduler_stop(void);
/* The schedules with their last run and next fire time (GET /api/v1/schedules). */
json_t *nvd_scheduler_list(struct nvd_app *app);
/* Fire every schedule whose slot came at or before now_s (the timer's work;
 * exposed for tests). */
void nvd_scheduler_tick(struct nvd_app *app, int64_t now_s);

#endif
