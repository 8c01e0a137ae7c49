/* HTTP/1.1 server on libuv with http_parser (see http.h). */
#include "http.h"

#include <errno.h>
#include <http_parser.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/sha256.h"
#include "http_conn.h"
#include "http_internal.h"

/* ---- arena ---- */

void *nvd_http_alloc(nvd_http_req *req, size_t n)
{
    reqstate *rq = (reqstate *)req;
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_chunk *a = rq->arena;
    if (!a || a->cap - a->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        a = malloc(sizeof(*a) + cap);
        if (!a)
            return NULL;
        a->cap = cap;
        a->used = 0;
        a->next = rq->arena;
        rq->arena = a;
    }
    void *p = (char *)a->data + a->used;
    a->used += n;
    return p;
}

static void rq_reset(reqstate *rq)
{
    while (rq->arena) {
        arena_chunk *n = rq->arena->next;
        free(rq->arena);
        rq->arena = n;
    }
    free(rq->url);
    free(rq->hbuf);
    free(rq->body);
    memset(rq, 0, sizeof(*rq));
}

/* Give a request's body bytes back to the server's total and its budget. */
static void uncharge(conn *c)
{
    c->srv->body_bytes -= c->rq.charged;
    c->srv->budget_bytes[c->rq.budget] -= c->rq.charged;
    c->rq.charged = 0;
}

/* Count n more body bytes for the request, within the total and its budget. */
static int charge(conn *c, size_t n)
{
    nvd_http_server *srv = c->srv;
    size_t cap = srv->lim.max_body_budget[c->rq.budget];
    if (srv->body_bytes + n > srv->lim.max_body_total ||
        (cap && srv->budget_bytes[c->rq.budget] + n > cap))
        return -ENOBUFS;
    srv->body_bytes += n;
    srv->budget_bytes[c->rq.budget] += n;
    c->rq.charged += n;
    return 0;
}

/* Free a connection's request state and return its body bytes to the budget. */
void http_conn_rq_reset(conn *c)
{
    uncharge(c);
    rq_reset(&c->rq);
}

/* Between requests on one connection: keep the small buffers (one arena
 * chunk, URL, headers, a body up to KEEP_BODY bytes) so keep-alive requests do
 * not allocate them again; free the rest. */
static void conn_rq_recycle(conn *c)
{
    reqstate *rq = &c->rq;
    arena_chunk *keep = NULL;
    while (rq->arena) {
        arena_chunk *n = rq->arena->next;
        if (!keep && rq->arena->cap == ARENA_CHUNK) {
            keep = rq->arena;
            keep->used = 0;
            keep->next = NULL;
        } else {
            free(rq->arena);
        }
        rq->arena = n;
    }
    reqstate k = {.arena = keep,
                  .url = rq->url,
                  .url_cap = rq->url_cap,
                  .hbuf = rq->hbuf,
                  .hcap = rq->hcap,
                  .body = rq->body,
                  .body_cap = rq->body_cap,
                  .charged = rq->charged,
                  .budget = rq->budget};
    if (k.body_cap > KEEP_BODY) {
        free(k.body);
        k.body = NULL;
        k.body_cap = 0;
        uncharge(c);
        k.charged = 0;
    }
    /* Kept buffers read as empty strings until refilled. */
    if (k.url)
        k.url[0] = '\0';
    if (k.hbuf)
        k.hbuf[0] = '\0';
    if (k.body)
        k.body[0] = '\0';
    *rq = k;
}

/* ---- writing ---- */

static void on_write(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    conn *c = wr->c;
    bool final = wr->final;
    int st = wr->status;
    free(wr);
    if (!final || c->closing)
        return;
    nvd_http_server *srv = c->srv;
    if (srv->cb.done)
        srv->cb.done(srv->ud, &c->rq.pub, st);
    c->in_flight = false;
    conn_rq_recycle(c);
    if (status < 0 || srv->closing) {
        c->srv->ops->close(c);
        return;
    }
    if (c->close_after) {
        c->srv->ops->linger(c);
        return;
    }
    c->phase = PH_IDLE;
    c->srv->ops->arm(c, srv->lim.idle_timeout_ms);
    http_process_input(c);
}

