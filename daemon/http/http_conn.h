/* The HTTP module's connection and request state, shared by its two halves:
 * http.c (parsing, requests, responses) and http_server.c (listener,
 * connections, timers). daemon/http*.c only. */
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
    size_t charged; /* body bytes counted in the server's body_bytes */
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
    uv_shutdown_t shutdown;
    char *in;
    size_t in_len, in_off, in_cap;
    reqstate rq;
} conn;

struct nvd_http_server {
    uv_tcp_t listener;
    uv_loop_t *loop;
    nvd_http_limits lim;
    nvd_http_callbacks cb;
    void *ud;
    conn *conns;
    int n_conns, port;
    size_t body_bytes; /* request bodies held by all connections */
    bool closing, listener_closed;
};

typedef struct wreq {
    uv_write_t w;
    conn *c;
    bool final; /* the response that ends the request (not a 100 Continue) */
    int status;
    char data[];
} wreq;

/* http.c */
void http_process_input(conn *c);
void http_fail_conn(conn *c, int status, const char *code, const char *message);
void http_conn_rq_reset(conn *c);

/* http_server.c */
void http_conn_close(conn *c);
void http_conn_arm(conn *c, uint64_t ms);
void http_read_start(conn *c);
void http_linger(conn *c);

#endif
