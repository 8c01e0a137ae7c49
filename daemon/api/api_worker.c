/* Routes for workers: claim (long poll), heartbeat, result, artifact upload. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "api.h"
#include "daemon/auth.h"
#include "daemon/promote.h"
#include "daemon/supervisor.h"
#include "daemon/webhook.h"
#include "daemon/store/store_suite.h"
#include "common/artifact.h"
#include "common/log.h"
#include "common/sha256.h"
#include "daemon/util/util.h"
#include "core/spec/jobspec.h"

typedef struct claim_wait {
    api_ctx *x;
    nvd_waiter *w;
    char device[129];
    char worker_id[65]; /* "" when the claim named none */
    json_t *describe;
    int64_t deadline;
} claim_wait;

static void claim_try(claim_wait *cw);

static void claim_abort(void *ud, nvd_http_req *req)
{
    (void)req;
    claim_wait *cw = ud;
    nvd_queue_unwait(cw->w);
    cw->w = NULL;
    json_decref(cw->describe);
    cw->describe = NULL;
}

static void claim_wake(void *ud, bool timed_out)
{
    claim_wait *cw = ud;
    cw->w = NULL;
    nvd_http_on_abort(cw->x->req, NULL, NULL);
    if (timed_out || nvd_now_ms() >= cw->deadline) {
        json_decref(cw->describe);
        cw->describe = NULL;
        api_json(cw->x, 204, NULL);
        return;
    }
    claim_try(cw);
}

static void claim_try(claim_wait *cw)
{
    api_ctx *x = cw->x;
    int64_t now = nvd_now_ms();
    json_t *job = NULL;
    int r = nvd_queue_claim(x->app->queue, cw->device, cw->describe, now, &job);
    if (r == 0) {
        x->app->metrics.claims++;
        int64_t id = 0;
        if (cw->worker_id[0] && nvd_json_id(json_object_get(job, "id"), &id) == 0)
            nvd_supervisor_leased(x->app->sup, cw->worker_id, id,
                                  json_string_value(json_object_get(job, "lease_token")));
        json_decref(cw->describe);
        cw->describe = NULL;
        api_json(x, 200, json_pack("{s:o}", "job", job));
        return;
    }
    if (r != -ENOENT || now >= cw->deadline) {
        json_decref(cw->describe);
        cw->describe = NULL;
        if (r == -ENOENT)
            api_json(x, 204, NULL);
        else
            api_errno(x, r, "claim");
        return;
    }
    r = nvd_queue_wait(x->app->queue, cw->device, (uint64_t)(cw->deadline - now), claim_wake, cw,
                       &cw->w);
    if (r < 0) {
        json_decref(cw->describe);
        cw->describe = NULL;
        api_errno(x, r, "claim wait");
        return;
    }
    nvd_http_on_abort(x->req, claim_abort, cw);
}

void api_worker_claim(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    const json_t *dev = json_object_get(body, "device");
    const json_t *wait = json_object_get(body, "wait_ms");
    const json_t *desc = json_object_get(body, "describe");
    const json_t *wid = json_object_get(body, "worker_id");
    if (!json_is_string(dev) || !api_name_ok(json_string_value(dev))) {
        api_error(x, 400, "bad_request", "/device",
                  "\"device\" must be a device name ([A-Za-z0-9._-], at most 128 bytes)");
        goto out;
    }
    /* A per-host token claims only for the devices its host serves. */
    if (x->devices && !nvd_auth_device_listed(x->devices, json_string_value(dev))) {
        api_error(x, 403, "forbidden", "/device",
                  "token '%s' is bound to devices '%s' and may not claim for device '%s'",
                  x->token_name ? x->token_name : "", x->devices, json_string_value(dev));
        goto out;
    }
    if (wait && (!json_is_integer(wait) || json_integer_value(wait) < 0)) {
        api_error(x, 400, "bad_request", "/wait_ms", "\"wait_ms\" must be a non-negative integer");
        goto out;
    }
    if (desc && !json_is_object(desc) && !json_is_null(desc)) {
        api_error(x, 400, "bad_request", "/describe", "\"describe\" must be an object");
        goto out;
    }
    if (wid && (!json_is_string(wid) || !api_name_ok(json_string_value(wid)) ||
                json_string_length(wid) > 64)) {
        api_error(x, 400, "bad_request", "/worker_id",
                  "\"worker_id\" must be a name ([A-Za-z0-9._-], at most 64 bytes)");
        goto out;
    }
    claim_wait *cw = nvd_http_alloc(x->req, sizeof(*cw));
    if (!cw) {
        api_errno(x, -ENOMEM, "claim");
        goto out;
    }
    memset(cw, 0, sizeof(*cw));
    cw->x = x;
    snprintf(cw->device, sizeof(cw->device), "%s", json_string_value(dev));
    snprintf(cw->worker_id, sizeof(cw->worker_id), "%s", wid ? json_string_value(wid) : "");
    int64_t w = wait ? json_integer_value(wait) : 0;
    if (w > x->app->cfg->claim_max_wait_ms)
        w = x->app->cfg->claim_max_wait_ms;
    cw->deadline = nvd_now_ms() + w;
    cw->describe = json_is_object(desc) ? json_incref((json_t *)desc) : NULL;
    int r = nvd_store_device_seen(x->app->store, cw->device, cw->describe, nvd_now_ms());
    if (r < 0)
        nv_log_warn("claim: cannot record device '%s': %s", cw->device, strerror(-r));
    claim_try(cw);
out:
    json_decref(body);
}

