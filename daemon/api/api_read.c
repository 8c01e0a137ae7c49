/* Long reads (job and case lists, history, flaky cases, build compare) on the libuv threadpool with the store's
 * read-only connections, so a page of 1000 cases never stalls the loop. The
 * request's parameters are copied: the connection (and its arena) may go
 * while the work runs, which the abort callback records. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

typedef struct offload {
    uv_work_t work;
    nvd_app *app;
    nvd_http_req *req; /* NULL once the connection is gone */
    api_read_fn fn;    /* api_read_run: the read, its argument and its name */
    api_read_err_fn on_err;
    void *arg;
    const char *what;
    bool cases;
    nvd_job_filter jf;
    nvd_case_filter cf;
    char str[5][136]; /* copies of the filter strings */
    int r;
    char *text;
} offload;

static const char *keep(offload *o, int i, const char *s)
{
    if (!s)
        return NULL;
    snprintf(o->str[i], sizeof(o->str[i]), "%s", s);
    return o->str[i];
}

static char *page(json_t *items, const char *key, bool more, int64_t next)
{
    char nc[32];
    snprintf(nc, sizeof(nc), "%lld", (long long)next);
    json_t *b =
        json_pack("{s:o, s:o}", key, items, "next_cursor", more ? json_string(nc) : json_null());
    char *t = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    return t;
}

static void run(uv_work_t *w)
{
    offload *o = w->data;
    nvd_store *s = nvd_store_pool_acquire(o->app->read_pool);
    json_t *items = NULL;
    if (o->fn) {
        o->r = o->fn(s, o->arg, &items);
        if (o->r == 0) {
            o->text = json_dumps(items, JSON_COMPACT);
            json_decref(items);
        }
    } else if (o->cases) {
        json_t *job = NULL;
        o->r = nvd_store_job_get(s, o->cf.job_id, &job);
        json_decref(job);
        int64_t last = -1;
        bool more = false;
        if (o->r == 0)
            o->r = nvd_store_cases_list(s, &o->cf, &items, &last, &more);
        if (o->r == 0)
            o->text = page(items, "cases", more, last);
    } else {
        int64_t next = 0;
        o->r = nvd_store_jobs_list(s, &o->jf, &items, &next);
        if (o->r == 0)
            o->text = page(items, "jobs", next != 0, next);
    }
    nvd_store_pool_release(o->app->read_pool, s);
    if (o->r == 0 && !o->text)
        o->r = -ENOMEM;
}

static void done(uv_work_t *w, int status)
{
    offload *o = w->data;
    nvd_http_req *req = o->req;
    if (req) {
        nvd_http_on_abort(req, NULL, NULL);
        api_ctx *x = req->user;
        if (status < 0)
            o->r = status;
        if (o->r == 0)
            nvd_http_respond(req, 200, "application/json", o->text, strlen(o->text),
                             "Cache-Control: no-store\r\n");
        else if (o->on_err)
            o->on_err(x, o->r, o->arg);
        else if (o->r == -ENOENT && !o->fn)
            api_error(x, 404, "not_found", NULL, "job '%lld' not found", (long long)o->cf.job_id);
        else
            api_errno(x, o->r, o->fn ? o->what : o->cases ? "list cases" : "list jobs");
    }
    free(o->text);
    free(o->arg);
    free(o);
}

static void aborted(void *ud, nvd_http_req *req)
{
    (void)req;
    offload *o = ud;
    o->req = NULL;
}

static void start(api_ctx *x, offload *o)
{
    o->app = x->app;
    o->req = x->req;
    o->work.data = o;
    int r = uv_queue_work(x->app->loop, &o->work, run, done);
    if (r < 0) {
        free(o->arg);
        free(o);
        api_errno(x, r, "queue read");
        return;
    }
    nvd_http_on_abort(x->req, aborted, o);
}

void api_read_jobs(api_ctx *x, const nvd_job_filter *f)
{
    offload *o = calloc(1, sizeof(*o));
    if (!o) {
        api_errno(x, -ENOMEM, "list jobs");
        return;
    }
    o->jf = *f;
    o->jf.state = keep(o, 0, f->state);
    o->jf.kind = keep(o, 1, f->kind);
    o->jf.device = keep(o, 2, f->device);
    o->jf.build = keep(o, 3, f->build);
    start(x, o);
}

void api_read_cases(api_ctx *x, const nvd_case_filter *f)
{
    offload *o = calloc(1, sizeof(*o));
    if (!o) {
        api_errno(x, -ENOMEM, "list cases");
        return;
    }
    o->cases = true;
    o->cf = *f;
    o->cf.verdict = keep(o, 4, f->verdict);
    start(x, o);
}

void api_read_run(api_ctx *x, api_read_fn fn, void *arg, const char *what)
{
    api_read_run_err(x, fn, arg, what, NULL);
}

void api_read_run_err(api_ctx *x, api_read_fn fn, void *arg, const char *what,
                      api_read_err_fn on_err)
{
    offload *o = calloc(1, sizeof(*o));
    if (!o) {
        free(arg);
        api_errno(x, -ENOMEM, what);
        return;
    }
    o->fn = fn;
    o->on_err = on_err;
    o->arg = arg;
    o->what = what;
    start(x, o);
}
