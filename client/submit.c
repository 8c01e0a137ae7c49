/* numvalctl submit: submit a job or a suite file, optionally wait for the
 * verdicts and write JUnit XML. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "client.h"

typedef struct submit_opts {
    const char *file, *device, *priority, *build, *build_name, *build_version, *commit;
    const char *junit, *timeout, *rerun, *retries;
    bool wait, new_device, quiet;
    int n_retries;
    char key_prefix[33]; /* random per invocation; the jobs' keys are PREFIX-N */
    int n_keys;
} submit_opts;

/* A job pinned to a device no worker has ever served would wait forever: refuse
 * it unless --new-device says the device's worker is not registered yet. A server
 * that cannot answer leaves the decision to the submit itself. */
static int check_device(const nvc_conn *c, const submit_opts *o)
{
    if (!o->device || o->new_device)
        return 0;
    char *id = nvc_escape(o->device), path[512], *err = NULL;
    if (!id)
        return -ENOMEM;
    snprintf(path, sizeof path, "/api/v1/devices/%s", id);
    free(id);
    nvc_response resp = {0};
    int r = nvc_http(c, "GET", path, NULL, NULL, 0, 0, &resp, &err);
    free(err);
    if (r < 0)
        return 0;
    long status = resp.status;
    nvc_response_done(&resp);
    if (status != 404)
        return 0;
    json_t *list = NULL;
    char names[400] = "";
    if (nvc_api(c, "GET", "/api/v1/devices", NULL, &list, NULL) == 0) {
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(list, "devices"), i, d)
        {
            const char *n = json_string_value(json_object_get(d, "name"));
            if (n && strlen(names) + strlen(n) + 3 < sizeof names) {
                if (*names)
                    strcat(names, ", ");
                strcat(names, n);
            }
        }
        json_decref(list);
    }
    nvc_error("no device '%s' is registered on %s (known: %s); a job for it would wait "
              "until its worker connects: pass --new-device to submit it anyway",
              o->device, c->server, *names ? names : "none");
    return -ENOENT;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int parse_long(const char *s, const char *opt, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        nvc_error("invalid %s '%s': expected an integer in %ld..%ld", opt, s, lo, hi);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* The "build" object for the request body from the options; NULL when none.
 * *ret_err set on a bad file. */
static int build_object(const submit_opts *o, json_t **ret)
{
    *ret = NULL;
    if (o->build && (o->build_name || o->build_version || o->commit)) {
        nvc_error("use either --build FILE or --build-name/--build-version/--commit, not both");
        return -EINVAL;
    }
    if (o->build) {
        char *err = NULL;
        json_t *b = nvc_load_json_file(o->build, &err);
        if (!b || !json_is_object(b)) {
            nvc_error("%s", err ? err : "build file must hold a JSON object");
            free(err);
            json_decref(b);
            return -EINVAL;
        }
        *ret = b;
        return 0;
    }
    if (!o->build_name && !o->build_version && !o->commit)
        return 0;
    json_t *b = json_object();
    if (!b)
        return -ENOMEM;
    if (o->build_name)
        json_object_set_new(b, "name", json_string(o->build_name));
    if (o->build_version)
        json_object_set_new(b, "version", json_string(o->build_version));
    if (o->commit)
        json_object_set_new(b, "commit", json_string(o->commit));
    *ret = b;
    return 0;
}

/* POST one job; appends its JOB object to jobs and prints the id. */
static int submit_one(const nvc_conn *c, const json_t *spec, submit_opts *o, json_t *build,
                      long priority, json_t *jobs)
{
    json_t *body = json_deep_copy(spec), *resp = NULL;
    char *err = NULL;
    if (!body)
        return -ENOMEM;
    if (o->device)
        json_object_set_new(body, "device", json_string(o->device));
    if (o->priority)
        json_object_set_new(body, "priority", json_integer(priority));
    if (build)
        json_object_set(body, "build", build);
    /* The key makes a retry after a lost answer return the job it created
     * instead of creating another (docs/API.md "Idempotent submission"). */
    char hdr[96];
    snprintf(hdr, sizeof hdr, "Idempotency-Key: %s-%d", o->key_prefix, o->n_keys++);
    nvc_conn ck = *c;
    ck.header = hdr;
    int r = nvc_api_retry(&ck, "POST", "/api/v1/jobs", body, o->n_retries, &resp, &err);
    json_decref(body);
    if (r < 0) {
        nvc_error("submit failed: %s", err ? err : strerror(-r));
        free(err);
        return r;
    }
    json_t *job = json_object_get(resp, "job");
    char idb[32];
    const char *id = nvc_id_text(json_object_get(job, "id"), idb);
    if (!*id) {
        nvc_error("server answered the submission without a job id");
        json_decref(resp);
        return -EPROTO;
    }
    /* With --json the jobs are printed as one document at the end. */
    if (!c->json) {
        printf("%s\n", id);
        fflush(stdout);
    }
    json_array_append(jobs, job);
    json_decref(resp);
    return 0;
}

static bool is_terminal(const char *state)
{
    return state && (!strcmp(state, "passed") || !strcmp(state, "failed") ||
                     !strcmp(state, "error") || !strcmp(state, "cancelled"));
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static void print_progress(const json_t *job)
{
    char idb[32], suite[300];
    nvc_junit_suite_name(job, suite, sizeof suite);
    fprintf(stderr, "numvalctl: job %s (%s): %s, %lld/%lld cases done, %lld failed\n",
            nvc_id_text(json_object_get(job, "id"), idb), suite,
            str_or(job, "state", "?"),
            (long long)json_integer_value(json_object_get(job, "cases_done")),
            (long long)json_integer_value(json_object_get(job, "cases_total")),
            (long long)json_integer_value(json_object_get(job, "cases_failed")));
}

/* Refresh one job; tolerates an unreachable server (a daemon restart) by
 * returning -EAGAIN so the caller retries. */
static int refresh(const nvc_conn *c, json_t *jobs, size_t i, bool quiet)
{
    json_t *job = json_array_get(jobs, i), *resp = NULL;
    char path[512], *err = NULL, idb[32];
    snprintf(path, sizeof(path), "/api/v1/jobs/%s", nvc_id_text(json_object_get(job, "id"), idb));
    int r = nvc_api(c, "GET", path, NULL, &resp, &err);
    if (r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EIO) {
        free(err);
        return -EAGAIN;
    }
    if (r < 0) {
        nvc_error("cannot follow job: %s", err ? err : strerror(-r));
        free(err);
        return r;
    }
    json_t *fresh = json_object_get(resp, "job");
    if (!json_is_object(fresh)) {
        json_decref(resp);
        return -EPROTO;
    }
    json_t *old = json_array_get(jobs, i);
    bool changed =
        !json_equal(json_object_get(old, "state"), json_object_get(fresh, "state")) ||
        !json_equal(json_object_get(old, "cases_done"), json_object_get(fresh, "cases_done"));
    json_array_set(jobs, i, fresh);
    if (changed && !quiet)
        print_progress(fresh);
    json_decref(resp);
    return 0;
}

/* Poll until every job is terminal or the timeout passes. */
static int wait_jobs(const nvc_conn *c, json_t *jobs, double timeout_s, bool quiet)
{
    double start = now_s(), unreachable_since = 0, pause = 0.2;
    for (;;) {
        bool all_done = true, lost = false;
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            const char *st = json_string_value(json_object_get(json_array_get(jobs, i), "state"));
            if (is_terminal(st))
                continue;
            all_done = false;
            int r = refresh(c, jobs, i, quiet);
            if (r == -EAGAIN) {
                lost = true;
                break;
            }
            if (r < 0)
                return r;
        }
        if (all_done)
            return 0;
        if (lost && unreachable_since == 0)
            unreachable_since = now_s();
        else if (!lost)
            unreachable_since = 0;
        /* A daemon restart takes seconds; give up after two minutes of silence. */
        if (lost && now_s() - unreachable_since > 120) {
            nvc_error("server '%s' unreachable for 120 s while waiting", c->server);
            return -ECONNREFUSED;
        }
        if (timeout_s > 0 && now_s() - start > timeout_s) {
            nvc_error("timed out after %g s waiting for the verdicts", timeout_s);
            return -ETIMEDOUT;
        }
        sleep_s(pause);
        pause = pause < 1.0 ? pause * 1.5 : 1.0;
    }
}

/* Why a finished job did not pass, or NULL: an error's text, a long run's
 * acceptance reason. */
static const char *job_reason(const json_t *job)
{
    const char *err = json_string_value(json_object_get(job, "error"));
    if (err && *err)
        return err;
    const json_t *res = json_object_get(job, "result");
    const char *acc =
        json_string_value(json_object_get(json_object_get(res, "acceptance"), "reason"));
    const char *st = json_string_value(json_object_get(job, "state"));
    if (acc && *acc && st && strcmp(st, "passed"))
        return acc;
    return NULL;
}

/* The tests a job counts in the summary line: its cases (passed, failed and
 * errors from the result's summary when there is one), or for a job without
 * cases (a long run, a job that ended in error) the job itself. */
static void job_counts(const json_t *job, long long n[3])
{
    const char *st = json_string_value(json_object_get(job, "state"));
    const json_t *sum = json_object_get(json_object_get(job, "result"), "summary");
    long long total = json_integer_value(json_object_get(job, "cases_total"));
    long long passed = json_integer_value(json_object_get(job, "cases_passed"));
    long long failed = json_integer_value(json_object_get(job, "cases_failed"));
    if (json_is_object(sum)) {
        n[0] += json_integer_value(json_object_get(sum, "passed"));
        n[1] += json_integer_value(json_object_get(sum, "failed"));
        n[2] += json_integer_value(json_object_get(sum, "errors"));
    } else if (total > 0 || passed + failed > 0) {
        n[0] += passed;
        n[1] += failed;
    } else if (st && !strcmp(st, "passed")) {
        n[0]++;
    } else if (st && !strcmp(st, "failed")) {
        n[1]++;
    } else {
        n[2]++;
    }
}

/* Print each job's verdict (with why it did not pass) and the summary line
 * "== N jobs: P passed, F failed, E errors in Ts ==" to stderr. Returns 0 all
 * passed, 1 some case failed, 2 a job errored or was cancelled. */
static int verdict(const json_t *jobs, double seconds)
{
    int status = NVC_EXIT_OK;
    long long n[3] = {0, 0, 0};
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        const json_t *job = json_array_get(jobs, i);
        const char *st = json_string_value(json_object_get(job, "state"));
        const char *why = job_reason(job);
        char idb[32], suite[300];
        nvc_junit_suite_name(job, suite, sizeof suite);
        long long total = json_integer_value(json_object_get(job, "cases_total"));
        fprintf(stderr, "numvalctl: job %s %s: %s", nvc_id_text(json_object_get(job, "id"), idb),
                suite, st ? st : "?");
        if (total > 0)
            fprintf(stderr, " (%lld passed, %lld failed of %lld cases)",
                    (long long)json_integer_value(json_object_get(job, "cases_passed")),
                    (long long)json_integer_value(json_object_get(job, "cases_failed")), total);
        fprintf(stderr, "%s%s\n", why ? ": " : "", why ? why : "");
        job_counts(job, n);
        if (!st || !strcmp(st, "error") || !strcmp(st, "cancelled"))
            status = NVC_EXIT_ERROR;
        else if ((!strcmp(st, "failed") ||
                  json_integer_value(json_object_get(job, "cases_failed")) > 0) &&
                 status == NVC_EXIT_OK)
            status = NVC_EXIT_FAILED;
    }
    size_t nj = json_array_size(jobs);
    fprintf(stderr, "== %zu job%s: %lld passed, %lld failed, %lld error%s in %.1fs ==\n", nj,
            nj == 1 ? "" : "s", n[0], n[1], n[2], n[2] == 1 ? "" : "s", seconds);
    return status;
}

