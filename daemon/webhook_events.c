/* Where webhook events come from (webhook.h): promotions and regressions of
 * an uploaded result, and failed cron slots.
 *
 * The regression check and the slot watcher both read what the loop just
 * wrote, so they run from a timer: a timer fires at the start of a loop turn,
 * after the previous turn's group commit (commit.c commits in the prepare
 * phase), so the threadpool's read-only connections see the result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "app.h"
#include "common/log.h"
#include "daemon/store/store_longrun.h"
#include "daemon/store/store_suite.h"
#include "daemon/util/util.h"
#include "webhook.h"

/* Cron slots watched at once (beyond it the oldest is given up, logged), and
 * regression checks waiting for the timer. */
#define MAX_SLOTS 64
#define MAX_CHECKS 256
/* Regression events remembered, so several jobs of one op on one build
 * announce it once. */
#define RECENT 256
/* Newly failing cases listed in a regression event (counts give the total). */
#define LISTED 10

typedef struct check {
    char build[65];
    char kind[16];
    char op[64];
    int64_t job_id;
} check;

typedef struct slot {
    char *schedule, *device;
    int64_t slot;
    json_t *ids;
} slot;

typedef struct regress_work {
    uv_work_t work;
    nvd_app *app;
    check c;
    char *pred;    /* the predecessor's hash, or NULL */
    json_t *cmp;   /* the compare, or NULL */
    int r;
} regress_work;

static struct {
    uv_timer_t timer;
    bool timer_on;
    check checks[MAX_CHECKS];
    int n_checks;
    slot slots[MAX_SLOTS];
    int n_slots;
    char recent[RECENT][224];
    int n_recent;
} ev;

static void on_tick(uv_timer_t *t);

/* Start the 1 s timer if it is not running; it stops itself when idle. */
static void wake(nvd_app *app)
{
    if (!ev.timer_on) {
        if (uv_timer_init(app->loop, &ev.timer) < 0)
            return;
        ev.timer_on = true;
    }
    ev.timer.data = app;
    if (!uv_is_active((uv_handle_t *)&ev.timer))
        uv_timer_start(&ev.timer, on_tick, 1000, 1000);
}

static json_t *build_ref(nvd_store *s, const char *hash)
{
    json_t *rows = NULL, *out = NULL;
    /* The identity is what a receiver can act on; the list holds it. */
    if (nvd_store_builds_list(s, 1000, &rows) == 0) {
        for (size_t i = 0; !out && i < json_array_size(rows); i++) {
            const json_t *b = json_array_get(rows, i);
            const char *id = json_string_value(json_object_get(b, "id"));
            if (id && !strcmp(id, hash))
                out = json_pack("{s:s, s:O}", "id", hash, "identity",
                                json_object_get(b, "identity"));
        }
    }
    json_decref(rows);
    return out ? out : json_pack("{s:s}", "id", hash);
}

static void regress_run(uv_work_t *w)
{
    regress_work *g = w->data;
    nvd_store *s = nvd_store_pool_acquire(g->app->read_pool);
    g->r = nvd_store_build_predecessor(s, g->c.build, &g->pred);
    if (g->r == 0)
        g->r = nvd_store_compare(s, g->pred, g->c.build, g->c.kind, g->c.op[0] ? g->c.op : NULL,
                                 &g->cmp);
    nvd_store_pool_release(g->app->read_pool, s);
}

static void regress_done(uv_work_t *w, int status)
{
    regress_work *g = w->data;
    json_t *counts = json_object_get(g->cmp, "counts");
    json_int_t n = json_integer_value(json_object_get(counts, "newly_failing"));
    if (status == 0 && g->r == 0 && n > 0) {
        char key[224];
        snprintf(key, sizeof key, "%.64s %.64s %s %s", g->pred, g->c.build, g->c.kind, g->c.op);
        bool seen = false;
        for (int i = 0; i < ev.n_recent && i < RECENT; i++)
            seen |= !strcmp(ev.recent[i], key);
        if (!seen) {
            snprintf(ev.recent[ev.n_recent++ % RECENT], sizeof ev.recent[0], "%s", key);
            json_t *list = json_array();
            size_t i;
            json_t *e;
            json_array_foreach(json_object_get(g->cmp, "newly_failing"), i, e)
            {
                if (i < LISTED)
                    json_array_append(list, e);
            }
            nv_log_info("webhook: build %.12s newly fails %lld %s case(s) of its predecessor "
                        "%.12s (job %lld)",
                        g->c.build, (long long)n, g->c.kind, g->pred, (long long)g->c.job_id);
            nvd_webhooks_emit(g->app->hooks, NVD_EV_REGRESSION,
                              json_pack("{s:o, s:o, s:s, s:s?, s:I, s:I, s:o, s:O}", "build",
                                        build_ref(g->app->store, g->c.build), "predecessor",
                                        build_ref(g->app->store, g->pred), "kind", g->c.kind,
                                        "op", g->c.op[0] ? g->c.op : NULL, "job_id",
                                        (json_int_t)g->c.job_id, "newly_failing",
                                        (json_int_t)n, "cases", list, "counts", counts));
        }
    } else if (g->r < 0 && g->r != -ENOENT) {
        nv_log_warn("webhook: regression check of build %.12s failed: %s", g->c.build,
                    strerror(-g->r));
    }
    json_decref(g->cmp);
    free(g->pred);
    free(g);
}

