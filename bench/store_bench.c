/* numvald store benchmark: 1,000,000 stored cases, then the list
 * queries the API runs, timed through the store API (nvd_store_*), plus their
 * SQLite query plans.
 *
 * Fill (not timed as a target): 9,000 op/gradient/fused jobs of 100 cases
 * each across 8 devices and 20 builds (one job in five fails, with a tenth of
 * its cases failed), one large job of 100,000 cases with one failure per
 * thousand, and 1,000 queued / 500 cancelled jobs among them. Every job goes
 * through insert -> claim -> finish, the path a worker's upload takes, with
 * writes grouped into one transaction per 100 jobs (group commit) and
 * synchronous=NORMAL: the fill's speed is not what is measured.
 *
 * Timed: each query ITER times with random parameters on a read-only pool
 * connection, as the daemon's threadpool runs them, including json_dumps of
 * the page (the body the HTTP layer sends). Prints p50/p99/max per query and
 * EXPLAIN QUERY PLAN for the SQL text the store uses (copied from
 * daemon/store/store_jobs.c and daemon/store/store_cases.c; the bench fails if a plan
 * scans a table where an index is expected).
 *
 * Usage: store_bench [DB_PATH] (default: a temp file under /var/tmp, removed;
 * an existing DB_PATH that an earlier run filled is reused and kept).
 * Never run by the test suite. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/store/store.h"

#define BIG_CASES_TEXT "100000" /* BIG_CASES, for SQL */
enum { N_JOBS = 9000, CASES_PER_JOB = 100, BIG_CASES = 100000, N_DEV = 8, N_BUILD = 20,
       ITER = 2000, PAGE = 100 };

static const char *const kinds[] = {"op", "gradient", "fused"};
static const char *const ops[] = {"exp", "log", "tanh", "matmul", "softmax", "sum"};
static const char *const dtypes[] = {"fp32", "bf16", "fp16", "fp8_e4m3fn"};
static const char *const inputs[] = {"normal", "near_zero", "specials", "large"};

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) /* splitmix64: reproducible parameters */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void) /* this thread's CPU time: excludes waiting for a core */
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *make_case(int64_t idx, bool failed)
{
    json_t *c = json_pack(
        "{s:I, s:s, s:s, s:s, s:[i,i], s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:I, s:f,"
        " s:{s:s, s:i, s:s, s:s, s:i, s:s}}",
        "index", (json_int_t)idx, "verdict", failed ? "failed" : "passed", "op",
        ops[idx % 6], "dtype", dtypes[idx % 4], "shape", 64, 257, "layout", "contiguous",
        "input", inputs[idx % 4], "seed", 7, "max_ulp", failed ? 12.0 : 0.5, "mean_ulp", 0.11,
        "p99_ulp", 0.49, "max_abs", 1.2e-7, "max_rel", 5.9e-8, "mismatches",
        (json_int_t)(failed ? 17 : 0), "headroom", failed ? -11.0 : 0.5, "tolerance", "metric",
        "ulp", "max_ulp", 1, "reason_code", "approximation_error", "reason",
        "correctly rounded reference; 1 ulp for the device's libm", "version", 1, "source",
        "default");
    if (c && failed) {
        json_object_set_new(c, "failure_class", json_string("ulp_exceeded"));
        json_object_set_new(c, "first_mismatches",
                            json_pack("[{s:[i,i], s:[f], s:f, s:f, s:f, s:f}]", "index", 3, 17,
                                      "inputs", 88.5, "got", 2.7e38, "exact", 2.69e38,
                                      "ulp_error", 12.0, "abs_error", 1e31));
    }
    return c;
}

/* Insert, claim and finish one job with n cases; a case fails when
 * (idx % fail_every) == fail_at (fail_every 0: none fails). */
