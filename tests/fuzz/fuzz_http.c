/* libFuzzer target: numvald's HTTP/1.1 request parsing (daemon/http/http.c over
 * http-parser), the code every byte from the network goes through first.
 *
 * Each input is the byte stream one client sends on one connection: one or
 * more (pipelined) requests, possibly cut short. The connection is a real libuv
 * stream (one end of a socketpair) attached to a real nvd_http_server the way
 * http_server.c attaches an accepted socket, so http_process_input, the
 * server's timers, writes, lingering close and the close callbacks all run as
 * in numvald; the peer end sends the input (in pieces whose size the input's
 * hash picks), then EOF, and reads whatever comes back. The owner's callbacks
 * stand in for daemon/api: they read what a handler reads (method, path,
 * query, headers, the NUL-terminated body) and answer, with ETags (a JSON 200)
 * or an error.
 *
 * Checked besides ASan and UBSan: every connection closes once the client has
 * sent EOF and read its answers (no request left hanging without a timer
 * firing), and the server's body budgets (max_body_total and each of
 * max_body_budget) return to 0: bytes charged to a request are given back
 * when it ends.
 *
 * Includes daemon/http/http_conn.h, the module's private state, to attach the
 * connection: a test's privilege. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/http/http.h"
#include "daemon/http/http_conn.h"

#define SMALL_BODY 4096
#define JOB_BODY (64 << 10)
#define BIG_BODY (512 << 10)

static uv_loop_t loop;
static nvd_http_server *srv;
static unsigned long answered;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_http: %s\n", what);
    abort();
}

static void handle(void *ud, nvd_http_req *req)
{
    (void)ud;
    /* What handlers read: every string NUL-terminated within its allocation. */
    size_t n = strlen(req->method) + strlen(req->path) + strlen(req->query);
    if (req->body[req->body_len] != '\0')
        die("the body is not NUL-terminated");
    const char *auth = nvd_http_header(req, "Authorization");
    const char *ctype = nvd_http_header(req, "content-type");
    n += auth ? strlen(auth) : 0;
    n += ctype ? strlen(ctype) : 0;
    char *scratch = nvd_http_alloc(req, 1 + req->body_len % 8192);
    if (scratch)
        scratch[0] = (char)n;
    answered++;
    if (strncmp(req->path, "/e", 2) == 0) {
        nvd_http_error(req, 404, "not_found", req->path, req->query);
        return;
    }
    char body[128];
    int len = snprintf(body, sizeof body, "{\"path_bytes\":%zu,\"body_bytes\":%zu}",
                       strlen(req->path), req->body_len);
    nvd_http_respond(req, 200, "application/json", body, (size_t)len,
                     req->query[0] ? "Cache-Control: no-store\r\n" : NULL);
}

/* The routes' limits as daemon/api sets them, smaller (the budget below):
 * uploads charged to budget 2, as numvald charges worker routes, and a path
 * refused before its body, as numvald refuses a write without a token. */
static void admit(void *ud, nvd_http_req *req, nvd_http_admit *ret)
{
    (void)ud;
    const char *m = req->method, *path = req->path;
    if (!strcmp(m, "PUT") && !strncmp(path, "/api/v1/worker/artifacts/", 25)) {
        ret->body_limit = BIG_BODY;
        ret->budget = 2;
    } else if (!strcmp(m, "POST") || !strcmp(m, "PUT")) {
        ret->body_limit = JOB_BODY;
        ret->budget = 1;
    } else {
        ret->body_limit = SMALL_BODY;
    }
    if (!strncmp(path, "/deny", 5)) {
        ret->status = 401;
        ret->code = "unauthorized";
        ret->message = path;
    }
}

static void setup(void)
{
    if (srv)
        return;
    uv_loop_init(&loop);
    /* numvald's defaults (daemon/config.c) but a body budget two large bodies
     * exhaust, so that refusal is reachable. */
    nvd_http_limits lim = {.max_header_bytes = 16384,
                           .max_headers = 64,
                           .max_connections = 1024,
                           .max_body_total = BIG_BODY + JOB_BODY,
                           .max_body_budget = {SMALL_BODY * 4, JOB_BODY, BIG_BODY},
                           .idle_timeout_ms = 60000,
                           .header_timeout_ms = 10000,
                           .body_timeout_ms = 60000};
    nvd_http_callbacks cb = {.handle = handle, .admit = admit};
    if (nvd_http_server_new(&loop, "127.0.0.1:0", &lim, &cb, NULL, &srv) < 0)
        die("cannot start the server");
}

/* A connection on fd, as http_server.c's on_connection sets up an accepted one. */
static conn *attach(int fd)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        die("out of memory");
    c->srv = srv;
    uv_tcp_init(&loop, &c->tcp);
    uv_timer_init(&loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    srv->n_conns++;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    if (uv_tcp_open(&c->tcp, fd) < 0)
        die("uv_tcp_open");
    c->loopback = true;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->phase = PH_IDLE;
    srv->ops->arm(c, srv->lim.idle_timeout_ms);
    srv->ops->read_start(c);
    return c;
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        die("socketpair");
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    attach(sv[0]);
    /* Pieces of 1, 7, 64 bytes or the whole input: the parser must give the
     * same answers however the stream is cut. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    static const size_t pieces[] = {1, 7, 64, SIZE_MAX};
    size_t piece = pieces[h % 4], off = 0;
    int idle = 0;
    while (off < size) {
        size_t want = size - off < piece ? size - off : piece;
        ssize_t w = send(sv[1], data + off, want, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN)
            break; /* the server closed its end: the rest is never read */
        int live = uv_run(&loop, UV_RUN_NOWAIT);
        drain(sv[1]);
        if (srv->n_conns == 0)
            break;
        idle = w > 0 ? 0 : idle + 1;
        if (idle > 100000 || !live)
            break;
    }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; srv->n_conns > 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        drain(sv[1]);
        if (i == 100000)
            die("the connection stays open after the client's EOF");
    }
    close(sv[1]);
    if (srv->body_bytes != 0)
        die("body bytes still charged after the connection closed");
    for (int b = 0; b < NVD_HTTP_BUDGETS; b++)
        if (srv->budget_bytes[b] != 0)
            die("body bytes still charged to a budget after the connection closed");
    return 0;
}
