/* Routing, authentication and replies for the JSON API. */
#include "api.h"
#include "api_history.h"
#include "api_longrun.h"
#include "api_suite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/auth.h"
#include "common/log.h"

void api_json(api_ctx *x, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : (status == 204 ? strdup("") : NULL);
    json_decref(body);
    if (!text) {
        nvd_http_error(x->req, 503, "unavailable", "out of memory", NULL);
        return;
    }
    nvd_commit_reply(x->app, x->req, status, text);
}

void api_error(api_ctx *x, int status, const char *code, const char *field, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (e && field)
        json_object_set_new(e, "field", json_string(field));
    json_t *body = e ? json_pack("{s:o}", "error", e) : NULL;
    if (!body) {
        nvd_http_error(x->req, status, code, msg, field);
        return;
    }
    api_json(x, status, body);
}

void api_errno(api_ctx *x, int r, const char *what)
{
    switch (r) {
    case -ENOENT:
        api_error(x, 404, "not_found", NULL, "%s not found", what);
        break;
    case -EBUSY:
        api_error(x, 503, "unavailable", NULL, "database busy; retry");
        break;
    case -ENOMEM:
        api_error(x, 503, "unavailable", NULL, "out of memory");
        break;
    case -ENOSPC:
        api_error(x, 503, "unavailable", NULL, "disk full");
        break;
    case -EUCLEAN: {
        char why[300];
        nvd_store_damaged(why, sizeof(why));
        api_error(x, 503, "store_damaged", NULL,
                  "%s: the database is damaged (%s); numvald is read-only until it is restored "
                  "(docs/RELIABILITY.md)",
                  what, why);
        break;
    }
    default:
        api_error(x, 500, "internal", NULL, "%s failed: %s", what, strerror(-r));
        break;
    }
}

static int unhex(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

const char *api_query(api_ctx *x, const char *name)
{
    const char *q = x->req->query;
    size_t nl = strlen(name);
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > nl && !strncmp(q, name, nl) && q[nl] == '=') {
            const char *v = q + nl + 1;
            size_t vl = len - nl - 1;
            char *out = nvd_http_alloc(x->req, vl + 1);
            if (!out)
                return NULL;
            size_t n = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] == '+')
                    out[n++] = ' ';
                else if (v[i] == '%' && i + 2 < vl && unhex(v[i + 1]) >= 0 &&
                         unhex(v[i + 2]) >= 0) {
                    out[n++] = (char)(unhex(v[i + 1]) * 16 + unhex(v[i + 2]));
                    i += 2;
                } else
                    out[n++] = v[i];
            }
            out[n] = '\0';
            return out[0] ? out : NULL;
        }
        q = amp ? amp + 1 : NULL;
    }
    return NULL;
}

json_t *api_body_object(api_ctx *x)
{
    json_error_t err;
    json_t *v = json_loadb(x->req->body, x->req->body_len, JSON_REJECT_DUPLICATES, &err);
    if (!v) {
        api_error(x, 400, "bad_request", "", "malformed JSON at line %d column %d: %s", err.line,
                  err.column, err.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        api_error(x, 400, "bad_request", "", "the request body must be a JSON object");
        return NULL;
    }
    return v;
}

int api_limit(api_ctx *x, int def, int max)
{
    const char *s = api_query(x, "limit");
    if (!s)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > max) {
        api_error(x, 400, "bad_request", "limit", "limit '%s' must be an integer in 1..%d", s, max);
        return -1;
    }
    return (int)v;
}

int api_id(api_ctx *x, const char *s, int64_t *ret)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v <= 0) {
        api_error(x, 404, "not_found", NULL, "'%s' is not an id", s);
        return -1;
    }
    *ret = v;
    return 0;
}

bool api_name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') ||
              (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return false;
    }
    return n > 0 && n <= 128;
}

/* ---- routing ---- */

size_t nvd_api_body_limit(void *ud, const char *method, const char *raw_path)
{
    nvd_app *app = ud;
    if (!strcmp(method, "PUT") && !strncmp(raw_path, "/api/v1/worker/artifacts/", 25))
        return app->cfg->max_artifact_body;
    if (!strcmp(method, "POST") && !strncmp(raw_path, "/api/v1/worker/result", 21))
        return app->cfg->max_artifact_body;
    if (!strcmp(method, "POST") || !strcmp(method, "PUT"))
        return app->cfg->max_job_body;
    return 4096;
}

void nvd_api_done(void *ud, nvd_http_req *req, int status)
{
    (void)req;
    nvd_app *app = ud;
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        app->metrics.requests[cls]++;
}