static int fill_job(nvd_store *s, const char *kind, const char *dev, const char *build, int64_t n,
                    int64_t fail_every, int64_t fail_at, int64_t *ret_id)
{
    nvd_job_new j = {.kind = kind, .op = ops[rnd() % 6], .device = dev, .build_hash = build,
                     .max_attempts = 3,
                     .spec_json = "{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],"
                                  "\"shapes\":[[64,257]],\"seed\":7}"};
    int64_t id;
    int r = nvd_store_job_insert(s, &j, wall_ms(), &id);
    if (r < 0)
        return r;
    json_t *claimed = NULL;
    r = nvd_store_job_claim(s, dev, "lease-bench", wall_ms(), 600000, &claimed);
    if (r < 0)
        return r;
    json_decref(claimed);
    json_t *cases = json_array();
    int64_t nfail = 0;
    for (int64_t i = 0; cases && i < n; i++) {
        bool f = fail_every > 0 && i % fail_every == fail_at;
        nfail += f;
        if (json_array_append_new(cases, make_case(i, f)) < 0) {
            json_decref(cases);
            return -ENOMEM;
        }
    }
    json_t *res = json_pack("{s:s, s:s, s:{s:I, s:I, s:I, s:i}, s:o}", "verdict",
                            nfail ? "failed" : "passed", "kind", kind, "summary", "cases",
                            (json_int_t)n, "passed", (json_int_t)(n - nfail), "failed",
                            (json_int_t)nfail, "errors", 0, "cases", cases);
    if (!res)
        return -ENOMEM;
    bool dup;
    r = nvd_store_job_finish(s, id, "lease-bench", res, wall_ms(), &dup);
    json_decref(res);
    if (r == 0)
        *ret_id = id;
    return r;
}

static int64_t big_job_id;

static int fill(nvd_store *s, char builds[N_BUILD][65])
{
    for (int b = 0; b < N_BUILD; b++) {
        snprintf(builds[b], 65, "%064x", b + 1);
        char ident[128];
        snprintf(ident, sizeof(ident), "{\"name\":\"kernels\",\"version\":\"1.%d\"}", b);
        int r = nvd_store_build_put(s, builds[b], ident, wall_ms());
        if (r < 0)
            return r;
    }
    double t0 = now_ms();
    int64_t cases = 0;
    for (int i = 0; i < N_JOBS; i++) {
        char dev[16];
        snprintf(dev, sizeof(dev), "dev%d", i % N_DEV);
        const char *build = builds[(i / 450) % N_BUILD]; /* builds arrive over time */
        bool fails = rnd() % 5 == 0;
        int64_t id;
        int r = fill_job(s, kinds[i % 3], dev, build, CASES_PER_JOB, fails ? 10 : 0,
                         (int64_t)(rnd() % 10), &id);
        if (r < 0)
            return r;
        cases += CASES_PER_JOB;
        if (i == N_JOBS / 2) { /* the large job sits in the middle of the id range */
            r = fill_job(s, "op", "dev0", build, BIG_CASES, 1000, 999, &big_job_id);
            if (r < 0)
                return r;
            cases += BIG_CASES;
        }
        if (i % 6 == 0 || i % 18 == 1) { /* queued for a device no worker serves; cancelled */
            nvd_job_new q = {.kind = kinds[i % 3], .op = "exp", .device = "idle",
                             .build_hash = build, .max_attempts = 3, .spec_json = "{}"};
            int64_t qid;
            r = nvd_store_job_insert(s, &q, wall_ms(), &qid);
            if (r == 0 && i % 18 == 1)
                r = nvd_store_job_cancel(s, qid, wall_ms());
            if (r < 0)
                return r;
        }
        if (i % 100 == 99 && (r = nvd_store_commit(s)) < 0)
            return r;
        if (i % 1000 == 999)
            fprintf(stderr, "store_bench: %d jobs, %" PRId64 " cases, %.1f s\n", i + 1, cases,
                    (now_ms() - t0) / 1e3);
    }
    int r = nvd_store_commit(s);
    fprintf(stderr, "store_bench: filled %" PRId64 " cases in %.1f s\n", cases,
            (now_ms() - t0) / 1e3);
    return r;
}

/* ---- timing -------------------------------------------------------------- */

