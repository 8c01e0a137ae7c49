/* HTTP server limits, against a real socket: request parsing, keep-alive and
 * pipelining, header and body limits, slow clients, connection limit. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/http/http.h"
#include "tests/unit/tap.h"

static int port;
static uv_async_t done_async;
static nvd_http_server *srv;

static void handle(void *ud, nvd_http_req *req)
{
    (void)ud;
    char body[512];
    const char *x = nvd_http_header(req, "x-test");
    int n = snprintf(body, sizeof(body), "%s %s ?%s len=%zu x=%s", req->method, req->path,
                     req->query, req->body_len, x ? x : "-");
    nvd_http_respond(req, 200, "text/plain", body, (size_t)n, NULL);
}

/* Bodies up to 100 bytes; "/deny..." refused before its body (as numvald
 * refuses an upload without a token), "/b2..." charged to budget 2, which
 * holds 120 bytes. */
static void admit(void *ud, nvd_http_req *req, nvd_http_admit *ret)
{
    (void)ud;
    ret->body_limit = 100;
    if (!strncmp(req->path, "/deny", 5)) {
        ret->status = 401;
        ret->code = "unauthorized";
        ret->message = "no token";
    }
    if (!strncmp(req->path, "/b2", 3))
        ret->budget = 2;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_str(int fd, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t k = send(fd, s + off, n - off, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        off += (size_t)k;
    }
}

/* Read until the peer closes or ms pass without data; returns bytes read. */
static size_t recv_all(int fd, char *buf, size_t cap, int ms)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0)
            break;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    return n;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        c++;
    return c;
}

/* Whether the server closed the connection (EOF within ms). */
static int closed(int fd, int ms)
{
    char b[16];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    return recv(fd, b, sizeof(b), 0) == 0;
}

static void *client(void *arg)
{
    (void)arg;
    static char buf[65536];
    int fd = dial();
    send_str(fd, "GET /a%2Fb?q=1 HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "HTTP/1.1 200 OK") && strstr(buf, "GET /a/b ?q=1 len=0 x=yes"),
           "GET: path decoded, query and header seen");
    send_str(fd, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "POST /p ? len=5") != NULL, "keep-alive: second request on the connection");
    close(fd);

    fd = dial();
    send_str(fd, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    char *p1 = strstr(buf, "GET /1"), *p2 = strstr(buf, "GET /2"), *p3 = strstr(buf, "GET /3");
    tap_ok(count(buf, "HTTP/1.1 200") == 3 && p1 && p2 && p3 && p1 < p2 && p2 < p3,
           "pipelined requests answered in order");
    tap_ok(strstr(buf, "Connection: close") != NULL, "Connection: close honoured");
    close(fd);

    fd = dial();
    char big[2048];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    char req[4096];
    snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nX-Big: %s\r\n\r\n", big);
    send_str(fd, req);
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "431") && strstr(buf, "\"too_large\""), "2 KiB header over 1 KiB: 431 JSON");
    close(fd);

    fd = dial();
    send_str(fd, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 20; i++)
        send_str(fd, "X-A: b\r\n");
    send_str(fd, "\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "431") != NULL, "20 headers over the limit of 16: 431");
    close(fd);

    fd = dial();
    send_str(fd, "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "413") && strstr(buf, "Connection: close"),
           "Content-Length over the limit: 413 before the body, connection closed");
    close(fd);

    fd = dial();
    send_str(fd, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++)
        send_str(fd, "20\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "413") != NULL, "chunked body over 100 bytes: 413");
    close(fd);

    fd = dial();
    send_str(fd, "GET / HTTP/1.1\r\nHo");
    recv_all(fd, buf, sizeof(buf), 1500);
    tap_ok(strstr(buf, "408") && strstr(buf, "\"timeout\""),
           "headers not complete within 300 ms: 408 JSON");
    tap_ok(closed(fd, 500), "and the connection is closed");
    close(fd);

    fd = dial();
    send_str(fd, "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nab");
    recv_all(fd, buf, sizeof(buf), 1500);
    tap_ok(strstr(buf, "408") != NULL, "body not complete within 300 ms: 408");
    close(fd);

    int b1 = dial(), b2 = dial(), b3 = dial();
    const char *part = "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nx";
    send_str(b1, part);
    send_str(b2, part);
    usleep(50000);
    send_str(b3, part);
    recv_all(b3, buf, sizeof(buf), 200);
    tap_ok(strstr(buf, "503") != NULL, "third 100-byte body over the 250-byte total: 503");
    close(b1);
    close(b2);
    close(b3);
    usleep(50000);

    /* Budgets: a second 100-byte body of budget 2 passes its 120 bytes while
     * the total (250) still has room; budget 0 is not held by it. */
    b1 = dial();
    b2 = dial();
    b3 = dial();
    send_str(b1, "POST /b2 HTTP/1.1\r\nContent-Length: 100\r\n\r\nx");
    usleep(50000);
    send_str(b2, "POST /b2 HTTP/1.1\r\nContent-Length: 100\r\n\r\nx");
    recv_all(b2, buf, sizeof(buf), 200);
    tap_ok(strstr(buf, "503") != NULL, "second 100-byte body of budget 2 over its 120: 503");
    send_str(b3, "POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n");
    for (int i = 0; i < 100; i++)
        send_str(b3, "y");
    recv_all(b3, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "200 OK") && strstr(buf, "len=100"),
           "while budget 2 is full, a body of budget 0 is served");
    close(b1);
    close(b2);
    close(b3);
    usleep(50000);

    fd = dial();
    send_str(fd, "POST /deny HTTP/1.1\r\nContent-Length: 50\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "401") && strstr(buf, "\"unauthorized\"") && strstr(buf, "no token"),
           "refused by admit at the end of the headers, before any body byte");
    close(fd);

    fd = dial();
    send_str(fd, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\nab");
    recv_all(fd, buf, sizeof(buf), 200);
    tap_ok(strstr(buf, "413") != NULL, "a chunk size over the limit: 413 at once, not 408");
    close(fd);

    fd = dial();
    send_str(fd, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                 "3\r\nabc\r\n0\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "501") && strstr(buf, "gzip, chunked"),
           "Transfer-Encoding 'gzip, chunked': 501 naming it");
    close(fd);

    fd = dial();
    send_str(fd, "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "400") && strstr(buf, "Bad Name"), "header name with a space: 400 naming it");
    close(fd);

    fd = dial();
    {
        char url[1600];
        memset(url, 'u', sizeof(url));
        url[0] = '/';
        url[sizeof(url) - 1] = '\0';
        char line[1700];
        snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\n\r\n", url);
        send_str(fd, line);
    }
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "HTTP/1.1 414") != NULL, "a 1600-byte URI over the 1 KiB limit: 414");
    close(fd);

    fd = dial();
    send_str(fd, "BLAH\x01 / HTTP/1.1\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "400") && strstr(buf, "\"bad_request\""), "garbage request line: 400 JSON");
    close(fd);

    fd = dial();
    send_str(fd, "GET /a%00b HTTP/1.1\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 1000);
    tap_ok(strstr(buf, "400") != NULL, "%%00 in the path: 400");
    close(fd);

    int fds[5];
    for (int i = 0; i < 5; i++)
        fds[i] = dial();
    recv_all(fds[4], buf, sizeof(buf), 500);
    tap_ok(strstr(buf, "503") && strstr(buf, "\"unavailable\""), "fifth connection over 4: 503");
    for (int i = 0; i < 5; i++)
        close(fds[i]);

    usleep(100000);
    fd = dial();
    send_str(fd, "GET /still HTTP/1.1\r\n\r\n");
    recv_all(fd, buf, sizeof(buf), 300);
    tap_ok(strstr(buf, "GET /still") != NULL, "the server still serves afterwards");
    tap_ok(closed(fd, 3000), "idle keep-alive connection closed after the idle timeout");
    close(fd);
    uv_async_send(&done_async);
    return NULL;
}