/* job_id and lease_token of a worker request; 0 or the error is sent. */
static int lease_fields(api_ctx *x, const json_t *body, int64_t *id, const char **token)
{
    if (nvd_json_id(json_object_get(body, "job_id"), id) < 0) {
        api_error(x, 400, "bad_request", "/job_id", "\"job_id\" must be a job id");
        return -1;
    }
    *token = json_string_value(json_object_get(body, "lease_token"));
    if (!*token || !**token) {
        api_error(x, 400, "bad_request", "/lease_token", "\"lease_token\" must be a string");
        return -1;
    }
    return 0;
}

/* A token bound to devices heartbeats and posts results only for jobs of
 * them; the lease token already ties a request to its claim, this keeps a
 * lease token that leaked to another host useless there. 0, or -1 with the
 * error sent. */
static int lease_device_ok(api_ctx *x, int64_t id)
{
    if (!x->devices)
        return 0;
    json_t *job = NULL;
    int r = nvd_store_job_get(x->app->store, id, &job);
    if (r < 0) {
        api_errno(x, r, "job");
        return -1;
    }
    /* A job submitted for no device is the device's that claimed it
     * ("leased_by"): a bound token claims only for its own devices. */
    const char *dev = json_string_value(json_object_get(job, "device"));
    if (!dev)
        dev = json_string_value(json_object_get(job, "leased_by"));
    bool ok = dev && nvd_auth_device_listed(x->devices, dev);
    if (!ok)
        api_error(x, 403, "forbidden", "/job_id",
                  "token '%s' is bound to devices '%s'; job '%lld' is for device '%s'",
                  x->token_name ? x->token_name : "", x->devices, (long long)id, dev ? dev : "");
    json_decref(job);
    return ok ? 0 : -1;
}

static void lease_error(api_ctx *x, int r, int64_t id)
{
    if (r == -ESTALE)
        api_error(x, 409, "conflict", "/lease_token",
                  "the lease on job '%lld' is not held by this token (expired or re-leased)",
                  (long long)id);
    else if (r == -ECANCELED)
        api_error(x, 409, "conflict", NULL, "job '%lld' was cancelled", (long long)id);
    else if (r == -ENOENT)
        api_error(x, 404, "not_found", "/job_id", "job '%lld' not found", (long long)id);
    else
        api_errno(x, r, "lease");
}

void api_worker_heartbeat(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    int64_t id;
    const char *token;
    if (lease_fields(x, body, &id, &token) < 0 || lease_device_ok(x, id) < 0)
        goto out;
    const json_t *d = json_object_get(body, "cases_done"),
                 *t = json_object_get(body, "cases_total");
    if ((d && !json_is_integer(d)) || (t && !json_is_integer(t))) {
        api_error(x, 400, "bad_request", d && !json_is_integer(d) ? "/cases_done" : "/cases_total",
                  "progress counts must be integers");
        goto out;
    }
    bool cancel = false;
    int r = nvd_store_job_heartbeat(x->app->store, id, token, d ? json_integer_value(d) : 0,
                                    t ? json_integer_value(t) : 0, nvd_now_ms(),
                                    x->app->cfg->lease_ms, &cancel);
    if (r < 0)
        lease_error(x, r, id);
    else
        api_json(x, 200,
                 json_pack("{s:b, s:I}", "cancel", cancel, "lease_ms",
                           (json_int_t)x->app->cfg->lease_ms));
out:
    json_decref(body);
}

typedef struct promote_ud {
    int64_t job_id;
    const json_t *result;
    int64_t now;
    json_t *new_ids; /* suite cases created, for the webhooks */
} promote_ud;

static int promote_then(nvd_store *s, void *ud, bool dup)
{
    (void)dup;
    const promote_ud *pu = ud;
    json_array_clear(pu->new_ids);
    return nvd_promote_result_ids(s, pu->job_id, pu->result, pu->now, pu->new_ids);
}