typedef struct ctx {
    nvd_store *rd;    /* a read-only pool connection, as the API's list routes use */
    sqlite3 *raw;     /* plain read-only connection: the query without an API route, plans */
    int64_t *failjobs; /* small jobs with failed cases */
    int n_failjobs;
    int64_t max_job, max_case;
    char (*builds)[65];
} ctx;

typedef int (*query_fn)(ctx *c);

static int dump_page(json_t *page, int r)
{
    if (r < 0)
        return r;
    char *body = json_dumps(page, JSON_COMPACT); /* the response body's cost */
    json_decref(page);
    if (!body)
        return -ENOMEM;
    free(body);
    return 0;
}

static int cases_page(ctx *c, int64_t job, const char *verdict, int64_t cursor)
{
    nvd_case_filter f = {.job_id = job, .verdict = verdict, .cursor = cursor, .limit = PAGE};
    json_t *page = NULL;
    int64_t next;
    bool more;
    int r = nvd_store_cases_list(c->rd, &f, &page, &next, &more);
    return dump_page(page, r);
}

static int jobs_page(ctx *c, const char *state, const char *kind, const char *dev,
                     const char *build)
{
    nvd_job_filter f = {.state = state, .kind = kind, .device = dev, .build = build,
                        .cursor = 1 + (int64_t)(rnd() % (uint64_t)c->max_job), .limit = 50};
    json_t *page = NULL;
    int64_t next;
    int r = nvd_store_jobs_list(c->rd, &f, &page, &next);
    return dump_page(page, r);
}

static int64_t some_failjob(ctx *c) { return c->failjobs[rnd() % (uint64_t)c->n_failjobs]; }
static const char *some_dev(void)
{
    static char d[16];
    snprintf(d, sizeof(d), "dev%d", (int)(rnd() % N_DEV));
    return d;
}

static int q_case_failed(ctx *c) { return cases_page(c, some_failjob(c), "failed", -1); }
static int q_case_passed(ctx *c)
{
    return cases_page(c, some_failjob(c), "passed", (int64_t)(rnd() % 50) - 1);
}
static int q_big_failed(ctx *c)
{
    return cases_page(c, big_job_id, "failed", (int64_t)(rnd() % BIG_CASES));
}
static int q_big_all(ctx *c)
{
    return cases_page(c, big_job_id, NULL, (int64_t)(rnd() % (BIG_CASES - PAGE)));
}
static int q_jobs_all(ctx *c) { return jobs_page(c, NULL, NULL, NULL, NULL); }
static int q_jobs_failed(ctx *c) { return jobs_page(c, "failed", NULL, NULL, NULL); }
static int q_jobs_queued(ctx *c) { return jobs_page(c, "queued", NULL, NULL, NULL); }
static int q_jobs_kind(ctx *c) { return jobs_page(c, NULL, "gradient", NULL, NULL); }
static int q_jobs_dev(ctx *c) { return jobs_page(c, NULL, NULL, some_dev(), NULL); }
static int q_jobs_build(ctx *c)
{
    return jobs_page(c, NULL, NULL, NULL, c->builds[rnd() % N_BUILD]);
}
static int q_jobs_combo(ctx *c)
{
    return jobs_page(c, "failed", "op", some_dev(), c->builds[rnd() % N_BUILD]);
}
static int q_job_get(ctx *c)
{
    json_t *j = NULL;
    int r = nvd_store_job_get(c->rd, 1 + (int64_t)(rnd() % (uint64_t)c->max_job), &j);
    return dump_page(j, r);
}
static int q_case_get(ctx *c)
{
    json_t *j = NULL;
    int r = nvd_store_case_get(c->rd, 1 + (int64_t)(rnd() % (uint64_t)c->max_case), &j);
    return dump_page(j, r);
}

/* Failed cases of every job, newest first: no API route runs this (the API
 * lists cases per job); measured because a dashboard would want it. */
static const char recent_failed_sql[] =
    "SELECT c.id, c.job_id, c.idx, c.data FROM cases c WHERE c.verdict = 'failed' AND c.id < ?1 "
    "ORDER BY c.id DESC LIMIT 100";
