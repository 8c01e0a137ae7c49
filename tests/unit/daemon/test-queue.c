/* Queue lifecycle under a fake clock: leases, expiry and requeue with the
 * attempt counter, max attempts, priorities, device targeting, cancel,
 * idempotent results, depth limit and tolerance resolution. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/queue.h"
#include "daemon/store/store.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-queue-XXXXXX";

static nvd_store *open_db(const char *name)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s.db", dir, name);
    nvd_store *s = NULL;
    char *err = NULL;
    if (nvd_store_open(p, NULL, &s, &err) < 0) {
        tap_diag("open: %s", err);
        exit(1);
    }
    return s;
}

static const char *state_of(nvd_store *s, int64_t id, char buf[32])
{
    json_t *j = NULL;
    buf[0] = '\0';
    if (nvd_store_job_get(s, id, &j) == 0)
        snprintf(buf, 32, "%s", json_string_value(json_object_get(j, "state")));
    json_decref(j);
    return buf;
}

static int64_t submit(nvd_queue *q, const char *device, int prio, int max_attempts,
                      const char *spec, int64_t now)
{
    nvd_job_new j = {.kind = "op",
                     .op = "exp",
                     .device = device,
                     .priority = prio,
                     .max_attempts = max_attempts,
                     .spec_json = spec ? spec : "{}"};
    int64_t id = -1;
    int r = nvd_queue_submit(q, &j, now, &id);
    return r < 0 ? r : id;
}

static void test_leases(void)
{
    nvd_store *s = open_db("leases");
    nvd_queue_opts o = {.max_depth = 100, .lease_ms = 100};
    nvd_queue *q = NULL;
    nvd_queue_new(NULL, s, &o, &q);
    char st[32];
    int64_t id = submit(q, NULL, 0, 2, NULL, 1000);
    json_t *c1 = NULL, *c2 = NULL;
    tap_ok(nvd_queue_claim(q, "d0", NULL, 1000, &c1) == 0, "claim at t=1000");
    tap_ok(json_integer_value(json_object_get(c1, "attempt")) == 1, "attempt 1");
    tap_ok(!strcmp(state_of(s, id, st), "leased"), "job leased");
    int rq = -1, er = -1;
    nvd_queue_expire(q, 1100, &rq, &er);
    tap_ok(rq == 0 && er == 0, "lease (expires 1100) still held at t=1100");
    bool cancel = true;
    const char *tok1 = json_string_value(json_object_get(c1, "lease_token"));
    tap_ok(nvd_store_job_heartbeat(s, id, tok1, 1, 4, 1050, 100, &cancel) == 0 && !cancel,
           "heartbeat at 1050 extends the lease to 1150");
    tap_ok(!strcmp(state_of(s, id, st), "running"), "first heartbeat: running");
    nvd_queue_expire(q, 1149, &rq, &er);
    tap_ok(rq == 0, "not expired at 1149");
    nvd_queue_expire(q, 1151, &rq, &er);
    tap_ok(rq == 1 && er == 0, "expired at 1151: requeued");
    tap_ok(!strcmp(state_of(s, id, st), "queued"), "job queued again");
    tap_ok(nvd_store_job_heartbeat(s, id, tok1, 2, 4, 1152, 100, &cancel) == -ESTALE,
           "old lease's heartbeat refused (-ESTALE)");
    tap_ok(nvd_queue_claim(q, "d1", NULL, 1200, &c2) == 0 &&
               json_integer_value(json_object_get(c2, "attempt")) == 2,
           "second claim is attempt 2");
    const char *tok2 = json_string_value(json_object_get(c2, "lease_token"));
    tap_ok(strcmp(tok1, tok2) != 0, "a new lease token");
    json_t *res = json_pack("{s:s, s:[]}", "verdict", "passed", "cases");
    bool dup;
    tap_ok(nvd_store_job_finish(s, id, tok1, res, 1210, &dup) == -ESTALE,
           "result under the old lease refused");
    nvd_queue_expire(q, 1301, &rq, &er);
    tap_ok(rq == 0 && er == 1, "second expiry with max_attempts 2: error");
    json_t *j = NULL;
    nvd_store_job_get(s, id, &j);
    const char *e = json_string_value(json_object_get(j, "error"));
    tap_ok(!strcmp(state_of(s, id, st), "error") && e && strstr(e, "attempt 2 of 2") &&
               strstr(e, "'d1'"),
           "state error, reason: %s", e ? e : "(null)");
    json_decref(j);
    json_decref(res);
    json_decref(c1);
    json_decref(c2);
    nvd_queue_free(q);
    nvd_store_free(s);
}

static void test_order_and_cancel(void)
{
    nvd_store *s = open_db("order");
    nvd_queue_opts o = {.max_depth = 4, .lease_ms = 1000};
    nvd_queue *q = NULL;
    nvd_queue_new(NULL, s, &o, &q);
    int64_t low = submit(q, NULL, 0, 3, NULL, 1);
    int64_t high = submit(q, NULL, 5, 3, NULL, 2);
    int64_t low2 = submit(q, NULL, 0, 3, NULL, 3);
    int64_t only_a = submit(q, "a", 9, 3, NULL, 4);
    tap_ok(submit(q, NULL, 0, 3, NULL, 5) == -EAGAIN, "fifth job refused: depth limit 4");
    tap_ok(nvd_queue_depth(q) == 4, "depth 4");
    json_t *c = NULL;
    nvd_queue_claim(q, "b", NULL, 10, &c);
    tap_ok(json_integer_value(json_object_get(c, "id")) == high,
           "device b gets the priority-5 job, not device a's priority-9 job");
    json_decref(c);
    tap_ok(nvd_queue_cancel(q, low, 11) == 0, "cancel a queued job");
    tap_ok(nvd_queue_cancel(q, low, 12) == -EALREADY, "cancelling it again: -EALREADY");
    tap_ok(nvd_queue_cancel(q, 999, 12) == -ENOENT, "cancel a missing job: -ENOENT");
    nvd_queue_claim(q, "b", NULL, 13, &c);
    tap_ok(json_integer_value(json_object_get(c, "id")) == low2, "then FIFO: the later job");
    json_decref(c);
    tap_ok(nvd_queue_claim(q, "b", NULL, 14, &c) == -ENOENT, "nothing left for device b");
    nvd_queue_claim(q, "a", NULL, 15, &c);
    tap_ok(json_integer_value(json_object_get(c, "id")) == only_a, "device a gets its job");
    /* Cancel while leased: the heartbeat says so and the result is refused. */
    const char *tok = json_string_value(json_object_get(c, "lease_token"));
    nvd_queue_cancel(q, only_a, 16);
    bool cancel = false, dup = false;
    tap_ok(nvd_store_job_heartbeat(s, only_a, tok, 0, 1, 17, 1000, &cancel) == 0 && cancel,
           "heartbeat of a cancelled job: cancel = true");
    json_t *res = json_pack("{s:s}", "verdict", "passed");
    tap_ok(nvd_store_job_finish(s, only_a, tok, res, 18, &dup) == -ECANCELED,
           "result of a cancelled job refused");
    json_decref(res);
    json_decref(c);
    nvd_queue_free(q);
    nvd_store_free(s);
}

