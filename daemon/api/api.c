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

/* The body an unauthenticated request may send, and any request to a route
 * that takes none (reads, unknown routes). */
#define SMALL_BODY 4096

static size_t route_body_limit(const nvd_app *app, const char *method, const char *path)
{
    if (!strcmp(method, "PUT") && !strncmp(path, "/api/v1/worker/artifacts/", 25))
        return app->cfg->max_artifact_body;
    if (!strcmp(method, "POST") && !strcmp(path, "/api/v1/worker/result"))
        return app->cfg->max_artifact_body;
    if (!strcmp(method, "POST") || !strcmp(method, "PUT"))
        return app->cfg->max_job_body;
    return SMALL_BODY;
}

void nvd_api_done(void *ud, nvd_http_req *req, int status)
{
    (void)req;
    nvd_app *app = ud;
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        app->metrics.requests[cls]++;
}

static const char *scope_word(unsigned need)
{
    return need == NVD_SCOPE_READ     ? "read"
           : need == NVD_SCOPE_SUBMIT ? "submit"
           : need == NVD_SCOPE_WORKER ? "worker"
                                      : "admin";
}

/* Whether the client is on this host, for anonymous_read = loopback: behind a
 * reverse proxy every peer is the proxy, so proxy headers decide (auth.h). */
static bool client_loopback(const nvd_app *app, const nvd_http_req *req)
{
    nvd_auth_origin o = {.peer = req->peer,
                         .trusted = app->cfg->trusted_proxy,
                         .xff = nvd_http_header(req, "X-Forwarded-For"),
                         .n_xff = nvd_http_header_count(req, "X-Forwarded-For"),
                         .forwarded = nvd_http_header(req, "Forwarded") ||
                                      nvd_http_header(req, "X-Real-IP")};
    return nvd_auth_from_loopback(&o);
}

/* Who may do this, from the request's headers alone: 0 (with the token's
 * name, malloc'd or NULL, scopes and bound devices, malloc'd or NULL), or the
 * status of the refusal with its code and a message in msg. */
static int auth_decide(nvd_app *app, nvd_http_req *req, unsigned need, char **ret_name,
                       unsigned *ret_scopes, char **ret_devices, const char **code, char *msg,
                       size_t cap)
{
    const char *h = nvd_http_header(req, "Authorization");
    *ret_name = NULL;
    *ret_scopes = 0;
    *ret_devices = NULL;
    *code = "unauthorized";
    if (!h) {
        bool anon = app->cfg->anonymous_read == NVD_ANON_YES ||
                    (app->cfg->anonymous_read == NVD_ANON_LOOPBACK && client_loopback(app, req));
        if (need == NVD_SCOPE_READ && anon)
            return 0;
        if (need == NVD_SCOPE_READ && app->cfg->anonymous_read == NVD_ANON_LOOPBACK &&
            nvd_http_header(req, "X-Forwarded-For"))
            snprintf(msg, cap,
                     "reading needs a token (Authorization: Bearer ...): the request "
                     "came through a proxy (X-Forwarded-For), so its client is not "
                     "judged to be on this host ([server] trusted_proxy)");
        else if (need == NVD_SCOPE_READ)
            snprintf(msg, cap, "reading needs a token (Authorization: Bearer ...)");
        else
            snprintf(msg, cap, "this route needs a token with scope '%s'", scope_word(need));
        return 401;
    }
    char *name = NULL, *devices = NULL;
    unsigned scopes = 0;
    int r = nvd_auth_check(app->store, h, &name, &scopes, &devices);
    if (r == -EACCES) {
        snprintf(msg, cap, "invalid or revoked token");
        return 401;
    }
    if (r < 0) {
        *code = "unavailable";
        snprintf(msg, cap, "token check failed: %s; retry", strerror(-r));
        return 503;
    }
    if (!nvd_auth_allows(scopes, need)) {
        *code = "forbidden";
        snprintf(msg, cap, "token '%s' lacks scope '%s'", name ? name : "", scope_word(need));
        free(name);
        free(devices);
        return 403;
    }
    *ret_name = name;
    *ret_scopes = scopes;
    *ret_devices = devices;
    return 0;
}

