/* Unit tests of the case pool (worker/runner/case_pool.c): every index runs exactly
 * once for any thread count, cancel stops the claiming, a failing open or case
 * is reported with its message, progress rises by one up to n, contexts are
 * opened only where needed and always closed. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/runner/case_pool.h"
#include "tests/unit/tap.h"

#define MAX_N 1000

/* What one pool run did, as seen by the callbacks. */
typedef struct probe {
    atomic_int runs[MAX_N + 1];             /* times each index ran */
    atomic_int opens, closes, open_fail_at; /* open_fail_at: 1-based open that fails; 0 none */
    atomic_int ctx_missing;                 /* cases that needed a context and had none */
    atomic_int ctx_unneeded;                /* cases that needed none and got one */
    int64_t fail_case;                      /* run_case fails at this index; -1 none */
    int64_t cancel_after;                   /* set *cancel once this many cases ran; -1 never */
    int64_t ctx_from;                       /* needs_ctx: cases >= this need one */
    int hold_until_opens; /* a case waits (up to 5 s) until this many opens were tried */
    atomic_int cancel;
    /* progress, called serially by the pool */
    int64_t last_done, progress_calls, bad_total;
    int progress_steps_ok;
} probe;

static void probe_init(probe *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->fail_case = -1;
    pr->cancel_after = -1;
    pr->progress_steps_ok = 1;
}

static int t_open(void *ud, void **ret_ctx, char *err, size_t errlen)
{
    probe *pr = ud;
    int k = atomic_fetch_add(&pr->opens, 1) + 1;
    if (k == atomic_load(&pr->open_fail_at)) {
        snprintf(err, errlen, "device 'fake0' refused context %d", k);
        return -ENODEV;
    }
    *ret_ctx = pr; /* any non-NULL token marks an opened context */
    return 0;
}

static void t_close(void *ud, void *ctx)
{
    probe *pr = ud;
    if (ctx == pr)
        atomic_fetch_add(&pr->closes, 1);
}

static bool t_needs(void *ud, int64_t i)
{
    const probe *pr = ud;
    return i >= pr->ctx_from;
}

