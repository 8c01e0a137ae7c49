/* numval-worker's one libcurl file: requests to numvald's worker routes.
 * Thread-safe: each request uses its own easy handle (the runner thread uploads
 * artifacts while the main thread heartbeats). */
#ifndef NUMVAL_WORKER_HTTP_CLIENT_H
#define NUMVAL_WORKER_HTTP_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct nvw_http nvw_http;

typedef struct nvw_http_resp {
    long status;
    char *body; /* NUL-terminated, owned; free with nvw_http_resp_done */
    size_t len;
} nvw_http_resp;

/* Process-wide setup; call once before any thread starts. 0 or -EIO. */
int nvw_http_global_init(void);
void nvw_http_global_done(void);

/* A client for server (base URL) with bearer token (may be NULL or ""); abort
 * points at a flag that, when it becomes non-zero, aborts requests in flight
 * (SIGTERM during a long poll). Returns NULL on ENOMEM. */
nvw_http *nvw_http_new(const char *server, const char *token, atomic_int *abort);

void nvw_http_free(nvw_http *h); /* NULL is a no-op */
/* Verify an https server against the CA certificates (PEM) in path instead of
 * the system's (copied; NULL or "": the system's). Verification itself is
 * always on. 0 or -ENOMEM. */
int nvw_http_set_cacert(nvw_http *h, const char *path);

/* One request. Returns 0 when a response arrived (any status), -ECONNREFUSED /
 * -ETIMEDOUT / -ECANCELED (aborted) / -EIO for transport failures,
 * -EKEYREJECTED when the server's certificate does not verify (or the CA file
 * cannot be used), -ENOMEM;
 * *ret_err (when given) gets a malloc'd message on failure. */
int nvw_http_request(nvw_http *h, const char *method, const char *path, const char *content_type,
                     const void *body, size_t len, long timeout_ms, nvw_http_resp *ret,
                     char **ret_err);
void nvw_http_resp_done(nvw_http_resp *r);

#endif