static int q_recent_failed(ctx *c)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c->raw, recent_failed_sql, -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    sqlite3_bind_int64(st, 1, 1 + (int64_t)(rnd() % (uint64_t)c->max_case));
    size_t bytes = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        bytes += (size_t)sqlite3_column_bytes(st, 3);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE && bytes > 0 ? 0 : -EIO;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs fn n times; prints wall p50/p99/max and CPU-time p50/p99 in ms. The
 * machine is shared and loaded: wall time includes waiting for a core, CPU time
 * is what the query itself costs. */
static int time_query(ctx *c, const char *name, query_fn fn, int n, double *ret_p99)
{
    static double t[ITER], u[ITER];
    for (int i = 0; i < n; i++) {
        double t0 = now_ms(), u0 = cpu_ms();
        int r = fn(c);
        u[i] = cpu_ms() - u0;
        t[i] = now_ms() - t0;
        if (r < 0) {
            fprintf(stderr, "store_bench: '%s' failed: %s\n", name, strerror(-r));
            return r;
        }
    }
    qsort(t, (size_t)n, sizeof(t[0]), cmp_d);
    qsort(u, (size_t)n, sizeof(u[0]), cmp_d);
    printf("| %-52s | %5d | %7.3f | %7.3f | %8.3f | %7.3f | %7.3f |\n", name, n, t[n / 2],
           t[n * 99 / 100], t[n - 1], u[n / 2], u[n * 99 / 100]);
    fflush(stdout);
    *ret_p99 = t[n * 99 / 100];
    return 0;
}

/* ---- plans --------------------------------------------------------------- */

#define JOB_COLS                                                                                   \
    "id, state, kind, op, device, build_hash, priority, attempt, max_attempts, cases_total, "      \
    "cases_done, cases_passed, cases_failed, created_at, started_at, finished_at, error, spec, "   \
    "leased_by, result"
#define CASE_SELECT                                                                                \
    "SELECT c.id, c.job_id, c.idx, c.tolerance_version, c.data, j.build_hash, j.leased_by "        \
    "FROM cases c JOIN jobs j ON j.id = c.job_id "

static int explain(sqlite3 *db, const char *sql, const char *must_not)
{
    char *q = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st;
    int r = 0;
    if (!q || sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "store_bench: cannot explain '%s': %s\n", sql, sqlite3_errmsg(db));
        sqlite3_free(q);
        return -EIO;
    }
    printf("\n    %s\n", sql);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 3);
        printf("      -> %s\n", d);
        if (must_not && strstr(d, must_not)) {
            fprintf(stderr, "store_bench: plan '%s' for '%s' is not index-driven\n", d, sql);
            r = -EINVAL;
        }
    }
    sqlite3_finalize(st);
    sqlite3_free(q);
    return r;
}

static int plans(sqlite3 *db)
{
    static const char *const jobs_sql[] = {
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 ORDER BY id DESC LIMIT ?6",
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 AND state = ?1 ORDER BY id DESC LIMIT ?6",
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 AND kind = ?2 ORDER BY id DESC LIMIT ?6",
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 AND device = ?3 ORDER BY id DESC LIMIT ?6",
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 AND build_hash = ?4 ORDER BY id DESC LIMIT ?6",
        "SELECT " JOB_COLS " FROM jobs WHERE id < ?5 AND state = ?1 AND kind = ?2 AND device = ?3 "
        "AND build_hash = ?4 ORDER BY id DESC LIMIT ?6",
    };
    static const char *const cases_sql[] = {
        CASE_SELECT "WHERE c.job_id = ?1 AND c.verdict = ?2 AND c.idx > ?3 ORDER BY c.idx LIMIT ?4",
        CASE_SELECT "WHERE c.job_id = ?1 AND c.idx > ?3 ORDER BY c.idx LIMIT ?4",
        CASE_SELECT "WHERE c.id = ?1",
    };
    printf("\nEXPLAIN QUERY PLAN (the store's SQL texts):\n");
    int r = 0;
    for (size_t i = 0; i < sizeof(jobs_sql) / sizeof(jobs_sql[0]); i++)
        r |= explain(db, jobs_sql[i], "USE TEMP B-TREE");
    for (size_t i = 0; i < sizeof(cases_sql) / sizeof(cases_sql[0]); i++)
        r |= explain(db, cases_sql[i], "SCAN c");
    r |= explain(db,
                 "SELECT id FROM jobs INDEXED BY jobs_queue WHERE state = 'queued' AND "
                 "(device IS NULL OR device = ?1) ORDER BY priority DESC, id LIMIT 1",
                 "USE TEMP B-TREE");
    printf("\n  not an API route (failed cases of all jobs, newest first):\n");
    r |= explain(db, recent_failed_sql, NULL);
    return r ? -EINVAL : 0;
}

