#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "common/log.h"
#include "daemon/util/util.h"
#include "pool_run.h"
#include "supervisor.h" /* nvd_supervisor_default_worker */

#define CALL_TIMEOUT_MS 60000      /* an sbatch or squeue that hangs on a dead controller */
#define SQUEUE_MAX_OUT (256 << 10) /* max_workers (<= 1000) lines of "ID STATE" fit */
#define BACKOFF_MAX_MS 300000

extern char **environ;

typedef struct pool {
    nvd_pools *ps;
    const nvd_pool_conf *conf;
    const char *device;
    uv_timer_t tick;
    nvd_run *run; /* the squeue or sbatch in flight; NULL: none */
    char *token;
    char job_name[80];
    char url[256];
    char *worker;
    int64_t not_before; /* after a failure: no call before this (ms) */
    int64_t backoff_ms;
    int submitting;               /* workers asked of the sbatch in flight */
    int live, pending;            /* the pool's Slurm jobs at the last squeue */
    uint64_t submitted, failures; /* workers submitted, failed calls (since start) */
    char state[16];               /* what the devices table says: online | backoff */
} pool;

struct nvd_pools {
    nvd_app *app;
    pool *pools;
    int n;
    char script[PATH_MAX];
    int open; /* tick timers not yet closed, calls in flight */
    bool stopping;
    void (*done)(void *ud);
    void *done_ud;
};

static void maybe_done(nvd_pools *ps)
{
    if (ps->stopping && ps->open == 0 && ps->done) {
        void (*done)(void *) = ps->done;
        ps->done = NULL;
        done(ps->done_ud);
    }
}

/* The devices table shows the pool's state (GET /api/v1/devices); written on
 * a change only, not every tick. */
static void set_state(pool *p, const char *state, const char *why)
{
    if (!strcmp(p->state, state) && !why)
        return;
    snprintf(p->state, sizeof(p->state), "%s", state);
    nvd_store_device_state(p->ps->app->store, p->device, state, NULL, why, 0, nvd_now_ms());
}

static void failed(pool *p, const char *what, int status, const char *err)
{
    char why[1200];
    size_t n = strcspn(err, "\n");
    if (status < 0)
        snprintf(why, sizeof(why), "%s %s: %s%s%.*s", what,
                 status == -ETIMEDOUT ? "timed out" : "failed", strerror(-status), n ? "; " : "",
                 (int)n, err);
    else
        snprintf(why, sizeof(why), "%s exited with status %d: %.*s", what, status, (int)n,
                 n ? err : "(no message)");
    p->failures++;
    int64_t every = p->conf->interval_ms;
    p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : every * 2;
    if (p->backoff_ms > BACKOFF_MAX_MS)
        p->backoff_ms = BACKOFF_MAX_MS > every ? BACKOFF_MAX_MS : every;
    p->not_before = nvd_now_ms() + p->backoff_ms;
    nv_log_warn("pool '%s': %s; next try in %lld s", p->conf->name, why,
                (long long)(p->backoff_ms / 1000));
    set_state(p, "backoff", why);
}

/* Our environment without any NUMVAL_TOKEN, plus token when given (sbatch
 * exports it to the job: --export names it, its value comes from here).
 * NULL on ENOMEM; free with free_env. */
static char **child_env(const char *token)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 2, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    if (token && asprintf(&env[k++], "NUMVAL_TOKEN=%s", token) < 0) {
        free(env);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "NUMVAL_TOKEN=", 13))
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static void free_env(char **env, bool token)
{
    if (env && token)
        free(env[0]);
    free(env);
}

static void on_sbatch_done(void *ud, int status, const char *out, size_t len, const char *err)
{
    pool *p = ud;
    nvd_pools *ps = p->ps;
    p->run = NULL;
    ps->open--;
    (void)len;
    if (status != 0) {
        if (!ps->stopping)
            failed(p, "sbatch", status, err);
    } else {
        /* --parsable: "JOBID" or "JOBID;CLUSTER". */
        nv_log_info("pool '%s': submitted Slurm job array %.*s (%d worker%s for device '%s')",
                    p->conf->name, (int)strcspn(out, ";\n"), out, p->submitting,
                    p->submitting == 1 ? "" : "s", p->device);
        p->submitted += (uint64_t)p->submitting;
        p->backoff_ms = 0;
        set_state(p, "online", NULL);
    }
    maybe_done(ps);
}

