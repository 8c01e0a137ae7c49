/* GET /metrics: Prometheus text exposition format 0.0.4. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon/pool.h"
#include "daemon/store/store_care.h"
#include "daemon/util/util.h"
#include "daemon/webhook.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void add(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)n;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

static void counter(buf *b, const char *name, const char *help, uint64_t v)
{
    add(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

static void gauge(buf *b, const char *name, const char *help, double v)
{
    /* Whole values print as integers; others with millisecond resolution. */
    if (v == (double)(long long)v)
        add(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, (long long)v);
    else
        add(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.3f\n", name, help, name, name, v);
}

void api_metrics(api_ctx *x)
{
    nvd_app *app = x->app;
    const nvd_metrics *m = &app->metrics;
    buf b = {.p = malloc(4096), .cap = 4096};
    if (!b.p) {
        api_errno(x, -12, "metrics");
        return;
    }
    add(&b, "# HELP numvald_http_requests_total HTTP responses sent, by status class.\n"
            "# TYPE numvald_http_requests_total counter\n");
    for (int c = 1; c <= 5; c++)
        add(&b, "numvald_http_requests_total{class=\"%dxx\"} %llu\n", c,
            (unsigned long long)m->requests[c]);
    counter(&b, "numvald_jobs_submitted_total", "Jobs accepted by POST /api/v1/jobs.",
            m->jobs_submitted);
    counter(&b, "numvald_results_stored_total", "Job results stored.", m->results_stored);
    counter(&b, "numvald_claims_total", "Jobs leased to workers.", m->claims);
    counter(&b, "numvald_artifacts_stored_total", "New artifacts stored.", m->artifacts_stored);
    counter(&b, "numvald_commit_failures_total", "Group commits that failed.", m->commit_failures);
    counter(&b, "numvald_worker_restarts_total", "Supervised worker restarts.", m->worker_restarts);
    counter(&b, "numvald_idempotent_replays_total",
            "Submissions answered with the job their Idempotency-Key names.", m->idem_replays);
    nvd_webhook_stats ws;
    nvd_webhooks_stats(app->hooks, &ws);
    counter(&b, "numvald_webhook_delivered_total", "Webhook events a receiver accepted (2xx).",
            ws.delivered);
    counter(&b, "numvald_webhook_failed_attempts_total",
            "Webhook delivery attempts that failed (retried or dropped).", ws.failed_attempts);
    counter(&b, "numvald_webhook_dropped_total",
            "Webhook events given up: attempts exhausted or queue full.", ws.dropped);
    json_t *states = NULL;
    if (nvd_store_jobs_count_states(app->store, &states) == 0) {
        add(&b, "# HELP numvald_jobs Jobs in the store, by state.\n# TYPE numvald_jobs gauge\n");
        const char *k;
        json_t *v;
        json_object_foreach(states, k, v)
            add(&b, "numvald_jobs{state=\"%s\"} %lld\n", k, (long long)json_integer_value(v));
        json_decref(states);
    }
    int64_t na = 0, nb = 0;
    if (nvd_store_artifacts_stats(app->store, &na, &nb) == 0) {
        gauge(&b, "numvald_artifacts", "Artifacts stored.", (double)na);
        gauge(&b, "numvald_artifact_bytes", "Compressed bytes of stored artifacts.", (double)nb);
    }
    gauge(&b, "numvald_store_damaged",
          "1 when the database was found damaged (numvald is then read-only), else 0.",
          nvd_store_damaged(NULL, 0) ? 1.0 : 0.0);
    nvd_store_sizes sz;
    if (nvd_store_sizes_get(app->store, &sz) == 0) {
        gauge(&b, "numvald_store_bytes", "Bytes of the SQLite database file (its pages).",
              (double)sz.file_bytes);
        gauge(&b, "numvald_store_free_bytes", "Free pages in the database, reused by later writes.",
              (double)sz.free_bytes);
        if (sz.wal_bytes >= 0)
            gauge(&b, "numvald_store_wal_bytes", "Bytes of the write-ahead log file.",
                  (double)sz.wal_bytes);
    }
    gauge(&b, "numvald_queue_depth", "Queued jobs.", (double)nvd_queue_depth(app->queue));
    gauge(&b, "numvald_claims_waiting", "Worker claims parked in long poll.",
          (double)nvd_queue_waiting(app->queue));
    gauge(&b, "numvald_http_connections", "Open HTTP connections.",
          (double)nvd_http_server_connections(app->http));
    gauge(&b, "numvald_uptime_seconds", "Seconds since numvald started.",
          (double)(nvd_now_ms() - m->started_ms) / 1000.0);
    char *pools = nvd_pools_metrics(app->pools); /* [pool] sections (daemon/pool.c) */
    if (pools)
        add(&b, "%s", pools);
    free(pools);
    if (b.oom) {
        free(b.p);
        api_errno(x, -12, "metrics");
        return;
    }
    nvd_http_respond(x->req, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len, NULL);
    free(b.p);
}
