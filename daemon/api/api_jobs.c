/* Routes: jobs and cases. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_longrun.h"
#include "api.h"
#include "api_suite.h"
#include "common/buildid.h"
#include "common/sha256.h"
#include "daemon/store/store_idempotency.h"
#include "daemon/util/util.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"

/* Validate submission fields numvald itself interprets; 0 or error sent. */
static int submit_fields(api_ctx *x, const json_t *body, nvd_job_new *j)
{
    const json_t *dev = json_object_get(body, "device");
    if (dev && !json_is_null(dev)) {
        if (!json_is_string(dev) || !api_name_ok(json_string_value(dev))) {
            api_error(x, 400, "bad_request", "/device",
                      "\"device\" must be a device name ([A-Za-z0-9._-], at most 128 bytes)");
            return -1;
        }
        j->device = json_string_value(dev);
    }
    const json_t *pr = json_object_get(body, "priority");
    if (pr) {
        if (!json_is_integer(pr) || json_integer_value(pr) < -1000 ||
            json_integer_value(pr) > 1000) {
            api_error(x, 400, "bad_request", "/priority",
                      "\"priority\" must be an integer in -1000..1000");
            return -1;
        }
        j->priority = (int)json_integer_value(pr);
    }
    const json_t *kind = json_object_get(body, "kind");
    if (!json_is_string(kind)) {
        api_error(x, 400, "bad_request", "/kind", "\"kind\" must be a string such as \"op\"");
        return -1;
    }
    j->kind = json_string_value(kind);
    const json_t *op = json_object_get(body, "op");
    j->op = json_is_string(op) ? json_string_value(op) : NULL;
    return 0;
}

/* Store the build identity, if any; *ret_hash (65 bytes) or "" when none. */
static int submit_build(api_ctx *x, const json_t *body, char hash[65])
{
    hash[0] = '\0';
    const json_t *b = json_object_get(body, "build");
    if (!b || json_is_null(b))
        return 0;
    char *canon = NULL;
    const char *field = NULL;
    int r = nv_buildid_canonical(b, &canon, hash, &field);
    if (r == -EINVAL) {
        api_error(x, 400, "bad_request", "/build",
                  "\"build\" must be an object with at least one of name, version, commit, "
                  "compiler, runtime, driver, firmware, flags, mode");
        return -1;
    }
    if (r < 0) {
        api_errno(x, r, "build identity");
        return -1;
    }
    r = nvd_store_build_put(x->app->store, hash, canon, nvd_now_ms());
    free(canon);
    if (r < 0) {
        api_errno(x, r, "store build");
        return -1;
    }
    return 0;
}

/* A submission's Idempotency-Key (docs/API.md "Idempotent submission"). */
typedef struct idem {
    char key[256]; /* "" when the request has none */
    char sha[65];  /* of the request body */
    const char *principal;
    int64_t since; /* records older than this have expired */
} idem;

/* Read the key. 0: go on (k->key may be ""), 1: answered (the original job
 * for a retry, or an error). */
static int idem_begin(api_ctx *x, idem *k)
{
    k->key[0] = '\0';
    const char *h = nvd_http_header(x->req, "Idempotency-Key");
    if (!h)
        return 0;
    /* Also the quoted sf-string form of draft-ietf-httpapi-idempotency-key-header. */
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '"' && h[n - 1] == '"')
        h++, n -= 2;
    bool ok = n >= 1 && n < sizeof(k->key);
    for (size_t i = 0; ok && i < n; i++)
        ok = h[i] > 0x20 && h[i] < 0x7f && h[i] != '"';
    if (!ok) {
        api_error(x, 400, "bad_request", "Idempotency-Key",
                  "the Idempotency-Key header must be 1..255 visible ASCII characters");
        return 1;
    }
    memcpy(k->key, h, n);
    k->key[n] = '\0';
    nv_sha256_hex(x->req->body, x->req->body_len, k->sha);
    k->principal = x->token_name ? x->token_name : "";
    k->since = nvd_now_ms() - x->app->cfg->idem_ttl_s * 1000;
    int64_t job_id;
    char was[65];
    int r = nvd_store_idem_get(x->app->store, k->principal, k->key, k->since, &job_id, was);
    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        api_errno(x, r, "idempotency key");
        return 1;
    }
    if (strcmp(was, k->sha) != 0) {
        api_error(x, 422, "idempotency_key_reused", "Idempotency-Key",
                  "Idempotency-Key '%s' was used for job %lld with a different request body; "
                  "a new request needs a new key",
                  k->key, (long long)job_id);
        return 1;
    }
    json_t *job = NULL;
    r = nvd_store_job_get(x->app->store, job_id, &job);
    if (r == -ENOENT)
        return 0; /* the job is gone: the key names nothing any more */
    if (r < 0) {
        api_errno(x, r, "job");
        return 1;
    }
    x->app->metrics.idem_replays++;
    api_json(x, 200, json_pack("{s:o, s:b}", "job", job, "replayed", 1));
    return 1;
}

