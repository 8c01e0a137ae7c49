/* Internal interface of the gradient runner (run_gradient*.c). */
#ifndef NUMVAL_WORKER_RUN_GRADIENT_INTERNAL_H
#define NUMVAL_WORKER_RUN_GRADIENT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "backends/loader.h"
#include "run_gradient.h"

typedef struct gjob {
    const json_t *spec_json;
    nv_gradspec *g;
    const char *backend_spec;
    const nv_backend *table;
    const char *options;
    json_t *describe;
    const json_t *saved; /* describe "saved" list of the op (borrowed) */
    bool nondeterministic;
    const nvw_run_opts *opts;
    json_t **cases;
    atomic_llong next;
    atomic_int abort;
    pthread_mutex_t lock;
    int64_t done;
    char *infra_err;
} gjob;

/* Case i on context ctx: new reference, NULL on ENOMEM (run_gradient_case.c). */
json_t *nvw_grad_case(gjob *j, void *ctx, int64_t i);
/* The job's formula-check parameters with their reasons (new reference). */
json_t *nvw_grad_settings(const gjob *j);

#endif
