/* numvald: command line, startup, signals and shutdown. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app.h"
#include "auth.h"
#include "care_cmd.h"
#include "common/log.h"
#include "notify.h"
#include "pool.h"
#include "scheduler.h"
#include "webhook.h"
#include "bisect.h"
#include "supervisor.h"
#include "daemon/util/util.h"
#include "nvd_paths.h"

typedef struct cli {
    const char *config, *data_dir, *listen, *web_dir, *port_file, *scope, *device;
    bool check_config, dry_run;
    const char *pos[8];
    int n_pos;
} cli;

static void usage(FILE *f)
{
    fputs("usage: numvald [--config FILE] [--data-dir DIR] [--listen HOST:PORT] [--web-dir DIR]\n"
          "               [--port-file FILE] [--check-config] [-v|--verbose]\n"
          "       numvald [--config FILE] [--data-dir DIR] token create NAME --scope S[,S...]\n"
          "                                                [--device DEV[,DEV...]]\n"
          "       numvald [--config FILE] [--data-dir DIR] token revoke NAME\n"
          "       numvald [--config FILE] [--data-dir DIR] token list\n"
          "       numvald [--config FILE] [--data-dir DIR] check-db\n"
          "       numvald [--config FILE] [--data-dir DIR] backup FILE\n"
          "       numvald [--config FILE] [--data-dir DIR] prune [--dry-run]\n"
          "scopes: read, submit, worker, admin\n"
          "--device     bind a worker token to the devices of one host: it claims only for\n"
          "             them, and heartbeats and posts results only for their jobs\n"
          "backup FILE  copy the store to a new FILE (SQLite online backup of one snapshot;\n"
          "             safe while numvald serves)\n"
          "prune        delete case rows and artifacts older than [retention] allows; suite\n"
          "             cases and their origins stay (--dry-run: count only)\n"
          "check-db     full integrity check of the store, read-only (exit 0 ok, 1 damaged)\n",
          f);
}

static int parse_cli(int argc, char **argv, cli *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--config")      ? &c->config
                            : !strcmp(a, "--data-dir")  ? &c->data_dir
                            : !strcmp(a, "--listen")    ? &c->listen
                            : !strcmp(a, "--web-dir")   ? &c->web_dir
                            : !strcmp(a, "--port-file") ? &c->port_file
                            : !strcmp(a, "--scope")     ? &c->scope
                            : !strcmp(a, "--device")    ? &c->device
                                                        : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "numvald: '%s' needs a value\n", a);
                return -1;
            }
            *slot = argv[++i];
        } else if (!strcmp(a, "--check-config")) {
            c->check_config = true;
        } else if (!strcmp(a, "--dry-run")) {
            c->dry_run = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            nv_log_level = LOG_DEBUG;
        } else if (!strcmp(a, "--version")) {
            printf("numvald %s\n", NV_VERSION);
            exit(0);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (a[0] == '-') {
            fprintf(stderr, "numvald: unknown option '%s'\n", a);
            usage(stderr);
            return -1;
        } else if (c->n_pos < 8) {
            c->pos[c->n_pos++] = a;
        } else {
            fprintf(stderr, "numvald: too many arguments\n");
            return -1;
        }
    }
    return 0;
}

static int load_config(const cli *c, nvd_config *cfg)
{
    char *err = NULL;
    if (nvd_config_init(cfg) < 0)
        return -ENOMEM;
    if (c->config && nvd_config_load(cfg, c->config, &err) < 0)
        goto fail;
    if ((c->data_dir && nvd_config_set_str(&cfg->data_dir, c->data_dir) < 0) ||
        (c->listen && nvd_config_set_str(&cfg->listen, c->listen) < 0) ||
        (c->web_dir && nvd_config_set_str(&cfg->web_dir, c->web_dir) < 0))
        return -ENOMEM;
    if (nvd_config_check(cfg, &err) < 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "numvald: %s\n", err ? err : "bad configuration");
    free(err);
    return -EINVAL;
}

static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0750) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0750) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int open_store(const nvd_config *cfg, bool group, nvd_store **ret)
{
    int r = make_dirs(cfg->data_dir);
    if (r < 0) {
        fprintf(stderr, "numvald: cannot create data dir '%s': %s\n", cfg->data_dir, strerror(-r));
        return r;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/numvald.db", cfg->data_dir);
    /* SQLite says only "unable to open database file" when it cannot create
     * the database or its -wal and -shm files: say why. */
    bool db_exists = access(path, F_OK) == 0;
    if (access(cfg->data_dir, W_OK | X_OK) < 0 || (db_exists && access(path, W_OK) < 0)) {
        int e = errno;
        bool dir = access(cfg->data_dir, W_OK | X_OK) < 0;
        fprintf(stderr,
                "numvald: %s '%s' is read-only for numvald (uid %d): %s; numvald writes "
                "numvald.db and its -wal and -shm files in the data dir (give it write access "
                "or choose another with --data-dir)\n",
                dir ? "data dir" : "database", dir ? cfg->data_dir : path, (int)geteuid(),
                strerror(e));
        return -e;
    }
    nvd_store_opts o = {.group_commit = group,
                        .sync_full = cfg->sync_full,
                        .guard = true,
                        .skip_check = cfg->skip_check};
    char *err = NULL;
    r = nvd_store_open(path, &o, ret, &err);
    if (r < 0) {
        fprintf(stderr, "numvald: %s\n", err ? err : strerror(-r));
        free(err);
    }
    return r;
}

