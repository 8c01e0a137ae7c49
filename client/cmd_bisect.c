/* numvalctl bisect: the first build in registration order where a suite case
 * fails, by binary search between a good and a bad build, one suite job per
 * probe (docs/CLIENT.md "Bisection"); numvalctl builds register. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "client.h"

/* Non-monotone pairs reported at most (the first ones found, oldest first). */
#define MAX_EVIDENCE 16

typedef struct bisect {
    const nvc_conn *c;
    const char *case_id, *device;
    double probe_timeout_s;
    json_t *builds;  /* oldest first: registration order */
    json_t *probes;  /* [{build, index, job_id, verdict}] in the order run */
    char key[33];    /* random per invocation; probe keys are KEY-INDEX */
} bisect;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* GET path; the reply (new reference) or NULL with the error printed. */
static json_t *get(const nvc_conn *c, const char *path)
{
    json_t *resp = NULL;
    char *err = NULL;
    int r = nvc_api(c, "GET", path, NULL, &resp, &err);
    if (r < 0) {
        nvc_error("GET %s: %s", path, err ? err : strerror(-r));
        free(err);
        return NULL;
    }
    return resp;
}

static const char *bstr(const json_t *build, const char *key)
{
    const char *v = json_string_value(json_object_get(json_object_get(build, "identity"), key));
    return v ? v : "-";
}

/* Index in b->builds of a build hash, or of the newest build with that name or
 * version (as compare resolves them); -1 when none. */
static int resolve(const bisect *b, const char *what)
{
    int found = -1;
    for (size_t i = 0; i < json_array_size(b->builds); i++) {
        const json_t *x = json_array_get(b->builds, i);
        const char *id = json_string_value(json_object_get(x, "id"));
        if (id && !strcmp(id, what))
            return (int)i;
        if (!strcmp(bstr(x, "name"), what) || !strcmp(bstr(x, "version"), what))
            found = (int)i; /* later is newer */
    }
    return found;
}

/* The builds oldest first (the API lists them newest first). */
static int load_builds(bisect *b)
{
    json_t *resp = get(b->c, "/api/v1/builds?limit=1000");
    if (!resp)
        return -EIO;
    json_t *rows = json_object_get(resp, "builds");
    b->builds = json_array();
    for (size_t i = json_array_size(rows); b->builds && i-- > 0;)
        json_array_append(b->builds, json_array_get(rows, i));
    json_decref(resp);
    return b->builds ? 0 : -ENOMEM;
}

/* Submit the probe of build k and wait for its verdict: the job's final state
 * ("passed", "failed", "error", "cancelled") in *ret_job (new reference). */
static int probe(bisect *b, int k, json_t **ret_job)
{
    const json_t *build = json_array_get(b->builds, (size_t)k);
    char *endp;
    long long id = strtoll(b->case_id, &endp, 10);
    json_t *spec = json_pack("{s:s, s:O, s:{s:[I]}}", "kind", "suite", "build",
                             json_object_get(build, "identity"), "filter", "ids", (json_int_t)id);
    if (!spec)
        return -ENOMEM;
    if (b->device)
        json_object_set_new(spec, "device", json_string(b->device));
    char hdr[96];
    snprintf(hdr, sizeof hdr, "Idempotency-Key: bisect-%s-%d", b->key, k);
    nvc_conn ck = *b->c;
    ck.header = hdr;
    json_t *resp = NULL;
    char *err = NULL;
    int r = nvc_api_retry(&ck, "POST", "/api/v1/jobs", spec, 4, &resp, &err);
    json_decref(spec);
    if (r < 0) {
        nvc_error("probe of build %s %s: submit failed: %s", bstr(build, "name"),
                  bstr(build, "version"), err ? err : strerror(-r));
        free(err);
        return r;
    }
    char idb[32], path[96];
    snprintf(path, sizeof path, "/api/v1/jobs/%s",
             nvc_id_text(json_object_get(json_object_get(resp, "job"), "id"), idb));
    json_decref(resp);
    if (!b->c->json)
        fprintf(stderr, "probe %zu: build %s %s: job %s ...\n", json_array_size(b->probes) + 1,
                bstr(build, "name"), bstr(build, "version"), idb);
    double start = now_s(), pause = 0.2;
    for (;;) {
        json_t *j = get(b->c, path);
        if (!j)
            return -EIO;
        json_t *job = json_object_get(j, "job");
        const char *st = json_string_value(json_object_get(job, "state"));
        if (st && (!strcmp(st, "passed") || !strcmp(st, "failed") || !strcmp(st, "error") ||
                   !strcmp(st, "cancelled"))) {
            *ret_job = json_incref(job);
            json_decref(j);
            return 0;
        }
        json_decref(j);
        if (now_s() - start > b->probe_timeout_s) {
            nvc_error("probe job %s not finished after %g s (--timeout); is a worker for "
                      "device '%s' running?",
                      idb, b->probe_timeout_s, b->device ? b->device : "any");
            return -ETIMEDOUT;
        }
        sleep_s(pause);
        pause = pause < 1.0 ? pause * 1.5 : 1.0;
    }
}

