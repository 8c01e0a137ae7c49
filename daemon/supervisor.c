#include "supervisor.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "common/log.h"
#include "daemon/util/util.h"
#include "nvd_paths.h"

#define MAX_CRASHES 64

extern char **environ;

typedef struct device device;

typedef struct slot {
    device *dev;
    uv_process_t proc;
    uv_pipe_t err;
    uv_timer_t restart;
    bool running, pipe_open;
    int64_t started_ms;
    char line[512]; /* the worker's last stderr line */
    size_t line_len;
    char last[512];
    /* The child's identity (NUMVAL_WORKER_ID, sent with its claims) and the
     * lease it was last given: a live child that lost it is stuck. */
    char worker_id[33];
    int64_t job_id; /* 0: none */
    char lease[64];
    bool confirmed;  /* the lease was seen committed (not rolled back with its claim) */
    int64_t lost_at; /* when the lease was first seen lost; 0: not lost */
    char lost[160];  /* why it was killed, for the crash reason */
} slot;

struct device {
    nvd_supervisor *sup;
    const nvd_device_conf *conf;
    slot *slots;
    int64_t crashes[MAX_CRASHES];
    int n_crashes, consecutive, restarts;
    bool quarantined;
};

struct nvd_supervisor {
    nvd_app *app;
    char *token, *worker, url[128];
    device *devs;
    int n_devs, open_handles;
    bool stopping, kill_open, watch_open;
    uv_timer_t kill_timer;
    uv_timer_t watch; /* checks the leases of the live children */
    void (*done)(void *ud);
    void *done_ud;
};

static void spawn(slot *s);

static void on_handle_closed(uv_handle_t *h);

static void maybe_done(nvd_supervisor *sv)
{
    if (!sv->stopping)
        return;
    if (sv->kill_open && sv->open_handles == 1) {
        /* Every worker is gone: the SIGKILL timer is not needed any more. */
        sv->kill_open = false;
        uv_timer_stop(&sv->kill_timer);
        uv_close((uv_handle_t *)&sv->kill_timer, on_handle_closed);
        return;
    }
    if (sv->open_handles == 0 && sv->done) {
        void (*done)(void *) = sv->done;
        sv->done = NULL;
        done(sv->done_ud);
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    nvd_supervisor *sv = h->data;
    sv->open_handles--;
    maybe_done(sv);
}

static void close_handle(nvd_supervisor *sv, uv_handle_t *h)
{
    h->data = sv;
    uv_close(h, on_handle_closed);
}

static void on_pipe_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    (void)h;
    static char buf[4096];
    (void)sz;
    *b = uv_buf_init(buf, sizeof(buf));
}

static void on_pipe_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    slot *s = st->data;
    if (n < 0) {
        uv_read_stop(st);
        return;
    }
    /* The worker's log goes on to ours; its last line names a crash's cause. */
    fwrite(b->base, 1, (size_t)n, stderr);
    for (ssize_t i = 0; i < n; i++) {
        char ch = b->base[i];
        if (ch == '\n') {
            if (s->line_len) {
                s->line[s->line_len] = '\0';
                memcpy(s->last, s->line, s->line_len + 1);
            }
            s->line_len = 0;
        } else if (s->line_len + 1 < sizeof(s->line)) {
            s->line[s->line_len++] = ch;
        }
    }
}

static void on_restart(uv_timer_t *t)
{
    slot *s = t->data;
    s->dev->restarts++;
    s->dev->sup->app->metrics.worker_restarts++;
    spawn(s);
}

