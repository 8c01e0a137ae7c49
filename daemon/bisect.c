/* The daemon-side bisection driver (bisect.h). */
#include "bisect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "app.h"
#include "common/log.h"
#include "daemon/store/store_bisect.h"
#include "daemon/store/store_suite.h"
#include "daemon/util/util.h"

/* Verdict pairs reported as non-monotone evidence, at most; and how much of a
 * suite case's history is read for it. */
#define MAX_EVIDENCE 16
#define MAX_HISTORY 2000

static uv_timer_t timer;
static bool timer_on;

static void on_tick(uv_timer_t *t);

static void wake(nvd_app *app)
{
    if (!timer_on) {
        if (uv_timer_init(app->loop, &timer) < 0)
            return;
        timer_on = true;
    }
    timer.data = app;
    if (!uv_is_active((uv_handle_t *)&timer))
        uv_timer_start(&timer, on_tick, 1000, 1000);
}

static bool terminal(const char *st)
{
    return st && (!strcmp(st, "passed") || !strcmp(st, "failed") || !strcmp(st, "error") ||
                  !strcmp(st, "cancelled"));
}

/* Index of build hash in the row's builds, or -1. */
static int index_of(const json_t *builds, const char *hash)
{
    for (size_t i = 0; hash && i < json_array_size(builds); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(builds, i), "id")), hash))
            return (int)i;
    return -1;
}

/* Every pair of a failing build i and a passing build j >= i among the
 * probes and the case's stored replays (on the row's device, when it has
 * one): the evidence that the case is not monotone in build order. */
static json_t *non_monotone(nvd_app *app, const json_t *row)
{
    const json_t *builds = json_object_get(row, "builds");
    const char *device = json_string_value(json_object_get(row, "device"));
    json_t *ev = json_array(), *sc = NULL, *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(row, "probes"), i, p)
        json_array_append_new(ev, json_pack("[O,O,O]", json_object_get(p, "index"),
                                            json_object_get(p, "verdict"),
                                            json_object_get(p, "job_id")));
    if (nvd_store_suite_get(app->store, json_integer_value(json_object_get(row, "suite_case")),
                            &sc) == 0) {
        json_array_foreach(json_object_get(sc, "history"), i, p)
        {
            if (i >= MAX_HISTORY)
                break;
            const char *dev = json_string_value(json_object_get(p, "device"));
            int k = index_of(builds, json_string_value(json_object_get(p, "build")));
            if (k < 0 || (device && (!dev || strcmp(dev, device))))
                continue;
            bool probe = false;
            size_t j;
            json_t *q;
            json_array_foreach(json_object_get(row, "probes"), j, q)
                probe |= json_equal(json_object_get(q, "job_id"), json_object_get(p, "job_id"));
            if (!probe)
                json_array_append_new(ev, json_pack("[i,O,O]", k, json_object_get(p, "verdict"),
                                                    json_object_get(p, "job_id")));
        }
    }
    json_decref(sc);
    for (i = 0; ev && out && i < json_array_size(ev); i++) {
        const json_t *f = json_array_get(ev, i);
        if (strcmp(json_string_value(json_array_get(f, 1)), "failed"))
            continue;
        for (size_t j = 0; j < json_array_size(ev) && json_array_size(out) < MAX_EVIDENCE; j++) {
            const json_t *g = json_array_get(ev, j);
            if (strcmp(json_string_value(json_array_get(g, 1)), "passed") ||
                json_integer_value(json_array_get(g, 0)) < json_integer_value(json_array_get(f, 0)))
                continue;
            json_array_append_new(
                out, json_pack("{s:O, s:O, s:O, s:O}", "failing",
                               json_array_get(builds, (size_t)json_integer_value(json_array_get(f, 0))),
                               "failing_job", json_array_get(f, 2), "passing",
                               json_array_get(builds, (size_t)json_integer_value(json_array_get(g, 0))),
                               "passing_job", json_array_get(g, 2)));
        }
    }
    json_decref(ev);
    return out;
}

/* Submit the probe of builds[mid]; its job id in *ret_id. */
static int submit_probe(nvd_app *app, const json_t *row, int mid, int64_t *ret_id)
{
    const json_t *b = json_array_get(json_object_get(row, "builds"), (size_t)mid);
    json_t *ids = json_pack("[O]", json_object_get(row, "suite_case")), *cases = NULL;
    int r = ids ? nvd_store_suite_active(app->store, NULL, NULL, NULL, ids, &cases) : -ENOMEM;
    json_decref(ids);
    if (r < 0)
        return r;
    if (json_array_size(cases) == 0) {
        json_decref(cases);
        return -ENOENT; /* retired meanwhile */
    }
    json_t *spec = json_pack("{s:s, s:{s:[O]}, s:O, s:o}", "kind", "suite", "filter", "ids",
                             json_object_get(row, "suite_case"), "build",
                             json_object_get(b, "identity"), "cases", cases);
    const char *device = json_string_value(json_object_get(row, "device"));
    if (spec && device)
        json_object_set_new(spec, "device", json_string(device));
    char *text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
    json_decref(spec);
    if (!text)
        return -ENOMEM;
    nvd_job_new j = {.kind = "suite",
                     .device = device,
                     .build_hash = json_string_value(json_object_get(b, "id")),
                     .max_attempts = app->cfg->max_attempts,
                     .spec_json = text};
    r = nvd_queue_submit(app->queue, &j, nvd_now_ms(), ret_id);
    free(text);
    return r;
}

