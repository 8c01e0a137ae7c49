/* Promotion is atomic with the result upload (store_suite.h
 * nvd_store_job_finish_then + promote.c): a numvald that dies before the
 * result's write commits leaves the job leased, and the worker's retried upload
 * stores it AND promotes it; a result stored without its promotion (numvald
 * before this change died between the two) is promoted by the retried
 * (duplicate) upload; every retry after that records nothing twice. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/promote.h"
#include "daemon/store/store.h"
#include "daemon/store/store_suite.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-promote-XXXXXX";
static char path[256];

#define SIG_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ART_A "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* Counted with a connection of its own: what a restarted numvald would see. */
static int sql_int(const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static nvd_store *open_store(bool group)
{
    nvd_store_opts o = {.group_commit = group};
    nvd_store *s = NULL;
    char *err = NULL;
    if (nvd_store_open(path, &o, &s, &err) < 0) {
        tap_diag("open: %s", err ? err : "?");
        free(err);
        return NULL;
    }
    return s;
}

/* A queued op job leased with token tok; its id. */
static int64_t leased_job(nvd_store *s, const char *tok)
{
    nvd_job_new j = {.kind = "op", .op = "sum", .max_attempts = 3, .spec_json = "{}"};
    int64_t id = 0;
    json_t *claim = NULL;
    if (nvd_store_job_insert(s, &j, 1000, &id) < 0 ||
        nvd_store_job_claim(s, "dev0", tok, 1001, 60000, &claim) < 0)
        return -1;
    json_decref(claim);
    return id;
}

/* A failed result whose case 0 carries a minimized reproducer of signature A. */
static json_t *failed_result(void)
{
    return json_pack("{s:s, s:s, s:s, s:[{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:s}}]}", "verdict",
                     "failed", "kind", "op", "op", "sum", "cases", "index", 0, "verdict", "failed",
                     "op", "sum", "dtype", "fp32", "minimized_artifact", ART_A, "signature", "id",
                     SIG_A, "failure_class", "ulp_exceeded");
}

typedef struct upload {
    int64_t job_id;
    json_t *result;
    int fail; /* 0, or the error then returns (a store error inside promotion) */
} upload;

static int then_promote(nvd_store *s, void *ud, bool dup)
{
    (void)dup;
    upload *u = ud;
    if (u->fail)
        return u->fail;
    return nvd_promote_result(s, u->job_id, u->result, 2000);
}

/* What the result route does (api_worker.c): store and promote in one write. */
static int upload_result(nvd_store *s, upload *u, const char *tok, bool *dup)
{
    return nvd_store_job_finish_then(s, u->job_id, tok, u->result, 2000, then_promote, u, dup);
}

static int job_leased(int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT state = 'leased' FROM jobs WHERE id = %lld", (long long)id);
    return sql_int(sql);
}

static int occurrences_of_job(int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM suite_occurrences WHERE job_id = %lld",
             (long long)id);
    return sql_int(sql);
}

/* numvald dies after storing the result and promoting it in its group
 * transaction but before the commit (and so before the 200 went out). */
static void test_crash_then_retry(nvd_store *s)
{
    upload u = {.job_id = leased_job(s, "tok1"), .result = failed_result()};
    tap_ok(u.job_id > 0 && u.result, "job 1 leased to the worker");
    pid_t pid = fork();
    if (pid == 0) {
        nvd_store *c = open_store(true);
        bool dup = true;
        int r = c ? upload_result(c, &u, "tok1", &dup) : -EIO;
        _exit(r == 0 && !dup && nvd_store_pending(c) ? 0 : 1); /* no commit: a crash */
    }
    int st = -1;
    waitpid(pid, &st, 0);
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the crashing numvald stored and promoted");
    tap_ok(job_leased(u.job_id) == 1, "after the crash the job is still leased (nothing kept)");
    tap_ok(sql_int("SELECT COUNT(*) FROM suite_cases") == 0, "and no suite case was kept");

    bool dup = true;
    int r = upload_result(s, &u, "tok1", &dup);
    tap_ok(r == 0 && !dup, "the retried upload is stored as the first (r=%d)", r);
    tap_ok(job_leased(u.job_id) == 0, "job 1 finished");
    tap_ok(sql_int("SELECT COUNT(*) FROM suite_cases") == 1, "signature A promoted once");
    tap_ok(occurrences_of_job(u.job_id) == 1, "one occurrence for job 1");

    r = upload_result(s, &u, "tok1", &dup);
    tap_ok(r == 0 && dup, "a second retry is a duplicate");
    tap_ok(sql_int("SELECT COUNT(*) FROM suite_cases") == 1 &&
               sql_int("SELECT occurrences FROM suite_cases") == 1 &&
               occurrences_of_job(u.job_id) == 1,
           "and records nothing twice (1 case, 1 occurrence)");
    json_decref(u.result);
}

/* The result was committed without its promotion (the window numvald had when
 * promotion ran in a write of its own): the duplicate upload promotes it. */
static void test_stored_without_promotion(nvd_store *s)
{
    upload u = {.job_id = leased_job(s, "tok2"), .result = failed_result()};
    bool dup = true;
    int r = nvd_store_job_finish(s, u.job_id, "tok2", u.result, 2000, &dup);
    tap_ok(r == 0 && !dup && occurrences_of_job(u.job_id) == 0,
           "job 2 stored without its promotion");
    r = upload_result(s, &u, "tok2", &dup);
    tap_ok(r == 0 && dup, "the retried upload is a duplicate");
    tap_ok(occurrences_of_job(u.job_id) == 1, "and records job 2's occurrence");
    tap_ok(sql_int("SELECT COUNT(*) FROM suite_cases") == 1 &&
               sql_int("SELECT occurrences FROM suite_cases") == 2,
           "the known signature counts 2 occurrences, still 1 suite case");
    r = upload_result(s, &u, "tok2", &dup);
    tap_ok(r == 0 && dup && sql_int("SELECT occurrences FROM suite_cases") == 2 &&
               occurrences_of_job(u.job_id) == 1,
           "another retry counts nothing");
    json_decref(u.result);
}