static void test_idempotent_result(void)
{
    nvd_store *s = open_db("result");
    nvd_queue_opts o = {.max_depth = 10, .lease_ms = 1000};
    nvd_queue *q = NULL;
    nvd_queue_new(NULL, s, &o, &q);
    int64_t id = submit(q, NULL, 0, 3, NULL, 1);
    json_t *c = NULL;
    nvd_queue_claim(q, "d", NULL, 2, &c);
    const char *tok = json_string_value(json_object_get(c, "lease_token"));
    json_t *res =
        json_pack("{s:s, s:[{s:i, s:s, s:f, s:{s:i}}, {s:i, s:s, s:f}]}", "verdict", "failed",
                  "cases", "index", 0, "verdict", "passed", "max_ulp", 0.5, "tolerance", "version",
                  3, "index", 1, "verdict", "failed", "max_ulp", 7.0);
    bool dup = true;
    tap_ok(nvd_store_job_finish(s, id, tok, res, 3, &dup) == 0 && !dup, "result stored");
    tap_ok(nvd_store_job_finish(s, id, tok, res, 4, &dup) == 0 && dup,
           "same upload again: accepted as a duplicate");
    nvd_case_filter f = {.job_id = id, .cursor = -1, .limit = 100};
    json_t *cases = NULL;
    int64_t last;
    bool more;
    nvd_store_cases_list(s, &f, &cases, &last, &more);
    tap_ok(json_array_size(cases) == 2, "2 cases stored, not 4");
    tap_ok(json_integer_value(json_object_get(json_array_get(cases, 0), "tolerance_version")) == 3,
           "case 0 records tolerance version 3");
    json_decref(cases);
    f.verdict = "failed";
    nvd_store_cases_list(s, &f, &cases, &last, &more);
    tap_ok(json_array_size(cases) == 1 &&
               json_integer_value(json_object_get(json_array_get(cases, 0), "index")) == 1,
           "verdict filter: case 1 only");
    json_decref(cases);
    json_t *j = NULL;
    nvd_store_job_get(s, id, &j);
    tap_ok(!strcmp(json_string_value(json_object_get(j, "state")), "failed") &&
               json_integer_value(json_object_get(j, "cases_passed")) == 1 &&
               json_integer_value(json_object_get(j, "cases_failed")) == 1,
           "job failed with 1 passed, 1 failed");
    json_decref(j);
    tap_ok(nvd_store_job_finish(s, id, "other", res, 5, &dup) == -ESTALE,
           "another token after the end: -ESTALE");
    json_decref(res);
    json_decref(c);
    nvd_queue_free(q);
    nvd_store_free(s);
}