static int send_bytes(conn *c, const char *head, size_t hlen, const void *body, size_t blen,
                      bool final, int status)
{
    wreq *wr = malloc(sizeof(*wr) + hlen + blen);
    if (!wr)
        return -ENOMEM;
    wr->c = c;
    wr->final = final;
    wr->status = status;
    memcpy(wr->data, head, hlen);
    if (blen)
        memcpy(wr->data + hlen, body, blen);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)(hlen + blen));
    int r = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (r < 0) {
        free(wr);
        return r;
    }
    return 0;
}

static void respond_conn(conn *c, int status, const char *ctype, const void *body, size_t len,
                         const char *extra, bool head_only)
{
    char hdr[1024];
    bool close = c->close_after || !c->rq.keep_alive || c->srv->closing;
    c->close_after = close;
    c->rq.responded = true;
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                     status, nvd_http_status_text(status), ctype ? ctype : "application/json", len,
                     extra ? extra : "", close ? "Connection: close\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(hdr)) {
        n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n");
        len = 0;
        c->close_after = true;
        status = 500;
    }
    if (send_bytes(c, hdr, (size_t)n, head_only ? NULL : body, head_only ? 0 : len, true, status) <
        0)
        c->srv->ops->close(c);
}

/* If-None-Match (RFC 9110 §13.1.2): "*" or a list of entity tags compared
 * weakly (§8.8.3.2: the opaque parts equal, a W/ prefix ignored). opaque is
 * the quoted tag. */
static bool etag_listed(const char *inm, const char *opaque)
{
    size_t olen = strlen(opaque);
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t n = (size_t)(e - p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == olen && memcmp(p, opaque, n) == 0)
            return true;
        p = e;
    }
    return false;
}

void nvd_http_respond(nvd_http_req *req, int status, const char *content_type, const void *body,
                      size_t len, const char *extra_headers)
{
    conn *c = (conn *)((char *)req - offsetof(conn, rq));
    if (c->rq.responded)
        return;
    /* Conditional GET for JSON reads: a weak ETag from the SHA-256 of the body
     * (weak: the same JSON, not promised byte-for-byte across versions); a
     * matching If-None-Match gets 304 with the headers only (RFC 9110 §15.4.5). */
    bool get = req->head || (req->method && strcmp(req->method, "GET") == 0);
    if (status == 200 && get && body && content_type &&
        strcmp(content_type, "application/json") == 0) {
        char hex[65], opaque[40], hdrs[768];
        nv_sha256_hex(body, len, hex);
        snprintf(opaque, sizeof opaque, "\"%.32s\"", hex);
        int n = snprintf(hdrs, sizeof hdrs, "%sETag: W/%s\r\n", extra_headers ? extra_headers : "",
                         opaque);
        if (n > 0 && (size_t)n < sizeof hdrs) {
            const char *inm = nvd_http_header(req, "If-None-Match");
            bool same = inm && etag_listed(inm, opaque);
            respond_conn(c, same ? 304 : status, content_type, body, len, hdrs, same || req->head);
            return;
        }
    }
    respond_conn(c, status, content_type, body, len, extra_headers, req->head);
}

void nvd_http_error(nvd_http_req *req, int status, const char *code, const char *message,
                    const char *field)
{
    char buf[2048];
    int n = http_format_error(buf, sizeof(buf), code, message, field);
    if (n < 0 || (size_t)n >= sizeof(buf))
        n = snprintf(buf, sizeof(buf), "{\"error\":{\"code\":\"%s\",\"message\":\"error\"}}", code);
    nvd_http_respond(req, status, "application/json", buf, (size_t)n, NULL);
}

/* A protocol-level error: answer and close the connection afterwards. */
void http_fail_conn(conn *c, int status, const char *code, const char *message)
{
    char buf[1024];
    int n = http_format_error(buf, sizeof(buf), code, message, NULL);
    c->close_after = true;
    c->in_flight = true;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    uv_timer_stop(&c->timer);
    respond_conn(c, status, "application/json", buf, (size_t)n, NULL, false);
}

void nvd_http_on_abort(nvd_http_req *req, void (*cb)(void *ud, nvd_http_req *req), void *ud)
{
    reqstate *rq = (reqstate *)req;
    rq->abort_cb = cb;
    rq->abort_ud = ud;
}

const char *nvd_http_header(const nvd_http_req *req, const char *name)
{
    const reqstate *rq = (const reqstate *)req;
    for (int i = 0; i < rq->n_headers; i++)
        if (strcasecmp(rq->hdr[2 * i], name) == 0)
            return rq->hdr[2 * i + 1];
    return NULL;
}

