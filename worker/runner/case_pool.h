/* The case pool shared by every runner (op, gradient, fused, longrun): cases
 * 0..n-1 run on a pool of threads, each exactly once; every thread holds one
 * context (a backend context in the runners), opened before the thread's first
 * case that needs one and closed when the thread ends. Where the results go is
 * the runner's business: run_case places case i by its index, so the output does
 * not depend on the thread count. */
#ifndef NUMVAL_WORKER_CASE_POOL_H
#define NUMVAL_WORKER_CASE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "numval/backend.h"
#include "run.h"

/* The most threads a pool starts, whatever is asked. */
#define NVW_CASE_POOL_MAX_THREADS 256

/* Room for the message of a failing open_ctx or run_case. */
#define NVW_CASE_POOL_ERRLEN 768

/* Run case i on the thread's context ctx: 0, or negative on an infrastructure
 * error with a message for users in err; the pool then stops (no further case
 * is claimed). Called concurrently for different i. */
typedef int (*nvw_case_fn)(void *ud, void *ctx, int64_t i, char *err, size_t errlen);

typedef struct nvw_case_pool {
    int threads; /* > 0: that many, else one per online CPU; never more than n */
    int64_t n;   /* the cases are 0..n-1 */
    nvw_case_fn run_case;
    void *ud; /* passed to run_case and needs_ctx */
    /* Whether case i runs on the context; NULL: every case does. A thread whose
     * cases need none opens none (ctx is NULL for those cases). */
    bool (*needs_ctx)(void *ud, int64_t i);
    /* Open a thread's context: 0, or negative with a message for users in err
     * (the pool stops and reports it). NULL: no context, ctx is NULL. */
    int (*open_ctx)(void *ctx_ud, void **ret_ctx, char *err, size_t errlen);
    void (*close_ctx)(void *ctx_ud, void *ctx);
    void *ctx_ud; /* passed to open_ctx and close_ctx */
    /* Called serially after each case that ran, with done rising by one each
     * time up to n; may be NULL. */
    nvw_progress_fn progress;
    void *progress_ud;
    atomic_int *cancel; /* polled before each case (another thread sets it); may be NULL */

} nvw_case_pool;

/* Run the cases of p and join every thread it started. When no thread can be
 * created the cases run on the calling thread; when only some can, on those.
 * Each pool thread frees MPFR's thread-local caches (nv_ref_thread_done) before
 * it ends.
 * Returns 0 when every case ran; -EIO after a failing open_ctx or run_case
 * (*ret_err: the first message); -ECANCELED when *cancel stopped the pool
 * before every case ran (*ret_err: "job cancelled after D of N cases");
 * -ENOMEM. *ret_err (malloc'd, may be NULL) is written only on failure. */
int nvw_case_pool_run(const nvw_case_pool *p, char **ret_err);

/* Contexts of a loaded backend, for open_ctx/close_ctx with ctx_ud pointing
 * at this (borrowed for the run). */
typedef struct nvw_case_pool_backend {
    const nv_backend *table;
    const char *options; /* text passed to table->open */
    const char *spec;    /* the backend spec, named in errors */
    /* Configure every context {"deterministic": true} after it opens; a context
     * that does not answer true fails the open (-ENODEV). */
    bool deterministic;
} nvw_case_pool_backend;

/* table->open(options); on failure -ENODEV and err says "backend 'SPEC' failed
 * to open a context: DETAIL". */
int nvw_case_pool_backend_open(void *ctx_ud, void **ret_ctx, char *err, size_t errlen);
void nvw_case_pool_backend_close(void *ctx_ud, void *ctx);

/* A runner's case: the case JSON (new reference), NULL on ENOMEM. */
typedef json_t *(*nvw_case_json_fn)(void *job, void *ctx, int64_t i);

/* A job whose cases are JSON placed by index (op, gradient and fused runners). */
typedef struct nvw_case_pool_job {
    const nvw_run_opts *opts;      /* threads, progress, cancel; NULL: one thread a CPU */
    nvw_case_pool_backend backend; /* one context of it per thread */
    int64_t n;                     /* the cases are 0..n-1 */
    nvw_case_json_fn run;
    void *job;        /* passed to run */
    json_t **cases;   /* n slots: case i goes to cases[i], whichever thread runs it */
    const char *what; /* the case named in the out-of-memory error: "case", "fused case" */
} nvw_case_pool_job;

/* Run the cases of pj on a pool. A NULL from run stops the pool with "out of
 * memory while running a WHAT". Returns as nvw_case_pool_run; the slots of the
 * cases that ran are filled (the caller frees them) whatever it returns. */
int nvw_case_pool_run_job(const nvw_case_pool_job *pj, char **ret_err);

#endif