static int token_cmd(const cli *c, const nvd_config *cfg)
{
    const char *sub = c->n_pos > 1 ? c->pos[1] : "";
    nvd_store *s = NULL;
    int r = open_store(cfg, false, &s);
    if (r < 0)
        return 2;
    int rc = 0;
    if (!strcmp(sub, "create") && c->n_pos == 3) {
        unsigned scopes;
        char bad[64];
        char derr[300];
        if (!c->scope || nvd_auth_parse_scopes(c->scope, &scopes, bad) < 0) {
            fprintf(stderr, "numvald: --scope '%s' is not a list of read, submit, worker, admin\n",
                    c->scope ? bad : "");
            rc = 2;
        } else if (c->device && nvd_auth_parse_devices(c->device, scopes, derr, sizeof derr) < 0) {
            fprintf(stderr, "numvald: %s\n", derr);
            rc = 2;
        } else {
            char *tok = NULL;
            r = nvd_auth_create_bound(s, c->pos[2], scopes, c->device, &tok);
            if (r == -EEXIST) {
                fprintf(stderr, "numvald: a live token named '%s' exists; revoke it first\n",
                        c->pos[2]);
                rc = 1;
            } else if (r < 0) {
                fprintf(stderr, "numvald: cannot create token: %s\n", strerror(-r));
                rc = 2;
            } else {
                fprintf(stderr, "numvald: token '%s' created; it is shown only once:\n", c->pos[2]);
                printf("%s\n", tok);
                free(tok);
            }
        }
    } else if (!strcmp(sub, "revoke") && c->n_pos == 3) {
        r = nvd_store_token_revoke(s, c->pos[2], nvd_now_ms());
        if (r < 0) {
            fprintf(stderr, "numvald: cannot revoke '%s': %s\n", c->pos[2],
                    r == -ENOENT ? "no live token has that name" : strerror(-r));
            rc = 1;
        } else
            printf("revoked %s\n", c->pos[2]);
    } else if (!strcmp(sub, "list") && c->n_pos == 2) {
        json_t *rows = NULL;
        r = nvd_store_tokens_list(s, &rows);
        if (r < 0) {
            rc = 2;
        } else {
            size_t i;
            json_t *t;
            printf("%-24s %-28s %-24s %-26s %s\n", "NAME", "SCOPES", "DEVICES", "CREATED",
                   "REVOKED");
            json_array_foreach(rows, i, t)
            {
                const char *rev = json_string_value(json_object_get(t, "revoked_at"));
                const char *dev = json_string_value(json_object_get(t, "devices"));
                printf("%-24s %-28s %-24s %-26s %s\n",
                       json_string_value(json_object_get(t, "name")),
                       json_string_value(json_object_get(t, "scopes")), dev ? dev : "any",
                       json_string_value(json_object_get(t, "created_at")), rev ? rev : "-");
            }
            json_decref(rows);
        }
    } else {
        usage(stderr);
        rc = 2;
    }
    nvd_store_free(s);
    return rc;
}