/* Every verdict known for the case on builds lo..hi: the probes and the case's
 * stored replays (on b->device when given), as [index, verdict, job_id]. */
static json_t *evidence(const bisect *b, const json_t *history, int lo, int hi)
{
    json_t *ev = json_array();
    for (size_t i = 0; ev && i < json_array_size(b->probes); i++) {
        const json_t *p = json_array_get(b->probes, i);
        json_array_append_new(ev, json_pack("[O,O,O]", json_object_get(p, "index"),
                                            json_object_get(p, "verdict"),
                                            json_object_get(p, "job_id")));
    }
    for (size_t i = 0; ev && i < json_array_size(history); i++) {
        const json_t *h = json_array_get(history, i);
        const char *dev = json_string_value(json_object_get(h, "device"));
        const char *hash = json_string_value(json_object_get(h, "build"));
        if (!hash || (b->device && (!dev || strcmp(dev, b->device))))
            continue;
        int k = resolve(b, hash);
        if (k < lo || k > hi)
            continue;
        bool dup = false; /* a probe is in the history too */
        for (size_t p = 0; p < json_array_size(b->probes); p++)
            dup |= json_equal(json_object_get(json_array_get(b->probes, p), "job_id"),
                              json_object_get(h, "job_id"));
        if (!dup)
            json_array_append_new(ev, json_pack("[i,O,O]", k, json_object_get(h, "verdict"),
                                                json_object_get(h, "job_id")));
    }
    return ev;
}

static json_t *build_ref(const bisect *b, int k)
{
    const json_t *x = json_array_get(b->builds, (size_t)k);
    return json_pack("{s:O, s:O, s:O}", "id", json_object_get(x, "id"), "identity",
                     json_object_get(x, "identity"), "backend", json_object_get(x, "backend"));
}

/* Bisection assumes the case passes up to one build and fails from it on. A
 * failing verdict at build i with a passing one at a build j >= i contradicts
 * that; each such pair is reported, never smoothed over. */
static json_t *non_monotone(const bisect *b, const json_t *ev)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(ev); i++) {
        const json_t *f = json_array_get(ev, i);
        if (strcmp(json_string_value(json_array_get(f, 1)), "failed"))
            continue;
        for (size_t j = 0; j < json_array_size(ev) && json_array_size(out) < MAX_EVIDENCE; j++) {
            const json_t *p = json_array_get(ev, j);
            if (strcmp(json_string_value(json_array_get(p, 1)), "passed") ||
                json_integer_value(json_array_get(p, 0)) < json_integer_value(json_array_get(f, 0)))
                continue;
            json_array_append_new(
                out, json_pack("{s:o, s:O, s:o, s:O}", "failing",
                               build_ref(b, (int)json_integer_value(json_array_get(f, 0))),
                               "failing_job", json_array_get(f, 2), "passing",
                               build_ref(b, (int)json_integer_value(json_array_get(p, 0))),
                               "passing_job", json_array_get(p, 2)));
        }
    }
    return out;
}