/* The slot's jobs: 1 when all are done (a "schedule_failed" sent if one did
 * not pass), 0 while some still run. */
static int slot_settled(nvd_app *app, const slot *sl)
{
    json_t *bad = json_array();
    size_t i;
    json_t *id;
    int settled = 1;
    json_array_foreach(sl->ids, i, id)
    {
        json_t *job = NULL;
        if (nvd_store_job_get(app->store, json_integer_value(id), &job) < 0)
            continue; /* pruned or unreadable: no verdict to wait for */
        const char *st = json_string_value(json_object_get(job, "state"));
        if (st && (!strcmp(st, "queued") || !strcmp(st, "leased") || !strcmp(st, "running")))
            settled = 0;
        else if (st && strcmp(st, "passed"))
            json_array_append_new(bad, json_pack("{s:O, s:s, s:O}", "id", id, "state", st,
                                                 "error", json_object_get(job, "error")));
        json_decref(job);
        if (!settled)
            break;
    }
    if (settled && json_array_size(bad) > 0) {
        char at[32];
        nvd_time_format(sl->slot * 1000, at);
        nvd_webhooks_emit(app->hooks, NVD_EV_SCHEDULE_FAILED,
                          json_pack("{s:s, s:s, s:s?, s:O, s:I, s:O, s:n}", "schedule",
                                    sl->schedule, "slot", at, "device", sl->device, "job_ids",
                                    sl->ids, "jobs", (json_int_t)json_array_size(sl->ids),
                                    "not_passed", bad, "error"));
    }
    json_decref(bad);
    return settled;
}

static void slot_free(slot *sl)
{
    free(sl->schedule);
    free(sl->device);
    json_decref(sl->ids);
}

static void on_tick(uv_timer_t *t)
{
    nvd_app *app = t->data;
    for (int i = 0; i < ev.n_checks; i++) {
        regress_work *g = calloc(1, sizeof *g);
        if (!g)
            break;
        g->app = app;
        g->c = ev.checks[i];
        g->work.data = g;
        if (uv_queue_work(app->loop, &g->work, regress_run, regress_done) < 0)
            free(g);
    }
    ev.n_checks = 0;
    for (int i = 0; i < ev.n_slots;) {
        if (slot_settled(app, &ev.slots[i])) {
            slot_free(&ev.slots[i]);
            memmove(&ev.slots[i], &ev.slots[i + 1], sizeof(slot) * (size_t)(ev.n_slots - i - 1));
            ev.n_slots--;
        } else {
            i++;
        }
    }
    if (ev.n_slots == 0)
        uv_timer_stop(t);
}

void nvd_webhooks_on_result(nvd_app *app, int64_t job_id, const json_t *new_suite_ids)
{
    if (!app->hooks)
        return;
    size_t i;
    json_t *id;
    json_array_foreach(new_suite_ids, i, id)
    {
        json_t *sc = NULL;
        if (nvd_store_suite_get(app->store, json_integer_value(id), &sc) < 0)
            continue;
        /* The case as GET /api/v1/suite lists it: its history is not news. */
        json_object_del(sc, "history");
        json_object_del(sc, "occurrence_list");
        json_object_del(sc, "audit");
        nvd_webhooks_emit(app->hooks, NVD_EV_PROMOTED,
                          json_pack("{s:o, s:I}", "suite_case", sc, "job_id", (json_int_t)job_id));
    }
    json_t *job = NULL;
    if (nvd_store_job_get(app->store, job_id, &job) < 0)
        return;
    const char *kind = json_string_value(json_object_get(job, "kind"));
    const char *build = json_string_value(json_object_get(job, "build_id"));
    const char *op = json_string_value(json_object_get(job, "op"));
    bool judged = kind && (!strcmp(kind, "op") || !strcmp(kind, "gradient") ||
                           !strcmp(kind, "fused"));
    if (judged && build && strlen(build) == 64 &&
        json_integer_value(json_object_get(job, "cases_failed")) > 0) {
        if (ev.n_checks < MAX_CHECKS) {
            check *c = &ev.checks[ev.n_checks++];
            snprintf(c->build, sizeof c->build, "%s", build);
            snprintf(c->kind, sizeof c->kind, "%s", kind);
            snprintf(c->op, sizeof c->op, "%s", op && strlen(op) < sizeof c->op ? op : "");
            c->job_id = job_id;
            wake(app);
        } else {
            nv_log_warn("webhook: %d regression checks waiting; job %lld not checked",
                        MAX_CHECKS, (long long)job_id);
        }
    }
    json_decref(job);
}

