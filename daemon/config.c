#include "config.h"
#include "auth.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nvd_config_set_str(char **field, const char *v)
{
    char *d = v ? strdup(v) : NULL;
    if (v && !d)
        return -ENOMEM;
    free(*field);
    *field = d;
    return 0;
}

/* The shares of max_body_total (config.h NVD_BUDGET_*): requests without a
 * token send at most a few KiB each, so 1/16 is room for every connection;
 * workers, whose artifacts are the largest bodies, get 9/16. */
static void split_budgets(nvd_config *c)
{
    size_t t = c->http.max_body_total;
    c->http.max_body_budget[NVD_BUDGET_ANON] = t / 16;
    c->http.max_body_budget[NVD_BUDGET_CLIENT] = t / 16 * 6;
    c->http.max_body_budget[NVD_BUDGET_WORKER] = t - t / 16 - t / 16 * 6;
}

int nvd_config_init(nvd_config *c)
{
    memset(c, 0, sizeof(*c));
    c->anonymous_read = NVD_ANON_LOOPBACK;
    c->http = (nvd_http_limits){.max_header_bytes = 16384,
                                .max_headers = 64,
                                .max_connections = 1024,
                                .max_body_total = (size_t)512 << 20,
                                .idle_timeout_ms = 60000,
                                .header_timeout_ms = 10000,
                                .body_timeout_ms = 60000};
    c->max_job_body = 1 << 20;
    c->max_artifact_body = 64 << 20;
    c->queue_depth = 100000;
    c->max_attempts = 3;
    c->lease_ms = 30000;
    c->claim_max_wait_ms = 60000;
    c->crash_limit = 5;
    c->crash_window_ms = 300000;
    c->backoff_max_ms = 60000;
    c->idem_keys = 100000;
    c->idem_ttl_s = 86400;
    c->sync_full = true;
    split_budgets(c);
    if (nvd_config_set_str(&c->listen, "127.0.0.1:8080") < 0 ||
        nvd_config_set_str(&c->data_dir, "./var") < 0 ||
        nvd_config_set_str(&c->js_dir, "/usr/share/javascript") < 0)
        return -ENOMEM;
    return 0;
}

typedef struct load_ctx {
    nvd_config *c;
    char err[512];
} load_ctx;

static int parse_num(const char *v, int64_t lo, int64_t hi, int64_t *ret)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -EINVAL;
    *ret = n;
    return 0;
}

static nvd_device_conf *device(nvd_config *c, const char *name)
{
    for (int i = 0; i < c->n_devices; i++)
        if (strcmp(c->devices[i].name, name) == 0)
            return &c->devices[i];
    nvd_device_conf *d = realloc(c->devices, sizeof(*d) * (size_t)(c->n_devices + 1));
    if (!d)
        return NULL;
    c->devices = d;
    d = &c->devices[c->n_devices];
    memset(d, 0, sizeof(*d));
    d->slots = 1;
    d->minimize_deadline_s = -1;
    d->name = strdup(name);
    if (!d->name)
        return NULL;
    c->n_devices++;
    return d;
}

static int server_key(load_ctx *x, const char *k, const char *v)
{
    nvd_config *c = x->c;
    if (!strcmp(k, "listen"))
        return nvd_config_set_str(&c->listen, v);
    if (!strcmp(k, "data_dir"))
        return nvd_config_set_str(&c->data_dir, v);
    if (!strcmp(k, "web_dir"))
        return nvd_config_set_str(&c->web_dir, v);
    if (!strcmp(k, "js_dir"))
        return nvd_config_set_str(&c->js_dir, v);
    if (!strcmp(k, "worker"))
        return nvd_config_set_str(&c->worker, v);
    if (!strcmp(k, "anonymous_read")) {
        if (!strcmp(v, "loopback"))
            c->anonymous_read = NVD_ANON_LOOPBACK;
        else if (!strcmp(v, "yes"))
            c->anonymous_read = NVD_ANON_YES;
        else if (!strcmp(v, "no"))
            c->anonymous_read = NVD_ANON_NO;
        else
            return -EINVAL;
        return 0;
    }
    if (!strcmp(k, "trusted_proxy")) {
        if (!nvd_auth_addr_list_ok(v))
            return -EINVAL;
        return nvd_config_set_str(&c->trusted_proxy, v);
    }
    if (!strcmp(k, "synchronous")) {
        if (!strcmp(v, "full"))
            c->sync_full = true;
        else if (!strcmp(v, "normal"))
            c->sync_full = false;
        else
            return -EINVAL;
        return 0;
    }
    if (!strcmp(k, "integrity_check")) {
        if (!strcmp(v, "quick"))
            c->skip_check = false;
        else if (!strcmp(v, "off"))
            c->skip_check = true;
        else
            return -EINVAL;
        return 0;
    }
    return -ENOENT;
}