/* Who may do this: 0 ok; else the error has been sent. */
static int authorize(api_ctx *x, unsigned need)
{
    const char *h = nvd_http_header(x->req, "Authorization");
    nvd_app *app = x->app;
    if (!h) {
        bool anon = app->cfg->anonymous_read == NVD_ANON_YES ||
                    (app->cfg->anonymous_read == NVD_ANON_LOOPBACK && x->req->loopback);
        if (need == NVD_SCOPE_READ && anon)
            return 0;
        api_error(x, 401, "unauthorized", NULL,
                  need == NVD_SCOPE_READ ? "reading needs a token (Authorization: Bearer ...)"
                                         : "this route needs a token with scope '%s'",
                  need == NVD_SCOPE_SUBMIT   ? "submit"
                  : need == NVD_SCOPE_WORKER ? "worker"
                                             : "admin");
        return -1;
    }
    int r = nvd_auth_check(app->store, h, &x->token_name, &x->scopes);
    if (r == -EACCES) {
        api_error(x, 401, "unauthorized", NULL, "invalid or revoked token");
        return -1;
    }
    if (r < 0) {
        api_errno(x, r, "token check");
        return -1;
    }
    if (!nvd_auth_allows(x->scopes, need)) {
        api_error(x, 403, "forbidden", NULL, "token '%s' lacks scope '%s'", x->token_name,
                  need == NVD_SCOPE_READ     ? "read"
                  : need == NVD_SCOPE_SUBMIT ? "submit"
                  : need == NVD_SCOPE_WORKER ? "worker"
                                             : "admin");
        return -1;
    }
    return 0;
}

static bool is(const api_ctx *x, int n, const char *a, const char *b, const char *c)
{
    if (x->n_seg != n)
        return false;
    const char *w[3] = {a, b, c};
    for (int i = 0; i < n && i < 3; i++)
        if (w[i] && strcmp(x->seg[i], w[i]) != 0)
            return false;
    return true;
}

/* One route: path shape, method, scope and action. Returns false if no route
 * has this path (404), sets *bad_method when the path exists for another method. */
static bool route(api_ctx *x, bool *bad_method)
{
    const char *m = x->req->method;
    bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");
    int64_t id;
#define ROUTE(cond, ok_method, scope, action)                                                      \
    if (cond) {                                                                                    \
        if (!(ok_method)) {                                                                        \
            *bad_method = true;                                                                    \
            return true;                                                                           \
        }                                                                                          \
        if (authorize(x, scope) == 0) {                                                            \
            action;                                                                                \
        }                                                                                          \
        return true;                                                                               \
    }
    ROUTE(is(x, 1, "jobs", 0, 0) && post, post, NVD_SCOPE_SUBMIT, api_jobs_submit(x));
    ROUTE(is(x, 1, "jobs", 0, 0), get, NVD_SCOPE_READ, api_jobs_list(x));
    ROUTE(is(x, 2, "jobs", 0, 0), get, NVD_SCOPE_READ,
          if (api_id(x, x->seg[1], &id) == 0) api_job_get(x, id));
    ROUTE(is(x, 3, "jobs", 0, "cancel"), post, NVD_SCOPE_SUBMIT,
          if (api_id(x, x->seg[1], &id) == 0) api_job_cancel(x, id));
    ROUTE(is(x, 3, "jobs", 0, "cases"), get, NVD_SCOPE_READ,
          if (api_id(x, x->seg[1], &id) == 0) api_job_cases(x, id));
    ROUTE(is(x, 2, "cases", 0, 0), get, NVD_SCOPE_READ,
          if (api_id(x, x->seg[1], &id) == 0) api_case_get(x, id));
    ROUTE(is(x, 2, "artifacts", 0, 0), get, NVD_SCOPE_READ, api_artifact_get(x, x->seg[1]));
    ROUTE(is(x, 2, "tolerances", "history", 0), get, NVD_SCOPE_READ, api_tolerances_get(x, true));
    ROUTE(is(x, 1, "tolerances", 0, 0) && post, post, NVD_SCOPE_ADMIN, api_tolerances_post(x));
    ROUTE(is(x, 1, "tolerances", 0, 0), get, NVD_SCOPE_READ, api_tolerances_get(x, false));
    ROUTE(is(x, 1, "builds", 0, 0), get, NVD_SCOPE_READ, api_builds(x));
    ROUTE(is(x, 1, "devices", 0, 0), get, NVD_SCOPE_READ, api_devices(x, NULL));
    ROUTE(is(x, 2, "devices", 0, 0), get, NVD_SCOPE_READ, api_devices(x, x->seg[1]));
    ROUTE(is(x, 2, "worker", "claim", 0), post, NVD_SCOPE_WORKER, api_worker_claim(x));
    ROUTE(is(x, 2, "worker", "heartbeat", 0), post, NVD_SCOPE_WORKER, api_worker_heartbeat(x));
    ROUTE(is(x, 2, "worker", "result", 0), post, NVD_SCOPE_WORKER, api_worker_result(x));
    ROUTE(is(x, 3, "worker", "artifacts", 0), !strcmp(m, "PUT"), NVD_SCOPE_WORKER,
          api_worker_artifact_put(x, x->seg[2]));
    /* the permanent suite and build compare (api_suite.c) */
    ROUTE(is(x, 1, "suite", 0, 0), get, NVD_SCOPE_READ, api_suite_list(x));
    ROUTE(is(x, 2, "suite", 0, 0), get, NVD_SCOPE_READ,
          if (api_id(x, x->seg[1], &id) == 0) api_suite_get(x, id));
    ROUTE(is(x, 3, "suite", 0, "retire"), post, NVD_SCOPE_ADMIN,
          if (api_id(x, x->seg[1], &id) == 0) api_suite_retire(x, id));
    ROUTE(is(x, 1, "compare", 0, 0), get, NVD_SCOPE_READ, api_compare(x));
    /* a test across builds, flaky cases (api_history.c) */
    ROUTE(is(x, 1, "history", 0, 0), get, NVD_SCOPE_READ, api_history(x));
    ROUTE(is(x, 1, "flaky", 0, 0), get, NVD_SCOPE_READ, api_flaky(x));
    /* long-run qualification (api_longrun.c) */
    ROUTE(is(x, 1, "amp-policies", 0, 0) && post, post, NVD_SCOPE_ADMIN, api_amp_post(x));
    ROUTE(is(x, 1, "amp-policies", 0, 0), get, NVD_SCOPE_READ, api_amp_list(x));
    ROUTE(is(x, 1, "schedules", 0, 0), get, NVD_SCOPE_READ, api_schedules(x));
#undef ROUTE
    return false;
}