static void submit(pool *p, int n)
{
    const nvd_pool_conf *c = p->conf;
    char opt[16][1100];
    char *argv[40];
    int a = 0, k = 0;
#define OPT(...) (snprintf(opt[k], sizeof(opt[k]), __VA_ARGS__), argv[a++] = opt[k++])
    argv[a++] = c->sbatch ? c->sbatch : "sbatch";
    argv[a++] = "--parsable";
    OPT("--job-name=%s", p->job_name);
    OPT("--array=0-%d", n - 1);
    if (c->partition)
        OPT("--partition=%s", c->partition);
    if (c->gres)
        OPT("--gres=%s", c->gres);
    if (c->time_limit)
        OPT("--time=%s", c->time_limit);
    if (c->account)
        OPT("--account=%s", c->account);
    if (c->qos)
        OPT("--qos=%s", c->qos);
    if (c->constraint)
        OPT("--constraint=%s", c->constraint);
    OPT("--output=%s", c->output ? c->output : "/dev/null");
    OPT("--chdir=%s", c->chdir ? c->chdir : "/tmp");
    OPT("--export=NUMVAL_TOKEN,%s", c->export_env ? c->export_env : "PATH");
    /* B: to the batch step, which is the worker (the script execs it): it
     * finishes its job and claims no more before the time limit. */
    if (c->drain_before_s)
        OPT("--signal=B:USR1@%d", c->drain_before_s);
#undef OPT
    /* The job script runs its arguments (write_script): the worker's command
     * line, each value one argv element, no shell quoting anywhere. */
    argv[a++] = p->ps->script;
    argv[a++] = p->worker;
    argv[a++] = "--server";
    argv[a++] = p->url;
    argv[a++] = "--device";
    argv[a++] = (char *)p->device;
    argv[a++] = "--backend";
    argv[a++] = c->backend;
    char idle[16], threads[16];
    snprintf(idle, sizeof(idle), "%d", c->idle_exit_s);
    argv[a++] = "--idle-exit";
    argv[a++] = idle;
    if (c->threads) {
        snprintf(threads, sizeof(threads), "%d", c->threads);
        argv[a++] = "--threads";
        argv[a++] = threads;
    }
    argv[a] = NULL;
    char **env = child_env(p->token);
    int r = env ? nvd_run_start(p->ps->app->loop, argv, env, CALL_TIMEOUT_MS, 4096, on_sbatch_done,
                                p, &p->run)
                : -ENOMEM;
    free_env(env, true);
    if (r < 0) {
        failed(p, "sbatch", r, "");
        return;
    }
    p->submitting = n;
    p->ps->open++;
}

/* squeue's lines, "JOBID STATE" (one per array task with --array). */
static int count_live(const char *out, int *ret_pending)
{
    int live = 0, pending = 0;
    for (const char *l = out; *l;) {
        size_t n = strcspn(l, "\n");
        if (n && strspn(l, " \t") < n) {
            live++;
            const char *sp = memchr(l, ' ', n);
            pending += sp && sp[1] == 'P' && sp[2] == 'D';
        }
        l += n + (l[n] == '\n');
    }
    *ret_pending = pending;
    return live;
}

static void on_squeue_done(void *ud, int status, const char *out, size_t len, const char *err)
{
    pool *p = ud;
    nvd_pools *ps = p->ps;
    p->run = NULL;
    ps->open--;
    (void)len;
    if (ps->stopping) {
        maybe_done(ps);
        return;
    }
    if (status != 0) {
        failed(p, "squeue", status, err);
        return;
    }
    int pending = 0, live = count_live(out, &pending);
    p->live = live;
    p->pending = pending;
    int64_t queued = 0, active = 0;
    int max = p->conf->max_workers;
    int r = nvd_store_jobs_demand(ps->app->store, p->device, max, &queued, &active);
    if (r < 0) {
        nv_log_warn("pool '%s': cannot count the jobs of device '%s': %s", p->conf->name, p->device,
                    strerror(-r));
        return;
    }
    int64_t want = queued + active < max ? queued + active : max;
    if (want <= live) {
        if (!strcmp(p->state, "backoff") || !p->state[0])
            set_state(p, "online", NULL);
        p->backoff_ms = 0;
        return;
    }
    nv_log_info("pool '%s': %lld job(s) queued and %lld running for device '%s', %d worker(s) "
                "in Slurm (%d pending): submitting %lld",
                p->conf->name, (long long)queued, (long long)active, p->device, live, pending,
                (long long)(want - live));
    submit(p, (int)(want - live));
}