/* check-db: the full PRAGMA integrity_check, read-only (numvald may be running). */
static int check_db_cmd(const nvd_config *cfg)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/numvald.db", cfg->data_dir);
    nvd_store_opts o = {.read_only = true};
    nvd_store *s = NULL;
    char *err = NULL, *rep = NULL;
    int r = nvd_store_open(path, &o, &s, &err);
    if (r < 0) {
        fprintf(stderr, "numvald: %s\n", err ? err : strerror(-r));
        free(err);
        return 2;
    }
    r = nvd_store_check(s, true, &rep);
    if (r == 0)
        printf("numvald: database '%s': integrity_check ok\n", path);
    else
        fprintf(stderr, "numvald: database '%s' is damaged: %s\n", path, rep ? rep : strerror(-r));
    free(rep);
    nvd_store_free(s);
    return r == 0 ? 0 : 1;
}

/* The static root: --web-dir / [server] web_dir, else the installed share dir,
 * else ./web when run from the source tree. */
static char *find_web_dir(const nvd_config *cfg)
{
    const char *cands[] = {cfg->web_dir, NVD_DATADIR "/web", "./web"};
    for (size_t i = 0; i < 3; i++) {
        struct stat st;
        if (cands[i] && stat(cands[i], &st) == 0 && S_ISDIR(st.st_mode))
            return realpath(cands[i], NULL);
    }
    if (cfg->web_dir)
        nv_log_warn("web dir '%s' does not exist; the UI is not served", cfg->web_dir);
    return NULL;
}

typedef struct daemon_state {
    nvd_app app;
    uv_signal_t sigint, sigterm;
    bool stopping;
} daemon_state;

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void on_supervisor_stopped(void *ud)
{
    daemon_state *d = ud;
    nvd_commit_stop(&d->app);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
}

static void on_pools_stopped(void *ud)
{
    daemon_state *d = ud;
    nvd_supervisor_stop(d->app.sup, on_supervisor_stopped, d);
}

static void on_signal(uv_signal_t *s, int signum)
{
    daemon_state *d = s->data;
    if (d->stopping)
        return;
    d->stopping = true;
    nv_log_info("signal %d: shutting down", signum);
    nvd_notify("STOPPING=1");
    nvd_http_server_close(d->app.http);
    d->app.http = NULL;
    nvd_scheduler_stop();
    nvd_webhooks_events_stop();
    nvd_bisect_stop();
    nvd_queue_free(d->app.queue);
    d->app.queue = NULL;
    nvd_pools_stop(d->app.pools, on_pools_stopped, d);
}

static int write_port_file(const char *path, int port)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -errno;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0 || rename(tmp, path) < 0)
        return -errno;
    return 0;
}

