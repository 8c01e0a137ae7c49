/* The HTTP module's connection and request state, shared by its two halves:
 * http.c (parsing, requests, responses) and http_server.c (listener,
 * connections, timers). daemon/http/ only.
 *
 * The calls go one way: http_server.c calls http.c (below) by name; http.c
 * reaches the connection through the server's http_conn_ops, which
 * http_server.c fills in. */
#ifndef NUMVAL_DAEMON_HTTP_CONN_H
#define NUMVAL_DAEMON_HTTP_CONN_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "http.h"

#define READ_CHUNK 65536
#define ARENA_CHUNK 4096
#define KEEP_BODY 65536

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

typedef enum { PH_IDLE, PH_HEADERS, PH_BODY, PH_BUSY } phase_t;

typedef struct reqstate {
    nvd_http_req pub; /* first: nvd_http_req * converts back */
    arena_chunk *arena;
    char *url;
    size_t url_len, url_cap;
    char *hbuf; /* name\0value\0 ... */
    size_t hlen, hcap;
    int hstate; /* 0 none, 1 in a field, 2 in a value */
    int n_headers;
    const char **hdr; /* n_headers pairs: name, value */
    char *body;
    size_t body_len, body_cap, body_limit;
    size_t charged;   /* body bytes counted in the server's body_bytes and budget */
    int budget;       /* the budget they are counted in (admit) */
    bool has_length;  /* Content-Length given: declared is the body's size */
    uint64_t declared;
    bool keep_alive, responded;
    int error_status;
    const char *error_code, *error_msg;
    void (*abort_cb)(void *ud, nvd_http_req *req);
    void *abort_ud;
} reqstate;

typedef struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    nvd_http_server *srv;
    struct conn *prev, *next;
    http_parser parser;
    phase_t phase;
    int open_handles;
    bool closing, in_flight, close_after, reading, loopback, draining;
    char peer[64]; /* the peer address as text (nvd_http_req.peer) */
    uv_shutdown_t shutdown;
    char *in;
    size_t in_len, in_off, in_cap;
    reqstate rq;
} conn;

/* What http.c asks of a connection (http_server.c implements it). */
typedef struct http_conn_ops {
    void (*close)(conn *c);            /* close (once), aborting a request in flight */
    void (*arm)(conn *c, uint64_t ms); /* (re)start the connection's timer */
    void (*read_start)(conn *c);       /* resume reading */
    void (*linger)(conn *c);           /* FIN, discard input for a moment, then close */
} http_conn_ops;

struct nvd_http_server {
    uv_tcp_t listener;
    uv_loop_t *loop;
    nvd_http_limits lim;
    nvd_http_callbacks cb;
    void *ud;
    const http_conn_ops *ops;
    conn *conns;
    int n_conns, port;
    size_t body_bytes; /* request bodies held by all connections */
    size_t budget_bytes[NVD_HTTP_BUDGETS]; /* the same, by budget */
    bool closing, listener_closed;
};

typedef struct wreq {
    uv_write_t w;
    conn *c;
    bool final; /* the response that ends the request (not a 100 Continue) */
    int status;
    char data[];
} wreq;

/* http.c, for http_server.c: parse and dispatch what the connection has read,
 * answer with an error and close, free the request state on close. */
void http_process_input(conn *c);
void http_fail_conn(conn *c, int status, const char *code, const char *message);
void http_conn_rq_reset(conn *c);

#endif