static void on_tick(uv_timer_t *t)
{
    pool *p = t->data;
    if (p->run || p->ps->stopping || nvd_now_ms() < p->not_before)
        return;
    const nvd_pool_conf *c = p->conf;
    char name[128];
    snprintf(name, sizeof(name), "--name=%s", p->job_name);
    /* --me: our own jobs only, so another user's jobs of the same name (or
     * another numvald's, under its own user) do not count as ours. A
     * completing job still holds its allocation (its worker may be shutting
     * down): it counts until Slurm has freed it, so max_workers bounds the
     * allocations, not only the live workers. */
    char *argv[] = {c->squeue ? c->squeue : "squeue",
                    "--noheader",
                    "--array",
                    "--me",
                    name,
                    "--states=PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED,REQUEUED",
                    "--format=%i %t",
                    NULL};
    char **env = child_env(NULL);
    int r = env ? nvd_run_start(p->ps->app->loop, argv, env, CALL_TIMEOUT_MS, SQUEUE_MAX_OUT,
                                on_squeue_done, p, &p->run)
                : -ENOMEM;
    free_env(env, false);
    if (r < 0) {
        failed(p, "squeue", r, "");
        return;
    }
    p->ps->open++;
}

/* The pool's worker token: the one kept in DATA_DIR/pool-NAME.token while the
 * store still holds it, else a new one written there (mode 600). */
static int pool_token(pool *p)
{
    nvd_app *app = p->ps->app;
    char name[128], path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(name, sizeof(name), "numvald-pool-%s", p->conf->name);
    snprintf(path, sizeof(path), "%s/pool-%s.token", app->cfg->data_dir, p->conf->name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        char buf[300] = "Bearer ";
        ssize_t n = read(fd, buf + 7, sizeof(buf) - 8);
        close(fd);
        buf[n > 0 ? 7 + n : 7] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
        char *owner = NULL;
        unsigned scopes = 0;
        if (n > 0 && nvd_auth_check(app->store, buf, &owner, &scopes, NULL) == 0 && owner &&
            !strcmp(owner, name) && (scopes & NVD_SCOPE_WORKER)) {
            free(owner);
            p->token = strdup(buf + 7);
            return p->token ? 0 : -ENOMEM;
        }
        free(owner);
    }
    nvd_store_token_revoke(app->store, name, nvd_now_ms());
    int r = nvd_auth_create(app->store, name, NVD_SCOPE_WORKER, &p->token);
    if (r < 0)
        return r;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    size_t len = strlen(p->token);
    bool ok = fd >= 0 && write(fd, p->token, len) == (ssize_t)len && write(fd, "\n", 1) == 1 &&
              fsync(fd) == 0;
    if (fd >= 0 && close(fd) < 0)
        ok = false;
    if (!ok || rename(tmp, path) < 0) {
        nv_log_err("pool '%s': cannot write its token file '%s': %s", p->conf->name, path,
                   strerror(errno));
        unlink(tmp);
        return -EIO;
    }
    return 0;
}

/* The batch script every pool submits: it runs its arguments, so the worker's
 * command line reaches the job as sbatch's arguments, never shell text. */
static int write_script(nvd_pools *ps)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/slurm-worker.sh", ps->app->cfg->data_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    static const char text[] = "#!/bin/sh\n"
                               "# numvald's Slurm pools ([pool] in numvald.ini) submit this\n"
                               "# script; its arguments are the numval-worker command.\n"
                               "exec \"$@\"\n";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
    bool ok = fd >= 0 && write(fd, text, sizeof(text) - 1) == (ssize_t)(sizeof(text) - 1);
    if (fd >= 0 && close(fd) < 0)
        ok = false;
    if (!ok || rename(tmp, path) < 0 || !realpath(path, ps->script)) {
        nv_log_err("cannot write the Slurm job script '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -EIO;
    }
    return 0;
}

/* Where workers reach numvald: the pool's server, else where numvald listens
 * (a wildcard address meaning this host's loopback, as for local workers). */
static void server_url(pool *p)
{
    const nvd_config *cfg = p->ps->app->cfg;
    if (p->conf->server) {
        snprintf(p->url, sizeof(p->url), "%s", p->conf->server);
        return;
    }
    char host[64];
    const char *colon = strrchr(cfg->listen, ':');
    size_t hl = colon ? (size_t)(colon - cfg->listen) : 0;
    snprintf(host, sizeof(host), "%.*s", (int)(hl < sizeof(host) ? hl : 0), cfg->listen);
    if (!host[0] || !strcmp(host, "0.0.0.0"))
        strcpy(host, "127.0.0.1");
    else if (!strcmp(host, "[::]"))
        strcpy(host, "[::1]");
    snprintf(p->url, sizeof(p->url), "http://%s:%d", host, p->ps->app->port);
    if (nvd_http_listen_is_loopback(cfg->listen))
        nv_log_warn("pool '%s' has no 'server': its workers reach numvald at %s, which only "
                    "works on this host",
                    p->conf->name, p->url);
}