/* ---- claim with a deep queue ------------------------------------------------ */

static nvd_store *wr; /* the write connection, as the event loop holds it */

static int q_claim(ctx *c)
{
    (void)c;
    json_t *j = NULL;
    int r = nvd_store_job_claim(wr, "dev0", "lease-claim", wall_ms(), 600000, &j);
    json_decref(j);
    if (r == 0)
        r = nvd_store_commit(wr); /* the loop commits once per turn */
    return r;
}

/* 100,000 more queued jobs (any device, priorities -2..2), then claims as a
 * worker for dev0 makes them: each claim picks the best queued job. */
static int claims(const char *path)
{
    nvd_store_opts o = {.group_commit = true, .sync_full = false};
    char *err = NULL;
    int r = nvd_store_open(path, &o, &wr, &err);
    for (int i = 0; r == 0 && i < 100000; i++) {
        nvd_job_new q = {.kind = "op", .op = "exp", .priority = (int)(rnd() % 5) - 2,
                         .max_attempts = 3, .spec_json = "{}"};
        int64_t id;
        r = nvd_store_job_insert(wr, &q, wall_ms(), &id);
        if (r == 0 && i % 1000 == 999)
            r = nvd_store_commit(wr);
    }
    if (r == 0)
        r = nvd_store_commit(wr);
    if (r == 0) {
        printf("\nclaims with 101,000 queued jobs (write connection, commit per claim, "
               "synchronous=NORMAL):\n\n");
        double p99;
        r = time_query(NULL, "claim the best queued job for dev0", q_claim, 500, &p99);
    }
    if (r < 0)
        fprintf(stderr, "store_bench: claims: %s\n", err ? err : strerror(-r));
    free(err);
    nvd_store_free(wr);
    return r;
}

/* ---- main ---------------------------------------------------------------- */

