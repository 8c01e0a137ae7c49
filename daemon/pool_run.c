#include "pool_run.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_KEEP 1024

struct nvd_run {
    uv_process_t proc;
    uv_pipe_t out, err;
    uv_timer_t timer;
    nvd_run_fn fn;
    void *ud;
    char *buf; /* max_out + 1 bytes */
    size_t len, max_out;
    char errbuf[ERR_KEEP + 1];
    size_t elen;
    int open;      /* handles not yet closed */
    int start_err; /* uv_spawn's error; 0: it started */
    int64_t exit_status;
    int term_sig;
    bool exited, out_eof, err_eof, finished, timed_out, too_big;
    bool draining; /* exited: the timer now bounds the wait for its pipes */
};

/* Where reads go once a buffer is full: the bytes are dropped. One loop
 * thread reads into it, so one buffer serves every run. */
static char discard[4096];

static void on_closed(uv_handle_t *h)
{
    nvd_run *r = h->data;
    if (--r->open > 0)
        return;
    int status = r->start_err   ? r->start_err
                 : r->timed_out ? -ETIMEDOUT
                 : r->too_big   ? -E2BIG
                 : r->term_sig  ? -EINTR
                                : (int)r->exit_status;
    if (r->start_err) {
        snprintf(r->errbuf, sizeof(r->errbuf), "%s", uv_strerror(r->start_err));
        r->elen = strlen(r->errbuf);
    }
    r->buf[r->len] = '\0';
    r->errbuf[r->elen] = '\0';
    r->fn(r->ud, status, r->buf, r->len, r->errbuf);
    free(r->buf);
    free(r);
}

static void finish(nvd_run *r)
{
    if (r->finished)
        return;
    r->finished = true;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->proc, on_closed);
    uv_close((uv_handle_t *)&r->out, on_closed);
    uv_close((uv_handle_t *)&r->err, on_closed);
    uv_close((uv_handle_t *)&r->timer, on_closed);
}

static void maybe_finish(nvd_run *r)
{
    if (r->exited && r->out_eof && r->err_eof)
        finish(r);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    nvd_run *r = h->data;
    if ((uv_pipe_t *)h == &r->out && r->len < r->max_out)
        *b = uv_buf_init(r->buf + r->len, (unsigned)(r->max_out - r->len));
    else if ((uv_pipe_t *)h == &r->err && r->elen < ERR_KEEP)
        *b = uv_buf_init(r->errbuf + r->elen, (unsigned)(ERR_KEEP - r->elen));
    else
        *b = uv_buf_init(discard, sizeof(discard));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    nvd_run *r = st->data;
    bool is_out = (uv_pipe_t *)st == &r->out;
    if (n < 0) {
        uv_read_stop(st);
        if (is_out)
            r->out_eof = true;
        else
            r->err_eof = true;
        maybe_finish(r);
        return;
    }
    if (b->base == discard) {
        /* Output beyond max_out is not a reply we can trust whole: stop it. */
        if (is_out && n > 0 && !r->too_big) {
            r->too_big = true;
            if (!r->exited)
                uv_process_kill(&r->proc, SIGKILL);
        }
        return;
    }
    if (is_out)
        r->len += (size_t)n;
    else
        r->elen += (size_t)n;
}

static void on_timeout(uv_timer_t *t);

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    nvd_run *r = p->data;
    r->exited = true;
    r->exit_status = status;
    r->term_sig = sig;
    if (!r->finished && !(r->out_eof && r->err_eof)) {
        /* A child of the child may hold the pipes open: what the program
         * itself wrote is in them by now, so wait a moment only. */
        r->draining = true;
        uv_timer_start(&r->timer, on_timeout, 1000, 0);
    }
    maybe_finish(r);
}

static void on_timeout(uv_timer_t *t)
{
    nvd_run *r = t->data;
    if (!r->draining)
        r->timed_out = true;
    if (!r->exited)
        uv_process_kill(&r->proc, SIGKILL);
    r->out_eof = r->err_eof = true; /* stop waiting for the pipes */
    maybe_finish(r);
}

int nvd_run_start(uv_loop_t *loop, char *const *argv, char *const *env, uint64_t timeout_ms,
                  size_t max_out, nvd_run_fn fn, void *ud, nvd_run **ret)
{
    nvd_run *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->buf = malloc(max_out + 1);
    if (!r->buf) {
        free(r);
        return -ENOMEM;
    }
    r->max_out = max_out;
    r->fn = fn;
    r->ud = ud;
    uv_pipe_init(loop, &r->out, 0);
    uv_pipe_init(loop, &r->err, 0);
    uv_timer_init(loop, &r->timer);
    r->proc.data = r->out.data = r->err.data = r->timer.data = r;
    r->open = 4;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err}};
    uv_process_options_t o = {.file = argv[0],
                              .args = (char **)argv,
                              .env = (char **)env,
                              .exit_cb = on_exit_cb,
                              .stdio = stdio,
                              .stdio_count = 3};
    int e = uv_spawn(loop, &r->proc, &o);
    *ret = r;
    if (e < 0) {
        /* uv_spawn initialised the handle even on failure; fn runs from the
         * close callbacks, as it does for a run that started. */
        r->start_err = e;
        r->exited = r->out_eof = r->err_eof = true;
        finish(r);
        return 0;
    }
    uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&r->err, on_alloc, on_read);
    uv_timer_start(&r->timer, on_timeout, timeout_ms, 0);
    return 0;
}

void nvd_run_kill(nvd_run *r)
{
    if (r && !r->exited)
        uv_process_kill(&r->proc, SIGTERM);
}
