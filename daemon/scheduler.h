/* numvald's scheduler: runs suites on cron schedules from the config
 *   [schedule nightly]
 *   cron = 0 2 * * *            (cron.h; UTC)
 *   suite = suites/nightly.json (a suite file: {"name", "jobs": [spec...]})
 *   device = emu0               (optional: the device the jobs are pinned to)
 * Each fired slot is recorded in the store before its jobs are submitted
 * (schema/003_longrun.sql), so a slot runs at most once, across restarts. When
 * numvald was down over several slots, the latest missed one runs once. */
#ifndef NUMVAL_DAEMON_SCHEDULER_H
#define NUMVAL_DAEMON_SCHEDULER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "cron.h"

typedef struct nvd_schedule_conf {
    char *name, *cron_text, *suite, *device;
    nvd_cron cron;
    int cron_ok;
} nvd_schedule_conf;

/* The config hooks (config.c): one key of [schedule NAME] (0, -ENOENT unknown
 * key, -EINVAL bad value, -ENOMEM), the cross-field check (message into buf),
 * and freeing. */
int nvd_schedule_config_key(nvd_config *c, const char *name, const char *k, const char *v);
void nvd_schedule_config_check(const nvd_config *c, char *buf, size_t len);
void nvd_schedule_config_free(nvd_config *c);

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
