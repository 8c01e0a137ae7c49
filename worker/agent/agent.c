/* numval-worker agent mode: claim jobs for one device from numvald, run them
 * with the runner in a thread while the main thread heartbeats, upload the
 * result. Survives daemon restarts (everything is retried with backoff; the
 * server's result route is idempotent per job and lease token). */
#include "agent.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_internal.h"
#include "common/log.h"
#include "minimize.h"
#include "worker/backends/loader.h"
#include "worker/kinds/kinds.h"

/* SIGTERM / SIGINT; read by the runner thread too. A lock-free atomic is what a
 * signal handler may store to (C11 7.14.1.1). */
static atomic_int g_stop;

/* SIGUSR1: finish the job in hand, claim no more, exit 0 (a batch system's
 * warning before the time limit: sbatch --signal=B:USR1@S). */
static atomic_int g_drain;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        atomic_store(&g_drain, 1);
    else
        atomic_store(&g_stop, 1);
}

typedef struct agent_opts {
    const char *server, *device, *backend, *cacert;
    char *token;     /* malloc'd: --token, --token-file or NUMVAL_TOKEN */
    char *worker_id; /* NUMVAL_WORKER_ID from a supervisor, sent with claims */
    int threads, max_artifacts;
    long claim_wait_ms, minimize_deadline_s;
    long idle_exit_s; /* exit 0 after this long without a job; 0: never */
    int once;
    char *build_dirs[8]; /* --build-backend-dir, resolved (malloc'd) */
    int n_build_dirs;
} agent_opts;