static int start(daemon_state *d, nvd_config *cfg, const cli *c)
{
    nvd_app *app = &d->app;
    app->loop = uv_default_loop();
    app->cfg = cfg;
    app->metrics.started_ms = nvd_now_ms();
    int r = open_store(cfg, true, &app->store);
    if (r < 0)
        return r;
    /* One read connection per libuv threadpool thread (4 unless UV_THREADPOOL_SIZE). */
    char path[PATH_MAX], *err = NULL;
    snprintf(path, sizeof(path), "%s/numvald.db", cfg->data_dir);
    const char *tps = getenv("UV_THREADPOOL_SIZE");
    int n_read = tps && atoi(tps) > 0 && atoi(tps) <= 64 ? atoi(tps) : 4;
    r = nvd_store_pool_new(path, n_read, &app->read_pool, &err);
    if (r < 0) {
        fprintf(stderr, "numvald: cannot open read connections: %s\n", err ? err : strerror(-r));
        free(err);
        return r;
    }
    nvd_queue_opts qo = {.max_depth = cfg->queue_depth,
                         .lease_ms = cfg->lease_ms,
                         .expiry_tick_ms = cfg->lease_ms < 2000 ? 100 : 1000};
    r = nvd_queue_new(app->loop, app->store, &qo, &app->queue);
    if (r < 0)
        return r;
    app->web_dir = find_web_dir(cfg);
    nvd_http_callbacks cb = {
        .handle = nvd_api_handle, .admit = nvd_api_admit, .done = nvd_api_done};
    r = nvd_http_server_new(app->loop, cfg->listen, &cfg->http, &cb, app, &app->http);
    if (r < 0) {
        fprintf(stderr, "numvald: cannot listen on '%s': %s\n", cfg->listen,
                r == -EINVAL ? "not HOST:PORT" : uv_strerror(r));
        return r;
    }
    app->port = nvd_http_server_port(app->http);
    /* Anonymous reads were meant for the host itself; say so when the
     * listener takes peers from elsewhere. */
    if (!nvd_http_listen_is_loopback(cfg->listen) && cfg->anonymous_read != NVD_ANON_NO)
        nv_log_warn("listening on '%s', not a loopback address, with anonymous_read = %s: "
                    "reads without a token are allowed %s; set [server] anonymous_read = no "
                    "to require a token",
                    cfg->listen, cfg->anonymous_read == NVD_ANON_YES ? "yes" : "loopback",
                    cfg->anonymous_read == NVD_ANON_YES
                        ? "from any host that reaches it"
                        : "from loopback peers (a request a proxy forwarded with "
                          "X-Forwarded-For is judged by [server] trusted_proxy)");
    r = nvd_webhooks_new(cfg, &app->hooks); /* [webhook] delivery threads (webhook.c) */
    if (r < 0) {
        fprintf(stderr, "numvald: cannot start the webhooks: %s\n", strerror(-r));
        return r;
    }
    r = nvd_webhooks_events_resume(app);
    if (r < 0)
        nv_log_warn("webhooks: cannot read the recorded cron slots (%s): slots fired before "
                    "this start are not watched",
                    strerror(-r));
    r = nvd_commit_start(app);
    if (r < 0) {
        fprintf(stderr, "numvald: cannot start the group commit: %s\n", uv_strerror(r));
        return r;
    }
    uv_signal_init(app->loop, &d->sigint);
    uv_signal_init(app->loop, &d->sigterm);
    d->sigint.data = d->sigterm.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    r = nvd_supervisor_new(app, &app->sup);
    if (r < 0) {
        fprintf(stderr, "numvald: cannot start the worker supervisor: %s\n", strerror(-r));
        return r;
    }
    r = nvd_pools_new(app, &app->pools); /* [pool] sections: Slurm workers (pool.c) */
    if (r < 0) {
        fprintf(stderr, "numvald: cannot start the Slurm pools: %s\n", strerror(-r));
        return r;
    }
    r = nvd_bisect_resume(app); /* bisections left running (bisect.c) */
    if (r < 0) {
        fprintf(stderr, "numvald: cannot resume the bisections: %s\n", strerror(-r));
        return r;
    }
    r = nvd_scheduler_start(app); /* cron schedules (scheduler.c) */
    if (r < 0) {
        fprintf(stderr, "numvald: cannot start the scheduler: %s\n", strerror(-r));
        return r;
    }
    char host[256];
    snprintf(host, sizeof(host), "%s", cfg->listen);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    fprintf(stderr, "numvald: listening on http://%s:%d (data %s, web %s)\n",
            host[0] ? host : "0.0.0.0", app->port, cfg->data_dir,
            app->web_dir ? app->web_dir : "none");
    if (c->port_file && (r = write_port_file(c->port_file, app->port)) < 0) {
        fprintf(stderr, "numvald: cannot write port file '%s': %s\n", c->port_file, strerror(-r));
        return r;
    }
    /* Listening, store open, supervisor and scheduler started: Type=notify's
     * ExecStart is done, units ordered after numvald.service may start. */
    if ((r = nvd_notify("READY=1")) < 0)
        nv_log_warn("cannot notify systemd ($NOTIFY_SOCKET): %s", strerror(-r));
    return 0;
}

/* Run `WORKER check-backend SPEC` (worker/check_backend.c: the worker owns the
 * backend loader) and wait at most 60 s. Returns its exit status, or -1 when it
 * could not be run or was killed. */
