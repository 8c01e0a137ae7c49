/* Shared helpers of the reproduction code (repro_util.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sha256.h"
#include "repro_util.h"
#include "worker/runner/err.h"

int nvw_probe_fork(pid_t *ret_pid, int *ret_fd)
{
    int fds[2];
    if (pipe(fds) < 0)
        return -EAGAIN;
    fflush(NULL); /* a child must not flush the parent's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return e == ENOMEM ? -ENOMEM : -EAGAIN;
    }
    close(fds[pid == 0 ? 0 : 1]);
    *ret_fd = fds[pid == 0 ? 1 : 0];
    *ret_pid = pid;
    return 0;
}

int nvw_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -EIO;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int64_t nvw_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nvw_read_all(int fd, void *p, size_t n, int64_t deadline_ms)
{
    uint8_t *b = p;
    while (n > 0) {
        int64_t now = nvw_mono_ms();
        if (now >= deadline_ms)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int64_t left = deadline_ms - now;
        int pr = poll(&pf, 1, left > 1 << 30 ? 1 << 30 : (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -EIO;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

void nvw_probe_failed(int r, int status, int timeout_ms, char *cls, size_t cls_len, char *msg,
                      size_t msg_len)
{
    if (r == -ETIMEDOUT) {
        snprintf(cls, cls_len, "timeout");
        snprintf(msg, msg_len, "the probe ran past %d ms and was killed", timeout_ms);
    } else if (WIFSIGNALED(status)) {
        snprintf(cls, cls_len, "crash");
        snprintf(msg, msg_len, "the backend died of signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(cls, cls_len, "crash");
        snprintf(msg, msg_len, "the probe exited with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

json_t *nvw_signature_id(json_t *s)
{
    char *text = s ? json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    if (!text) {
        json_decref(s);
        return NULL;
    }
    char hex[65];
    nv_sha256_hex(text, strlen(text), hex);
    free(text);
    if (json_object_set_new(s, "id", json_string(hex)) < 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

nv_tensor *nvw_artifact_values(const nv_artifact_tensor *at)
{
    nv_dtype dt = (nv_dtype)at->dtype;
    if (!nv_dtype_get(dt))
        return NULL;
    nv_tensor *t = nv_tensor_new(dt, at->ndim, at->shape);
    for (int64_t k = 0; t && k < at->numel; k++)
        t->data[k] = nv_dtype_decode(dt, nv_dtype_load_bits(dt, at->data, k), false);
    return t;
}

int nvw_artifact_tensor(const nv_artifact_tensor *at, nv_dtype want, nv_tensor **ret,
                        char **ret_err)
{
    if (at->dtype != (int32_t)want)
        return nvw_set_err(
            ret_err, -EINVAL, "artifact tensor '%s' has dtype '%s', the case needs '%s'", at->name,
            nv_dtype_name((nv_dtype)at->dtype) ? nv_dtype_name((nv_dtype)at->dtype) : "?",
            nv_dtype_name(want));
    nv_tensor *t = nvw_artifact_values(at);
    if (!t)
        return -ENOMEM;
    *ret = t;
    return 0;
}