static void add_tol(nvd_store *s, const char *mode, const char *metric)
{
    nvd_tolerance_new t = {.op = "exp",
                           .dtype = "bf16",
                           .mode = mode,
                           .metric_json = metric,
                           .reason_code = "approximation_error",
                           .reason = "test",
                           .author = "t"};
    json_t *row = NULL;
    nvd_store_tolerance_add(s, &t, 1, &row);
    json_decref(row);
}

static int64_t claimed_version(nvd_queue *q, const char *spec, const char *mode_json)
{
    submit(q, NULL, 0, 3, spec, 1);
    json_t *mode = json_loads(mode_json, 0, NULL);
    json_t *desc = json_pack("{s:o}", "mode", mode);
    json_t *c = NULL;
    int64_t v = -1;
    if (nvd_queue_claim(q, "d", desc, 2, &c) == 0) {
        json_t *t = json_object_get(
            json_object_get(json_object_get(json_object_get(c, "spec"), "tolerance_by_dtype"),
                            "bf16"),
            "version");
        v = t ? json_integer_value(t) : 0;
    }
    json_decref(c);
    json_decref(desc);
    return v;
}

static void test_tolerances(void)
{
    tap_ok(nvd_mode_match("*", NULL) == 0, "'*' matches with specificity 0");
    json_t *m = json_pack("{s:s, s:b, s:i}", "transcendental", "fast", "fma", 1, "k", 4);
    tap_ok(nvd_mode_match("transcendental=fast", m) == 1, "one term matches");
    tap_ok(nvd_mode_match("transcendental=fast,fma=true", m) == 2, "two terms (bool)");
    tap_ok(nvd_mode_match("transcendental=f*,k=4", m) == 2, "glob and integer");
    tap_ok(nvd_mode_match("transcendental=exact", m) == -1, "mismatching value");
    tap_ok(nvd_mode_match("missing=1", m) == -1, "missing key");
    json_decref(m);

    nvd_store *s = open_db("tol");
    nvd_queue_opts o = {.max_depth = 100, .lease_ms = 1000};
    nvd_queue *q = NULL;
    nvd_queue_new(NULL, s, &o, &q);
    add_tol(s, "*", "{\"metric\":\"ulp\",\"max_ulp\":1}");                   /* v1 */
    add_tol(s, "transcendental=fast", "{\"metric\":\"ulp\",\"max_ulp\":8}"); /* v2 */
    add_tol(s, "*", "{\"metric\":\"ulp\",\"max_ulp\":2}");                   /* v3 */
    const char *spec = "{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"bf16\",\"fp32\"]}";
    tap_ok(claimed_version(q, spec, "{\"transcendental\":\"fast\"}") == 2,
           "fast mode gets the specific pattern (v2)");
    tap_ok(claimed_version(q, spec, "{\"transcendental\":\"exact\"}") == 3,
           "other modes get the latest '*' row (v3, not v1)");
    const char *own = "{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"bf16\"],\"tolerance\":"
                      "{\"metric\":\"ulp\",\"max_ulp\":0}}";
    tap_ok(claimed_version(q, own, "{}") == 0, "a job with its own tolerance keeps it");
    json_t *hist = NULL;
    nvd_store_tolerances_list(s, "exp", "bf16", true, &hist);
    tap_ok(json_array_size(hist) == 3, "history keeps all 3 versions");
    json_decref(hist);
    nvd_store_tolerances_list(s, "exp", "bf16", false, &hist);
    tap_ok(json_array_size(hist) == 2, "current: one row per mode pattern");
    json_decref(hist);
    nvd_queue_free(q);
    nvd_store_free(s);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_leases();
    test_order_and_cancel();
    test_idempotent_result();
    test_tolerances();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