static int run_check(const char *worker, const char *spec)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDOUT_FILENO); /* its "OK" line; errors stay on stderr */
        execlp(worker, worker, "check-backend", spec, (char *)NULL);
        fprintf(stderr, "numvald: cannot run worker '%s': %s\n", worker, strerror(errno));
        _exit(127);
    }
    int status = 0;
    for (int waited = 0; waited < 600; waited++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0)
            return -1;
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fprintf(stderr, "numvald: '%s check-backend %s' took longer than 60 s\n", worker, spec);
    return -1;
}

/* --check-config: every device's backend spec must load (and open, for emu and
 * plugin) in the worker that will run it. Returns the count of bad devices. */
static int check_backends(const nvd_config *cfg)
{
    char *dflt = cfg->worker ? strdup(cfg->worker) : nvd_supervisor_default_worker();
    int bad = 0;
    for (int i = 0; i < cfg->n_devices && dflt; i++) {
        const nvd_device_conf *d = &cfg->devices[i];
        const char *w = d->worker ? d->worker : dflt;
        int st = run_check(w, d->backend);
        if (st != 0) {
            fprintf(stderr, "numvald: device '%s': backend '%s' is not usable%s\n", d->name,
                    d->backend, st == 127 ? " (the worker could not be run)" : " (see above)");
            bad++;
        }
    }
    free(dflt);
    return dflt ? bad : 1;
}

int main(int argc, char **argv)
{
    nv_log_set_program("numvald");
    signal(SIGPIPE, SIG_IGN);
    cli c = {0};
    if (parse_cli(argc, argv, &c) < 0)
        return 2;
    nvd_config cfg;
    if (load_config(&c, &cfg) < 0) {
        nvd_config_done(&cfg);
        return 2;
    }
    if (c.n_pos > 0 && !strcmp(c.pos[0], "token")) {
        int rc = token_cmd(&c, &cfg);
        nvd_config_done(&cfg);
        return rc;
    }
    if (c.n_pos == 1 && !strcmp(c.pos[0], "check-db")) {
        int rc = check_db_cmd(&cfg);
        nvd_config_done(&cfg);
        return rc;
    }
    if ((c.n_pos == 2 && !strcmp(c.pos[0], "backup")) ||
        (c.n_pos == 1 && !strcmp(c.pos[0], "prune"))) {
        int rc =
            c.pos[0][0] == 'b' ? nvd_backup_cmd(&cfg, c.pos[1]) : nvd_prune_cmd(&cfg, c.dry_run);
        nvd_config_done(&cfg);
        return rc;
    }
    if (c.n_pos > 0) {
        fprintf(stderr, "numvald: unknown command '%s'\n", c.pos[0]);
        usage(stderr);
        nvd_config_done(&cfg);
        return 2;
    }
    if (c.check_config) {
        int bad = check_backends(&cfg);
        if (bad == 0)
            printf("numvald: configuration OK: listen %s, data %s, %d device(s)\n", cfg.listen,
                   cfg.data_dir, cfg.n_devices);
        nvd_config_done(&cfg);
        return bad ? 2 : 0;
    }
    static daemon_state d;
    int r = start(&d, &cfg, &c);
    int rc = r < 0 ? 1 : 0;
    if (r == 0)
        uv_run(d.app.loop, UV_RUN_DEFAULT);
    /* Close whatever is left (a failed start), then let the close callbacks run. */
    if (d.app.http)
        nvd_http_server_close(d.app.http);
    if (d.app.queue)
        nvd_queue_free(d.app.queue);
    if (d.app.loop) {
        uv_walk(d.app.loop, close_any, NULL);
        uv_run(d.app.loop, UV_RUN_DEFAULT);
        uv_loop_close(d.app.loop);
    }
    nvd_supervisor_free(d.app.sup);
    nvd_pools_free(d.app.pools);
    nvd_webhooks_free(d.app.hooks); /* after the loop: its last events are queued or dropped */
    nvd_store_pool_free(d.app.read_pool);
    nvd_store_free(d.app.store);
    free(d.app.web_dir);
    nvd_config_done(&cfg);
    if (rc == 0)
        nv_log_info("stopped");
    return rc;
}