static void crashed(slot *s, const char *why)
{
    device *d = s->dev;
    nvd_supervisor *sv = d->sup;
    int64_t now = nvd_now_ms();
    char reason[1200];
    snprintf(reason, sizeof(reason), "%s%s%s%s", s->lost, why, s->last[0] ? "; last output: " : "",
             s->last);
    s->lost[0] = '\0';
    s->job_id = 0;
    nv_log_warn("worker for device '%s' %s", d->conf->name, reason);
    if (now - s->started_ms > 60000)
        d->consecutive = 0;
    d->consecutive++;
    memmove(d->crashes + 1, d->crashes, sizeof(d->crashes[0]) * (MAX_CRASHES - 1));
    d->crashes[0] = now;
    if (d->n_crashes < MAX_CRASHES)
        d->n_crashes++;
    int recent = 0;
    for (int i = 0; i < d->n_crashes; i++)
        recent += now - d->crashes[i] <= sv->app->cfg->crash_window_ms;
    if (recent >= sv->app->cfg->crash_limit) {
        char q[1400];
        snprintf(q, sizeof(q), "%d worker crashes within %lld s; last: %s", recent,
                 (long long)(sv->app->cfg->crash_window_ms / 1000), reason);
        d->quarantined = true;
        nv_log_err("device '%s' quarantined: %s", d->conf->name, q);
        nvd_store_device_state(sv->app->store, d->conf->name, "quarantined", q, reason, d->restarts,
                               now);
        return;
    }
    int64_t delay = 1000;
    for (int i = 1; i < d->consecutive && delay < sv->app->cfg->backoff_max_ms; i++)
        delay *= 2;
    if (delay > sv->app->cfg->backoff_max_ms)
        delay = sv->app->cfg->backoff_max_ms;
    nvd_store_device_state(sv->app->store, d->conf->name, "backoff", NULL, reason, d->restarts,
                           now);
    uv_timer_start(&s->restart, on_restart, (uint64_t)delay, 0);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    slot *s = p->data;
    nvd_supervisor *sv = s->dev->sup;
    s->running = false;
    close_handle(sv, (uv_handle_t *)&s->proc);
    if (s->pipe_open) {
        s->pipe_open = false;
        close_handle(sv, (uv_handle_t *)&s->err);
    }
    if (sv->stopping)
        return;
    char why[128];
    if (sig)
        snprintf(why, sizeof(why), "was killed by signal %d (%s)", sig, strsignal(sig));
    else
        snprintf(why, sizeof(why), "exited with status %lld", (long long)status);
    crashed(s, why);
}

/* The child's environment: ours without the supervisor's own variables, plus
 * the token (never in argv: /proc/PID/cmdline is world-readable, environ is
 * the owner's alone), our pid for the worker's parent-death signal, and its
 * identity. NULL on ENOMEM; free with free_env. */
static char **child_env(const nvd_supervisor *sv, const slot *s)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 4, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    int ok = asprintf(&env[k++], "NUMVAL_TOKEN=%s", sv->token) >= 0;
    ok = ok && asprintf(&env[k++], "NUMVAL_PARENT_PID=%ld", (long)getpid()) >= 0;
    ok = ok && asprintf(&env[k++], "NUMVAL_WORKER_ID=%s", s->worker_id) >= 0;
    if (!ok) {
        env[k - 1] = NULL;
        for (size_t i = 0; env[i]; i++)
            free(env[i]);
        free(env);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "NUMVAL_TOKEN=", 13) &&
            strncmp(environ[i], "NUMVAL_PARENT_PID=", 18) &&
            strncmp(environ[i], "NUMVAL_WORKER_ID=", 17))
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static void free_env(char **env)
{
    if (!env)
        return;
    for (int i = 0; i < 3; i++)
        free(env[i]);
    free(env);
}

static void spawn(slot *s)
{
    device *d = s->dev;
    nvd_supervisor *sv = d->sup;
    if (sv->stopping || d->quarantined)
        return;
    const char *worker = d->conf->worker ? d->conf->worker : sv->worker;
    char mdl[16];
    snprintf(mdl, sizeof mdl, "%d", d->conf->minimize_deadline_s);
    char *args[] = {(char *)worker, "--server",       sv->url, "--device", d->conf->name,
                    "--backend",    d->conf->backend, NULL,    NULL,       NULL,
                    NULL,           NULL};
    int na = 7;
    if (d->conf->minimize_deadline_s >= 0)
        args[na++] = "--minimize-deadline", args[na++] = mdl;
    if (d->conf->build_backend_dir)
        args[na++] = "--build-backend-dir", args[na++] = d->conf->build_backend_dir;
    s->job_id = 0;
    s->lost_at = 0;
    s->lost[0] = '\0';
    char **env = NULL;
    if (nvd_random_hex(16, s->worker_id) < 0 || !(env = child_env(sv, s))) {
        crashed(s, "could not be started (out of memory)");
        return;
    }
    uv_pipe_init(sv->app->loop, &s->err, 0);
    s->err.data = s;
    sv->open_handles++;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&s->err}};
    uv_process_options_t o = {.file = worker,
                              .args = args,
                              .env = env,
                              .exit_cb = on_exit_cb,
                              .stdio = stdio,
                              .stdio_count = 3};
    s->proc.data = s;
    s->last[0] = '\0';
    s->line_len = 0;
    s->started_ms = nvd_now_ms();
    int r = uv_spawn(sv->app->loop, &s->proc, &o);
    free_env(env); /* the child has exec'd (or failed to) when uv_spawn returns */
    if (r < 0) {
        /* uv_spawn initialised the handle even on failure: close it. */
        sv->open_handles++;
        close_handle(sv, (uv_handle_t *)&s->proc);
        close_handle(sv, (uv_handle_t *)&s->err);
        char why[PATH_MAX + 64];
        snprintf(why, sizeof(why), "could not be started ('%s': %s)", worker, uv_strerror(r));
        crashed(s, why);
        return;
    }
    sv->open_handles++;
    s->running = true;
    s->pipe_open = true;
    uv_read_start((uv_stream_t *)&s->err, on_pipe_alloc, on_pipe_read);
    nvd_store_device_state(sv->app->store, d->conf->name, "online", NULL, NULL, d->restarts,
                           nvd_now_ms());
    nv_log_info("started worker pid %d for device '%s' (%s)", s->proc.pid, d->conf->name,
                d->conf->backend);
}

