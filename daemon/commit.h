/* The group commit: the store's writes of one event-loop turn share one
 * transaction (store.h group_commit), committed once before the loop blocks (a
 * uv_prepare handle). A JSON response written while that transaction is open
 * is held until the commit, so no client is told of a write the disk does not
 * have yet; if the commit fails, every held response becomes a 503.
 *
 * Used by the route handlers (api/) for their replies and by the daemon's
 * services (the scheduler) that write outside a request. */
#ifndef NUMVAL_DAEMON_COMMIT_H
#define NUMVAL_DAEMON_COMMIT_H

#include <uv.h>

#include "daemon/http/http.h"

typedef struct nvd_held nvd_held;

/* Embedded in nvd_app (app.h). */
typedef struct nvd_commit {
    uv_prepare_t prepare;  /* commits before the loop blocks */
    nvd_held *head, *tail; /* the responses waiting for the commit, in order */
} nvd_commit;

struct nvd_app;

/* Start committing before each loop block, on app->loop. 0 or a libuv error. */
int nvd_commit_start(struct nvd_app *app);
/* Commit the open group transaction, if any, and send the held responses
 * (503s when the commit failed; counted in app->metrics.commit_failures). */
void nvd_commit_flush(struct nvd_app *app);
/* On shutdown: a last flush, then stop and close the prepare handle. */
void nvd_commit_stop(struct nvd_app *app);
/* Answer req with status and JSON text (compact; "" for a 204), now when no
 * write is waiting for the commit, else once the commit is done. Takes text
 * (malloc'd; freed here). If the connection closes first, the held response
 * is dropped. */
void nvd_commit_reply(struct nvd_app *app, nvd_http_req *req, int status, char *text);

#endif
