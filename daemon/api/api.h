/* Helpers shared by the route handlers (daemon/api*.c only). */
#ifndef NUMVAL_DAEMON_API_H
#define NUMVAL_DAEMON_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/app.h"

typedef struct api_ctx {
    nvd_app *app;
    nvd_http_req *req;
    const char *method; /* the method routed by (req's, or another when asking what is allowed) */
    bool dry;           /* only find the route: its scope goes to need, nothing runs */
    unsigned need;
    const char *seg[8]; /* path segments after "/api/v1/" */
    int n_seg;
    char *token_name; /* the caller's token name, or NULL (anonymous) */
    unsigned scopes;
    char *devices; /* the devices a worker token is bound to (comma list), or NULL */
} api_ctx;

/* Send body (stolen) as JSON; waits for the group commit when one is open. */
void api_json(api_ctx *x, int status, json_t *body);
/* {"error": {...}}; message is printf-style. field may be NULL. */
void api_error(api_ctx *x, int status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Map a negative errno from the store to a 4xx/5xx error. */
void api_errno(api_ctx *x, int r, const char *what);
/* Decoded query parameter, or NULL (arena memory). */
const char *api_query(api_ctx *x, const char *name);
/* Parse the body as a JSON object; on failure answers 400 and returns NULL. */
json_t *api_body_object(api_ctx *x);
/* Parse "limit" (default def, 1..max); answers 400 and returns -1 when bad. */
int api_limit(api_ctx *x, int def, int max);
/* Parse a positive id from a path segment; answers 400/404 and returns -1. */
int api_id(api_ctx *x, const char *s, int64_t *ret);
/* Whether s is a safe name ([A-Za-z0-9._-], 1..128 bytes). */
bool api_name_ok(const char *s);

/* Route handlers. */
void api_jobs_submit(api_ctx *x);
void api_jobs_list(api_ctx *x);
void api_job_get(api_ctx *x, int64_t id);
void api_job_cancel(api_ctx *x, int64_t id);
void api_job_cases(api_ctx *x, int64_t id);
void api_case_get(api_ctx *x, int64_t id);
void api_worker_claim(api_ctx *x);
void api_worker_heartbeat(api_ctx *x);
void api_worker_result(api_ctx *x);
void api_worker_artifact_put(api_ctx *x, const char *sha);
void api_artifact_get(api_ctx *x, const char *sha);
void api_tolerances_get(api_ctx *x, bool history);
void api_tolerances_post(api_ctx *x);
void api_builds(api_ctx *x);
/* POST /api/v1/builds (api_builds.c). */
void api_builds_register(api_ctx *x);
/* POST /api/v1/bisections, GET /api/v1/bisections/{id} (api_bisect.c). */
void api_bisect_post(api_ctx *x);
void api_bisect_get(api_ctx *x, int64_t id);
void api_devices(api_ctx *x, const char *name);
/* GET /api/v1/devices/{name}/contract (api_contract.c). */
void api_device_contract(api_ctx *x, const char *device);
void api_metrics(api_ctx *x);
/* Job and case lists on the threadpool (api_read.c); filters are copied. */
void api_read_jobs(api_ctx *x, const nvd_job_filter *f);
void api_read_cases(api_ctx *x, const nvd_case_filter *f);
/* Any other long read on the threadpool: fn(s, arg, &body) runs there on a
 * read-only connection and body (a new reference) is the 200 answer; an error
 * is answered through api_errno(what). arg is malloc'd, owned by the call
 * (freed after fn ran, also when the connection went away); what is a string
 * literal. */
typedef int (*api_read_fn)(nvd_store *s, void *arg, json_t **ret);
void api_read_run(api_ctx *x, api_read_fn fn, void *arg, const char *what);
/* The same, with on_err answering an error (back on the loop, before arg is
 * freed) instead of api_errno. */
typedef void (*api_read_err_fn)(api_ctx *x, int r, void *arg);
void api_read_run_err(api_ctx *x, api_read_fn fn, void *arg, const char *what,
                      api_read_err_fn on_err);
/* Static files: /js/... from the JavaScript library dir, else the web dir. */
void api_static(nvd_app *app, nvd_http_req *req);

#endif