static void watch(nvd_app *app, const char *schedule, int64_t slot_s, const char *device,
                  const json_t *job_ids)
{
    if (!schedule)
        return;
    if (ev.n_slots == MAX_SLOTS) {
        nv_log_warn("webhook: %d cron slots watched; giving up on '%s' slot %lld", MAX_SLOTS,
                    ev.slots[0].schedule, (long long)ev.slots[0].slot);
        slot_free(&ev.slots[0]);
        memmove(&ev.slots[0], &ev.slots[1], sizeof(slot) * (MAX_SLOTS - 1));
        ev.n_slots--;
    }
    slot *sl = &ev.slots[ev.n_slots];
    *sl = (slot){.schedule = strdup(schedule),
                 .device = device ? strdup(device) : NULL,
                 .slot = slot_s,
                 .ids = json_deep_copy(job_ids)};
    if (!sl->schedule || !sl->ids || (device && !sl->device)) {
        slot_free(sl);
        return;
    }
    ev.n_slots++;
    wake(app);
}

void nvd_webhooks_on_slot(nvd_app *app, const char *schedule, int64_t slot_s, const char *device,
                          const json_t *job_ids, const char *err)
{
    if (!app->hooks)
        return;
    if (err) {
        char at[32];
        nvd_time_format(slot_s * 1000, at);
        nvd_webhooks_emit(app->hooks, NVD_EV_SCHEDULE_FAILED,
                          json_pack("{s:s, s:s, s:s?, s:O, s:I, s:[], s:s}", "schedule", schedule,
                                    "slot", at, "device", device, "job_ids", job_ids, "jobs",
                                    (json_int_t)json_array_size(job_ids), "not_passed", "error",
                                    err));
        return;
    }
    watch(app, schedule, slot_s, device, job_ids);
}

/* True while one of the jobs is queued, leased or running. */
static bool jobs_running(nvd_app *app, const json_t *ids)
{
    size_t i;
    json_t *id;
    bool running = false;
    json_array_foreach(ids, i, id)
    {
        json_t *job = NULL;
        if (running || nvd_store_job_get(app->store, json_integer_value(id), &job) < 0)
            continue;
        const char *st = json_string_value(json_object_get(job, "state"));
        running = st && (!strcmp(st, "queued") || !strcmp(st, "leased") || !strcmp(st, "running"));
        json_decref(job);
    }
    return running;
}

int nvd_webhooks_events_resume(nvd_app *app)
{
    if (!app->hooks)
        return 0;
    json_t *rows = NULL;
    int r = nvd_store_slots_with_jobs(app->store, MAX_SLOTS, &rows);
    if (r < 0)
        return r;
    size_t i, n = 0;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        const json_t *ids = json_object_get(row, "job_ids");
        if (!json_is_array(ids) || !jobs_running(app, ids))
            continue; /* settled before the restart: its previous run reported it */
        watch(app, json_string_value(json_object_get(row, "schedule")),
              json_integer_value(json_object_get(row, "slot")),
              json_string_value(json_object_get(row, "device")), ids);
        n++;
    }
    if (n)
        nv_log_info("webhook: watching %zu cron slot(s) fired before the restart", n);
    json_decref(rows);
    return 0;
}

void nvd_webhooks_events_stop(void)
{
    if (!ev.timer_on)
        return;
    uv_timer_stop(&ev.timer);
    uv_close((uv_handle_t *)&ev.timer, NULL);
    ev.timer_on = false;
    for (int i = 0; i < ev.n_slots; i++)
        slot_free(&ev.slots[i]);
    ev.n_slots = 0;
}