int nvd_http_header_count(const nvd_http_req *req, const char *name)
{
    const reqstate *rq = (const reqstate *)req;
    int n = 0;
    for (int i = 0; i < rq->n_headers; i++)
        n += strcasecmp(rq->hdr[2 * i], name) == 0;
    return n;
}

/* ---- parsing ---- */

static int append(char **buf, size_t *len, size_t *cap, const char *at, size_t n, size_t limit)
{
    if (*len + n + 1 > limit)
        return -E2BIG;
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < *len + n + 1)
            nc *= 2;
        if (nc > limit + 1)
            nc = limit + 1;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return -ENOMEM;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, at, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static conn *conn_of(http_parser *p)
{
    return (conn *)p->data;
}

static int cb_fail(conn *c, int status, const char *code, const char *msg)
{
    c->rq.error_status = status;
    c->rq.error_code = code;
    c->rq.error_msg = msg;
    return -1;
}

static int on_message_begin(http_parser *p)
{
    conn *c = conn_of(p);
    conn_rq_recycle(c);
    c->phase = PH_HEADERS;
    c->srv->ops->arm(c, c->srv->lim.header_timeout_ms);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    conn *c = conn_of(p);
    reqstate *rq = &c->rq;
    if (append(&rq->url, &rq->url_len, &rq->url_cap, at, n, c->srv->lim.max_header_bytes) < 0)
        return cb_fail(c, 414, "too_large", "request URI is longer than the header limit");
    return 0;
}

static int header_bytes(conn *c, const char *at, size_t n, int state)
{
    reqstate *rq = &c->rq;
    size_t lim = c->srv->lim.max_header_bytes;
    if (rq->hstate != state && rq->hstate != 0) {
        if (append(&rq->hbuf, &rq->hlen, &rq->hcap, "", 1, lim) < 0) /* terminator */
            return cb_fail(c, 431, "too_large", "request headers exceed the size limit");
    }
    if (state == 1 && rq->hstate != 1 && ++rq->n_headers > c->srv->lim.max_headers)
        return cb_fail(c, 431, "too_large", "too many request headers");
    rq->hstate = state;
    if (rq->url_len + rq->hlen + n > lim || append(&rq->hbuf, &rq->hlen, &rq->hcap, at, n, lim) < 0)
        return cb_fail(c, 431, "too_large", "request headers exceed the size limit");
    return 0;
}

/* http-parser reports a chunked body's trailer fields through the header
 * callbacks too, after the headers were indexed: they are discarded (RFC 9112
 * §7.1.2 lets a recipient ignore trailers), so the index never changes under a
 * handler. */
static int on_header_field(http_parser *p, const char *at, size_t n)
{
    conn *c = conn_of(p);
    if (c->phase == PH_BODY)
        return 0;
    return header_bytes(c, at, n, 1);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    conn *c = conn_of(p);
    if (c->phase == PH_BODY)
        return 0;
    if (c->rq.hstate == 0)
        return cb_fail(c, 400, "bad_request", "header value without a name");
    return header_bytes(c, at, n, 2);
}