static void finish(nvd_app *app, json_t *row, const char *state, json_t *stopped)
{
    const json_t *builds = json_object_get(row, "builds");
    int lo = (int)json_integer_value(json_object_get(row, "lo"));
    int hi = (int)json_integer_value(json_object_get(row, "hi"));
    json_t *res = json_pack("{s:o}", "non_monotone", non_monotone(app, row));
    if (res && stopped)
        json_object_set_new(res, "stopped", stopped);
    else if (res) {
        json_object_set(res, "first_failing_build", json_array_get(builds, (size_t)hi));
        json_object_set(res, "last_passing_build", json_array_get(builds, (size_t)lo));
    } else {
        json_decref(stopped);
    }
    json_object_set_new(row, "result", res ? res : json_null());
    json_object_set_new(row, "state", json_string(state));
    json_object_set_new(row, "current_job", json_null());
    nv_log_info("bisection %lld: %s after %zu probes", (long long)json_integer_value(json_object_get(row, "id")),
                state, json_array_size(json_object_get(row, "probes")));
}

/* Advance one bisection as far as its probes allow; saves it when it moved. */
static int step(nvd_app *app, int64_t id)
{
    json_t *row = NULL;
    int r = nvd_store_bisect_get(app->store, id, &row);
    if (r < 0)
        return r;
    bool moved = false;
    int lo = (int)json_integer_value(json_object_get(row, "lo"));
    int hi = (int)json_integer_value(json_object_get(row, "hi"));
    const json_t *cj = json_object_get(row, "current_job");
    if (json_is_integer(cj)) {
        json_t *job = NULL;
        r = nvd_store_job_get(app->store, json_integer_value(cj), &job);
        if (r < 0 && r != -ENOENT) {
            json_decref(row);
            return r; /* the store is busy: the next tick looks again */
        }
        const char *st = r == 0 ? json_string_value(json_object_get(job, "state")) : "error";
        if (r == -ENOENT || terminal(st)) {
            /* The probe's build is the one the range's halves put it at. */
            int mid = lo + (hi - lo) / 2;
            json_array_append_new(
                json_object_get(row, "probes"),
                json_pack("{s:O, s:i, s:O, s:s}", "build",
                          json_array_get(json_object_get(row, "builds"), (size_t)mid), "index",
                          mid, "job_id", cj, "verdict", st));
            json_object_set_new(row, "current_job", json_null());
            moved = true;
            if (!strcmp(st, "passed"))
                lo = mid;
            else if (!strcmp(st, "failed"))
                hi = mid;
            else
                finish(app, row, "stopped",
                       json_pack("{s:s, s:O, s:O}", "verdict", st, "job_id", cj, "error",
                                 json_object_get(job, "error")));
            json_object_set_new(row, "lo", json_integer(lo));
            json_object_set_new(row, "hi", json_integer(hi));
        }
        json_decref(job);
        r = 0;
    }
    const char *state = json_string_value(json_object_get(row, "state"));
    if (!strcmp(state, "running") && json_is_null(json_object_get(row, "current_job"))) {
        if (hi - lo <= 1) {
            finish(app, row, "done", NULL);
        } else {
            int64_t job = 0;
            r = submit_probe(app, row, lo + (hi - lo) / 2, &job);
            if (r == -EAGAIN) /* queue full: the next tick tries again */
                r = 0;
            else if (r < 0)
                finish(app, row, "stopped",
                       json_pack("{s:s, s:n, s:s}", "verdict", "not_submitted", "job_id",
                                 "error", r == -ENOENT ? "the suite case is no longer active"
                                                       : strerror(-r)));
            else
                json_object_set_new(row, "current_job", json_integer(job));
            r = 0;
        }
        moved = true;
    }
    if (moved)
        r = nvd_store_bisect_save(app->store, row, nvd_now_ms());
    json_decref(row);
    return r;
}

static void on_tick(uv_timer_t *t)
{
    nvd_app *app = t->data;
    json_t *ids = NULL;
    if (nvd_store_bisect_running(app->store, NVD_BISECT_MAX_RUNNING, &ids) < 0)
        return;
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id)
    {
        int r = step(app, json_integer_value(id));
        if (r < 0)
            nv_log_warn("bisection %lld: %s", (long long)json_integer_value(id), strerror(-r));
    }
    if (json_array_size(ids) == 0)
        uv_timer_stop(t);
    json_decref(ids);
}

