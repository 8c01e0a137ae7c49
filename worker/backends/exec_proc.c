/* The exec backend's harness process (exec_internal.h): spawning it with its
 * pipes, the hello, reading and writing against deadlines, and the messages
 * that carry its stderr tail. */
#include "exec.h"
#include "exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/numerics/dtype.h"
int64_t exec_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stderr_tail(exec_ctx *c, char *out, size_t outlen)
{
    out[0] = '\0';
    if (c->err_fd < 0 || outlen < 2)
        return;
    off_t end = lseek(c->err_fd, 0, SEEK_END);
    size_t want = outlen - 1 < STDERR_TAIL ? outlen - 1 : STDERR_TAIL;
    off_t start = end > (off_t)want ? end - (off_t)want : 0;
    ssize_t n = pread(c->err_fd, out, (size_t)(end - start), start);
    out[n > 0 ? n : 0] = '\0';
}

/* Message for a failed conversation: what went wrong plus the stderr tail. */
void exec_fail(exec_ctx *c, char *err, size_t errlen, const char *fmt, ...)
{
    char what[512], tail[STDERR_TAIL + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    stderr_tail(c, tail, sizeof(tail));
    snprintf(err, errlen, "harness '%s': %s%s%s", c->command, what,
             tail[0] ? "; its stderr ends with: " : "", tail);
}

void exec_harness_kill(exec_ctx *c)
{
    if (c->to_fd >= 0)
        close(c->to_fd);
    if (c->from_fd >= 0)
        close(c->from_fd);
    c->to_fd = c->from_fd = -1;
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
    }
    c->pid = -1;
    c->rlen = 0;
}