static int hex(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Split the URL into a percent-decoded path and the raw query. */
static int split_url(conn *c)
{
    reqstate *rq = &c->rq;
    const char *u = rq->url ? rq->url : "";
    const char *q = strchr(u, '?');
    size_t plen = q ? (size_t)(q - u) : strlen(u);
    char *path = nvd_http_alloc(&rq->pub, plen + 1);
    char *query = nvd_http_alloc(&rq->pub, q ? strlen(q + 1) + 1 : 1);
    if (!path || !query)
        return cb_fail(c, 503, "unavailable", "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < plen; i++) {
        if (u[i] == '%') {
            if (i + 2 >= plen || hex(u[i + 1]) < 0 || hex(u[i + 2]) < 0)
                return cb_fail(c, 400, "bad_request", "bad percent-encoding in the path");
            char ch = (char)(hex(u[i + 1]) * 16 + hex(u[i + 2]));
            if (ch == '\0')
                return cb_fail(c, 400, "bad_request", "NUL byte in the path");
            path[n++] = ch;
            i += 2;
        } else {
            path[n++] = u[i];
        }
    }
    path[n] = '\0';
    strcpy(query, q ? q + 1 : "");
    rq->pub.path = path;
    rq->pub.query = query;
    return 0;
}

static int index_headers(conn *c)
{
    reqstate *rq = &c->rq;
    if (rq->hstate == 2) {
        if (append(&rq->hbuf, &rq->hlen, &rq->hcap, "", 1, c->srv->lim.max_header_bytes + 1) < 0)
            return cb_fail(c, 431, "too_large", "request headers exceed the size limit");
    }
    rq->hdr = nvd_http_alloc(&rq->pub, sizeof(char *) * 2 * (size_t)(rq->n_headers + 1));
    if (!rq->hdr)
        return cb_fail(c, 503, "unavailable", "out of memory");
    /* No header at all leaves hbuf NULL: no pointer arithmetic on it. */
    const char *p = rq->hbuf, *end = p ? p + rq->hlen : NULL;
    int n = 0;
    while (p && p < end && n < rq->n_headers) {
        rq->hdr[2 * n] = p;
        if (!nvd_http_token_ok(p)) {
            char *m = nvd_http_alloc(&rq->pub, 160);
            if (m)
                snprintf(m, 160, "header name '%.80s' is not a token (RFC 9110 section 5.6.2)", p);
            return cb_fail(c, 400, "bad_request", m ? m : "a header name is not a token");
        }
        p += strlen(p) + 1;
        if (p >= end)
            return cb_fail(c, 400, "bad_request", "header without a value");
        rq->hdr[2 * n + 1] = p;
        p += strlen(p) + 1;
        n++;
    }
    rq->n_headers = n;
    return 0;
}

/* RFC 9112 §6.1: a server that receives a transfer coding it does not
 * understand answers 501. Only "chunked" is understood (http-parser would
 * read "gzip, chunked" as chunked and hand over gzip bytes as the body). */
static int check_transfer_encoding(conn *c)
{
    reqstate *rq = &c->rq;
    for (int i = 0; i < rq->n_headers; i++) {
        if (strcasecmp(rq->hdr[2 * i], "Transfer-Encoding") != 0)
            continue;
        const char *v = rq->hdr[2 * i + 1];
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == 7 && strncasecmp(v, "chunked", 7) == 0)
            continue;
        char *m = nvd_http_alloc(&rq->pub, 200);
        if (m)
            snprintf(m, 200, "Transfer-Encoding '%.*s' is not supported (only 'chunked')",
                     (int)(n < 100 ? n : 100), v);
        return cb_fail(c, 501, "not_implemented",
                       m ? m : "only the chunked transfer coding is supported");
    }
    return 0;
}

/* Ask the owner about the request before any body byte is taken. */
static int admit(conn *c, http_parser *p)
{
    reqstate *rq = &c->rq;
    nvd_http_admit a = {0};
    c->srv->cb.admit(c->srv->ud, &rq->pub, &a);
    if (a.status) {
        const char *msg = a.message ? a.message : "request refused";
        char *m = nvd_http_alloc(&rq->pub, strlen(msg) + 1);
        if (m)
            strcpy(m, msg);
        return cb_fail(c, a.status, a.code ? a.code : "bad_request", m ? m : "request refused");
    }
    int budget = a.budget >= 0 && a.budget < NVD_HTTP_BUDGETS ? a.budget : 0;
    if (budget != rq->budget) {
        /* A buffer kept from the previous request is charged to its budget. */
        free(rq->body);
        rq->body = NULL;
        rq->body_cap = 0;
        uncharge(c);
        rq->budget = budget;
    }
    rq->body_limit = a.body_limit;
    rq->has_length = (p->flags & F_CONTENTLENGTH) != 0;
    rq->declared = rq->has_length ? p->content_length : 0;
    if (rq->has_length && p->content_length > rq->body_limit)
        return cb_fail(c, 413, "too_large", "request body is larger than the limit for this route");
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    conn *c = conn_of(p);
    reqstate *rq = &c->rq;
    if (p->upgrade || p->method == HTTP_CONNECT)
        return cb_fail(c, 400, "bad_request", "protocol upgrades and CONNECT are not supported");
    int r = index_headers(c);
    if (r)
        return r;
    r = check_transfer_encoding(c);
    if (r)
        return r;
    rq->pub.method = http_method_str((enum http_method)p->method);
    rq->pub.head = p->method == HTTP_HEAD;
    rq->pub.loopback = c->loopback;
    rq->pub.peer = c->peer;
    r = split_url(c);
    if (r)
        return r;
    r = admit(c, p);
    if (r)
        return r;
    c->phase = PH_BODY;
    c->srv->ops->arm(c, c->srv->lim.body_timeout_ms);
    const char *expect = nvd_http_header(&rq->pub, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (send_bytes(c, cont, sizeof(cont) - 1, NULL, 0, false, 100) < 0)
            return cb_fail(c, 503, "unavailable", "out of memory");
    }
    return 0;
}

