/* HTTP/1.1 server on libuv: the only module that uses http_parser.
 *
 * Keep-alive; at most one request in flight per connection (pipelined requests
 * wait in the input buffer until the response to the previous one is written);
 * limits on header bytes, body bytes (chosen per request by the owner),
 * connections, idle time and slow requests (a deadline for the headers and one
 * for the body), each answered with a JSON error and, where the stream cannot
 * be trusted any more, the connection closed.
 *
 * A request lives until the owner calls nvd_http_respond() on it, possibly from
 * a later loop turn (long polls). If the connection dies first, the abort
 * callback set with nvd_http_on_abort() runs and the request is gone.
 * Per-request scratch memory comes from nvd_http_alloc(), freed with the request.
 */
#ifndef NUMVAL_DAEMON_HTTP_H
#define NUMVAL_DAEMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct nvd_http_server nvd_http_server;
typedef struct nvd_http_req nvd_http_req;

/* Request bodies are charged, as their bytes arrive, to one of these budgets
 * (the owner's admit callback picks it), so the bodies of one kind of client
 * cannot hold the memory another kind needs. */
#define NVD_HTTP_BUDGETS 3

typedef struct nvd_http_limits {
    size_t max_header_bytes; /* request line + headers */
    int max_headers;         /* header count */
    int max_connections;     /* beyond: 503 and close */
    size_t max_body_total;   /* request bodies held at once, all connections */
    /* Of max_body_total, what the bodies charged to each budget may hold at
     * once (0: no cap of its own). */
    size_t max_body_budget[NVD_HTTP_BUDGETS];
    uint64_t idle_timeout_ms;   /* keep-alive connection with no request */
    uint64_t header_timeout_ms; /* first byte of a request to end of headers */
    uint64_t body_timeout_ms;   /* end of headers to end of body */
} nvd_http_limits;

/* Public, read-only view of a request. Strings are NUL-terminated. */
struct nvd_http_req {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* percent-decoded path, without the query */
    const char *query;  /* raw query string ("" if none) */
    const char *body;   /* NUL-terminated copy, body_len bytes */
    size_t body_len;
    bool loopback;    /* the peer address is a loopback address */
    const char *peer; /* the peer address as text ("127.0.0.1", "::1"; "" if unknown);
                       * an IPv4-mapped IPv6 peer is written as IPv4 */
    bool head;     /* HEAD request: the body of the response is not sent */
    void *user;    /* free for the owner */
};

/* What the owner decides about a request once its headers are in, before a
 * byte of its body is accepted (the admit callback fills it in; it starts as
 * body_limit 0, budget 0, status 0). */
typedef struct nvd_http_admit {
    size_t body_limit; /* the largest body accepted (beyond: 413) */
    int budget;        /* 0..NVD_HTTP_BUDGETS-1: where the body's bytes are charged */
    int status;        /* non-zero: refuse now with this status; the body is never read
                        * and the connection closes after the answer */
    const char *code;  /* with status: the error code and message (copied) */
    const char *message;
} nvd_http_admit;

/* The owner's callbacks. handle must answer every request exactly once.
 * admit sees the request without its body (method, decoded path, query,
 * headers, loopback; body NULL) and decides its body limit and budget, or
 * refuses it (an unauthenticated upload, say) before the body arrives. */
typedef struct nvd_http_callbacks {
    void (*handle)(void *ud, nvd_http_req *req);
    void (*admit)(void *ud, nvd_http_req *req, nvd_http_admit *ret);
    void (*done)(void *ud, nvd_http_req *req, int status); /* after a response; may be NULL */
} nvd_http_callbacks;

/* Start listening on "HOST:PORT" (port 0: any). */
int nvd_http_server_new(uv_loop_t *loop, const char *listen, const nvd_http_limits *limits,
                        const nvd_http_callbacks *cb, void *ud, nvd_http_server **ret);
/* The bound port, after nvd_http_server_new. */
int nvd_http_server_port(const nvd_http_server *srv);
int nvd_http_server_connections(const nvd_http_server *srv);
/* Close the listener and every connection (aborting requests in flight); the
 * memory goes once the loop has run the close callbacks. */
void nvd_http_server_close(nvd_http_server *srv);

/* A request header by case-insensitive name, or NULL. */
const char *nvd_http_header(const nvd_http_req *req, const char *name);
/* How many headers of that name the request has (a proxy header sent twice
 * is ambiguous). */
int nvd_http_header_count(const nvd_http_req *req, const char *name);
/* Arena memory for the request's lifetime; NULL on ENOMEM. */
void *nvd_http_alloc(nvd_http_req *req, size_t n);

/* Answer the request. Copies body. extra_headers: "Name: value\r\n..." or NULL.
 * After this call req must not be used. */
void nvd_http_respond(nvd_http_req *req, int status, const char *content_type, const void *body,
                      size_t len, const char *extra_headers);
/* Answer with {"error":{"code","message"[,"field"]}}. */
void nvd_http_error(nvd_http_req *req, int status, const char *code, const char *message,
                    const char *field);
/* Called if the connection closes before the request is answered. */
void nvd_http_on_abort(nvd_http_req *req, void (*cb)(void *ud, nvd_http_req *req), void *ud);

const char *nvd_http_status_text(int status);
/* Whether a listen address ("HOST:PORT", as nvd_http_server_new takes it)
 * accepts only loopback peers (127.0.0.0/8, ::1). false for a wildcard or an
 * address that does not parse. */
bool nvd_http_listen_is_loopback(const char *listen);
/* Whether a header name is an RFC 9110 token (§5.6.2: 1*tchar). */
bool nvd_http_token_ok(const char *name);

#endif