char *nvd_supervisor_default_worker(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *sl = strrchr(exe, '/');
        if (sl) {
            *sl = '\0';
            /* The build tree's, a worker beside numvald, the installed one
             * (numvald is in sbin/, the worker in bin/). */
            const char *rel[] = {"/../worker/numval-worker", "/numval-worker", NULL};
            for (int i = 0; i < 3; i++) {
                char cand[PATH_MAX + 32];
                if (rel[i])
                    snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
                else
                    snprintf(cand, sizeof(cand), "%s/numval-worker", NVD_BINDIR);
                if (access(cand, X_OK) == 0)
                    return realpath(cand, NULL);
            }
        }
    }
    return strdup("numval-worker");
}

void nvd_supervisor_leased(nvd_supervisor *sv, const char *worker_id, int64_t job_id,
                           const char *lease_token)
{
    if (!sv || !worker_id || !lease_token || strlen(lease_token) >= sizeof(((slot *)0)->lease))
        return;
    for (int i = 0; i < sv->n_devs; i++)
        for (int k = 0; k < sv->devs[i].conf->slots; k++) {
            slot *s = &sv->devs[i].slots[k];
            if (s->running && !strcmp(s->worker_id, worker_id)) {
                s->job_id = job_id;
                s->confirmed = false;
                s->lost_at = 0;
                snprintf(s->lease, sizeof(s->lease), "%s", lease_token);
                return;
            }
        }
}

/* A child that lost its lease while alive is stopped (SIGSTOP), hung, or cut
 * off: nothing else would ever free its slot, so kill it; on_exit_cb restarts
 * it like a crash. */
static void on_watch(uv_timer_t *t)
{
    nvd_supervisor *sv = t->data;
    /* Judge committed state only: an open group would show our own writes. */
    if (nvd_store_pending(sv->app->store))
        return;
    for (int i = 0; i < sv->n_devs; i++)
        for (int k = 0; k < sv->devs[i].conf->slots; k++) {
            slot *s = &sv->devs[i].slots[k];
            if (!s->running || !s->job_id || s->lost[0])
                continue;
            int held = nvd_store_lease_held(sv->app->store, s->job_id, s->lease);
            if (held < 0 && held != -ENOENT)
                continue; /* the store is failing: decide nothing now */
            if (held > 0) {
                s->confirmed = true;
                continue;
            }
            /* Not held at the first look: the claim's commit failed and the
             * worker got a 503, not the job (the check runs every lease_ms/4,
             * so a committed lease is seen before it can expire). */
            if (held < 0 || !s->confirmed) {
                s->job_id = 0;
                continue;
            }
            /* A live worker learns of the loss at its next heartbeat (3 per
             * lease), drops the job and claims again, which replaces this
             * record; one that has not done so within a lease is stuck. */
            int64_t now = nvd_now_ms();
            if (!s->lost_at)
                s->lost_at = now;
            if (now - s->lost_at < sv->app->cfg->lease_ms)
                continue;
            snprintf(s->lost, sizeof(s->lost),
                     "lost the lease of job %lld while alive (stopped or hung), was killed: ",
                     (long long)s->job_id);
            nv_log_warn("worker pid %d for device '%s' lost the lease of job %lld while alive "
                        "(stopped or hung): killing it so the slot restarts",
                        s->proc.pid, sv->devs[i].conf->name, (long long)s->job_id);
            s->job_id = 0;
            uv_process_kill(&s->proc, SIGKILL);
        }
}