static int t_case(void *ud, void *ctx, int64_t i, char *err, size_t errlen)
{
    probe *pr = ud;
    bool needs = i >= pr->ctx_from;
    if (needs && ctx != pr)
        atomic_fetch_add(&pr->ctx_missing, 1);
    if (!needs && ctx)
        atomic_fetch_add(&pr->ctx_unneeded, 1);
    for (int ms = 0; ms < 5000 && atomic_load(&pr->opens) < pr->hold_until_opens; ms++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    if (i == pr->fail_case) {
        snprintf(err, errlen, "case '%lld' ran out of memory", (long long)i);
        return -ENOMEM;
    }
    atomic_fetch_add(&pr->runs[i], 1);
    return 0;
}

static void t_progress(void *ud, int64_t done, int64_t total)
{
    probe *pr = ud;
    if (done != pr->last_done + 1)
        pr->progress_steps_ok = 0;
    if (total != pr->bad_total)
        pr->bad_total = -1 - total; /* marks a total other than n */
    pr->last_done = done;
    pr->progress_calls++;
    if (pr->cancel_after >= 0 && done >= pr->cancel_after)
        atomic_store(&pr->cancel, 1);
}

static nvw_case_pool pool_of(probe *pr, int threads, int64_t n)
{
    pr->bad_total = n; /* t_progress expects this total */
    nvw_case_pool p = {.threads = threads,
                       .n = n,
                       .run_case = t_case,
                       .ud = pr,
                       .open_ctx = t_open,
                       .close_ctx = t_close,
                       .ctx_ud = pr,
                       .progress = t_progress,
                       .progress_ud = pr,
                       .cancel = &pr->cancel};
    return p;
}

/* Every index of 0..n-1 ran once and nothing else ran. */
static bool each_once(probe *pr, int64_t n)
{
    for (int64_t i = 0; i <= MAX_N; i++)
        if (atomic_load(&pr->runs[i]) != (i < n ? 1 : 0))
            return false;
    return true;
}

static void test_every_index_once(void)
{
    static probe pr;
    for (int threads = 1; threads <= 8; threads++) {
        int bad = 0;
        for (int64_t n = 0; n <= MAX_N; n++) {
            probe_init(&pr);
            nvw_case_pool p = pool_of(&pr, threads, n);
            char *err = NULL;
            int r = nvw_case_pool_run(&p, &err);
            int want_threads = n < threads ? (int)n : threads;
            bool ok = r == 0 && !err && each_once(&pr, n) && pr.progress_steps_ok &&
                      pr.last_done == n && pr.progress_calls == n && pr.bad_total == n &&
                      pr.opens == pr.closes && pr.opens <= want_threads &&
                      (n == 0 || pr.opens >= 1);
            if (!ok && bad++ == 0)
                tap_diag("threads %d n %lld: r %d opens %d closes %d last progress %lld", threads,
                         (long long)n, r, pr.opens, pr.closes, (long long)pr.last_done);
            free(err);
        }
        tap_ok(bad == 0,
               "%d thread(s), n 0..%d: each index once, progress 1..n by one, every context "
               "closed, at most min(threads, n) opened",
               threads, MAX_N);
    }
}

static void test_cancel(void)
{
    static probe pr;
    /* One thread: the flag set in the progress call after case 10 is seen
     * before case 11 is claimed, so exactly 10 ran. */
    probe_init(&pr);
    pr.cancel_after = 10;
    nvw_case_pool p = pool_of(&pr, 1, 500);
    char *err = NULL;
    int r = nvw_case_pool_run(&p, &err);
    tap_ok(r == -ECANCELED && err && !strcmp(err, "job cancelled after 10 of 500 cases") &&
               each_once(&pr, 10),
           "cancel after 10 cases on one thread: -ECANCELED, \"job cancelled after 10 of 500 "
           "cases\", cases 0..9 ran (got %d, '%s')",
           r, err ? err : "");
    free(err);

    /* Four threads: each may finish the case it holds, none claims another. */
    probe_init(&pr);
    pr.cancel_after = 10;
    p = pool_of(&pr, 4, 500);
    err = NULL;
    r = nvw_case_pool_run(&p, &err);
    int ran = 0;
    for (int64_t i = 0; i < 500; i++)
        ran += atomic_load(&pr.runs[i]);
    char want[80];
    snprintf(want, sizeof want, "job cancelled after %d of 500 cases", ran);
    tap_ok(r == -ECANCELED && ran >= 10 && ran <= 13 && err && !strcmp(err, want) &&
               pr.last_done == ran && pr.opens == pr.closes,
           "cancel on four threads stops within one case a thread (%d ran), message counts them",
           ran);
    free(err);

    probe_init(&pr);
    atomic_store(&pr.cancel, 1);

    p = pool_of(&pr, 3, 50);
    err = NULL;
    r = nvw_case_pool_run(&p, &err);
    tap_ok(r == -ECANCELED && err && !strcmp(err, "job cancelled after 0 of 50 cases") &&
               each_once(&pr, 0) && pr.opens == 0,
           "cancelled before the start: no case, no context");
    free(err);
}

static void test_failures(void)
{
    static probe pr;
    probe_init(&pr);
    atomic_store(&pr.open_fail_at, 1);
    nvw_case_pool p = pool_of(&pr, 1, 20);
    char *err = NULL;
    int r = nvw_case_pool_run(&p, &err);
    tap_ok(r == -EIO && err && !strcmp(err, "device 'fake0' refused context 1") &&
               each_once(&pr, 0) && pr.closes == 0 && pr.progress_calls == 0,
           "a failing open: -EIO with its message, no case ran, nothing to close");
    free(err);

    /* The third of four opens fails: the first two threads hold their cases
     * until it was tried, so it is. The error is reported, the contexts that
     * did open are closed, and no case ran twice. */
    probe_init(&pr);
    atomic_store(&pr.open_fail_at, 3);
    pr.hold_until_opens = 3;
    p = pool_of(&pr, 4, 400);
    err = NULL;
    r = nvw_case_pool_run(&p, &err);
    int ran = 0, twice = 0;
    for (int64_t i = 0; i < 400; i++) {
        ran += atomic_load(&pr.runs[i]);
        twice += atomic_load(&pr.runs[i]) > 1;
    }
    tap_ok(r == -EIO && err && !strcmp(err, "device 'fake0' refused context 3"),
           "one of four opens fails: -EIO with its message (r %d, opens %d)", r, pr.opens);
    tap_ok(pr.closes == pr.opens - 1 && ran < 400 && twice == 0 && pr.last_done == ran,
           "the contexts that opened are closed, the pool stopped, progress counts what ran "
           "(%d ran)",
           ran);
    free(err);

    probe_init(&pr);
    pr.fail_case = 5;
    p = pool_of(&pr, 1, 100);
    err = NULL;
    r = nvw_case_pool_run(&p, &err);
    tap_ok(r == -EIO && err && !strcmp(err, "case '5' ran out of memory") && each_once(&pr, 5) &&
               pr.last_done == 5 && pr.closes == 1,
           "a failing case stops the pool: -EIO, its message, cases 0..4 ran and counted");
    free(err);

    probe_init(&pr);
    pr.fail_case = 0;
    p = pool_of(&pr, 2, 2);
    r = nvw_case_pool_run(&p, NULL);
    tap_ok(r == -EIO, "ret_err may be NULL");
}

static void test_contexts(void)
{
    static probe pr;
    probe_init(&pr);
    pr.ctx_from = 50;
    nvw_case_pool p = pool_of(&pr, 1, 100);
    p.needs_ctx = t_needs;
    int r = nvw_case_pool_run(&p, NULL);
    tap_ok(r == 0 && each_once(&pr, 100) && pr.opens == 1 && pr.closes == 1 &&
               pr.ctx_missing == 0 && pr.ctx_unneeded == 0,
           "needs_ctx: one thread opens its context at case 50, the first that needs it");

    probe_init(&pr);
    pr.ctx_from = 1000;
    p = pool_of(&pr, 4, 100);
    p.needs_ctx = t_needs;
    r = nvw_case_pool_run(&p, NULL);
    tap_ok(r == 0 && each_once(&pr, 100) && pr.opens == 0 && pr.closes == 0,
           "needs_ctx false for every case: no context opened");

    probe_init(&pr);
    pr.ctx_from = 1000;
    p = pool_of(&pr, 3, 30);
    p.open_ctx = NULL;
    p.close_ctx = NULL;
    p.progress = NULL;
    p.cancel = NULL;
    r = nvw_case_pool_run(&p, NULL);
    tap_ok(r == 0 && each_once(&pr, 30) && pr.ctx_unneeded == 0,
           "no open_ctx, progress or cancel: every case runs with a NULL context");

    probe_init(&pr);
    p = pool_of(&pr, 0, 64);
    r = nvw_case_pool_run(&p, NULL);
    tap_ok(r == 0 && each_once(&pr, 64) && pr.opens == pr.closes && pr.opens >= 1,
           "threads 0: one a CPU, every case once");
}

/* A backend table with only open and close, for the backend callbacks. */
static atomic_int fake_opens, fake_closes;
static int fake_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    if (!strcmp(options, "broken")) {
        snprintf(err, errlen, "option 'broken' is not known");
        return NV_E_INVALID;
    }
    atomic_fetch_add(&fake_opens, 1);
    *ret_ctx = &fake_opens;
    return NV_OK;
}

