/* The group commit and the responses held for it (commit.h). */
#include "commit.h"

#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "common/log.h"
#include "webhook.h"

struct nvd_held {
    nvd_held *prev, *next;
    nvd_app *app;
    nvd_http_req *req;
    int status;
    char *text;
};

static void held_unlink(nvd_app *app, nvd_held *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        app->commit.head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        app->commit.tail = p->prev;
}

/* The connection closed before the commit: nobody is left to answer. */
static void held_abort(void *ud, nvd_http_req *req)
{
    (void)req;
    nvd_held *p = ud;
    held_unlink(p->app, p);
    free(p->text);
    free(p);
}

static void send_text(nvd_http_req *req, int status, const char *text)
{
    nvd_http_respond(req, status, status == 204 ? NULL : "application/json", text, strlen(text),
                     "Cache-Control: no-store\r\n");
}

void nvd_commit_flush(nvd_app *app)
{
    if (!nvd_store_pending(app->store) && !app->commit.head) {
        nvd_webhooks_release(app->hooks, true); /* events emitted outside a write */
        return;
    }
    int r = nvd_store_commit(app->store);
    if (r < 0) {
        app->metrics.commit_failures++;
        /* The rolled-back submissions, claims and requeues must not stay counted. */
        int r2 = nvd_queue_resync(app->queue);
        if (r2 < 0)
            nv_log_err("queue: cannot recount after a failed commit: %s", strerror(-r2));
    }
    nvd_webhooks_release(app->hooks, r >= 0); /* the events of what was committed */
    while (app->commit.head) {
        nvd_held *p = app->commit.head;
        held_unlink(app, p);
        nvd_http_on_abort(p->req, NULL, NULL);
        if (r < 0)
            nvd_http_error(p->req, 503, "unavailable", "the store could not commit; retry later",
                           NULL);
        else
            send_text(p->req, p->status, p->text);
        free(p->text);
        free(p);
    }
}

void nvd_commit_reply(nvd_app *app, nvd_http_req *req, int status, char *text)
{
    if (nvd_store_pending(app->store)) {
        nvd_held *p = calloc(1, sizeof(*p));
        if (p) {
            p->app = app;
            p->req = req;
            p->status = status;
            p->text = text;
            p->prev = app->commit.tail;
            if (app->commit.tail)
                app->commit.tail->next = p;
            else
                app->commit.head = p;
            app->commit.tail = p;
            nvd_http_on_abort(req, held_abort, p);
            return;
        }
        /* Without memory to wait, commit now so the answer stays truthful. */
        nvd_commit_flush(app);
    }
    send_text(req, status, text);
    free(text);
}

static void on_prepare(uv_prepare_t *h)
{
    nvd_commit_flush(h->data);
}

int nvd_commit_start(nvd_app *app)
{
    int r = uv_prepare_init(app->loop, &app->commit.prepare);
    if (r < 0)
        return r;
    app->commit.prepare.data = app;
    return uv_prepare_start(&app->commit.prepare, on_prepare);
}

void nvd_commit_stop(nvd_app *app)
{
    nvd_commit_flush(app);
    uv_prepare_stop(&app->commit.prepare);
    uv_close((uv_handle_t *)&app->commit.prepare, NULL);
}
