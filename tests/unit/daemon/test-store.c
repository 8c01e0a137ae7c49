/* Store: migrations (fresh, reopen, newer database refused), schema rules
 * (STRICT, foreign keys, immutable tolerances), keyset pagination, the JSON of
 * the listings key for key. */
#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/store/store.h"
#include "daemon/store/store_idempotency.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-store-XXXXXX";
static char path[256];

static int sql_int(const char *p, const char *sql)
{
    sqlite3 *db;
    sqlite3_open(p, &db);
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static int sql_exec(const char *p, const char *sql)
{
    sqlite3 *db;
    sqlite3_open(p, &db);
    sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static int count_migrations(void)
{
    DIR *d = opendir(NVD_SCHEMA_DIR);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strlen(e->d_name) > 8 && e->d_name[0] >= '0' && e->d_name[0] <= '9' &&
             !strcmp(e->d_name + strlen(e->d_name) - 4, ".sql");
    if (d)
        closedir(d);
    return n;
}

static void test_migrations(void)
{
    nvd_store *s = NULL;
    char *err = NULL;
    int r = nvd_store_open(path, NULL, &s, &err);
    tap_ok(r == 0, "fresh database opens (%s)", err ? err : "ok");
    /* The binary embeds every schema/NNN_*.sql file, counted here from the tree. */
    int files = count_migrations();
    tap_ok(files >= 1 && nvd_store_latest_version() == files,
           "binary carries the %d migration file(s) of schema/", files);
    tap_ok(nvd_store_user_version(s) == files, "user_version recorded as %d", files);
    nvd_job_new j = {.kind = "op", .op = "exp", .max_attempts = 3, .spec_json = "{}"};
    int64_t id = 0;
    tap_ok(nvd_store_job_insert(s, &j, 1000, &id) == 0 && id == 1, "job inserted with id 1");
    nvd_store_free(s);

    s = NULL;
    r = nvd_store_open(path, NULL, &s, &err);
    json_t *job = NULL;
    tap_ok(r == 0 && nvd_store_job_get(s, 1, &job) == 0, "reopen keeps the job");
    tap_ok(job && !strcmp(json_string_value(json_object_get(job, "state")), "queued"),
           "job still queued after reopen");
    json_decref(job);
    nvd_store_free(s);

    tap_ok(sql_int(path, "SELECT COUNT(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") ==
               1,
           "database is in WAL mode");
    tap_ok(sql_exec(path, "INSERT INTO jobs (state, kind, max_attempts, created_at, spec) "
                          "VALUES ('queued', 'op', 'three', 1, '{}')") != SQLITE_OK,
           "STRICT table refuses a text max_attempts");
    tap_ok(sql_exec(path, "INSERT INTO jobs (state, kind, max_attempts, created_at, spec) "
                          "VALUES ('sleeping', 'op', 1, 1, '{}')") != SQLITE_OK,
           "CHECK refuses an unknown state");
    tap_ok(sql_exec(path, "INSERT INTO cases (job_id, idx, verdict, attempt, data) "
                          "VALUES (999, 0, 'passed', 1, '{}')") != SQLITE_OK,
           "foreign key refuses a case of a missing job");
    tap_ok(sql_exec(path, "INSERT INTO tolerances (op, dtype, mode, version, metric, "
                          "reason_code, reason, author, created_at) VALUES ('exp','fp32','*',"
                          "1,'{}','dtype_precision','why','me',1)") == SQLITE_OK,
           "a tolerance row inserts");
    tap_ok(sql_exec(path, "UPDATE tolerances SET reason = 'changed'") != SQLITE_OK,
           "a tolerance row cannot be updated in place");
    tap_ok(sql_exec(path, "INSERT INTO tolerances (op, dtype, mode, version, metric, "
                          "reason_code, reason, author, created_at) VALUES ('exp','fp32','*',"
                          "2,'{}','dtype_precision','','me',1)") != SQLITE_OK,
           "a tolerance with an empty reason is refused by the schema");

    /* A database from a newer numvald. */
    sql_exec(path, "PRAGMA user_version = 99");
    s = NULL;
    free(err);
    err = NULL;
    r = nvd_store_open(path, NULL, &s, &err);
    tap_ok(r == -EPROTO && s == NULL, "newer database refused (-EPROTO)");
    tap_ok(err && strstr(err, "99") && strstr(err, "newer"), "message names the version: %s",
           err ? err : "(none)");
    free(err);
}

static void test_pagination(void)
{
    char p2[300];
    snprintf(p2, sizeof(p2), "%s/page.db", dir);
    nvd_store *s = NULL;
    nvd_store_open(p2, NULL, &s, NULL);
    for (int i = 0; i < 5; i++) {
        nvd_job_new j = {.kind = i % 2 ? "gradient" : "op", .max_attempts = 1, .spec_json = "{}"};
        int64_t id;
        nvd_store_job_insert(s, &j, 1000 + i, &id);
    }
    nvd_job_filter f = {.limit = 2};
    json_t *a = NULL;
    int64_t next = -1;
    nvd_store_jobs_list(s, &f, &a, &next);
    tap_ok(json_array_size(a) == 2 &&
               json_integer_value(json_object_get(json_array_get(a, 0), "id")) == 5 &&
               json_integer_value(json_object_get(json_array_get(a, 1), "id")) == 4 && next == 4,
           "page 1: ids 5, 4; cursor 4");
    json_decref(a);
    f.cursor = next;
    nvd_store_jobs_list(s, &f, &a, &next);
    tap_ok(json_array_size(a) == 2 &&
               json_integer_value(json_object_get(json_array_get(a, 0), "id")) == 3 && next == 2,
           "page 2: ids 3, 2; cursor 2");
    json_decref(a);
    f.cursor = next;
    nvd_store_jobs_list(s, &f, &a, &next);
    tap_ok(json_array_size(a) == 1 && next == 0, "page 3: id 1, no further cursor");
    json_decref(a);
    nvd_job_filter k = {.kind = "gradient", .limit = 10};
    nvd_store_jobs_list(s, &k, &a, &next);
    tap_ok(json_array_size(a) == 2 &&
               json_integer_value(json_object_get(json_array_get(a, 0), "id")) == 4,
           "kind filter: the 2 gradient jobs (4, 2)");
    json_decref(a);
    nvd_store_free(s);
}

static void test_read_pool(void)
{
    char p2[300];
    snprintf(p2, sizeof(p2), "%s/pool.db", dir);
    nvd_store *w = NULL;
    nvd_store_opts go = {.group_commit = true};
    nvd_store_open(p2, &go, &w, NULL);
    nvd_store_pool *pool = NULL;
    char *err = NULL;
    tap_ok(nvd_store_pool_new(p2, 2, &pool, &err) == 0, "read pool of 2 opens");
    nvd_job_new j = {.kind = "op", .max_attempts = 1, .spec_json = "{}"};
    int64_t id;
    nvd_store_job_insert(w, &j, 1, &id);
    nvd_store *r1 = nvd_store_pool_acquire(pool), *r2 = nvd_store_pool_acquire(pool);
    tap_ok(r1 && r2 && r1 != r2, "two distinct read connections");
    json_t *job = NULL;
    tap_ok(nvd_store_job_get(r1, id, &job) == -ENOENT,
           "an uncommitted group write is invisible to readers");
    nvd_store_commit(w);
    tap_ok(nvd_store_job_get(r1, id, &job) == 0, "visible once committed");
    json_decref(job);
    int64_t id2;
    tap_ok(nvd_store_job_insert(r2, &j, 2, &id2) < 0, "a read connection cannot write");
    nvd_store_pool_release(pool, r1);
    nvd_store_pool_release(pool, r2);
    nvd_store_pool_free(pool);
    nvd_store_free(w);
}

/* The listings' JSON, key for key in order, as docs/API.md shows it: the
 * shape clients parse (store_rows_json and the column tables make it). */
static bool dumps_as(json_t *v, const char *want)
{
    char *got = v ? json_dumps(v, JSON_COMPACT) : NULL;
    bool ok = got && !strcmp(got, want);
    if (!ok)
        tap_diag("got  %s\n# want %s", got ? got : "(null)", want);
    free(got);
    json_decref(v);
    return ok;
}

static void test_listing_json(void)
{
    char p2[300];
    snprintf(p2, sizeof(p2), "%s/json.db", dir);
    nvd_store *s = NULL;
    nvd_store_open(p2, NULL, &s, NULL);
    json_t *a = NULL;
    nvd_store_token_add(s, "alice", "h1", "read", NULL, 1000);
    nvd_store_token_add(s, "bob", "h2", "worker", "emu0,emu1", 2000);
    nvd_store_token_revoke(s, "bob", 3000);
    tap_ok(nvd_store_tokens_list(s, &a) == 0 &&
               dumps_as(a, "[{\"name\":\"alice\",\"scopes\":\"read\",\"created_at\":"
                           "\"1970-01-01T00:00:01.000Z\",\"revoked_at\":null,\"devices\":null},"
                           "{\"name\":\"bob\",\"scopes\":\"worker\",\"created_at\":"
                           "\"1970-01-01T00:00:02.000Z\",\"revoked_at\":"
                           "\"1970-01-01T00:00:03.000Z\",\"devices\":\"emu0,emu1\"}]"),
           "tokens: name, scopes, created_at, revoked_at (null while live), devices (null: any)");
    nvd_store_device_declare(s, "emu0", "emu", 2, 1000);
    json_t *d = json_pack("{s:{s:i}, s:s}", "contract", "v", 1, "mode", "fast");
    nvd_store_device_seen(s, "emu0", d, 4000);
    json_decref(d);
    tap_ok(nvd_store_devices_list(s, &a) == 0 &&
               dumps_as(a, "[{\"name\":\"emu0\",\"backend\":\"emu\",\"slots\":2,\"local\":true,"
                           "\"contract\":{\"v\":1},\"describe\":{\"contract\":{\"v\":1},"
                           "\"mode\":\"fast\"},\"mode\":\"fast\",\"state\":\"online\","
                           "\"quarantine_reason\":null,\"last_crash\":null,\"restarts\":0,"
                           "\"last_seen\":\"1970-01-01T00:00:04.000Z\",\"updated_at\":"
                           "\"1970-01-01T00:00:04.000Z\"}]"),
           "devices: JSON columns parsed, local a boolean, nulls kept");
    nvd_job_new j = {.kind = "op", .op = "add", .max_attempts = 1, .spec_json = "{\"op\":\"add\"}"};
    int64_t id;
    nvd_store_job_insert(s, &j, 1000, &id);
    json_t *c = NULL;
    nvd_store_job_claim(s, "emu0", "tok", 2000, 30000, &c);
    json_decref(c);
    json_t *res = json_pack("{s:s, s:[{s:i, s:s, s:f}, {s:i, s:s}, {s:i, s:s}]}", "verdict",
                            "failed", "cases", "index", 0, "verdict", "passed", "max_ulp", 0.5,
                            "index", 1, "verdict", "failed", "index", 2, "verdict", "passed");
    bool dup;
    nvd_store_job_finish(s, id, "tok", res, 3000, &dup);
    json_decref(res);
    nvd_case_filter cf = {.job_id = id, .cursor = -1, .limit = 2};
    int64_t next = 0;
    bool more = false;
    tap_ok(nvd_store_cases_list(s, &cf, &a, &next, &more) == 0 && next == 1 && more &&
               dumps_as(a, "[{\"index\":0,\"verdict\":\"passed\",\"max_ulp\":0.5,\"id\":1,"
                           "\"job_id\":1,\"tolerance_version\":null,\"build_id\":null,"
                           "\"device\":\"emu0\"},{\"index\":1,\"verdict\":\"failed\",\"id\":2,"
                           "\"job_id\":1,\"tolerance_version\":null,\"build_id\":null,"
                           "\"device\":\"emu0\"}]"),
           "cases: the stored case, then id, job_id, index, tolerance_version, build_id, "
           "device; a page of 2 with more after index 1");
    cf.cursor = next;
    tap_ok(nvd_store_cases_list(s, &cf, &a, &next, &more) == 0 && next == 2 && !more &&
               json_array_size(a) == 1,
           "cases: the last page ends at index 2 with no more");
    json_decref(a);
    nvd_store_free(s);
}

/* Idempotency keys: stored with their job in one write, bounded in count
 * (the oldest dropped) and in time, scoped by principal. */
static void test_idempotency(void)
{
    nvd_store *s = NULL;
    char *err = NULL, p[300];
    snprintf(p, sizeof p, "%s/idem.db", dir);
    int r = nvd_store_open(p, NULL, &s, &err);
    tap_ok(r == 0, "open for idempotency keys (%s)", err ? err : "ok");
    free(err);
    if (r < 0)
        return;
    const char *sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int64_t ids[5];
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        nvd_job_idem k = {.principal = "ci", .key = key, .body_sha256 = sha, .max_keys = 3};
        nvd_job_new j = {.kind = "op", .max_attempts = 1, .spec_json = "{}", .idem = &k};
        r = nvd_store_job_insert(s, &j, 1000 + i, &ids[i]);
        tap_ok(r == 0, "job %d inserted with key %s", i, key);
    }
    int64_t n = -1, job = 0;
    char got[65];
    r = nvd_store_idem_count(s, &n);
    tap_ok(r == 0 && n == 3, "at most 3 keys kept (%lld)", (long long)n);
    tap_ok(nvd_store_idem_get(s, "ci", "k0", 0, &job, got) == -ENOENT &&
               nvd_store_idem_get(s, "ci", "k1", 0, &job, got) == -ENOENT,
           "the two oldest keys were dropped");
    tap_ok(nvd_store_idem_get(s, "ci", "k4", 0, &job, got) == 0 && job == ids[4] &&
               !strcmp(got, sha),
           "the newest key names its job and body hash");
    tap_ok(nvd_store_idem_get(s, "other", "k4", 0, &job, got) == -ENOENT, "keys are per principal");
    tap_ok(nvd_store_idem_get(s, "ci", "k2", 1003, &job, got) == -ENOENT,
           "a key older than the time bound is not found");
    /* A failing job insert (a foreign key to no build) stores no key either. */
    nvd_job_idem k = {.principal = "ci", .key = "bad", .body_sha256 = sha, .max_keys = 3};
    nvd_job_new j = {
        .kind = "op", .max_attempts = 1, .spec_json = "{}", .build_hash = "nope", .idem = &k};
    int64_t id;
    r = nvd_store_job_insert(s, &j, 2000, &id);
    tap_ok(r < 0 && nvd_store_idem_get(s, "ci", "bad", 0, &job, got) == -ENOENT,
           "a job that was not stored leaves no key (%d)", r);
    nvd_job_idem late = {
        .principal = "ci", .key = "late", .body_sha256 = sha, .since = 1004, .max_keys = 100};
    j = (nvd_job_new){.kind = "op", .max_attempts = 1, .spec_json = "{}", .idem = &late};
    r = nvd_store_job_insert(s, &j, 5000, &id);
    if (r == 0)
        r = nvd_store_idem_count(s, &n);
    tap_ok(r == 0 && n == 2, "an insert drops the keys older than its time bound (%lld left)",
           (long long)n);
    nvd_store_free(s);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/numvald.db", dir);
    test_migrations();
    test_pagination();
    test_read_pool();
    test_listing_json();
    test_idempotency();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