static int mint_token(nvd_supervisor *sv)
{
    nvd_store_token_revoke(sv->app->store, "numvald-supervisor", nvd_now_ms());
    return nvd_auth_create(sv->app->store, "numvald-supervisor", NVD_SCOPE_WORKER, &sv->token);
}

int nvd_supervisor_new(nvd_app *app, nvd_supervisor **ret)
{
    nvd_supervisor *sv = calloc(1, sizeof(*sv));
    if (!sv)
        return -ENOMEM;
    sv->app = app;
    *ret = sv;
    const nvd_config *cfg = app->cfg;
    if (cfg->n_devices == 0)
        return 0;
    int r = mint_token(sv);
    if (r < 0)
        return r;
    sv->worker = cfg->worker ? strdup(cfg->worker) : nvd_supervisor_default_worker();
    if (!sv->worker)
        return -ENOMEM;
    /* Local workers reach numvald where it listens; a wildcard address means loopback. */
    char host[64];
    const char *colon = strrchr(cfg->listen, ':');
    size_t hl = colon ? (size_t)(colon - cfg->listen) : 0;
    snprintf(host, sizeof(host), "%.*s", (int)(hl < sizeof(host) ? hl : 0), cfg->listen);
    if (!host[0] || !strcmp(host, "0.0.0.0"))
        strcpy(host, "127.0.0.1");
    else if (!strcmp(host, "[::]"))
        strcpy(host, "[::1]");
    snprintf(sv->url, sizeof(sv->url), "http://%s:%d", host, app->port);
    sv->devs = calloc((size_t)cfg->n_devices, sizeof(device));
    if (!sv->devs)
        return -ENOMEM;
    sv->n_devs = cfg->n_devices;
    for (int i = 0; i < cfg->n_devices; i++) {
        device *d = &sv->devs[i];
        d->sup = sv;
        d->conf = &cfg->devices[i];
        nvd_store_device_declare(app->store, d->conf->name, d->conf->backend, d->conf->slots,
                                 nvd_now_ms());
        d->slots = calloc((size_t)(d->conf->slots ? d->conf->slots : 1), sizeof(slot));
        if (!d->slots)
            return -ENOMEM;
        for (int k = 0; k < d->conf->slots; k++) {
            slot *s = &d->slots[k];
            s->dev = d;
            uv_timer_init(app->loop, &s->restart);
            s->restart.data = s;
            sv->open_handles++;
            spawn(s);
        }
    }
    int64_t every = cfg->lease_ms / 4;
    every = every < 100 ? 100 : every > 2000 ? 2000 : every;
    uv_timer_init(app->loop, &sv->watch);
    sv->watch.data = sv;
    sv->watch_open = true;
    sv->open_handles++;
    uv_timer_start(&sv->watch, on_watch, (uint64_t)every, (uint64_t)every);
    return 0;
}

static void on_kill_timer(uv_timer_t *t)
{
    nvd_supervisor *sv = t->data;
    for (int i = 0; i < sv->n_devs; i++)
        for (int k = 0; k < sv->devs[i].conf->slots; k++)
            if (sv->devs[i].slots[k].running)
                uv_process_kill(&sv->devs[i].slots[k].proc, SIGKILL);
}

void nvd_supervisor_stop(nvd_supervisor *sv, void (*done)(void *ud), void *ud)
{
    if (!sv) {
        done(ud);
        return;
    }
    sv->stopping = true;
    sv->done = done;
    sv->done_ud = ud;
    if (sv->watch_open) {
        sv->watch_open = false;
        uv_timer_stop(&sv->watch);
        close_handle(sv, (uv_handle_t *)&sv->watch);
    }
    for (int i = 0; i < sv->n_devs; i++) {
        device *d = &sv->devs[i];
        for (int k = 0; k < d->conf->slots; k++) {
            slot *s = &d->slots[k];
            uv_timer_stop(&s->restart);
            close_handle(sv, (uv_handle_t *)&s->restart);
            if (s->running)
                uv_process_kill(&s->proc, SIGTERM);
        }
    }
    uv_timer_init(sv->app->loop, &sv->kill_timer);
    sv->kill_timer.data = sv;
    sv->kill_open = true;
    sv->open_handles++;
    uv_timer_start(&sv->kill_timer, on_kill_timer, 5000, 0);
    maybe_done(sv);
}

void nvd_supervisor_free(nvd_supervisor *sv)
{
    if (!sv)
        return;
    for (int i = 0; i < sv->n_devs; i++)
        free(sv->devs[i].slots);
    free(sv->devs);
    free(sv->token);
    free(sv->worker);
    free(sv);
}
