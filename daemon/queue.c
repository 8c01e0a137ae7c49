#include "queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/util/util.h"
#include "replay.h"
#include "tolerance.h"

struct nvd_waiter {
    uv_timer_t timer;
    nvd_queue *q;
    nvd_waiter *prev, *next;
    char *device;
    nvd_wait_fn fn;
    void *ud;
    bool linked;
};

struct nvd_queue {
    uv_loop_t *loop;
    nvd_store *store;
    nvd_queue_opts o;
    int64_t depth;
    uv_timer_t expiry;
    nvd_waiter *head, *tail;
    int n_waiting;
};

static int recount(nvd_queue *q)
{
    return nvd_store_jobs_count(q->store, "queued", &q->depth);
}

static void on_expiry_tick(uv_timer_t *t)
{
    nvd_queue *q = t->data;
    int req = 0, err = 0;
    int r = nvd_queue_expire(q, nvd_now_ms(), &req, &err);
    if (r < 0)
        nv_log_err("queue: lease expiry failed: %s", strerror(-r));
    else if (req || err)
        nv_log_info("queue: %d expired lease(s) requeued, %d job(s) out of attempts", req, err);
}

int nvd_queue_new(uv_loop_t *loop, nvd_store *s, const nvd_queue_opts *o, nvd_queue **ret)
{
    nvd_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->loop = loop;
    q->store = s;
    q->o = *o;
    int r = recount(q);
    if (r < 0) {
        free(q);
        return r;
    }
    if (loop) {
        uv_timer_init(loop, &q->expiry);
        q->expiry.data = q;
        uint64_t tick = o->expiry_tick_ms ? (uint64_t)o->expiry_tick_ms : 1000;
        uv_timer_start(&q->expiry, on_expiry_tick, tick, tick);
    }
    *ret = q;
    return 0;
}

static void unlink_waiter(nvd_waiter *w)
{
    if (!w->linked)
        return;
    nvd_queue *q = w->q;
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->linked = false;
    q->n_waiting--;
}

static void on_waiter_closed(uv_handle_t *h)
{
    nvd_waiter *w = h->data;
    free(w->device);
    free(w);
}

void nvd_queue_unwait(nvd_waiter *w)
{
    if (!w)
        return;
    unlink_waiter(w);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_waiter_closed);
}

static void fire(nvd_waiter *w, bool timed_out)
{
    nvd_wait_fn fn = w->fn;
    void *ud = w->ud;
    nvd_queue_unwait(w);
    fn(ud, timed_out);
}

static void on_wait_timeout(uv_timer_t *t)
{
    fire(t->data, true);
}

int nvd_queue_wait(nvd_queue *q, const char *device, uint64_t ms, nvd_wait_fn fn, void *ud,
                   nvd_waiter **ret)
{
    if (!q->loop)
        return -ENOTSUP;
    nvd_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->device = device ? strdup(device) : NULL;
    if (device && !w->device) {
        free(w);
        return -ENOMEM;
    }
    w->q = q;
    w->fn = fn;
    w->ud = ud;
    uv_timer_init(q->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_wait_timeout, ms, 0);
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    w->linked = true;
    q->n_waiting++;
    *ret = w;
    return 0;
}

int nvd_queue_waiting(const nvd_queue *q)
{
    return q->n_waiting;
}

/* Wake waiters that could take a job for device (NULL: any device). */
static void wake(nvd_queue *q, const char *device, int max)
{
    nvd_waiter *w = q->head;
    while (w && max > 0) {
        nvd_waiter *next = w->next;
        if (!device || (w->device && strcmp(w->device, device) == 0)) {
            fire(w, false);
            max--;
        }
        w = next;
    }
}

static void on_expiry_closed(uv_handle_t *h)
{
    free(h->data);
}

