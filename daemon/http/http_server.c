/* The HTTP server's listener and connections on libuv: accept, read, timers,
 * shutdown and close (see http.h; requests are parsed in http.c). */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "http_conn.h"
#include "http_internal.h"

static void on_timer(uv_timer_t *t);
static void conn_close(conn *c);

/* ---- connections ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = h->data;
    if (c->in_off == c->in_len)
        c->in_off = c->in_len = 0;
    if (c->in_cap - c->in_len < READ_CHUNK) {
        if (c->in_off > 0) {
            memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
            c->in_len -= c->in_off;
            c->in_off = 0;
        }
        if (c->in_cap - c->in_len < READ_CHUNK) {
            char *n = realloc(c->in, c->in_len + READ_CHUNK);
            if (!n) {
                *buf = uv_buf_init(NULL, 0);
                return;
            }
            c->in = n;
            c->in_cap = c->in_len + READ_CHUNK;
        }
    }
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = s->data;
    if (c->draining) {
        c->in_off = c->in_len = 0;
        if (nread < 0)
            conn_close(c);
        return;
    }
    if (nread < 0) {
        /* A client may half-close after sending its request: answer it, then
         * close. A parked request (it has an abort callback: a long poll) is
         * given up at once, so a claim never goes to a worker that is gone. */
        if (nread == UV_EOF && c->in_flight && !c->rq.abort_cb && !c->rq.responded) {
            uv_read_stop(s);
            c->reading = false;
            c->close_after = true;
            return;
        }
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    c->in_len += (size_t)nread;
    if (c->in_flight) {
        /* Pipelined bytes wait; stop reading once a request's worth is buffered. */
        if (c->in_len - c->in_off > c->srv->lim.max_header_bytes + READ_CHUNK) {
            uv_read_stop(s);
            c->reading = false;
        }
        return;
    }
    http_process_input(c);
}

static void conn_read_start(conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status;
}

/* After an answer that ends the connection: send FIN, then read and discard
 * what the client still sends for a moment (lingering close, as nginx does),
 * so a client still writing a refused body reads our answer instead of a
 * reset. */
static void conn_linger(conn *c)
{
    c->draining = true;
    c->close_after = false;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    if (!c->reading)
        conn_read_start(c);
    uv_timer_start(&c->timer, on_timer, 2000, 0);
}

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->draining) {
        conn_close(c);
        return;
    }
    if (c->closing || c->in_flight)
        return;
    if (c->phase == PH_IDLE) {
        conn_close(c);
        return;
    }
    http_fail_conn(c, 408, "timeout",
                   c->phase == PH_HEADERS ? "request headers not received in time"
                                          : "request body not received in time");
}

static void conn_arm(conn *c, uint64_t ms)
{
    if (!c->closing)
        uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void server_maybe_free(nvd_http_server *srv)
{
    if (srv->closing && srv->listener_closed && srv->n_conns == 0)
        free(srv);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    nvd_http_server *srv = c->srv;
    http_conn_rq_reset(c);
    free(c->in);
    free(c);
    srv->n_conns--;
    server_maybe_free(srv);
}

static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->in_flight && !c->rq.responded && c->rq.abort_cb)
        c->rq.abort_cb(c->rq.abort_ud, &c->rq.pub);
    c->rq.abort_cb = NULL;
    nvd_http_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static const http_conn_ops conn_ops = {
    .close = conn_close, .arm = conn_arm, .read_start = conn_read_start, .linger = conn_linger};

/* The peer's address as text into buf (an IPv4-mapped IPv6 address as IPv4,
 * so that a [server] trusted_proxy of "127.0.0.1" matches it), and whether
 * it is a loopback address. */
static bool peer_is_loopback(uv_tcp_t *t, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    buf[0] = '\0';
    if (uv_tcp_getpeername(t, (struct sockaddr *)&ss, &len) < 0)
        return false;
    if (ss.ss_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)&ss, buf, cap);
    if (ss.ss_family == AF_INET6) {
        const unsigned char *b = ((const struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
        if (memcmp(b, mapped, 12) == 0)
            snprintf(buf, cap, "%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
        else
            uv_ip6_name((const struct sockaddr_in6 *)&ss, buf, cap);
    }
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        static const unsigned char lo[16] = {[15] = 1};
        static const unsigned char v4[12] = {[10] = 0xff, [11] = 0xff};
        return memcmp(a->sin6_addr.s6_addr, lo, 16) == 0 ||
               (memcmp(a->sin6_addr.s6_addr, v4, 12) == 0 && a->sin6_addr.s6_addr[12] == 127);
    }
    return false;
}

static void on_connection(uv_stream_t *server, int status)
{
    nvd_http_server *srv = server->data;
    if (status < 0 || srv->closing)
        return;
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    srv->n_conns++;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->loopback = peer_is_loopback(&c->tcp, c->peer, sizeof c->peer);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (srv->n_conns > srv->lim.max_connections) {
        http_fail_conn(c, 503, "unavailable", "too many connections; retry later");
        return;
    }
    c->phase = PH_IDLE;
    conn_arm(c, srv->lim.idle_timeout_ms);
    conn_read_start(c);
}

int nvd_http_server_new(uv_loop_t *loop, const char *listen, const nvd_http_limits *limits,
                        const nvd_http_callbacks *cb, void *ud, nvd_http_server **ret)
{
    /* The parser's own cap only backs up ours, set above what one
     * http_parser_execute call can see past our limit (the input buffer holds
     * at most max_header_bytes + 2 READ_CHUNKs), so that our callbacks, which
     * tell a long URI (414) from long headers (431), always refuse first. */
    http_parser_set_max_header_size((uint32_t)(2 * limits->max_header_bytes + 4 * READ_CHUNK));
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    int r = http_parse_listen(listen, &ss);
    if (r < 0)
        return -EINVAL;
    nvd_http_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->lim = *limits;
    srv->cb = *cb;
    srv->ud = ud;
    srv->ops = &conn_ops;
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    r = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
    if (r < 0) {
        srv->closing = true;
        nvd_http_server_close(srv);
        return r;
    }
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
    srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    *ret = srv;
    return 0;
}

int nvd_http_server_port(const nvd_http_server *srv)
{
    return srv->port;
}

int nvd_http_server_connections(const nvd_http_server *srv)
{
    return srv->n_conns;
}

static void on_listener_closed(uv_handle_t *h)
{
    nvd_http_server *srv = h->data;
    srv->listener_closed = true;
    server_maybe_free(srv);
}

void nvd_http_server_close(nvd_http_server *srv)
{
    if (!srv)
        return;
    srv->closing = true;
    while (srv->conns)
        conn_close(srv->conns);
    uv_close((uv_handle_t *)&srv->listener, on_listener_closed);
}