/* A store error during promotion rolls the result back with it. */
static void test_promotion_error_rolls_back(nvd_store *s)
{
    upload u = {.job_id = leased_job(s, "tok3"), .result = failed_result(), .fail = -EIO};
    bool dup = true;
    int r = upload_result(s, &u, "tok3", &dup);
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM cases WHERE job_id = %lld",
             (long long)u.job_id);
    tap_ok(r == -EIO && job_leased(u.job_id) == 1 && sql_int(sql) == 0,
           "a failing promotion leaves job 3 leased with no cases (r=%d)", r);
    u.fail = 0;
    r = upload_result(s, &u, "tok3", &dup);
    tap_ok(r == 0 && !dup && job_leased(u.job_id) == 0 && occurrences_of_job(u.job_id) == 1 &&
               sql_int("SELECT occurrences FROM suite_cases") == 3,
           "its retry stores and promotes (3 occurrences)");
    json_decref(u.result);
}

#define SIG_F "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
#define ART_F "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

/* A failed fused result: the case's own op is "fused" and its dtype the case
 * dtype; its signature names the first divergent op and its judged dtype. */
static json_t *fused_result(void)
{
    return json_pack("{s:s, s:s, s:[{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, "
                     "s:s}}]}",
                     "verdict", "failed", "kind", "fused", "cases", "index", 0, "verdict", "failed",
                     "op", "fused", "dtype", "bf16", "minimized_artifact", ART_F, "signature", "id",
                     SIG_F, "kind", "fused", "op", "matmul", "dtype", "fp32", "case_dtype", "bf16",
                     "failure_class", "bound_exceeded");
}

/* A fused failure is promoted once, named by its signature (kind fused, op
 * matmul, dtype fp32), and a second job with the same signature records an
 * occurrence, never a second suite case. */
static void test_fused(nvd_store *s)
{
    int before = sql_int("SELECT COUNT(*) FROM suite_cases");
    upload u1 = {.job_id = leased_job(s, "tokf1"), .result = fused_result()};
    upload u2 = {.job_id = leased_job(s, "tokf2"), .result = fused_result()};
    bool dup = true;
    int r = upload_result(s, &u1, "tokf1", &dup);
    tap_ok(r == 0 && sql_int("SELECT COUNT(*) FROM suite_cases") == before + 1,
           "fused failure promoted to a new suite case (r=%d)", r);
    json_t *list = NULL;
    json_t *fc = NULL;
    size_t i;
    json_t *e;
    if (nvd_store_suite_list(s, NULL, &list) < 0)
        list = NULL;
    json_array_foreach(list, i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "signature")), SIG_F))
            fc = e;
    }
    const char *kind = json_string_value(json_object_get(fc, "kind"));
    const char *op = json_string_value(json_object_get(fc, "op"));
    const char *dt = json_string_value(json_object_get(fc, "dtype"));
    tap_ok(kind && op && dt && !strcmp(kind, "fused") && !strcmp(op, "matmul") &&
               !strcmp(dt, "fp32"),
           "listed as kind fused, op matmul, dtype fp32 (%s %s %s)", kind ? kind : "-",
           op ? op : "-", dt ? dt : "-");
    json_t *first = json_array_get(list, 0);
    tap_ok(first && !strcmp(json_string_value(json_object_get(first, "kind")), "op"),
           "an op case is listed as kind op");
    json_decref(list);
    json_t *act = NULL;
    r = nvd_store_suite_active(s, NULL, "matmul", NULL, NULL, &act);
    tap_ok(r == 0 && json_array_size(act) == 1 &&
               !strcmp(json_string_value(json_object_get(json_array_get(act, 0), "kind")), "fused"),
           "a suite job filtered by op matmul selects it, with kind fused");
    json_decref(act);
    act = NULL;
    json_t *act_op = NULL;
    r = nvd_store_suite_active(s, "fused", NULL, NULL, NULL, &act);
    int r2 = nvd_store_suite_active(s, "op", NULL, NULL, NULL, &act_op);
    tap_ok(r == 0 && r2 == 0 && json_array_size(act) == 1 && json_array_size(act_op) == 1 &&
               !strcmp(json_string_value(json_object_get(json_array_get(act_op, 0), "signature")),
                       SIG_A),
           "filtered by kind: fused selects the fused case, op the op case");
    json_decref(act);
    json_decref(act_op);
    r = upload_result(s, &u2, "tokf2", &dup);
    tap_ok(r == 0 && sql_int("SELECT COUNT(*) FROM suite_cases") == before + 1 &&
               sql_int("SELECT occurrences FROM suite_cases WHERE op = 'matmul'") == 2,
           "a second fused job with the same signature: occurrence 2, no new case");
    json_decref(u1.result);
    json_decref(u2.result);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/numval.db", dir);
    nvd_store *s = open_store(false);
    tap_ok(s != NULL, "store opens");
    if (s) {
        test_crash_then_retry(s);
        test_stored_without_promotion(s);
        test_promotion_error_rolls_back(s);
        test_fused(s);
    }
    nvd_store_free(s);
    char p[300];
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
    return tap_done();
}