static int limits_key(load_ctx *x, const char *k, const char *v)
{
    nvd_config *c = x->c;
    int64_t n;
    if (parse_num(v, 1, (int64_t)1 << 40, &n) < 0)
        return -EINVAL;
    /* A known key with a value out of its range is a bad value, not an unknown key. */
    static const struct {
        const char *k;
        int64_t lo, hi;
    } ranges[] = {{"max_connections", 1, 1000000}, {"max_header_bytes", 1024, 1 << 24},
                  {"max_headers", 1, 10000},       {"queue_depth", 1, 100000000},
                  {"max_attempts", 1, 1000},       {"crash_limit", 1, 1000}};
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (!strcmp(k, ranges[i].k) && (n < ranges[i].lo || n > ranges[i].hi))
            return -EINVAL;
    if (!strcmp(k, "max_connections") && n <= 1000000)
        c->http.max_connections = (int)n;
    else if (!strcmp(k, "max_header_bytes") && n >= 1024 && n <= (1 << 24))
        c->http.max_header_bytes = (size_t)n;
    else if (!strcmp(k, "max_headers") && n <= 10000)
        c->http.max_headers = (int)n;
    else if (!strcmp(k, "max_body_total"))
        c->http.max_body_total = (size_t)n;
    else if (!strcmp(k, "max_job_body"))
        c->max_job_body = (size_t)n;
    else if (!strcmp(k, "max_artifact_body"))
        c->max_artifact_body = (size_t)n;
    else if (!strcmp(k, "idle_timeout_ms"))
        c->http.idle_timeout_ms = (uint64_t)n;
    else if (!strcmp(k, "header_timeout_ms"))
        c->http.header_timeout_ms = (uint64_t)n;
    else if (!strcmp(k, "body_timeout_ms"))
        c->http.body_timeout_ms = (uint64_t)n;
    else if (!strcmp(k, "queue_depth") && n <= 100000000)
        c->queue_depth = (int)n;
    else if (!strcmp(k, "max_attempts") && n <= 1000)
        c->max_attempts = (int)n;
    else if (!strcmp(k, "lease_ms"))
        c->lease_ms = n;
    else if (!strcmp(k, "claim_max_wait_ms"))
        c->claim_max_wait_ms = n;
    else if (!strcmp(k, "crash_limit") && n <= 1000)
        c->crash_limit = (int)n;
    else if (!strcmp(k, "crash_window_ms"))
        c->crash_window_ms = n;
    else if (!strcmp(k, "backoff_max_ms"))
        c->backoff_max_ms = n;
    else if (!strcmp(k, "idempotency_keys") && n >= 1 && n <= 10000000)
        c->idem_keys = n;
    else if (!strcmp(k, "idempotency_ttl_s") && n >= 1 && n <= 30 * 86400)
        c->idem_ttl_s = n;
    else
        return -ENOENT;
    return 0;
}

static int device_key(load_ctx *x, const char *name, const char *k, const char *v)
{
    nvd_device_conf *d = device(x->c, name);
    if (!d)
        return -ENOMEM;
    if (!strcmp(k, "backend"))
        return nvd_config_set_str(&d->backend, v);
    if (!strcmp(k, "worker"))
        return nvd_config_set_str(&d->worker, v);
    if (!strcmp(k, "slots")) {
        int64_t n;
        if (parse_num(v, 0, 256, &n) < 0)
            return -EINVAL;
        d->slots = (int)n;
        return 0;
    }
    if (!strcmp(k, "build_backend_dir")) /* docs/API.md "POST /api/v1/builds" */
        return *v == '/' ? nvd_config_set_str(&d->build_backend_dir, v) : -EINVAL;
    if (!strcmp(k, "minimize_deadline")) {
        int64_t n;
        if (parse_num(v, 0, 86400, &n) < 0)
            return -EINVAL;
        d->minimize_deadline_s = (int)n;
        return 0;
    }
    return -ENOENT;
}