int exec_write_all(exec_ctx *c, const void *buf, size_t n, int64_t deadline)
{
    const char *p = buf;
    while (n > 0) {
        struct pollfd pfd = {.fd = c->to_fd, .events = POLLOUT};
        int64_t left = deadline - exec_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -ETIMEDOUT : -errno;
        ssize_t w = write(c->to_fd, p, n);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read more bytes into rbuf (which has room for at least want more). */
static int fill(exec_ctx *c, size_t want, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {.fd = c->from_fd, .events = POLLIN};
        int64_t left = deadline - exec_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -ETIMEDOUT : -errno;
        ssize_t n = read(c->from_fd, c->rbuf + c->rlen, want);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        c->rlen += (size_t)n;
        return 0;
    }
}

/* One header line, NUL-terminated, malloc'd. */
int exec_read_line(exec_ctx *c, char **ret, int64_t deadline)
{
    for (;;) {
        char *nl = memchr(c->rbuf, '\n', c->rlen);
        if (nl) {
            size_t len = (size_t)(nl - c->rbuf);
            char *line = malloc(len + 1);
            if (!line)
                return -ENOMEM;
            memcpy(line, c->rbuf, len);
            line[len] = '\0';
            memmove(c->rbuf, nl + 1, c->rlen - len - 1);
            c->rlen -= len + 1;
            *ret = line;
            return 0;
        }
        if (c->rlen >= LINE_MAX_BYTES)
            return -E2BIG;
        int r = fill(c, LINE_MAX_BYTES - c->rlen, deadline);
        if (r < 0)
            return r;
    }
}

int exec_read_exact(exec_ctx *c, uint8_t *dst, size_t n, int64_t deadline)
{
    size_t have = c->rlen < n ? c->rlen : n;
    memcpy(dst, c->rbuf, have);
    memmove(c->rbuf, c->rbuf + have, c->rlen - have);
    c->rlen -= have;
    while (have < n) {
        ssize_t r;
        struct pollfd pfd = {.fd = c->from_fd, .events = POLLIN};
        int64_t left = deadline - exec_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int p = poll(&pfd, 1, (int)left);
        if (p < 0 && errno == EINTR)
            continue;
        if (p <= 0)
            return p == 0 ? -ETIMEDOUT : -errno;
        r = read(c->from_fd, dst + have, n - have);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return r == 0 ? -EPIPE : -errno;
        have += (size_t)r;
    }
    return 0;
}

const char *exec_io_what(int r)
{
    switch (r) {
    case -ETIMEDOUT:
        return "no reply before the timeout";
    case -EPIPE:
        return "the harness closed its output (exited or crashed)";
    case -E2BIG:
        return "a header line longer than 1 MiB";
    default:
        return strerror(-r);
    }
}

static int spawn(exec_ctx *c, char *err, size_t errlen)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return exec_fail(c, err, errlen, "pipe: %s", strerror(errno)), -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return exec_fail(c, err, errlen, "pipe: %s", strerror(e)), -e;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return exec_fail(c, err, errlen, "fork: %s", strerror(e)), -e;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(c->err_fd, 2);
        execl("/bin/sh", "sh", "-c", c->command, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* Large pipes: a 10^5-element tensor then crosses in one or two writes instead
     * of a poll/write/wake-up per 64 KiB (syscalls are the protocol's main cost on
     * a virtual machine). Best effort: the default size still works. */
    fcntl(in[1], F_SETPIPE_SZ, PIPE_BYTES);
    fcntl(out[0], F_SETPIPE_SZ, PIPE_BYTES);
    c->pid = pid;
    c->to_fd = in[1];
    c->from_fd = out[0];
    c->rlen = 0;
    return 0;
}

/* Start the harness and exchange hellos; keeps the first describe it sent. The
 * worker says protocol 2; a harness may answer 2, or 1 (it then serves
 * everything but double_backward, which is "not offered"); any other version
 * is refused naming both. */
int exec_harness_start(exec_ctx *c, char *err, size_t errlen)
{
    int r = spawn(c, err, errlen);
    if (r < 0)
        return NV_E_DEVICE;
    int64_t deadline = exec_now_ms() + c->start_timeout_ms;
    char hello[64];
    snprintf(hello, sizeof hello, "{\"type\":\"hello\",\"protocol\":%d}\n", NVW_EXEC_PROTOCOL);
    char *line = NULL;
    r = exec_write_all(c, hello, strlen(hello), deadline);
    if (r == 0)
        r = exec_read_line(c, &line, deadline);
    if (r < 0) {
        exec_fail(c, err, errlen,
             "no hello: %s (this worker speaks exec protocol %d, and accepts a harness that "
             "answers 1; a harness that exits on a newer hello must be updated to "
             "docs/EXEC_PROTOCOL.md)",
             exec_io_what(r), NVW_EXEC_PROTOCOL);
        exec_harness_kill(c);
        return NV_E_DEVICE;
    }
    json_error_t jerr;
    json_t *msg = json_loads(line, 0, &jerr);
    json_t *proto = json_object_get(msg, "protocol");
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (!msg || !type || strcmp(type, "hello") != 0 || !json_is_integer(proto)) {
        exec_fail(c, err, errlen, "first line is not a hello: '%.120s'", line);
        r = NV_E_DEVICE;
    } else if (json_integer_value(proto) != NVW_EXEC_PROTOCOL && json_integer_value(proto) != 1) {
        exec_fail(c, err, errlen,
             "speaks protocol %lld, this worker speaks %d (and accepts 1): update the harness "
             "or the worker (docs/EXEC_PROTOCOL.md)",
             (long long)json_integer_value(proto), NVW_EXEC_PROTOCOL);
        r = NV_E_DEVICE;
    } else {
        c->protocol = (int)json_integer_value(proto);
        if (!c->describe) {
            json_t *d = json_object_get(msg, "describe");
            c->describe = json_dumps(json_is_object(d) ? d : json_object(), JSON_COMPACT);
            r = c->describe ? NV_OK : NV_E_NOMEM;
        }
    }
    json_decref(msg);
    free(line);
    if (r != NV_OK)
        exec_harness_kill(c);
    return r;
}