void nvw_agent_sleep(long ms, atomic_int *stop)
{
    while (ms > 0 && !atomic_load(&g_stop) && !(stop && atomic_load(stop))) {
        long step = ms < 100 ? ms : 100;
        struct timespec ts = {0, step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

static const char USAGE[] =
    "usage: numval-worker --server URL [--token T | --token-file PATH] --device NAME\n"
    "                     --backend SPEC [--threads N] [--once] [--claim-wait-ms MS] "
    "[--max-artifacts N]\n"
    "                     [--minimize-deadline S] [--cacert FILE] [--idle-exit S]\n"
    "                     [--build-backend-dir DIR]...\n"
    "       numval-worker run JOB.json --backend SPEC\n"
    "Server and token also from NUMVAL_SERVER and NUMVAL_TOKEN; --token shows the token\n"
    "to every local user (ps), --token-file (mode 600) and NUMVAL_TOKEN do not.\n"
    "An https server's certificate is always verified, against the system's CAs or\n"
    "--cacert FILE (or NUMVAL_CACERT).\n";

static int parse_int(const char *s, const char *opt, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        nv_log_err("invalid %s '%s': expected an integer in %ld..%ld", opt, s, lo, hi);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_opts(int argc, char **argv, agent_opts *o)
{
    o->server = getenv("NUMVAL_SERVER");
    o->cacert = getenv("NUMVAL_CACERT");
    o->token = nvw_agent_take_env("NUMVAL_TOKEN");
    o->worker_id = nvw_agent_take_env("NUMVAL_WORKER_ID");
    o->claim_wait_ms = 20000;
    o->max_artifacts = 256;
    o->minimize_deadline_s = (long)NVW_AGENT_MIN_DEADLINE_S;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--once")) {
            o->once = 1;
            continue;
        }
        if (!strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (!v) {
            nv_log_err("option '%s' %s\n%s", a,
                       strncmp(a, "--", 2) ? "is unknown" : "needs a value", USAGE);
            return -EINVAL;
        }
        i++;
        if (!strcmp(a, "--server"))
            o->server = v;
        else if (!strcmp(a, "--cacert"))
            o->cacert = v;
        else if (!strcmp(a, "--token") || !strcmp(a, "--token-file")) {
            char *t = NULL;
            if (!strcmp(a, "--token"))
                t = strdup(v);
            else if (nvw_agent_token_file(v, &t) < 0)
                return -EINVAL;
            if (!t)
                return -ENOMEM;
            free(o->token);
            o->token = t;
        } else if (!strcmp(a, "--device"))
            o->device = v;
        else if (!strcmp(a, "--backend"))
            o->backend = v;
        else if (!strcmp(a, "--build-backend-dir")) {
            /* Resolved once, so a link swapped later cannot widen the list. */
            char *real = realpath(v, NULL);
            if (!real || o->n_build_dirs >= 8) {
                nv_log_err("--build-backend-dir '%s': %s", v,
                           real ? "at most 8 directories" : strerror(errno));
                free(real);
                return -EINVAL;
            }
            o->build_dirs[o->n_build_dirs++] = real;
        }
        else if (!strcmp(a, "--threads") && parse_int(v, a, 0, 4096, &n) == 0)
            o->threads = (int)n;
        else if (!strcmp(a, "--claim-wait-ms") && parse_int(v, a, 0, 600000, &n) == 0)
            o->claim_wait_ms = n;
        else if (!strcmp(a, "--max-artifacts") && parse_int(v, a, 0, 100000, &n) == 0)
            o->max_artifacts = (int)n;
        else if (!strcmp(a, "--minimize-deadline") && parse_int(v, a, 0, 86400, &n) == 0)
            o->minimize_deadline_s = n;
        else if (!strcmp(a, "--idle-exit") && parse_int(v, a, 1, 86400 * 30, &n) == 0)
            o->idle_exit_s = n;
        else {
            if (strcmp(a, "--threads") && strcmp(a, "--claim-wait-ms") &&
                strcmp(a, "--max-artifacts") && strcmp(a, "--minimize-deadline") &&
                strcmp(a, "--idle-exit"))
                nv_log_err("unknown option '%s'\n%s", a, USAGE);
            return -EINVAL;
        }
    }
    if (!o->server || !*o->server || !o->device || !o->backend) {
        nv_log_err("--server (or NUMVAL_SERVER), --device and --backend are required\n%s", USAGE);
        return -EINVAL;
    }
    /* An idle worker (one a batch system started) should notice its idleness
     * within the idle time, not a long poll later. */
    if (o->idle_exit_s && o->claim_wait_ms > o->idle_exit_s * 1000)
        o->claim_wait_ms = o->idle_exit_s * 1000;
    return 0;
}

static long mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec;
}

/* describe() of the backend as JSON, sent with every claim. */
static json_t *describe_backend(const char *spec)
{
    char err[512] = "";
    nvw_backend *b = NULL;
    int r = nvw_backend_load(spec, &b, err, sizeof(err));
    if (r < 0) {
        nv_log_err("cannot load backend '%s': %s", spec, err);
        return NULL;
    }
    const nv_backend *t = nvw_backend_table(b);
    void *ctx = NULL;
    json_t *d = NULL;
    if (t->open(nvw_backend_options(b), &ctx, err, sizeof(err)) != NV_OK) {
        nv_log_err("cannot open backend '%s': %s", spec, err);
    } else {
        const char *text = t->describe(ctx);
        json_error_t jerr;
        d = text ? json_loads(text, 0, &jerr) : NULL;
        if (!json_is_object(d)) {
            nv_log_err("backend '%s' describe() is not a JSON object", spec);
            json_decref(d);
            d = NULL;
        }
        t->close(ctx);
    }
    nvw_backend_free(b);
    return d;
}

/* The server's error message of a non-2xx response, for logs. */
static const char *resp_text(const nvw_http_resp *r)
{
    return r->body && *r->body ? r->body : "(empty body)";
}

typedef struct runner_thread {
    nvw_agent_job *job;
    int threads;
    int rc;
    json_t *result;
    char *err;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int finished;
} runner_thread;

static void on_progress(void *ud, int64_t done, int64_t total)
{
    nvw_agent_job *j = ud;
    atomic_store(&j->done, done);
    atomic_store(&j->total, total);
}

static void *run_thread(void *arg)
{
    runner_thread *t = arg;
    nvw_run_opts ro = {.threads = t->threads,
                       .progress = on_progress,
                       .on_failure = nvw_agent_on_failure_min, /* minimize.c */
                       .fetch_artifact = nvw_agent_fetch,      /* suite jobs: fetch.c */
                       .ud = t->job,
                       .cancel = &t->job->cancel};
    t->rc = nvw_run_job(t->job->spec, t->job->backend_spec, &ro, &t->result, &t->err);
    /* The gate and the minimizer on the failures kept while it ran. */
    nvw_agent_minimize_failures(t->job, t->rc == 0 ? t->result : NULL);
    pthread_mutex_lock(&t->lock);
    t->finished = 1;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* Heartbeat once. Returns 1 to go on, 0 when the server asked to cancel, -1
 * when the lease is lost (409). Transport errors go on: the daemon may be
 * restarting and the lease outlives a short outage. */
static int heartbeat(nvw_agent_job *j, long timeout_ms)
{
    json_t *body = json_pack("{s:O,s:s,s:I,s:I}", "job_id", j->job_id_json, "lease_token",
                             j->lease_token, "cases_done", (json_int_t)atomic_load(&j->done),
                             "cases_total", (json_int_t)atomic_load(&j->total));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return 1;
    nvw_http_resp resp = {0};
    char *err = NULL;
    int r = nvw_http_request(j->http, "POST", "/api/v1/worker/heartbeat", NULL, text, strlen(text),
                             timeout_ms, &resp, &err);
    free(text);
    int out = 1;
    if (r < 0) {
        nv_log_debug("heartbeat for job %s failed: %s", j->job_id, err ? err : strerror(-r));
    } else if (resp.status == 409) {
        out = -1;
    } else if (resp.status == 200) {
        json_t *rj = json_loadb(resp.body, resp.len, 0, NULL);
        if (json_is_true(json_object_get(rj, "cancel")))
            out = 0;
        json_decref(rj);
    } else {
        nv_log_warn("heartbeat for job %s: HTTP %ld %.300s", j->job_id, resp.status,
                    resp_text(&resp));
    }
    free(err);
    nvw_http_resp_done(&resp);
    return out;
}

/* Wait for the runner thread, heartbeating. Returns 0; 1 when the server
 * cancelled the job; -1 when the lease was lost or the worker is stopping. In
 * the last two cases the result is not uploaded. */
static int supervise(runner_thread *t, long lease_ms)
{
    nvw_agent_job *j = t->job;
    /* Three heartbeats per lease keep it alive through one lost request. */
    long interval = lease_ms / 3;
    interval = interval < 200 ? 200 : interval > 5000 ? 5000 : interval;
    int abandoned = 0, server_cancel = 0;
    pthread_mutex_lock(&t->lock);
    while (!t->finished) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (interval % 1000) * 1000000L;
        ts.tv_sec += interval / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&t->cond, &t->lock, &ts);
        if (t->finished)
            break;
        pthread_mutex_unlock(&t->lock);
        if (atomic_load(&g_stop) && !abandoned) {
            nv_log_info("stopping: abandoning job %s (its lease expires and it is requeued)",
                        j->job_id);
            abandoned = 1;
            atomic_store(&j->cancel, 1);
        }
        if (!abandoned && !server_cancel) {
            int h = heartbeat(j, interval > 2000 ? interval : 2000);
            if (h == 0) {
                nv_log_info("job %s cancelled by the server; stopping it", j->job_id);
                server_cancel = 1;
                atomic_store(&j->cancel, 1);
            } else if (h < 0) {
                nv_log_warn("job %s: lease lost (409), abandoning it", j->job_id);
                abandoned = 1;
                atomic_store(&j->cancel, 1);
            }
        }
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    if (abandoned || atomic_load(&g_stop))
        return -1;
    return server_cancel;
}

/* POST the result until it is accepted, the lease is lost or we stop. */
static int post_result(nvw_agent_job *j, json_t *result)
{
    json_t *body = json_pack("{s:O,s:s,s:O}", "job_id", j->job_id_json, "lease_token",
                             j->lease_token, "result", result);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return -ENOMEM;
    long pause = 250;
    int r = -EIO;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        nvw_http_resp resp = {0};
        char *err = NULL;
        r = nvw_http_request(j->http, "POST", "/api/v1/worker/result", NULL, text, strlen(text),
                             120000, &resp, &err);
        long st = r == 0 ? resp.status : 0;
        if (r == 0 && st >= 200 && st < 300) {
            nvw_http_resp_done(&resp);
            break;
        }
        if (st == 409) {
            nv_log_warn("job %s: lease lost before its result was accepted; abandoned", j->job_id);
            r = -ESTALE;
        } else if (st >= 400 && st < 500 && st != 408 && st != 429) {
            nv_log_err("job %s: result refused: HTTP %ld %.500s", j->job_id, st, resp_text(&resp));
            r = -EPROTO;
        } else {
            nv_log_warn("job %s: result upload failed (%s); retrying in %ld ms", j->job_id,
                        r < 0 ? (err ? err : strerror(-r)) : "server error", pause);
            r = -EAGAIN;
        }
        free(err);
        nvw_http_resp_done(&resp);
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* Give a restarting daemon ten minutes; then the lease has long expired. */
        if (r != -EAGAIN || atomic_load(&g_stop) || now.tv_sec - start.tv_sec > 600)
            break;
        nvw_agent_sleep(pause, NULL);
        pause = pause < 4000 ? pause * 2 : 5000;
    }
    free(text);
    return r == -EAGAIN ? -ETIMEDOUT : r;
}

/* The result JSON for a job the runner could not run at all. */
static json_t *error_result(const nvw_agent_job *j, int rc, const char *err)
{
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", err && *err ? err : strerror(-rc));
    return json_pack("{s:s,s:s,s:s,s:{s:i,s:i,s:i,s:i},s:[]}", "verdict", "error", "error", msg,
                     "backend", j->backend_spec, "summary", "cases", 0, "passed", 0, "failed", 0,
                     "errors", 0, "cases");
}

/* Run one claimed job to its end. Returns 0 when its result was accepted. */
static int run_claimed(nvw_http *http, const agent_opts *o, json_t *claimed)
{
    json_t *id = json_object_get(claimed, "id");
    const char *token = json_string_value(json_object_get(claimed, "lease_token"));
    json_t *spec = json_object_get(claimed, "spec");
    json_int_t lease_ms = json_integer_value(json_object_get(claimed, "lease_ms"));
    if ((!json_is_string(id) && !json_is_integer(id)) || !token || !json_is_object(spec)) {
        char *text = json_dumps(claimed, JSON_COMPACT);
        nv_log_err("claim response lacks id, lease_token or spec: %.300s",
                   text ? text : "(out of memory)");
        free(text);
        return -EPROTO;
    }

    char id_text[128];
    if (json_is_string(id))
        snprintf(id_text, sizeof(id_text), "%s", json_string_value(id));
    else
        snprintf(id_text, sizeof(id_text), "%" JSON_INTEGER_FORMAT, json_integer_value(id));
    nvw_agent_job j = {.http = http,
                       .backend_spec = o->backend,
                       .job_id = id_text,
                       .job_id_json = id,
                       .lease_token = token,
                       .attempt = json_integer_value(json_object_get(claimed, "attempt")),
                       .spec = spec,
                       .max_artifacts = o->max_artifacts,
                       .minimize_deadline_s = (double)o->minimize_deadline_s};
    runner_thread t = {.job = &j, .threads = o->threads};
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    /* A registered build brings its own backend (build_backend.c decides). */
    const char *bb = json_string_value(json_object_get(claimed, "build_backend"));
    int r;
    if (bb) {
        char why[1024];
        j.backend_spec = bb;
        r = nvw_agent_build_backend_check(bb, o->build_dirs, o->n_build_dirs, why, sizeof why);
        if (r < 0) {
            nv_log_warn("job %s: refused: %s", id_text, why);
            json_t *res = error_result(&j, r, why);
            r = res ? post_result(&j, res) : -ENOMEM;
            json_decref(res);
            goto out;
        }
        nv_log_info("job %s: the build's backend '%s'", id_text, bb);
    }
    nv_log_info("job %s (attempt %" JSON_INTEGER_FORMAT "): running", id_text, j.attempt);
    pthread_t th;
    r = pthread_create(&th, NULL, run_thread, &t);
    if (r != 0) {
        nv_log_err("cannot start the runner thread: %s", strerror(r));
        r = -r;
        goto out;
    }
    int sup = supervise(&t, lease_ms > 0 ? (long)lease_ms : 30000);
    pthread_join(th, NULL);
    if (sup != 0) {
        /* The server already holds the job as cancelled (or has re-leased it):
         * a result from this run would only be refused. */
        if (sup > 0)
            nv_log_info("job %s: cancelled after %lld of %lld cases", id_text,
                        (long long)atomic_load(&j.done), (long long)atomic_load(&j.total));
        r = -ECANCELED;
        goto out;
    }
    json_t *result = t.rc == 0 ? json_incref(t.result) : error_result(&j, t.rc, t.err);
    if (t.rc != 0)
        nv_log_warn("job %s could not run: %s", id_text, t.err ? t.err : strerror(-t.rc));
    r = result ? post_result(&j, result) : -ENOMEM;
    if (r == 0)
        nv_log_info("job %s: %s, result uploaded (%d artifacts)", id_text,
                    json_string_value(json_object_get(result, "verdict")),
                    atomic_load(&j.n_artifacts));
    json_decref(result);
out:
    json_decref(t.result);
    free(t.err);
    pthread_cond_destroy(&t.cond);
    pthread_mutex_destroy(&t.lock);
    return r;
}

/* One long-poll claim. Returns 1 with *ret_job (new reference) when a job was
 * leased, 0 when none, -EAGAIN for a transient failure, -EPERM for a refusal
 * that retrying cannot fix, -ECANCELED when stopping. */
static int claim(nvw_http *http, const agent_opts *o, const char *body, json_t **ret_job)
{
    nvw_http_resp resp = {0};
    char *err = NULL;
    int r = nvw_http_request(http, "POST", "/api/v1/worker/claim", NULL, body, strlen(body),
                             o->claim_wait_ms + 15000, &resp, &err);
    if (r == -ECANCELED || atomic_load(&g_stop)) {
        r = -ECANCELED;
    } else if (r == -EKEYREJECTED) {
        nv_log_err("claim: cannot trust server '%s': %s", o->server, err ? err : strerror(-r));
        r = -EPERM;
    } else if (r < 0) {
        nv_log_debug("claim failed: %s", err ? err : strerror(-r));
        r = -EAGAIN;
    } else if (resp.status == 204) {
        r = 0;
    } else if (resp.status == 200) {
        json_t *rj = json_loadb(resp.body, resp.len, 0, NULL);
        json_t *job = json_object_get(rj, "job");
        r = json_is_object(job) ? 1 : -EAGAIN;
        if (r == 1)
            *ret_job = json_incref(job);
        else
            nv_log_warn("claim answered 200 without a job: %.300s", resp_text(&resp));
        json_decref(rj);
    } else if (resp.status == 400 || resp.status == 401 || resp.status == 403 ||
               resp.status == 404) {
        nv_log_err("claim refused by '%s': HTTP %ld %.500s", o->server, resp.status,
                   resp_text(&resp));
        r = -EPERM;
    } else {
        nv_log_warn("claim: HTTP %ld %.300s", resp.status, resp_text(&resp));
        r = -EAGAIN;
    }
    free(err);
    nvw_http_resp_done(&resp);
    return r;
}

static int agent_loop(nvw_http *http, const agent_opts *o, const json_t *describe)
{
    json_t *cb = json_pack("{s:s,s:I,s:O}", "device", o->device, "wait_ms",
                           (json_int_t)o->claim_wait_ms, "describe", describe);
    if (cb && o->worker_id && json_object_set_new(cb, "worker_id", json_string(o->worker_id)) < 0) {
        json_decref(cb);
        cb = NULL;
    }
    char *body = cb ? json_dumps(cb, JSON_COMPACT) : NULL;
    json_decref(cb);
    if (!body)
        return 2;
    long backoff = 250;
    int status = 0, reported_down = 0;
    long idle_since = mono_s();
    while (!atomic_load(&g_stop)) {
        /* Idle time counts while the server is unreachable too: a worker that
         * a batch system started gives its allocation back either way. */
        if (o->idle_exit_s && mono_s() - idle_since >= o->idle_exit_s) {
            nv_log_info("no job for %ld s (--idle-exit): exiting", o->idle_exit_s);
            break;
        }
        if (atomic_load(&g_drain)) {
            nv_log_info("SIGUSR1: draining, no more claims: exiting");
            break;
        }
        json_t *job = NULL;
        int r = claim(http, o, body, &job);
        if (r == -EPERM) {
            status = 2;
            break;
        }
        if (r == -EAGAIN) {
            if (!reported_down)
                nv_log_warn("server '%s' unavailable; retrying with backoff", o->server);
            reported_down = 1;
            nvw_agent_sleep(backoff, NULL);
            backoff = backoff < 5000 ? backoff * 2 : 10000;
            continue;
        }
        if (reported_down && r >= 0)
            nv_log_info("server '%s' reachable again", o->server);
        reported_down = 0;
        backoff = 250;
        if (r == 1) {
            r = run_claimed(http, o, job);
            json_decref(job);
            if (o->once) {
                status = r == 0 ? 0 : 1;
                break;
            }
            idle_since = mono_s();
        }
    }
    free(body);
    return status;
}

int nvw_agent_main(int argc, char **argv)
{
    nv_log_set_program("numval-worker");
    agent_opts o = {0};
    int status = 2;
    if (parse_opts(argc, argv, &o) < 0 || nvw_agent_parent_death() < 0)
        goto out;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    json_t *describe = describe_backend(o.backend);
    if (!describe)
        goto out;
    if (nvw_http_global_init() < 0) {
        json_decref(describe);
        nv_log_err("cannot initialize libcurl");
        goto out;
    }
    nvw_http *http = nvw_http_new(o.server, o.token, &g_stop);
    if (http && nvw_http_set_cacert(http, o.cacert) < 0) {
        nvw_http_free(http);
        http = NULL;
    }
    if (http) {
        nv_log_info("agent for device '%s' (backend '%s') polling '%s'", o.device, o.backend,
                    o.server);
        status = agent_loop(http, &o, describe);
        nv_log_info("agent for device '%s' stopped", o.device);
    }
    nvw_http_free(http);
    nvw_http_global_done();
    json_decref(describe);
out:
    free(o.token);
    free(o.worker_id);
    for (int i = 0; i < o.n_build_dirs; i++)
        free(o.build_dirs[i]);
    return status;
}