static void on_done(uv_async_t *a)
{
    nvd_http_server_close(srv);
    uv_close((uv_handle_t *)a, NULL);
}

static void pure_functions(void)
{
    tap_ok(nvd_http_listen_is_loopback("127.0.0.1:8080") && nvd_http_listen_is_loopback("[::1]:0") &&
               nvd_http_listen_is_loopback("127.9.0.1:1"),
           "127.0.0.0/8 and ::1 are loopback listen addresses");
    tap_ok(!nvd_http_listen_is_loopback("0.0.0.0:8080") && !nvd_http_listen_is_loopback(":8080") &&
               !nvd_http_listen_is_loopback("[::]:1") &&
               !nvd_http_listen_is_loopback("10.1.2.3:80") && !nvd_http_listen_is_loopback("x"),
           "wildcards, other addresses and junk are not");
    tap_ok(nvd_http_token_ok("Content-Type") && nvd_http_token_ok("X-a.b_c~!#$%&'*+^`|"),
           "header names of tchars are tokens");
    tap_ok(!nvd_http_token_ok("Bad Name") && !nvd_http_token_ok("") &&
               !nvd_http_token_ok("a:b") && !nvd_http_token_ok("a\"b") &&
               !nvd_http_token_ok("\x80x"),
           "space, empty, ':', '\"' and non-ASCII are not");
}

int main(void)
{
    pure_functions();
    uv_loop_t *loop = uv_default_loop();
    nvd_http_limits lim = {.max_header_bytes = 1024,
                           .max_headers = 16,
                           .max_connections = 4,
                           .max_body_total = 250,
                           .max_body_budget = {0, 0, 120},
                           .idle_timeout_ms = 1000,
                           .header_timeout_ms = 300,
                           .body_timeout_ms = 300};
    nvd_http_callbacks cb = {.handle = handle, .admit = admit};
    int r = nvd_http_server_new(loop, "127.0.0.1:0", &lim, &cb, NULL, &srv);
    tap_ok(r == 0, "server listens");
    if (r < 0)
        return tap_done();
    port = nvd_http_server_port(srv);
    tap_ok(port > 0, "bound to port %d", port);
    uv_async_init(loop, &done_async, on_done);
    pthread_t t;
    pthread_create(&t, NULL, client, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    tap_ok(uv_loop_close(loop) == 0, "every handle closed at exit");
    return tap_done();
}
