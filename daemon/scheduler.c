/* The cron scheduler of numvald (scheduler.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "app.h"
#include "common/log.h"
#include "scheduler.h"
#include "webhook.h"
#include "daemon/store/store_longrun.h"
#include "daemon/util/util.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"

static uv_timer_t timer;
static int timer_on;
static int64_t *next_fire; /* per schedule: the next slot (Unix seconds) */

/* Submit every job of the suite file; ids appended to ids. */
static int submit_suite(nvd_app *app, const nvd_schedule_conf *s, json_t *ids, char *err,
                        size_t len)
{
    json_error_t je;
    json_t *suite = json_load_file(s->suite, 0, &je);
    const json_t *jobs = json_object_get(suite, "jobs");
    if (!json_is_array(jobs)) {
        snprintf(err, len, "suite '%s' is not a suite file with \"jobs\": %s", s->suite,
                 suite ? "no jobs array" : je.text);
        json_decref(suite);
        return -EINVAL;
    }
    size_t i;
    json_t *spec;
    int r = 0;
    json_array_foreach(jobs, i, spec)
    {
        char *ptr = NULL, *msg = NULL;
        r = nv_jobspec_validate(spec, &ptr, &msg);
        if (r < 0) {
            snprintf(err, len, "suite '%s' job %zu: %s: %s", s->suite, i, ptr ? ptr : "",
                     msg ? msg : "invalid");
            free(ptr);
            free(msg);
            break;
        }
        char *text = json_dumps(spec, JSON_COMPACT);
        const json_t *kind = json_object_get(spec, "kind"), *op = json_object_get(spec, "op");
        nvd_job_new j = {.kind = json_string_value(kind),
                         .op = json_string_value(op),
                         .device = s->device,
                         .max_attempts = app->cfg->max_attempts,
                         .spec_json = text};
        int64_t id = 0;
        r = text ? nvd_queue_submit(app->queue, &j, nvd_now_ms(), &id) : -ENOMEM;
        free(text);
        if (r < 0) {
            snprintf(err, len, "suite '%s' job %zu: submit failed: %s", s->suite, i, strerror(-r));
            break;
        }
        json_array_append_new(ids, json_integer(id));
    }
    json_decref(suite);
    return r;
}

static void fire(nvd_app *app, const nvd_schedule_conf *s, int64_t slot)
{
    bool fresh = false;
    int r =
        nvd_store_slot_claim(app->store, s->name, slot, s->suite, s->device, nvd_now_ms(), &fresh);
    if (r < 0 || !fresh) {
        if (r < 0)
            nv_log_err("schedule '%s': cannot record slot %lld: %s", s->name, (long long)slot,
                       strerror(-r));
        return;
    }
    json_t *ids = json_array();
    char err[512] = "";
    r = ids ? submit_suite(app, s, ids, err, sizeof err) : -ENOMEM;
    nv_log_info("schedule '%s': slot %lld submitted %zu jobs%s%s", s->name, (long long)slot,
                json_array_size(ids), err[0] ? ": " : "", err);
    nvd_store_slot_done(app->store, s->name, slot, ids, err[0] ? err : NULL);
    nvd_webhooks_on_slot(app, s->name, slot, s->device, ids, err[0] ? err : NULL);
    json_decref(ids);
    nvd_commit_flush(app);
}

void nvd_scheduler_tick(nvd_app *app, int64_t now_s)
{
    for (int i = 0; i < app->cfg->n_schedules; i++) {
        const nvd_schedule_conf *s = &app->cfg->schedules[i];
        if (next_fire[i] < 0 || now_s < next_fire[i])
            continue;
        int64_t slot = next_fire[i], n;
        while ((n = nvd_cron_next(&s->cron, slot)) >= 0 && n <= now_s)
            slot = n; /* the latest slot at or before now runs; missed ones do not pile up */
        fire(app, s, slot);
        next_fire[i] = nvd_cron_next(&s->cron, now_s);
    }
}

static void on_timer(uv_timer_t *t)
{
    nvd_scheduler_tick(t->data, nvd_now_ms() / 1000);
}

int nvd_scheduler_start(nvd_app *app)
{
    int n = app->cfg->n_schedules;
    if (n == 0)
        return 0;
    next_fire = calloc((size_t)n, sizeof *next_fire);
    if (!next_fire)
        return -ENOMEM;
    int64_t now = nvd_now_ms() / 1000;
    for (int i = 0; i < n; i++) {
        const nvd_schedule_conf *s = &app->cfg->schedules[i];
        json_t *last = NULL;
        int64_t from = now;
        /* After a restart the schedule resumes after its last recorded slot, so a
         * slot missed while numvald was down still runs (once). */
        if (nvd_store_slot_last(app->store, s->name, &last) == 0)
            from = json_integer_value(json_object_get(last, "slot"));
        json_decref(last);
        next_fire[i] = nvd_cron_next(&s->cron, from);
    }
    uv_timer_init(app->loop, &timer);
    timer.data = app;
    timer_on = 1;
    /* Check twice a minute: slots are whole minutes. */
    return uv_timer_start(&timer, on_timer, 1000, 30000);
}

void nvd_scheduler_stop(void)
{
    if (!timer_on)
        return;
    uv_timer_stop(&timer);
    uv_close((uv_handle_t *)&timer, NULL);
    timer_on = 0;
    free(next_fire);
    next_fire = NULL;
}

json_t *nvd_scheduler_list(nvd_app *app)
{
    json_t *a = json_array();
    int64_t now = nvd_now_ms() / 1000;
    for (int i = 0; i < app->cfg->n_schedules; i++) {
        const nvd_schedule_conf *s = &app->cfg->schedules[i];
        json_t *last = NULL;
        if (nvd_store_slot_last(app->store, s->name, &last) < 0)
            last = json_null();
        int64_t nx = next_fire && next_fire[i] > now ? next_fire[i] : nvd_cron_next(&s->cron, now);
        char buf[32];
        nvd_time_format(nx * 1000, buf);
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s}", "name", s->name,
                                           "cron", s->cron_text, "suite", s->suite, "device",
                                           s->device, "last_run", last, "next_run", buf));
    }
    return a;
}