static int load_ids(sqlite3 *db, ctx *c)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT id FROM jobs WHERE cases_total = 100 AND cases_failed > 0 "
                           "ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    c->failjobs = malloc(sizeof(int64_t) * N_JOBS);
    if (!c->failjobs) {
        sqlite3_finalize(st);
        return -ENOMEM;
    }
    while (sqlite3_step(st) == SQLITE_ROW && c->n_failjobs < N_JOBS)
        c->failjobs[c->n_failjobs++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    const char *mx[3] = {"SELECT MAX(id) FROM jobs", "SELECT MAX(id) FROM cases",
                         "SELECT MIN(id) FROM jobs WHERE cases_total = " BIG_CASES_TEXT};
    int64_t *out[3] = {&c->max_job, &c->max_case, &big_job_id};
    for (int i = 0; i < 3; i++) {
        if (sqlite3_prepare_v2(db, mx[i], -1, &st, NULL) != SQLITE_OK)
            return -EIO;
        if (sqlite3_step(st) == SQLITE_ROW)
            *out[i] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return c->n_failjobs > 0 && c->max_job > 0 && c->max_case > 0 && big_job_id > 0 ? 0 : -EIO;
}

static const struct {
    const char *name;
    query_fn fn;
    int n;
} queries[] = {
    {"cases of a job, verdict=failed, first page", q_case_failed, ITER},
    {"cases of a job, verdict=passed, cursor", q_case_passed, ITER},
    {"cases of the 100k-case job, verdict=failed, cursor", q_big_failed, ITER},
    {"cases of the 100k-case job, all, deep cursor", q_big_all, ITER},
    {"jobs, no filter, cursor", q_jobs_all, ITER},
    {"jobs, state=failed, cursor", q_jobs_failed, ITER},
    {"jobs, state=queued, cursor", q_jobs_queued, ITER},
    {"jobs, kind=gradient, cursor", q_jobs_kind, ITER},
    {"jobs, device=devN, cursor", q_jobs_dev, ITER},
    {"jobs, build=B, cursor", q_jobs_build, ITER},
    {"jobs, state+kind+device+build, cursor", q_jobs_combo, ITER},
    {"GET one job (by id)", q_job_get, ITER},
    {"GET one case (by id)", q_case_get, ITER},
    {"failed cases of all jobs, newest first (no route)", q_recent_failed, 200},
};

int main(int argc, char **argv)
{
    char path[4096], tmpdir[] = "/var/tmp/numval-store-bench.XXXXXX";
    bool own = argc < 2;
    if (own) {
        if (!mkdtemp(tmpdir)) {
            perror("store_bench: mkdtemp");
            return 2;
        }
        snprintf(path, sizeof(path), "%s/numvald.db", tmpdir);
    } else {
        snprintf(path, sizeof(path), "%s", argv[1]);
    }
    static char builds[N_BUILD][65];
    nvd_store_opts o = {.group_commit = true, .sync_full = false};
    nvd_store *s = NULL;
    nvd_store_pool *pool = NULL;
    ctx c = {.builds = builds};
    char *err = NULL;
    bool reuse = !own && access(path, F_OK) == 0; /* a database a previous run filled */
    int r = nvd_store_open(path, &o, &s, &err);
    if (r == 0 && !reuse)
        r = fill(s, builds);
    for (int b = 0; reuse && b < N_BUILD; b++)
        snprintf(builds[b], 65, "%064x", b + 1);
    nvd_store_free(s);
    if (r == 0)
        r = nvd_store_pool_new(path, 1, &pool, &err);
    if (r == 0 && sqlite3_open_v2(path, &c.raw, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        r = -EIO;
    if (r == 0)
        r = load_ids(c.raw, &c);
    if (r < 0) {
        fprintf(stderr, "store_bench: %s\n", err ? err : strerror(-r));
        goto out;
    }
    c.rd = nvd_store_pool_acquire(pool);
    printf("store_bench: %" PRId64 " jobs, %" PRId64 " cases (one job of %d), %d iterations "
           "per query, random parameters; ms per call including json_dumps of the page\n\n",
           c.max_job, c.max_case, BIG_CASES, ITER);
    printf("| %-52s | %5s | %7s | %7s | %8s | %7s | %7s |\n", "query", "calls", "p50 ms",
           "p99 ms", "max ms", "cpu p50", "cpu p99");
    printf("|------------------------------------------------------|-------|---------|---------|"
           "----------|---------|---------|\n");
    double worst = 0;
    for (size_t i = 0; r == 0 && i < sizeof(queries) / sizeof(queries[0]); i++) {
        double p99;
        r = time_query(&c, queries[i].name, queries[i].fn, queries[i].n ? queries[i].n : ITER,
                       &p99);
        if (r == 0 && p99 > worst && queries[i].fn != q_recent_failed)
            worst = p99;
    }
    nvd_store_pool_release(pool, c.rd);
    int rp = 0; /* a plan that is not index-driven fails the run, after the claims */
    if (r == 0) {
        printf("\nworst wall p99 of the API's queries: %.3f ms\n", worst);
        rp = plans(c.raw);
        r = claims(path);
    }
    if (r == 0)
        r = rp;
out:
    free(err);
    free(c.failjobs);
    sqlite3_close(c.raw);
    nvd_store_pool_free(pool);
    if (own) {
        const char *sfx[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char p[4200];
            snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
            unlink(p);
        }
        rmdir(tmpdir);
    }
    return r < 0 ? 1 : 0;
}