/* Who may do this: 0 ok; else the error has been sent. */
static int authorize(api_ctx *x, unsigned need)
{
    char msg[512];
    const char *code;
    int st = auth_decide(x->app, x->req, need, &x->token_name, &x->scopes, &x->devices, &code, msg,
                         sizeof msg);
    if (st) {
        api_error(x, st, code, NULL, "%s", msg);
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
    const char *m = x->method;
    bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");
    int64_t id;
#define ROUTE(cond, ok_method, scope, action)                                                      \
    if (cond) {                                                                                    \
        if (!(ok_method)) {                                                                        \
            *bad_method = true;                                                                    \
            return true;                                                                           \
        }                                                                                          \
        if (x->dry) {                                                                              \
            x->need = scope;                                                                       \
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
    ROUTE(is(x, 1, "builds", 0, 0) && post, post, NVD_SCOPE_ADMIN, api_builds_register(x));
    /* daemon-side bisections (api_bisect.c) */
    ROUTE(is(x, 1, "bisections", 0, 0), post, NVD_SCOPE_SUBMIT, api_bisect_post(x));
    ROUTE(is(x, 2, "bisections", 0, 0), get, NVD_SCOPE_READ,
          if (api_id(x, x->seg[1], &id) == 0) api_bisect_get(x, id));
    ROUTE(is(x, 1, "builds", 0, 0), get, NVD_SCOPE_READ, api_builds(x));
    ROUTE(is(x, 1, "devices", 0, 0), get, NVD_SCOPE_READ, api_devices(x, NULL));
    ROUTE(is(x, 2, "devices", 0, 0), get, NVD_SCOPE_READ, api_devices(x, x->seg[1]));
    ROUTE(is(x, 3, "devices", 0, "contract"), get, NVD_SCOPE_READ,
          api_device_contract(x, x->seg[1]));
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

/* Split the path after "/api/v1/" into x->seg. 0, -EINVAL for an empty, "."
 * or ".." segment, -ENOMEM. */
static int split_segments(api_ctx *x, const char *rest)
{
    size_t n = strlen(rest);
    char *buf = nvd_http_alloc(x->req, n + 1);
    if (!buf)
        return -ENOMEM;
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
            (!x->seg[i][0] && i + 1 < x->n_seg))
            return -EINVAL;
    return 0;
}

/* Whether the split path has a route for method m; its scope in *need. */
static bool route_exists(const api_ctx *x, const char *m, unsigned *need)
{
    api_ctx d = *x;
    d.method = m;
    d.dry = true;
    bool bad_method = false;
    bool found = d.n_seg < 8 && route(&d, &bad_method) && !bad_method;
    *need = d.need;
    return found;
}

/* 405 with the Allow header (RFC 9110 §15.5.6) listing allow. */
static void method_not_allowed(api_ctx *x, const char *allow)
{
    char hdr[96], msg[256];
    snprintf(hdr, sizeof hdr, "Allow: %s\r\n", allow);
    snprintf(msg, sizeof msg, "method '%s' is not allowed on '%.120s' (allowed: %s)",
             x->req->method, x->req->path, allow);
    json_t *b = json_pack("{s:{s:s, s:s}}", "error", "code", "method_not_allowed", "message", msg);
    char *text = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!text) {
        nvd_http_error(x->req, 503, "unavailable", "out of memory", NULL);
        return;
    }
    nvd_http_respond(x->req, 405, "application/json", text, strlen(text), hdr);
    free(text);
}

static void handle_api(api_ctx *x, const char *rest)
{
    int r = split_segments(x, rest);
    if (r == -ENOMEM) {
        nvd_http_error(x->req, 503, "unavailable", "out of memory", NULL);
        return;
    }
    if (r < 0) {
        api_error(x, 400, "bad_request", NULL, "path '%s' has an empty, '.' or '..' segment",
                  x->req->path);
        return;
    }
    bool bad_method = false;
    if (x->n_seg < 8 && route(x, &bad_method)) {
        if (bad_method) {
            char allow[64] = "";
            static const char *const ms[] = {"GET", "POST", "PUT"};
            for (size_t i = 0; i < 3; i++) {
                unsigned need;
                if (route_exists(x, ms[i], &need)) {
                    if (allow[0])
                        strcat(allow, ", ");
                    strcat(allow, i == 0 ? "GET, HEAD" : ms[i]);
                }
            }
            method_not_allowed(x, allow);
        }
        return;
    }
    api_error(x, 404, "not_found", NULL, "no route '%s %s'", x->req->method, x->req->path);
}

/* Query parameters are checked once, for every route: a value with a NUL or
 * control byte ("limit=10%00" would read as 10, "state=%00" as no filter) or
 * a '%' not followed by two hex digits is refused with 400 naming the
 * parameter. 0, or -1 with the error sent. */
static int check_query(api_ctx *x)
{
    const char *q = x->req->query;
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        size_t nl = eq ? (size_t)(eq - q) : len;
        char name[65];
        snprintf(name, sizeof name, "%.*s", (int)(nl < 64 ? nl : 64), q);
        for (size_t i = 0; i < len; i++) {
            if (q[i] != '%')
                continue;
            int hi = i + 1 < len ? unhex(q[i + 1]) : -1;
            int lo = i + 2 < len ? unhex(q[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                api_error(x, 400, "bad_request", name,
                          "query parameter '%s': '%%' must be followed by two hex digits", name);
                return -1;
            }
            int ch = hi * 16 + lo;
            if (ch < 0x20 || ch == 0x7f) {
                api_error(x, 400, "bad_request", name,
                          "query parameter '%s' holds a NUL or control byte (%%%02X)", name, ch);
                return -1;
            }
            i += 2;
        }
        q = amp ? amp + 1 : NULL;
    }
    return 0;
}

void nvd_api_admit(void *ud, nvd_http_req *req, nvd_http_admit *ret)
{
    nvd_app *app = ud;
    ret->body_limit = SMALL_BODY;
    ret->budget = NVD_BUDGET_ANON;
    unsigned need = 0;
    bool found = false;
    if (!strncmp(req->path, "/api/v1/", 8)) {
        api_ctx x = {.app = app, .req = req, .method = req->method};
        found = split_segments(&x, req->path + 8) == 0 && route_exists(&x, req->method, &need);
    } else if (!strcmp(req->path, "/metrics")) {
        found = true;
        need = NVD_SCOPE_READ;
    }
    if (!found)
        return; /* answered by the handler, after a small body at most */
    char msg[512], *name = NULL, *devices = NULL;
    const char *code;
    unsigned scopes;
    int st = auth_decide(app, req, need, &name, &scopes, &devices, &code, msg, sizeof msg);
    free(name);
    free(devices);
    if (st) {
        ret->status = st;
        ret->code = code;
        ret->message = msg; /* copied by the server before this returns to it */
        return;
    }
    if (!nvd_http_header(req, "Authorization"))
        return; /* an anonymous read */
    ret->budget = need == NVD_SCOPE_WORKER ? NVD_BUDGET_WORKER : NVD_BUDGET_CLIENT;
    ret->body_limit = route_body_limit(app, req->method, req->path);
}

static void not_allowed_here(api_ctx *x)
{
    method_not_allowed(x, "GET, HEAD");
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
    x->method = req->method;
    req->user = x;
    const char *p = req->path;
    bool get = !strcmp(req->method, "GET") || req->head;
    if (!strcmp(p, "/healthz")) {
        if (!get) {
            not_allowed_here(x);
        } else {
            char why[300];
            bool damaged = nvd_store_damaged(why, sizeof(why));
            json_t *b = json_pack("{s:s, s:s, s:I}", "status", damaged ? "degraded" : "ok",
                                  "version", NV_VERSION, "schema",
                                  (json_int_t)nvd_store_user_version(app->store));
            if (b && damaged)
                json_object_set_new(b, "store",
                                    json_pack("{s:s, s:s}", "state", "damaged", "message", why));
            api_json(x, damaged ? 503 : 200, b);
        }
    } else if (!strcmp(p, "/metrics")) {
        if (!get)
            not_allowed_here(x);
        else if (check_query(x) == 0 && authorize(x, NVD_SCOPE_READ) == 0)
            api_metrics(x);
    } else if (!strncmp(p, "/api/v1/", 8)) {
        if (check_query(x) == 0)
            handle_api(x, p + 8);
    } else if (!strncmp(p, "/api/", 5) || !strcmp(p, "/api")) {
        api_error(x, 404, "not_found", NULL, "no route '%s %s' (the API is under /api/v1/)",
                  req->method, p);
    } else {
        api_static(app, req);
    }
    free(x->token_name);
    x->token_name = NULL;
    free(x->devices);
    x->devices = NULL;
}