static void print_text(const json_t *res)
{
    const json_t *probes = json_object_get(res, "probes");
    for (size_t i = 0; i < json_array_size(probes); i++) {
        const json_t *p = json_array_get(probes, i);
        const json_t *bu = json_object_get(p, "build");
        char idb[32];
        printf("probe %zu: %-10s %s %s (job %s)\n", i + 1,
               json_string_value(json_object_get(p, "verdict")), bstr(bu, "name"),
               bstr(bu, "version"), nvc_id_text(json_object_get(p, "job_id"), idb));
    }
    const json_t *ff = json_object_get(res, "first_failing_build");
    if (json_is_object(ff))
        printf("first failing build: %s %s (%.12s), after %s %s; %zu probe runs\n",
               bstr(ff, "name"), bstr(ff, "version"),
               json_string_value(json_object_get(ff, "id")),
               bstr(json_object_get(res, "last_passing_build"), "name"),
               bstr(json_object_get(res, "last_passing_build"), "version"),
               json_array_size(probes));
    const json_t *nm = json_object_get(res, "non_monotone");
    for (size_t i = 0; i < json_array_size(nm); i++) {
        const json_t *e = json_array_get(nm, i);
        printf("non-monotone: fails on %s %s but passes on later %s %s\n",
               bstr(json_object_get(e, "failing"), "name"),
               bstr(json_object_get(e, "failing"), "version"),
               bstr(json_object_get(e, "passing"), "name"),
               bstr(json_object_get(e, "passing"), "version"));
    }
}

static int report(const nvc_conn *c, const json_t *res);
static int daemon_side(const nvc_conn *c, const char *case_id, const char *good, const char *bad,
                       const char *device, double timeout_s);

/* The search itself: lo passes, hi fails (as the caller says), probes between. */
static int search(bisect *b, int lo, int hi, const json_t *history, json_t **ret)
{
    int g = lo, bad = hi;
    const char *stop = NULL;
    json_t *stop_job = NULL;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        json_t *job = NULL;
        int r = probe(b, mid, &job);
        if (r < 0)
            return r;
        const char *st = json_string_value(json_object_get(job, "state"));
        json_array_append_new(b->probes,
                              json_pack("{s:o, s:i, s:O, s:s}", "build", build_ref(b, mid), "index",
                                        mid, "job_id", json_object_get(job, "id"), "verdict", st));
        if (!strcmp(st, "passed")) {
            lo = mid;
        } else if (!strcmp(st, "failed")) {
            hi = mid;
        } else {
            /* No verdict (the backend did not load, the job was cancelled):
             * the search cannot go on without guessing. */
            stop = st;
            stop_job = job;
            break;
        }
        json_decref(job);
    }
    json_t *ev = evidence(b, history, g, bad);
    json_t *res = json_pack("{s:I, s:o, s:o, s:i, s:O, s:I, s:o}", "suite_case",
                            (json_int_t)strtoll(b->case_id, NULL, 10),
                            "good", build_ref(b, g), "bad", build_ref(b, bad), "builds_between",
                            bad - g - 1, "probes", b->probes, "runs",
                            (json_int_t)json_array_size(b->probes), "non_monotone",
                            non_monotone(b, ev));
    json_decref(ev);
    if (!res) {
        json_decref(stop_job);
        return -ENOMEM;
    }
    if (stop) {
        json_object_set_new(res, "first_failing_build", json_null());
        json_object_set_new(res, "stopped",
                            json_pack("{s:s, s:O, s:O}", "verdict", stop, "job_id",
                                      json_object_get(stop_job, "id"), "error",
                                      json_object_get(stop_job, "error")));
    } else {
        json_object_set_new(res, "first_failing_build", build_ref(b, hi));
        json_object_set_new(res, "last_passing_build", build_ref(b, lo));
    }
    json_decref(stop_job);
    *ret = res;
    return 0;
}