void api_jobs_submit(api_ctx *x)
{
    idem k;
    if (idem_begin(x, &k))
        return;
    json_t *body = api_body_object(x);
    if (!body)
        return;
    nvd_job_new j = {.max_attempts = x->app->cfg->max_attempts};
    char *ptr = NULL, *msg = NULL, *spec = NULL;
    char hash[65];
    if (submit_fields(x, body, &j) < 0)
        goto out;
    /* kind "suite": expanded to the active suite cases (api_suite.c) */
    if (api_suite_is(body) && api_suite_expand(x, body) < 0)
        goto out;
    /* kind "longrun": its AMP policy version goes inline (api_longrun.c) */
    if (api_longrun_resolve(x, body) < 0)
        goto out;
    int r = api_suite_is(body) ? 0 : nv_jobspec_validate(body, &ptr, &msg);
    if (r == -EINVAL) {
        api_error(x, 400, "bad_request", ptr ? ptr : "", "%s", msg ? msg : "invalid job spec");
        goto out;
    }
    if (r < 0) {
        api_errno(x, r, "validate job");
        goto out;
    }
    if (submit_build(x, body, hash) < 0)
        goto out;
    j.build_hash = hash[0] ? hash : NULL;
    spec = json_dumps(body, JSON_COMPACT);
    if (!spec) {
        api_errno(x, -ENOMEM, "submit");
        goto out;
    }
    j.spec_json = spec;
    /* Stored in the job's own write: a key never names a job that is not stored. */
    nvd_job_idem ik = {.principal = k.principal,
                       .key = k.key,
                       .body_sha256 = k.sha,
                       .since = k.since,
                       .max_keys = x->app->cfg->idem_keys};
    j.idem = k.key[0] ? &ik : NULL;
    int64_t id;
    r = nvd_queue_submit(x->app->queue, &j, nvd_now_ms(), &id);
    if (r == -EAGAIN) {
        api_error(x, 429, "queue_full", NULL, "the queue holds %lld jobs, its limit; retry later",
                  (long long)nvd_queue_depth(x->app->queue));
        goto out;
    }
    if (r < 0) {
        api_errno(x, r, "submit");
        goto out;
    }
    x->app->metrics.jobs_submitted++;
    json_t *job = NULL;
    r = nvd_store_job_get(x->app->store, id, &job);
    if (r < 0) {
        api_errno(x, r, "job");
        goto out;
    }
    api_json(x, 201, json_pack("{s:o}", "job", job));
out:
    free(ptr);
    free(msg);
    free(spec);
    json_decref(body);
}

static const char *const states[] = {"queued", "leased", "running",   "passed",
                                     "failed", "error",  "cancelled", NULL};

void api_jobs_list(api_ctx *x)
{
    nvd_job_filter f = {0};
    f.state = api_query(x, "state");
    f.kind = api_query(x, "kind");
    f.device = api_query(x, "device");
    f.build = api_query(x, "build");
    if (f.state) {
        bool ok = false;
        for (int i = 0; states[i]; i++)
            ok = ok || !strcmp(states[i], f.state);
        if (!ok) {
            api_error(x, 400, "bad_request", "state",
                      "unknown state '%s' (queued, leased, running, passed, failed, error, "
                      "cancelled)",
                      f.state);
            return;
        }
    }
    f.limit = api_limit(x, 50, 1000);
    if (f.limit < 0)
        return;
    const char *cur = api_query(x, "cursor");
    if (cur && (nvd_parse_i64(cur, &f.cursor) < 0 || f.cursor <= 0)) {
        api_error(x, 400, "bad_request", "cursor", "cursor '%s' is not one this server gave", cur);
        return;
    }
    api_read_jobs(x, &f);
}

void api_job_get(api_ctx *x, int64_t id)
{
    json_t *job = NULL;
    int r = nvd_store_job_get(x->app->store, id, &job);
    if (r < 0) {
        if (r == -ENOENT)
            api_error(x, 404, "not_found", NULL, "job '%lld' not found", (long long)id);
        else
            api_errno(x, r, "get job");
        return;
    }
    api_json(x, 200, json_pack("{s:o}", "job", job));
}

void api_job_cancel(api_ctx *x, int64_t id)
{
    int r = nvd_queue_cancel(x->app->queue, id, nvd_now_ms());
    if (r == -EALREADY) {
        api_error(x, 409, "conflict", NULL, "job '%lld' has already finished", (long long)id);
        return;
    }
    if (r == -ENOENT) {
        api_error(x, 404, "not_found", NULL, "job '%lld' not found", (long long)id);
        return;
    }
    if (r < 0) {
        api_errno(x, r, "cancel");
        return;
    }
    api_job_get(x, id);
}

void api_job_cases(api_ctx *x, int64_t id)
{
    nvd_case_filter f = {.job_id = id, .cursor = -1};
    f.verdict = api_query(x, "verdict");
    if (f.verdict && strcmp(f.verdict, "passed") && strcmp(f.verdict, "failed") &&
        strcmp(f.verdict, "error")) {
        api_error(x, 400, "bad_request", "verdict", "unknown verdict '%s' (passed, failed, error)",
                  f.verdict);
        return;
    }
    f.limit = api_limit(x, 100, 1000);
    if (f.limit < 0)
        return;
    const char *cur = api_query(x, "cursor");
    if (cur && (nvd_parse_i64(cur, &f.cursor) < 0 || f.cursor < 0)) {
        api_error(x, 400, "bad_request", "cursor", "cursor '%s' is not one this server gave", cur);
        return;
    }
    api_read_cases(x, &f);
}

void api_case_get(api_ctx *x, int64_t id)
{
    json_t *c = NULL;
    int r = nvd_store_case_get(x->app->store, id, &c);
    if (r < 0) {
        if (r == -ENOENT)
            api_error(x, 404, "not_found", NULL, "case '%lld' not found", (long long)id);
        else
            api_errno(x, r, "get case");
        return;
    }
    api_json(x, 200, json_pack("{s:o}", "case", c));
}