static int pool_start(nvd_pools *ps, pool *p, const nvd_pool_conf *c)
{
    nvd_app *app = ps->app;
    p->ps = ps;
    p->conf = c;
    p->device = nvd_pool_device(c);
    snprintf(p->job_name, sizeof(p->job_name), "%s", c->job_name ? c->job_name : "");
    if (!c->job_name)
        snprintf(p->job_name, sizeof(p->job_name), "numval-%s", c->name);
    p->worker = c->worker          ? strdup(c->worker)
                : app->cfg->worker ? strdup(app->cfg->worker)
                                   : nvd_supervisor_default_worker();
    if (!p->worker)
        return -ENOMEM;
    int r = pool_token(p);
    if (r < 0)
        return r;
    server_url(p);
    nvd_store_device_declare(app->store, p->device, c->backend, c->max_workers, nvd_now_ms());
    uv_timer_init(app->loop, &p->tick);
    p->tick.data = p;
    ps->open++;
    /* The first look soon after start: a restarted numvald finds the workers
     * Slurm still runs for it before it submits more. */
    uv_timer_start(&p->tick, on_tick, 200, (uint64_t)c->interval_ms);
    nv_log_info("pool '%s': up to %d Slurm worker(s) for device '%s' (job name '%s', every %lld "
                "ms)",
                c->name, c->max_workers, p->device, p->job_name, (long long)c->interval_ms);
    return 0;
}

int nvd_pools_new(nvd_app *app, nvd_pools **ret)
{
    nvd_pools *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return -ENOMEM;
    ps->app = app;
    *ret = ps;
    const nvd_config *cfg = app->cfg;
    if (cfg->n_pools == 0)
        return 0;
    int r = write_script(ps);
    if (r < 0)
        return r;
    ps->pools = calloc((size_t)cfg->n_pools, sizeof(pool));
    if (!ps->pools)
        return -ENOMEM;
    for (int i = 0; i < cfg->n_pools; i++) {
        ps->n = i + 1;
        r = pool_start(ps, &ps->pools[i], &cfg->pools[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

static void on_tick_closed(uv_handle_t *h)
{
    pool *p = h->data;
    p->ps->open--;
    maybe_done(p->ps);
}

void nvd_pools_stop(nvd_pools *ps, void (*done)(void *ud), void *ud)
{
    if (!ps) {
        done(ud);
        return;
    }
    ps->stopping = true;
    ps->done = done;
    ps->done_ud = ud;
    for (int i = 0; i < ps->n; i++) {
        pool *p = &ps->pools[i];
        /* A pool whose start failed before its timer existed has none. */
        if (p->tick.data == p) {
            uv_timer_stop(&p->tick);
            uv_close((uv_handle_t *)&p->tick, on_tick_closed);
        }
        nvd_run_kill(p->run);
    }
    maybe_done(ps);
}

void nvd_pools_free(nvd_pools *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++) {
        free(ps->pools[i].token);
        free(ps->pools[i].worker);
    }
    free(ps->pools);
    free(ps);
}

char *nvd_pools_metrics(const nvd_pools *ps)
{
    if (!ps || ps->n == 0)
        return NULL;
    /* Pool names are [A-Za-z0-9._-] (pool_conf.c): label values need no escaping. */
    size_t cap = 1024 + (size_t)ps->n * 800, len = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
#define ADD(...)                                                                                   \
    (len += (size_t)snprintf(len < cap ? t + len : NULL, len < cap ? cap - len : 0, __VA_ARGS__))
    ADD("# HELP numvald_pool_workers Slurm jobs of a pool at its last squeue, by state.\n"
        "# TYPE numvald_pool_workers gauge\n");
    for (int i = 0; i < ps->n; i++) {
        const pool *p = &ps->pools[i];
        ADD("numvald_pool_workers{pool=\"%s\",state=\"pending\"} %d\n", p->conf->name, p->pending);
        ADD("numvald_pool_workers{pool=\"%s\",state=\"started\"} %d\n", p->conf->name,
            p->live - p->pending);
    }
    ADD("# HELP numvald_pool_submitted_total Workers a pool submitted through sbatch.\n"
        "# TYPE numvald_pool_submitted_total counter\n");
    for (int i = 0; i < ps->n; i++)
        ADD("numvald_pool_submitted_total{pool=\"%s\"} %llu\n", ps->pools[i].conf->name,
            (unsigned long long)ps->pools[i].submitted);
    ADD("# HELP numvald_pool_call_failures_total Failed sbatch and squeue calls of a pool.\n"
        "# TYPE numvald_pool_call_failures_total counter\n");
    for (int i = 0; i < ps->n; i++)
        ADD("numvald_pool_call_failures_total{pool=\"%s\"} %llu\n", ps->pools[i].conf->name,
            (unsigned long long)ps->pools[i].failures);
#undef ADD
    if (len >= cap) {
        free(t);
        return NULL;
    }
    return t;
}