int nvd_bisect_start(nvd_app *app, int64_t suite_case, const char *good, const char *bad,
                     const char *device, const char *actor, int64_t *ret_id, char *field,
                     size_t field_len, char *err, size_t errlen)
{
    char *g = NULL, *b = NULL;
    json_t *range = NULL, *running = NULL, *cases = NULL;
    json_t *ids = json_pack("[I]", (json_int_t)suite_case);
    field[0] = '\0';
    int r = ids ? nvd_store_suite_active(app->store, NULL, NULL, NULL, ids, &cases) : -ENOMEM;
    if (r == 0 && json_array_size(cases) == 0) {
        snprintf(field, field_len, "/suite_case");
        snprintf(err, errlen, "no active suite case %lld (see GET /api/v1/suite)",
                 (long long)suite_case);
        r = -ENOENT;
    }
    if (r == 0 && (r = nvd_store_bisect_running(app->store, NVD_BISECT_MAX_RUNNING, &running)) ==
                      0 &&
        json_array_size(running) >= NVD_BISECT_MAX_RUNNING) {
        snprintf(err, errlen, "%d bisections are running, the limit; retry when one is done",
                 NVD_BISECT_MAX_RUNNING);
        r = -EBUSY;
    }
    if (r == 0 && (r = nvd_store_build_resolve(app->store, good, &g)) == -ENOENT) {
        snprintf(field, field_len, "/good");
        snprintf(err, errlen, "no build '%s' (a build hash, name or version)", good);
    }
    if (r == 0 && (r = nvd_store_build_resolve(app->store, bad, &b)) == -ENOENT) {
        snprintf(field, field_len, "/bad");
        snprintf(err, errlen, "no build '%s' (a build hash, name or version)", bad);
    }
    if (r == 0 && (r = nvd_store_build_range(app->store, g, b, &range)) == -EINVAL) {
        snprintf(field, field_len, "/bad");
        snprintf(err, errlen, "good build '%s' is not registered before bad build '%s'", good,
                 bad);
    } else if (r == -E2BIG) {
        snprintf(err, errlen, "more than 10000 builds between '%s' and '%s'", good, bad);
    }
    if (r == 0)
        r = nvd_store_bisect_insert(app->store, suite_case, device, range, 0,
                                    (int)json_array_size(range) - 1, actor, nvd_now_ms(), ret_id);
    if (r == 0)
        r = step(app, *ret_id);
    if (r == 0)
        wake(app);
    free(g);
    free(b);
    json_decref(ids);
    json_decref(cases);
    json_decref(range);
    json_decref(running);
    return r;
}

int nvd_bisect_get(nvd_app *app, int64_t id, json_t **ret)
{
    json_t *row = NULL;
    int r = nvd_store_bisect_get(app->store, id, &row);
    if (r < 0)
        return r;
    /* The view of `numvalctl bisect --json`, plus the row's own fields; the
     * whole build range stays in the store. */
    json_t *builds = json_object_get(row, "builds"), *res = json_object_get(row, "result");
    json_t *v = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:O, s:I, s:O, s:O}", "id",
                          json_object_get(row, "id"), "state", json_object_get(row, "state"),
                          "suite_case", json_object_get(row, "suite_case"), "device",
                          json_object_get(row, "device"), "good", json_array_get(builds, 0),
                          "bad", json_array_get(builds, json_array_size(builds) - 1), "probes",
                          json_object_get(row, "probes"), "runs",
                          (json_int_t)json_array_size(json_object_get(row, "probes")),
                          "current_job", json_object_get(row, "current_job"), "builds_between",
                          (json_int_t)json_array_size(builds) - 2, "actor",
                          json_object_get(row, "actor"), "created_at",
                          json_object_get(row, "created_at"));
    const char *k;
    json_t *x;
    if (v && json_is_object(res))
        json_object_foreach(res, k, x) json_object_set(v, k, x);
    if (v && !json_object_get(v, "first_failing_build"))
        json_object_set_new(v, "first_failing_build", json_null());
    json_decref(row);
    if (!v)
        return -ENOMEM;
    *ret = v;
    return 0;
}

int nvd_bisect_resume(nvd_app *app)
{
    json_t *ids = NULL;
    int r = nvd_store_bisect_running(app->store, NVD_BISECT_MAX_RUNNING, &ids);
    if (r == 0 && json_array_size(ids) > 0) {
        nv_log_info("resuming %zu running bisections", json_array_size(ids));
        wake(app);
    }
    json_decref(ids);
    return r;
}

void nvd_bisect_stop(void)
{
    if (!timer_on)
        return;
    uv_timer_stop(&timer);
    uv_close((uv_handle_t *)&timer, NULL);
    timer_on = false;
}
