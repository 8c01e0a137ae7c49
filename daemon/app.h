/* The daemon's state, shared by main.c, the daemon's services and the route
 * handlers (api/). */
#ifndef NUMVAL_DAEMON_APP_H
#define NUMVAL_DAEMON_APP_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "commit.h"
#include "config.h"
#include "daemon/http/http.h"
#include "daemon/store/store.h"
#include "queue.h"

typedef struct nvd_supervisor nvd_supervisor;
typedef struct nvd_pools nvd_pools;
typedef struct nvd_webhooks nvd_webhooks;

typedef struct nvd_metrics {
    uint64_t requests[6]; /* by status class: [1] 1xx ... [5] 5xx */
    uint64_t jobs_submitted, results_stored, claims, leases_expired;
    uint64_t artifacts_stored, commit_failures, worker_restarts;
    uint64_t idem_replays; /* submissions answered with the job of their Idempotency-Key */
    int64_t started_ms;
} nvd_metrics;

typedef struct nvd_app {
    uv_loop_t *loop;
    nvd_config *cfg;
    nvd_store *store;
    nvd_store_pool *read_pool; /* read-only connections for the threadpool */
    nvd_queue *queue;
    nvd_http_server *http;
    nvd_supervisor *sup;
    nvd_pools *pools; /* [pool] sections: Slurm-started workers (pool.h) */
    nvd_webhooks *hooks; /* [webhook] deliveries (webhook.h) */
    nvd_metrics metrics;
    nvd_commit commit; /* group commit and the responses held for it (commit.h) */
    char *web_dir;     /* resolved static root, or NULL */
    int port;
} nvd_app;

/* The HTTP server's callbacks (nvd_http_callbacks), ud the nvd_app: defined by
 * the route handlers (api/api.c) and given to the server by main.c, the one
 * file above api/. Declared here so main.c includes nothing of api/. */
void nvd_api_handle(void *ud, nvd_http_req *req);
void nvd_api_admit(void *ud, nvd_http_req *req, nvd_http_admit *ret);
void nvd_api_done(void *ud, nvd_http_req *req, int status);

#endif