static int write_junit(const nvc_conn *c, const json_t *jobs, const char *path)
{
    json_t *all = json_array();
    if (!all)
        return -ENOMEM;
    int r = 0;
    char *err = NULL;
    for (size_t i = 0; i < json_array_size(jobs) && r == 0; i++) {
        json_t *cases = NULL;
        char idb[32];
        const char *id = nvc_id_text(json_object_get(json_array_get(jobs, i), "id"), idb);
        r = nvc_fetch_cases(c, id, false, &cases, &err);
        if (r == 0)
            json_array_append_new(all, cases);
    }
    if (r == 0)
        r = nvc_junit_write(path, jobs, all, &err);
    if (r < 0)
        nvc_error("cannot write JUnit XML: %s", err ? err : strerror(-r));
    free(err);
    json_decref(all);
    return r;
}

static int submit_all(const nvc_conn *c, submit_opts *o, json_t *jobs)
{
    long priority = 0, timeout = 0;
    if (o->priority && parse_long(o->priority, "--priority", -1000000, 1000000, &priority) < 0)
        return -EINVAL;
    if (o->timeout && parse_long(o->timeout, "--timeout", 1, 86400 * 7, &timeout) < 0)
        return -EINVAL;
    char *err = NULL;
    json_t *spec = NULL, *build = NULL;
    if (o->rerun) {
        int r = nvc_rerun_spec(c, o->rerun, &spec);
        if (r < 0)
            return r;
    } else if (!(spec = nvc_load_json_file(o->file, &err))) {
        nvc_error("%s", err ? err : "out of memory");
        free(err);
        return -EINVAL;
    }
    int r = build_object(o, &build);
    /* A suite file ({"name":..., "jobs":[...]} or a bare array of jobs,
     * docs/JOBS.md "Suites") submits each job. */
    json_t *list = json_is_array(spec) ? spec : json_object_get(spec, "jobs");
    if (r == 0 && json_is_array(list) && !json_object_get(spec, "kind")) {
        if (json_array_size(list) == 0) {
            nvc_error("suite file '%s' has no jobs", o->file);
            r = -EINVAL;
        }
        for (size_t i = 0; i < json_array_size(list) && r == 0; i++)
            r = submit_one(c, json_array_get(list, i), o, build, priority, jobs);
    } else if (r == 0) {
        r = submit_one(c, spec, o, build, priority, jobs);
    }
    json_decref(build);
    json_decref(spec);
    return r;
}