static void handle_api(api_ctx *x, const char *rest)
{
    size_t n = strlen(rest);
    char *buf = nvd_http_alloc(x->req, n + 1);
    if (!buf) {
        nvd_http_error(x->req, 503, "unavailable", "out of memory", NULL);
        return;
    }
    memcpy(buf, rest, n + 1);
    for (char *p = buf; *p && x->n_seg < 8;) {
        x->seg[x->n_seg++] = p;
        char *sl = strchr(p, '/');
        if (!sl)
            break;
        *sl = '\0';
        p = sl + 1;
    }
    for (int i = 0; i < x->n_seg; i++)
        if (!strcmp(x->seg[i], ".") || !strcmp(x->seg[i], "..") ||
            (!x->seg[i][0] && i + 1 < x->n_seg)) {
            api_error(x, 400, "bad_request", NULL, "path '%s' has an empty, '.' or '..' segment",
                      x->req->path);
            return;
        }
    bool bad_method = false;
    if (x->n_seg < 8 && route(x, &bad_method)) {
        if (bad_method)
            api_error(x, 405, "method_not_allowed", NULL, "method '%s' is not allowed on '%s'",
                      x->req->method, x->req->path);
        return;
    }
    api_error(x, 404, "not_found", NULL, "no route '%s %s'", x->req->method, x->req->path);
}

void nvd_api_handle(void *ud, nvd_http_req *req)
{
    nvd_app *app = ud;
    api_ctx *x = nvd_http_alloc(req, sizeof(*x));
    if (!x) {
        nvd_http_error(req, 503, "unavailable", "out of memory", NULL);
        return;
    }
    memset(x, 0, sizeof(*x));
    x->app = app;
    x->req = req;
    req->user = x;
    const char *p = req->path;
    if (!strcmp(p, "/healthz")) {
        char why[300];
        bool damaged = nvd_store_damaged(why, sizeof(why));
        json_t *b = json_pack("{s:s, s:s, s:I}", "status", damaged ? "degraded" : "ok", "version",
                              NV_VERSION, "schema", (json_int_t)nvd_store_user_version(app->store));
        if (b && damaged)
            json_object_set_new(b, "store",
                                json_pack("{s:s, s:s}", "state", "damaged", "message", why));
        api_json(x, damaged ? 503 : 200, b);
    } else if (!strcmp(p, "/metrics")) {
        if (authorize(x, NVD_SCOPE_READ) == 0)
            api_metrics(x);
    } else if (!strncmp(p, "/api/v1/", 8)) {
        handle_api(x, p + 8);
    } else if (!strncmp(p, "/api/", 5) || !strcmp(p, "/api")) {
        api_error(x, 404, "not_found", NULL, "no route '%s %s' (the API is under /api/v1/)",
                  req->method, p);
    } else {
        api_static(app, req);
    }
    free(x->token_name);
    x->token_name = NULL;
}