int nvc_cmd_bisect(nvc_conn *c, int argc, char **argv)
{
    const char *good = NULL, *bad = NULL, *device = NULL, *timeout = NULL, *pos[1];
    bool on_daemon = false;
    int npos = 0, status = NVC_EXIT_ERROR;
    char *err = NULL;
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {"good", &good, NULL},     {"bad", &bad, NULL},
                            {"device", &device, NULL}, {"timeout", &timeout, NULL},
                            {"daemon", NULL, &on_daemon}, {NULL, NULL, NULL}};
    if (nvc_parse(argc, argv, opts, pos, 1, &npos, &err) < 0 || npos != 1 || !good || !bad) {
        nvc_error("%s", err ? err
                            : "usage: numvalctl bisect CASE_ID --good BUILD --bad BUILD "
                              "[--device D] [--timeout S] [--daemon]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    bisect b = {.c = c, .case_id = pos[0], .device = device, .probe_timeout_s = 600};
    char *end;
    long long cid = strtoll(pos[0], &end, 10);
    if (*end || cid <= 0) {
        nvc_error("suite case id '%s' is not a positive integer (see numvalctl suite list)",
                  pos[0]);
        return NVC_EXIT_ERROR;
    }
    if (timeout) {
        b.probe_timeout_s = strtod(timeout, &end);
        if (*end || !(b.probe_timeout_s > 0)) {
            nvc_error("--timeout '%s' must be a positive number of seconds per probe", timeout);
            return NVC_EXIT_ERROR;
        }
    }
    if (on_daemon)
        return daemon_side(c, pos[0], good, bad, device, b.probe_timeout_s);
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        nvc_error("cannot draw a random Idempotency-Key: %s", strerror(errno));
        return NVC_EXIT_ERROR;
    }
    for (int i = 0; i < 16; i++)
        snprintf(b.key + 2 * i, 3, "%02x", rnd[i]);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/suite/%lld", cid);
    json_t *sc = get(c, path), *res = NULL;
    if (!sc || load_builds(&b) < 0)
        goto out;
    int gi = resolve(&b, good), bi = resolve(&b, bad);
    if (gi < 0 || bi < 0) {
        nvc_error("no build '%s' (a build hash, name or version; see numvalctl builds)",
                  gi < 0 ? good : bad);
        goto out;
    }
    if (gi >= bi) {
        nvc_error("good build '%s' is not registered before bad build '%s': bisection walks "
                  "builds in registration order (numvalctl builds lists them newest first)",
                  good, bad);
        goto out;
    }
    b.probes = json_array();
    if (!b.probes)
        goto out;
    int r = search(&b, gi, bi, json_object_get(json_object_get(sc, "suite_case"), "history"),
                   &res);
    if (r < 0)
        goto out;
    status = report(c, res);
out:
    json_decref(b.probes);
    json_decref(res);
    json_decref(b.builds);
    json_decref(sc);
    return status;
}

/* Print a bisection's outcome (the client's or numvald's, the same keys);
 * the exit status: 0 found, 1 non-monotone evidence, 2 stopped. */
static int report(const nvc_conn *c, const json_t *res)
{
    char idb[32];
    if (c->json)
        nvc_print_json(res);
    else
        print_text(res);
    bool stopped = json_object_get(res, "stopped") != NULL;
    bool nm = json_array_size(json_object_get(res, "non_monotone")) > 0;
    if (stopped)
        nvc_error("stopped: the probe job %s ended '%s' without a verdict",
                  nvc_id_text(json_object_get(json_object_get(res, "stopped"), "job_id"), idb),
                  json_string_value(json_object_get(json_object_get(res, "stopped"), "verdict")));
    else if (nm)
        nvc_error("warning: the verdicts are not monotone in build order: the first failing "
                  "build found is not the only change (see non_monotone)");
    return stopped ? NVC_EXIT_ERROR : nm ? NVC_EXIT_FAILED : NVC_EXIT_OK;
}