int nvc_cmd_submit(nvc_conn *c, int argc, char **argv)
{
    submit_opts o = {0};
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),
                            {"device", &o.device, NULL},
                            {"priority", &o.priority, NULL},
                            {"build", &o.build, NULL},
                            {"build-name", &o.build_name, NULL},
                            {"build-version", &o.build_version, NULL},
                            {"commit", &o.commit, NULL},
                            {"junit", &o.junit, NULL},
                            {"timeout", &o.timeout, NULL},
                            {"wait", NULL, &o.wait},
                            {"quiet", NULL, &o.quiet},
                            {"new-device", NULL, &o.new_device},
                            {"rerun-failed", &o.rerun, NULL},
                            {"retries", &o.retries, NULL},
                            {NULL, NULL, NULL}};
    const char *pos[1];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 1, &npos, &err) < 0 || npos != (o.rerun ? 0 : 1)) {
        nvc_error("%s", err       ? err
                        : o.rerun ? "--rerun-failed JOB_ID takes the job's spec: give no JOB.json"
                                  : "usage: numvalctl submit (JOB.json | --rerun-failed JOB_ID) "
                                    "[--wait] ...");
        free(err);
        return NVC_EXIT_ERROR;
    }
    o.file = o.rerun ? NULL : pos[0];
    o.n_retries = 4;
    if (o.retries) {
        char *end;
        long n = strtol(o.retries, &end, 10);
        if (end == o.retries || *end || n < 0 || n > 20) {
            nvc_error("--retries '%s' must be an integer in 0..20", o.retries);
            return NVC_EXIT_ERROR;
        }
        o.n_retries = (int)n;
    }
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        nvc_error("cannot draw a random Idempotency-Key: %s", strerror(errno));
        return NVC_EXIT_ERROR;
    }
    for (int i = 0; i < 16; i++)
        snprintf(o.key_prefix + 2 * i, 3, "%02x", rnd[i]);
    if (check_device(c, &o) < 0)
        return NVC_EXIT_ERROR;
    json_t *jobs = json_array();
    if (!jobs)
        return NVC_EXIT_ERROR;
    int status = NVC_EXIT_ERROR;
    double start = now_s();
    if (submit_all(c, &o, jobs) < 0)
        goto out;
    if (!o.wait && !o.junit) {
        status = NVC_EXIT_OK;
        goto out;
    }
    if (wait_jobs(c, jobs, o.timeout ? atof(o.timeout) : 0, o.quiet) < 0)
        goto out;
    status = verdict(jobs, now_s() - start);
    if (o.junit && write_junit(c, jobs, o.junit) < 0)
        status = NVC_EXIT_ERROR;
out:
    if (c->json && json_array_size(jobs) > 0) {
        json_t *doc = json_pack("{s:O}", "jobs", jobs);
        nvc_print_json(doc);
        json_decref(doc);
    }
    json_decref(jobs);
    return status;
}