/* [retention]: days after which `numvald prune` lets case rows and artifacts go. */
static int retention_key(load_ctx *x, const char *k, const char *v)
{
    int64_t n;
    if (parse_num(v, 0, 36500, &n) < 0)
        return -EINVAL;
    if (!strcmp(k, "case_days"))
        x->c->retention_case_days = (int)n;
    else if (!strcmp(k, "artifact_days"))
        x->c->retention_artifact_days = (int)n;
    else
        return -ENOENT;
    return 0;
}

/* [schedule NAME]: the scheduler (scheduler.h) runs what these sections give. */
static nvd_schedule_conf *schedule(nvd_config *c, const char *name)
{
    for (int i = 0; i < c->n_schedules; i++)
        if (strcmp(c->schedules[i].name, name) == 0)
            return &c->schedules[i];
    nvd_schedule_conf *s = realloc(c->schedules, sizeof(*s) * (size_t)(c->n_schedules + 1));
    if (!s)
        return NULL;
    c->schedules = s;
    s = &c->schedules[c->n_schedules];
    memset(s, 0, sizeof(*s));
    if (!(s->name = strdup(name)))
        return NULL;
    c->n_schedules++;
    return s;
}

static int schedule_key(load_ctx *x, const char *name, const char *k, const char *v)
{
    nvd_schedule_conf *s = schedule(x->c, name);
    if (!s)
        return -ENOMEM;
    if (!strcmp(k, "cron")) {
        char err[256];
        if (nvd_cron_parse(v, &s->cron, err, sizeof err) < 0)
            return -EINVAL;
        s->cron_ok = 1;
        return nvd_config_set_str(&s->cron_text, v);
    }
    if (!strcmp(k, "suite"))
        return nvd_config_set_str(&s->suite, v);
    if (!strcmp(k, "device"))
        return nvd_config_set_str(&s->device, v);
    return -ENOENT;
}

/* The first schedule without a cron expression or a suite, as a message in buf. */
static void schedules_check(const nvd_config *c, char *buf, size_t len)
{
    for (int i = 0; i < c->n_schedules; i++) {
        const nvd_schedule_conf *s = &c->schedules[i];
        if (!s->cron_ok)
            snprintf(buf, len, "schedule '%s' has no 'cron' (e.g. cron = 0 2 * * *)", s->name);
        else if (!s->suite)
            snprintf(buf, len, "schedule '%s' has no 'suite' (a suite JSON file)", s->name);
        if (buf[0])
            return;
    }
}

static void schedules_free(nvd_config *c)
{
    for (int i = 0; i < c->n_schedules; i++) {
        free(c->schedules[i].name);
        free(c->schedules[i].cron_text);
        free(c->schedules[i].suite);
        free(c->schedules[i].device);
    }
    free(c->schedules);
    c->schedules = NULL;
    c->n_schedules = 0;
}

static int on_ini(void *user, const char *section, const char *k, const char *v)
{
    load_ctx *x = user;
    int r;
    if (!strcmp(section, "server"))
        r = server_key(x, k, v);
    else if (!strcmp(section, "limits"))
        r = limits_key(x, k, v);
    else if (!strncmp(section, "device ", 7) && section[7])
        r = device_key(x, section + 7, k, v);
    else if (!strcmp(section, "retention"))
        r = retention_key(x, k, v);
    else if (!strncmp(section, "schedule ", 9) && section[9])
        r = schedule_key(x, section + 9, k, v);
    else if (!strncmp(section, "pool ", 5) && section[5])
        r = nvd_pool_conf_key(&x->c->pools, &x->c->n_pools, section + 5, k, v);
    else if (!strncmp(section, "webhook ", 8) && section[8])
        r = nvd_webhook_conf_key(x->c, section + 8, k, v);
    else
        r = -ESRCH;
    if (r == 0)
        return 1;
    if (!x->err[0]) {
        if (r == -ESRCH)
            snprintf(x->err, sizeof(x->err), "unknown section '[%s]'", section);
        else if (r == -E2BIG)
            snprintf(x->err, sizeof(x->err), "more than %d [webhook] sections", NVD_WEBHOOKS_MAX);
        else if (r == -ENOENT)
            snprintf(x->err, sizeof(x->err), "unknown key '%s' in [%s]", k, section);
        else
            snprintf(x->err, sizeof(x->err), "bad value '%s' for '%s' in [%s]", v, k, section);
    }
    return 0;
}

