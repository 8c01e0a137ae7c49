/* The case pool (case_pool.h): threads claim case indices from one atomic
 * counter, so each index runs exactly once whatever the thread count; the first
 * infrastructure error stops every thread. */
#include "case_pool.h"
#include "determinism.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ref/refmath.h"

typedef struct pool_state {
    const nvw_case_pool *p;
    atomic_llong next;    /* next case index to claim */
    atomic_int abort;     /* an infrastructure error stops the pool */
    pthread_mutex_t lock; /* guards done, the progress calls and err */
    int64_t done;
    char *err; /* the first infrastructure error */
    bool err_nomem;
} pool_state;

/* Record the first infrastructure error and stop the other threads. */
static void fail(pool_state *st, const char *msg)
{
    pthread_mutex_lock(&st->lock);
    if (!st->err && !st->err_nomem) {
        st->err = strdup(msg);
        st->err_nomem = !st->err;
    }
    pthread_mutex_unlock(&st->lock);
    atomic_store(&st->abort, 1);
}

static bool cancelled(const nvw_case_pool *p)
{
    return p->cancel && atomic_load(p->cancel);

}

/* One thread: claim, (open,) run, report, until the cases run out, an error
 * stops the pool or the job is cancelled. */
static void *pool_thread(void *arg)
{
    pool_state *st = arg;
    const nvw_case_pool *p = st->p;
    void *ctx = NULL;
    bool opened = false;
    char err[NVW_CASE_POOL_ERRLEN];
    while (!atomic_load(&st->abort) && !cancelled(p)) {
        int64_t i = atomic_fetch_add(&st->next, 1);
        if (i >= p->n)
            break;
        err[0] = '\0';
        if (!opened && p->open_ctx && (!p->needs_ctx || p->needs_ctx(p->ud, i))) {
            if (p->open_ctx(p->ctx_ud, &ctx, err, sizeof err) < 0) {
                fail(st, err[0] ? err : "could not open a context");
                break;
            }
            opened = true;
        }
        if (p->run_case(p->ud, ctx, i, err, sizeof err) < 0) {
            fail(st, err[0] ? err : "a case failed to run");
            break;
        }
        pthread_mutex_lock(&st->lock);
        int64_t done = ++st->done;
        if (p->progress)
            p->progress(p->progress_ud, done, p->n);
        pthread_mutex_unlock(&st->lock);
    }
    if (opened && p->close_ctx)
        p->close_ctx(p->ctx_ud, ctx);
    nv_ref_thread_done(); /* MPFR caches this thread filled; LeakSanitizer finds them */
    return NULL;
}

static int thread_count(const nvw_case_pool *p)
{
    long n = p->threads > 0 ? p->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > NVW_CASE_POOL_MAX_THREADS)
        n = NVW_CASE_POOL_MAX_THREADS;
    if (n > p->n)
        n = (long)p->n;
    return (int)n;
}

/* Start up to n threads and join them; with none started, run on this one. */
static void run_threads(pool_state *st, int n)
{
    pthread_t th[NVW_CASE_POOL_MAX_THREADS];
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, pool_thread, st) != 0)
            break;
    if (started == 0 && n > 0)
        pool_thread(st);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

int nvw_case_pool_run(const nvw_case_pool *p, char **ret_err)
{
    pool_state st = {.p = p};
    atomic_init(&st.next, 0);
    atomic_init(&st.abort, 0);
    int r = pthread_mutex_init(&st.lock, NULL);
    if (r != 0)
        return -r;
    run_threads(&st, thread_count(p));
    char *msg = NULL;
    if (st.err_nomem) {
        r = -ENOMEM;
    } else if (st.err) {
        r = -EIO;
        msg = st.err;
        st.err = NULL;
    } else if (st.done < p->n) {
        r = -ECANCELED;
        if (asprintf(&msg, "job cancelled after %lld of %lld cases", (long long)st.done,
                     (long long)p->n) < 0)
            msg = NULL;
    }
    if (r < 0 && ret_err)
        *ret_err = msg;
    else
        free(msg);
    free(st.err);
    pthread_mutex_destroy(&st.lock);
    return r;
}

int nvw_case_pool_backend_open(void *ctx_ud, void **ret_ctx, char *err, size_t errlen)
{
    const nvw_case_pool_backend *be = ctx_ud;
    char detail[512] = "";
    void *ctx = NULL;
    if (be->table->open(be->options, &ctx, detail, sizeof detail) != NV_OK) {
        snprintf(err, errlen, "backend '%s' failed to open a context: %s", be->spec, detail);
        return -ENODEV;
    }
    if (be->deterministic &&
        nvw_det_configure(be->table, ctx, detail, sizeof detail) != NVW_DET_HONOURED) {
        be->table->close(ctx);
        snprintf(err, errlen,
                 "backend '%s' honoured \"deterministic\" on the job's first context but not "
                 "on a later one: %s",
                 be->spec, detail);
        return -ENODEV;
    }
    *ret_ctx = ctx;
    return 0;
}

void nvw_case_pool_backend_close(void *ctx_ud, void *ctx)
{
    const nvw_case_pool_backend *be = ctx_ud;
    be->table->close(ctx);
}

static int json_case(void *ud, void *ctx, int64_t i, char *err, size_t errlen)
{
    const nvw_case_pool_job *pj = ud;
    json_t *c = pj->run(pj->job, ctx, i);
    if (!c) {
        snprintf(err, errlen, "out of memory while running a %s", pj->what);
        return -ENOMEM;
    }
    pj->cases[i] = c;
    return 0;
}

int nvw_case_pool_run_job(const nvw_case_pool_job *pj, char **ret_err)
{
    const nvw_run_opts *o = pj->opts;
    nvw_case_pool p = {
        .threads = o ? o->threads : 0,
        .n = pj->n,
        .run_case = json_case,
        .ud = (void *)pj,
        .open_ctx = nvw_case_pool_backend_open,
        .close_ctx = nvw_case_pool_backend_close,
        .ctx_ud = (void *)&pj->backend,
        .progress = o ? o->progress : NULL,
        .progress_ud = o ? o->ud : NULL,
        .cancel = o ? o->cancel : NULL,
    };
    return nvw_case_pool_run(&p, ret_err);
}