static void fake_close(void *ctx)
{
    if (ctx == &fake_opens)
        atomic_fetch_add(&fake_closes, 1);
}

/* Case i as JSON: the integer i, made on an opened fake context; NULL for
 * case 7 when the job says so (an out-of-memory case). */
static json_t *json_case(void *job, void *ctx, int64_t i)
{
    const bool *fail7 = job;
    if (ctx != &fake_opens || (*fail7 && i == 7))
        return NULL;
    return json_integer((json_int_t)i);
}

static void test_backend_job(void)
{
    nv_backend table = {.name = "fake", .open = fake_open, .close = fake_close};
    json_t *cases[40] = {NULL};
    bool fail7 = false;
    nvw_run_opts opts = {.threads = 3};
    nvw_case_pool_job pj = {.opts = &opts,
                            .backend = {&table, "", "fake:"},
                            .n = 40,
                            .run = json_case,
                            .job = &fail7,
                            .cases = cases,
                            .what = "widget case"};
    int r = nvw_case_pool_run_job(&pj, NULL);
    int placed = 0;
    for (int i = 0; i < 40; i++) {
        placed += json_integer_value(cases[i]) == i && cases[i];
        json_decref(cases[i]);
        cases[i] = NULL;
    }
    tap_ok(
        r == 0 && placed == 40 && fake_opens == fake_closes && fake_opens >= 1 && fake_opens <= 3,
        "run_job: case i's JSON in slot i for 40 cases, contexts closed (%d opened)", fake_opens);

    fail7 = true;
    opts.threads = 1;
    char *err = NULL;
    r = nvw_case_pool_run_job(&pj, &err);
    placed = 0;
    for (int i = 0; i < 40; i++) {
        placed += cases[i] != NULL;
        json_decref(cases[i]);
    }
    tap_ok(r == -EIO && err && !strcmp(err, "out of memory while running a widget case") &&
               placed == 7,
           "run_job: a NULL case stops the job, named by what ('%s'), 7 cases placed",
           err ? err : "");
    free(err);

    pj.opts = NULL;
    pj.backend.options = "broken";
    pj.backend.spec = "fake:broken";
    err = NULL;
    r = nvw_case_pool_run_job(&pj, &err);
    tap_ok(r == -EIO && err &&
               !strcmp(err, "backend 'fake:broken' failed to open a context: option 'broken' "
                            "is not known"),
           "run_job: a backend that cannot open is named with the backend's detail ('%s')",
           err ? err : "");
    free(err);
}

int main(void)
{
    test_every_index_once();
    test_cancel();
    test_failures();
    test_contexts();
    test_backend_job();
    return tap_done();
}
