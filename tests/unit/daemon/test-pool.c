/* Slurm pools without Slurm: the [pool NAME] keys (what each sbatch option
 * may hold, the cross-field rules), the command runner the scaler calls
 * sbatch and squeue through (exit status, output, time and size limits, a
 * program that is not there), and the store's count of a device's work. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/pool_run.h"
#include "daemon/store/store.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-pool-XXXXXX";

/* Load text as a config file; the error (or "") into err. */
static int load(const char *text, nvd_config *c, char *err, size_t len)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/t.ini", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -EIO;
    fputs(text, f);
    fclose(f);
    nvd_config_init(c);
    char *e = NULL;
    int r = nvd_config_load(c, path, &e);
    if (r == 0)
        r = nvd_config_check(c, &e);
    snprintf(err, len, "%s", e ? e : "");
    free(e);
    return r;
}

static void test_keys(void)
{
    nvd_config c;
    char err[1200];
    int r = load("[pool gpu]\nbackend = emu\npartition = a100,h100\ngres = gpu:a100:1\n"
                 "time_limit = 1-02:00:00\naccount = lab\nqos = normal\n"
                 "constraint = [a100*2&ib]\nmax_workers = 16\nidle_exit = 30\n"
                 "interval_ms = 1000\nthreads = 8\nserver = https://numval.lab:8443\n"
                 "drain_before = 600\n",
                 &c, err, sizeof(err));
    tap_ok(r == 0 && c.n_pools == 1, "a full [pool] loads (%s)", err);
    const nvd_pool_conf *p = c.n_pools ? &c.pools[0] : NULL;
    tap_ok(p && !strcmp(p->partition, "a100,h100") && !strcmp(p->gres, "gpu:a100:1") &&
               !strcmp(p->time_limit, "1-02:00:00") && p->max_workers == 16 &&
               p->idle_exit_s == 30 && p->interval_ms == 1000 && p->threads == 8 &&
               p->drain_before_s == 600,
           "its values are kept");
    tap_ok(p && !strcmp(nvd_pool_device(p), "gpu"), "the device defaults to the pool's name");
    nvd_config_done(&c);

    r = load("[pool p]\nbackend = emu\n", &c, err, sizeof(err));
    p = c.n_pools ? &c.pools[0] : NULL;
    tap_ok(r == 0 && p && p->max_workers == 1 && p->idle_exit_s == 60 && p->interval_ms == 5000 &&
               !p->partition && !p->gres,
           "defaults: 1 worker, 60 s idle exit, a look every 5 s, no sbatch options");
    nvd_config_done(&c);

    /* Each is refused at load, naming the key: no value reaches sbatch that
     * its option would not take, or that it would read as another option. */
    static const char *const bad[][2] = {
        {"partition", "a b"},    {"partition", "--wrap=id"}, {"gres", "gpu;rm"},
        {"time_limit", "1h"},    {"account", "lab$x"},       {"max_workers", "0"},
        {"max_workers", "1001"}, {"idle_exit", "0"},         {"interval_ms", "10"},
        {"device", "a/b"},       {"export_env", "PATH;X"},   {"job_name", "x y"},
        {"backend", "emu\x01"},  {"threads", "-1"},          {"drain_before", "65536"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), "[pool p]\nbackend = emu\n%s = %s\n", bad[i][0], bad[i][1]);
        r = load(text, &c, err, sizeof(err));
        tap_ok(r == -EINVAL && strstr(err, "bad value") && strstr(err, bad[i][0]),
               "%s = '%s' refused: %s", bad[i][0], bad[i][1], err);
        nvd_config_done(&c);
    }
    r = load("[pool p]\nbackend = emu\nsbatch_args = --exclusive\n", &c, err, sizeof(err));
    tap_ok(r == -EINVAL && strstr(err, "unknown key 'sbatch_args'"), "unknown key: %s", err);
    nvd_config_done(&c);
}