int nvd_config_load(nvd_config *c, const char *path, char **ret_err)
{
    load_ctx x = {.c = c};
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        char buf[600];
        snprintf(buf, sizeof(buf), "cannot open config '%s': %s", path, strerror(e));
        *ret_err = strdup(buf);
        return -e;
    }
    int r = ini_parse_file(f, on_ini, &x);
    fclose(f);
    split_budgets(c);
    if (r != 0) {
        char buf[1200];
        if (x.err[0])
            snprintf(buf, sizeof(buf), "config '%s' line %d: %s", path, r, x.err);
        else
            snprintf(buf, sizeof(buf), "config '%s': syntax error on line %d", path, r);
        *ret_err = strdup(buf);
        return -EINVAL;
    }
    return 0;
}

int nvd_config_check(const nvd_config *c, char **ret_err)
{
    char buf[512] = "";
    for (int i = 0; i < c->n_devices && !buf[0]; i++) {
        const nvd_device_conf *d = &c->devices[i];
        if (!d->backend || !d->backend[0])
            snprintf(buf, sizeof(buf), "device '%s' has no 'backend'", d->name);
        for (const char *p = d->name; *p && !buf[0]; p++)
            if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
                  (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                snprintf(buf, sizeof(buf), "device name '%s' may only use [A-Za-z0-9._-]", d->name);
    }
    if (!buf[0] && c->lease_ms < 100)
        snprintf(buf, sizeof(buf), "lease_ms '%lld' is below 100", (long long)c->lease_ms);
    if (!buf[0] && c->http.max_body_budget[NVD_BUDGET_WORKER] < c->max_artifact_body + 1)
        snprintf(buf, sizeof(buf),
                 "max_body_total '%zu' leaves worker uploads %zu bytes (9/16), less than "
                 "max_artifact_body '%zu'; raise max_body_total",
                 c->http.max_body_total, c->http.max_body_budget[NVD_BUDGET_WORKER],
                 c->max_artifact_body);
    if (!buf[0] && c->http.max_body_budget[NVD_BUDGET_CLIENT] < c->max_job_body + 1)
        snprintf(buf, sizeof(buf),
                 "max_body_total '%zu' leaves client requests %zu bytes (6/16), less than "
                 "max_job_body '%zu'; raise max_body_total",
                 c->http.max_body_total, c->http.max_body_budget[NVD_BUDGET_CLIENT],
                 c->max_job_body);
    if (!buf[0])
        schedules_check(c, buf, sizeof(buf));
    if (!buf[0])
        nvd_pool_conf_check(c->pools, c->n_pools, c->devices, c->n_devices, buf, sizeof(buf));
    if (!buf[0])
        nvd_webhook_conf_check(c, buf, sizeof(buf));
    if (buf[0]) {
        *ret_err = strdup(buf);
        return -EINVAL;
    }
    return 0;
}

void nvd_config_done(nvd_config *c)
{
    free(c->listen);
    free(c->data_dir);
    free(c->web_dir);
    free(c->js_dir);
    free(c->worker);
    free(c->trusted_proxy);
    for (int i = 0; i < c->n_devices; i++) {
        free(c->devices[i].name);
        free(c->devices[i].backend);
        free(c->devices[i].worker);
        free(c->devices[i].build_backend_dir);
    }
    free(c->devices);
    schedules_free(c);
    nvd_pool_conf_free(c->pools, c->n_pools);
    nvd_webhook_conf_free(c);
    memset(c, 0, sizeof(*c));
}