int nvc_cmd_build_register(nvc_conn *c, int argc, char **argv)
{
    const char *name = NULL, *version = NULL, *commit = NULL, *backend = NULL, *file = NULL;
    char *err = NULL;
    int npos = 0;
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),        {"name", &name, NULL},
                            {"version", &version, NULL}, {"commit", &commit, NULL},
                            {"build", &file, NULL},      {"backend", &backend, NULL},
                            {NULL, NULL, NULL}};
    if (nvc_parse(argc, argv, opts, NULL, 0, &npos, &err) < 0 || !backend ||
        (!file && !name && !version && !commit)) {
        nvc_error("%s", err ? err
                            : "usage: numvalctl builds register (--build build.json | --name N "
                              "--version V [--commit C]) --backend SPEC");
        free(err);
        return NVC_EXIT_ERROR;
    }
    json_t *build = file ? nvc_load_json_file(file, &err) : json_object();
    if (!build) {
        nvc_error("%s", err ? err : "out of memory");
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (name)
        json_object_set_new(build, "name", json_string(name));
    if (version)
        json_object_set_new(build, "version", json_string(version));
    if (commit)
        json_object_set_new(build, "commit", json_string(commit));
    json_t *body = json_pack("{s:o, s:s}", "build", build, "backend", backend), *resp = NULL;
    int r = body ? nvc_api(c, "POST", "/api/v1/builds", body, &resp, &err) : -ENOMEM;
    json_decref(body);
    if (r < 0) {
        nvc_error("register failed: %s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json)
        nvc_print_json(resp);
    else
        printf("%s\n", json_string_value(json_object_get(json_object_get(resp, "build"), "id")));
    json_decref(resp);
    return NVC_EXIT_OK;
}

/* --daemon: numvald runs the bisection (POST /api/v1/bisections); poll it,
 * saying each probe as it finishes. timeout_s bounds the wait per probe. */
static int daemon_side(const nvc_conn *c, const char *case_id, const char *good, const char *bad,
                       const char *device, double timeout_s)
{
    json_t *body = json_pack("{s:I, s:s, s:s}", "suite_case", (json_int_t)strtoll(case_id, NULL, 10),
                             "good", good, "bad", bad),
           *resp = NULL;
    if (body && device)
        json_object_set_new(body, "device", json_string(device));
    char *err = NULL;
    int r = body ? nvc_api(c, "POST", "/api/v1/bisections", body, &resp, &err) : -ENOMEM;
    json_decref(body);
    if (r < 0) {
        nvc_error("bisect: %s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    char idb[32], path[80];
    snprintf(path, sizeof path, "/api/v1/bisections/%s",
             nvc_id_text(json_object_get(json_object_get(resp, "bisection"), "id"), idb));
    json_decref(resp);
    if (!c->json)
        fprintf(stderr, "bisection %s running on numvald\n", idb);
    size_t said = 0;
    double last = now_s(), pause = 0.2;
    for (;;) {
        json_t *j = get(c, path);
        if (!j)
            return NVC_EXIT_ERROR;
        json_t *v = json_object_get(j, "bisection");
        const json_t *probes = json_object_get(v, "probes");
        for (; said < json_array_size(probes); said++, last = now_s()) {
            const json_t *p = json_array_get(probes, said);
            if (!c->json)
                fprintf(stderr, "probe %zu: %s %s %s\n", said + 1,
                        json_string_value(json_object_get(p, "verdict")),
                        bstr(json_object_get(p, "build"), "name"),
                        bstr(json_object_get(p, "build"), "version"));
        }
        const char *st = json_string_value(json_object_get(v, "state"));
        if (st && strcmp(st, "running")) {
            int status = report(c, v);
            json_decref(j);
            return status;
        }
        json_decref(j);
        if (now_s() - last > timeout_s) {
            nvc_error("no probe of bisection %s finished within %g s (--timeout); it goes on "
                      "on numvald: GET %s",
                      idb, timeout_s, path);
            return NVC_EXIT_ERROR;
        }
        sleep_s(pause);
        pause = pause < 1.0 ? pause * 1.5 : 1.0;
    }
}