/* A chunk's size is known before its bytes: refuse one that would pass the
 * route's limit now rather than wait for bytes that never come. */
static int on_chunk_header(http_parser *p)
{
    conn *c = conn_of(p);
    reqstate *rq = &c->rq;
    if (p->content_length > rq->body_limit - rq->body_len)
        return cb_fail(c, 413, "too_large", "request body is larger than the limit for this route");
    return 0;
}

/* Body bytes are charged as they arrive (the buffer grows by doubling, from
 * KEEP_BODY, never past the declared length), not from the declared length at
 * the first byte: a client that declares 64 MiB and sends one byte holds
 * KEEP_BODY bytes of the budget, not 64 MiB. */
static int on_body(http_parser *p, const char *at, size_t n)
{
    conn *c = conn_of(p);
    reqstate *rq = &c->rq;
    if (n > rq->body_limit - rq->body_len)
        return cb_fail(c, 413, "too_large", "request body is larger than the limit for this route");
    size_t need = rq->body_len + n + 1;
    if (need > rq->body_cap) {
        size_t top = rq->has_length ? (size_t)rq->declared + 1 : rq->body_limit + 1;
        size_t cap = rq->body_cap ? rq->body_cap * 2 : KEEP_BODY;
        if (cap > top)
            cap = top;
        if (cap < need)
            cap = need;
        if (charge(c, cap - rq->body_cap) < 0)
            return cb_fail(c, 503, "unavailable",
                           "too many large request bodies in flight; retry later");
        char *nb = realloc(rq->body, cap);
        if (!nb)
            return cb_fail(c, 503, "unavailable", "out of memory");
        rq->body = nb;
        rq->body_cap = cap;
    }
    memcpy(rq->body + rq->body_len, at, n);
    rq->body_len += n;
    rq->body[rq->body_len] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    conn *c = conn_of(p);
    c->rq.keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

static void dispatch(conn *c)
{
    reqstate *rq = &c->rq;
    if (!rq->body) {
        rq->body = malloc(1);
        if (!rq->body) {
            http_fail_conn(c, 503, "unavailable", "out of memory");
            return;
        }
        rq->body[0] = '\0';
        rq->body_cap = 1;
    }
    rq->pub.body = rq->body;
    rq->pub.body_len = rq->body_len;
    c->phase = PH_BUSY;
    c->in_flight = true;
    uv_timer_stop(&c->timer);
    c->srv->cb.handle(c->srv->ud, &rq->pub);
}

void http_process_input(conn *c)
{
    while (!c->in_flight && !c->closing && c->in_off < c->in_len) {
        size_t avail = c->in_len - c->in_off;
        size_t n = http_parser_execute(&c->parser, &settings, c->in + c->in_off, avail);
        c->in_off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            dispatch(c);
            break;
        }
        if (e != HPE_OK) {
            if (c->rq.error_status)
                http_fail_conn(c, c->rq.error_status, c->rq.error_code, c->rq.error_msg);
            else if (e == HPE_HEADER_OVERFLOW)
                http_fail_conn(c, 431, "too_large", "request headers exceed the size limit");
            else if (e == HPE_INVALID_TRANSFER_ENCODING)
                http_fail_conn(c, 501, "not_implemented",
                               "a Transfer-Encoding other than 'chunked' is not supported");
            else {
                char msg[256];
                snprintf(msg, sizeof(msg), "malformed HTTP request: %s", http_errno_description(e));
                http_fail_conn(c, 400, "bad_request", msg);
            }
            return;
        }
        if (n == 0)
            break;
    }
    if (c->in_off == c->in_len)
        c->in_off = c->in_len = 0;
    if (!c->closing && !c->close_after && !c->reading)
        c->srv->ops->read_start(c);
}