void api_worker_result(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    promote_ud pu = {0};
    int64_t id;
    const char *token;
    if (lease_fields(x, body, &id, &token) < 0 || lease_device_ok(x, id) < 0)
        goto out;
    const json_t *res = json_object_get(body, "result");
    if (!json_is_object(res)) {
        api_error(x, 400, "bad_request", "/result", "\"result\" must be the result JSON object");
        goto out;
    }
    const json_t *cases = json_object_get(res, "cases");
    if (cases && !json_is_array(cases)) {
        api_error(x, 400, "bad_request", "/result/cases", "\"cases\" must be an array");
        goto out;
    }
    /* A job has at most NV_JOB_MAX_CASES cases (core/spec/jobspec.h). */
    if (json_array_size(cases) > NV_JOB_MAX_CASES) {
        api_error(x, 413, "too_large", "/result/cases", "%zu cases exceed the limit of %d",
                  json_array_size(cases), NV_JOB_MAX_CASES);
        goto out;
    }
    /* Dedup + promotion and suite history (promote.c) in the same write
     * as the result, also on a duplicate upload (idempotent there), so no crash
     * between them can lose a promotion. */
    bool dup = false;
    pu = (promote_ud){.job_id = id, .result = res, .now = nvd_now_ms(), .new_ids = json_array()};
    int r = nvd_store_job_finish_then(x->app->store, id, token, res, pu.now, promote_then, &pu,
                                      &dup);
    if (r < 0) {
        lease_error(x, r, id);
        goto out;
    }
    if (!dup) {
        x->app->metrics.results_stored++;
        nvd_webhooks_on_result(x->app, id, pu.new_ids); /* held until the commit */
    }
    json_t *job = NULL;
    r = nvd_store_job_get(x->app->store, id, &job);
    if (r < 0) {
        api_errno(x, r, "job");
        goto out;
    }
    api_json(x, 200, json_pack("{s:o, s:b}", "job", job, "duplicate", dup));
out:
    json_decref(pu.new_ids);
    json_decref(body);
}

static bool sha_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == 64;
}

void api_worker_artifact_put(api_ctx *x, const char *sha)
{
    if (!sha_ok(sha)) {
        api_error(x, 400, "bad_request", NULL,
                  "artifact id '%.80s' must be 64 lowercase hex digits (SHA-256)", sha);
        return;
    }
    const char *b = x->req->body;
    size_t n = x->req->body_len;
    char got[65];
    nv_sha256_hex(b, n, got);
    if (strcmp(got, sha) != 0) {
        api_error(x, 400, "bad_request", NULL, "the body's SHA-256 is '%s', not '%s'", got, sha);
        return;
    }
    /* One complete zstd frame whose header states the decompressed size. */
    unsigned long long raw = n ? ZSTD_getFrameContentSize(b, n) : ZSTD_CONTENTSIZE_ERROR;
    size_t fsz = n ? ZSTD_findFrameCompressedSize(b, n) : 0;
    if (raw == ZSTD_CONTENTSIZE_ERROR || ZSTD_isError(fsz) || fsz != n) {
        api_error(x, 400, "bad_request", NULL, "the body is not one complete zstd frame");
        return;
    }
    /* The header's content size is what a reader will be asked to allocate:
     * it must be stated and within the container's limit (common/artifact.h),
     * however small the frame that declares it. */
    if (raw == ZSTD_CONTENTSIZE_UNKNOWN) {
        api_error(x, 400, "bad_request", NULL,
                  "the zstd frame does not declare its content size (compress with the "
                  "content size flag, as numval-worker does)");
        return;
    }
    if (raw > NV_ARTIFACT_MAX_RAW) {
        api_error(x, 413, "too_large", NULL,
                  "the zstd frame declares %llu bytes of content, more than the artifact "
                  "limit of %llu",
                  raw, (unsigned long long)NV_ARTIFACT_MAX_RAW);
        return;
    }
    bool existed = false;
    int r = nvd_store_artifact_put(x->app->store, sha, b, n, (int64_t)raw, nvd_now_ms(), &existed);
    if (r < 0) {
        api_errno(x, r, "store artifact");
        return;
    }
    if (!existed)
        x->app->metrics.artifacts_stored++;
    api_json(x, existed ? 200 : 201,
             json_pack("{s:s, s:I, s:I}", "sha256", sha, "size", (json_int_t)n, "raw_size",
                       (json_int_t)raw));
}

void api_artifact_get(api_ctx *x, const char *sha)
{
    if (!sha_ok(sha)) {
        api_error(x, 400, "bad_request", NULL,
                  "artifact id '%.80s' must be 64 lowercase hex digits (SHA-256)", sha);
        return;
    }
    void *blob = NULL;
    size_t len = 0;
    int r = nvd_store_artifact_get(x->app->store, sha, &blob, &len);
    if (r < 0) {
        if (r == -ENOENT)
            api_error(x, 404, "not_found", NULL, "artifact '%s' not found", sha);
        else
            api_errno(x, r, "get artifact");
        return;
    }
    char hdr[512];
    snprintf(hdr, sizeof(hdr),
             "Content-Disposition: attachment; filename=\"%.64s.nvart.zst\"\r\n"
             "Cache-Control: max-age=31536000, immutable\r\n",
             sha);
    nvd_http_respond(x->req, 200, "application/zstd", blob, len, hdr);
    free(blob);
}