static void test_check(void)
{
    static const char *const cases[][2] = {
        {"[pool p]\npartition = x\n", "has no 'backend'"},
        {"[device d0]\nbackend = emu\n[pool p]\nbackend = emu\ndevice = d0\n",
         "also a [device] section"},
        {"[pool a]\nbackend = emu\ndevice = x\n[pool b]\nbackend = emu\ndevice = x\n",
         "both serve device 'x'"},
        {"[pool p]\nbackend = emu\nexport_env = ALL\n", "must list variable names"},
        {"[pool p]\nbackend = emu\nexport_env = PATH,NUMVAL_TOKEN\n", "must list variable names"},
        {"[pool p]\nbackend = emu\nserver = ftp://x\n", "not an http:// or https:// URL"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        nvd_config c;
        char err[1200];
        int r = load(cases[i][0], &c, err, sizeof(err));
        tap_ok(r == -EINVAL && strstr(err, cases[i][1]), "refused: %s", err);
        nvd_config_done(&c);
    }
}

typedef struct outcome {
    int calls, status;
    char out[256], err[256];
    size_t len;
} outcome;

static void on_run(void *ud, int status, const char *out, size_t len, const char *err)
{
    outcome *o = ud;
    o->calls++;
    o->status = status;
    o->len = len;
    snprintf(o->out, sizeof(o->out), "%s", out);
    snprintf(o->err, sizeof(o->err), "%s", err);
}

extern char **environ;

static outcome run(char *const *argv, uint64_t timeout_ms, size_t max_out, bool kill_it)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    outcome o = {0};
    nvd_run *r = NULL;
    int rc = nvd_run_start(&loop, argv, environ, timeout_ms, max_out, on_run, &o, &r);
    if (rc == 0 && kill_it)
        nvd_run_kill(r);
    uv_run(&loop, UV_RUN_DEFAULT);
    tap_ok(uv_loop_close(&loop) == 0, "every handle of '%s' closed", argv[0]);
    if (rc < 0)
        o.status = rc, o.calls = -1;
    return o;
}

static void test_run(void)
{
    char *sh[] = {"/bin/sh", "-c", "echo 12345; echo oops >&2; exit 3", NULL};
    outcome o = run(sh, 10000, 4096, false);
    tap_ok(o.calls == 1 && o.status == 3 && !strcmp(o.out, "12345\n") && o.len == 6 &&
               !strcmp(o.err, "oops\n"),
           "exit status, stdout and stderr (%d %d, %zu and %zu bytes)", o.calls, o.status,
           strlen(o.out), strlen(o.err));
    char *slow[] = {"/bin/sh", "-c", "sleep 20", NULL};
    o = run(slow, 200, 4096, false);
    tap_ok(o.calls == 1 && o.status == -ETIMEDOUT, "killed past its time limit (%d)", o.status);
    char *big[] = {"/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x", NULL};
    o = run(big, 10000, 1000, false);
    tap_ok(o.calls == 1 && o.status == -E2BIG && o.len == 1000,
           "more than max_out: -E2BIG, the first max_out bytes kept (%d, %zu)", o.status, o.len);
    char *none[] = {"/nonexistent/sbatch", NULL};
    o = run(none, 10000, 4096, false);
    tap_ok(o.calls == 1 && o.status < 0 && o.status != -ETIMEDOUT && o.err[0],
           "a program that is not there: an error with its reason (%d '%s')", o.status, o.err);
    o = run(slow, 10000, 4096, true);
    tap_ok(o.calls == 1 && o.status == -EINTR, "nvd_run_kill ends it (%d)", o.status);
}

static void test_demand(void)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/demand.db", dir);
    nvd_store *s = NULL;
    char *err = NULL;
    if (nvd_store_open(p, NULL, &s, &err) < 0) {
        tap_ok(0, "open store: %s", err);
        free(err);
        return;
    }
    /* 5 for gpu, 2 for any device, 3 for another device. */
    const char *devs[] = {"gpu", "gpu", "gpu", "gpu", "gpu", NULL, NULL, "cpu", "cpu", "cpu"};
    for (int i = 0; i < 10; i++) {
        nvd_job_new j = {
            .kind = "op", .op = "exp", .device = devs[i], .max_attempts = 3, .spec_json = "{}"};
        int64_t id;
        nvd_store_job_insert(s, &j, 1000, &id);
    }
    int64_t q = -1, a = -1;
    tap_ok(nvd_store_jobs_demand(s, "gpu", 100, &q, &a) == 0 && q == 7 && a == 0,
           "gpu may claim its 5 and the 2 for any device (%lld, %lld)", (long long)q, (long long)a);
    json_t *c1 = NULL, *c2 = NULL;
    nvd_store_job_claim(s, "gpu", "tok1", 2000, 1000, &c1);
    nvd_store_job_claim(s, "gpu", "tok2", 2000, 1000, &c2);
    tap_ok(nvd_store_jobs_demand(s, "gpu", 100, &q, &a) == 0 && q == 5 && a == 2,
           "two claimed: 5 queued, 2 leased under its name (%lld, %lld)", (long long)q,
           (long long)a);
    tap_ok(nvd_store_jobs_demand(s, "gpu", 3, &q, &a) == 0 && q == 3,
           "the queued count stops at cap (%lld)", (long long)q);
    tap_ok(nvd_store_jobs_demand(s, "tpu", 100, &q, &a) == 0 && q == 2 && a == 0,
           "a device with no jobs of its own sees the 2 for any device (%lld)", (long long)q);
    json_decref(c1);
    json_decref(c2);
    nvd_store_free(s);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_keys();
    test_check();
    test_run();
    test_demand();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