void nvd_queue_free(nvd_queue *q)
{
    if (!q)
        return;
    while (q->head)
        nvd_queue_unwait(q->head);
    if (q->loop) {
        uv_timer_stop(&q->expiry);
        /* The expiry timer lives in q: free q once the loop has closed it. */
        uv_close((uv_handle_t *)&q->expiry, on_expiry_closed);
        return;
    }
    free(q);
}

int nvd_queue_submit(nvd_queue *q, const nvd_job_new *j, int64_t now, int64_t *ret_id)
{
    if (q->depth >= q->o.max_depth)
        return -EAGAIN;
    int r = nvd_store_job_insert(q->store, j, now, ret_id);
    if (r < 0)
        return r;
    q->depth++;
    if (q->loop)
        wake(q, j->device, 1);
    return 0;
}

int nvd_queue_resync(nvd_queue *q)
{
    return q ? recount(q) : 0;
}

int64_t nvd_queue_depth(const nvd_queue *q)
{
    return q->depth;
}

/* Put the store's tolerances into spec["tolerance_by_dtype"] for each dtype
 * the job does not set itself. */
static int add_tolerances(nvd_queue *q, const char *op, json_t *spec, const json_t *mode)
{
    if (!op || !json_is_object(spec) || json_object_get(spec, "tolerance"))
        return 0;
    const json_t *dtypes = json_object_get(spec, "dtypes");
    json_t *tbd = json_object_get(spec, "tolerance_by_dtype");
    size_t i;
    const json_t *d;
    json_array_foreach(dtypes, i, d)
    {
        const char *dt = json_string_value(d);
        if (!dt || (tbd && json_object_get(tbd, dt)))
            continue;
        json_t *tol = nvd_tolerance_stored(q->store, op, dt, mode);
        if (!tol)
            continue;
        if (!tbd) {
            tbd = json_object();
            if (!tbd || json_object_set_new(spec, "tolerance_by_dtype", tbd) < 0) {
                json_decref(tol);
                return -ENOMEM;
            }
        }
        json_object_set_new(tbd, dt, tol);
    }
    return 0;
}

int nvd_queue_claim(nvd_queue *q, const char *device, const json_t *describe, int64_t now,
                    json_t **ret)
{
    char token[33];
    int r = nvd_random_hex(16, token);
    if (r < 0)
        return r;
    json_t *c = NULL;
    r = nvd_store_job_claim(q->store, device, token, now, q->o.lease_ms, &c);
    if (r < 0)
        return r;
    if (q->depth > 0)
        q->depth--;
    const json_t *mode = json_object_get(describe, "mode");
    json_t *dev = NULL;
    if (!mode && nvd_store_device_get(q->store, device, &dev) == 0)
        mode = json_object_get(dev, "mode");
    r = add_tolerances(q, json_string_value(json_object_get(c, "op")), json_object_get(c, "spec"),
                       mode);
    /* A suite replay judges by the tolerances that apply now (replay.h). */
    const char *kind = json_string_value(json_object_get(json_object_get(c, "spec"), "kind"));
    if (r == 0 && kind && !strcmp(kind, "suite"))
        r = nvd_replay_tolerances(q->store, json_object_get(c, "spec"), mode, now);
    json_decref(dev);
    if (r < 0) {
        json_decref(c);
        return r;
    }
    json_object_del(c, "op");
    *ret = c;
    return 0;
}

int nvd_queue_cancel(nvd_queue *q, int64_t id, int64_t now)
{
    int r = nvd_store_job_cancel(q->store, id, now);
    if (r == 0)
        recount(q);
    return r;
}

int nvd_queue_expire(nvd_queue *q, int64_t now, int *ret_requeued, int *ret_errored)
{
    int req = 0, err = 0;
    int r = nvd_store_leases_expire(q->store, now, &req, &err);
    if (r < 0)
        return r;
    if (req) {
        q->depth += req;
        if (q->loop)
            wake(q, NULL, req);
    }
    if (ret_requeued)
        *ret_requeued = req;
    if (ret_errored)
        *ret_errored = err;
    return 0;
}
