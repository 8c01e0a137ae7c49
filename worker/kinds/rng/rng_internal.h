/* Internal interface of the RNG kind (the folder's own files). */
#ifndef NUMVAL_WORKER_RNG_INTERNAL_H
#define NUMVAL_WORKER_RNG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/spec/rngspec.h"
#include "rng.h"
#include "windows.h"
#include "worker/runner/job.h"

typedef struct rjob {
    nvw_job_base b;
    nv_rngspec *s;
} rjob;

/* One case on one thread's backend context. */
typedef struct rcase {
    const rjob *j;
    const nv_rngspec *s;
    void *ctx;
    json_t *cj;    /* the case JSON */
    json_t *tests; /* its "tests" array (borrowed from cj) */
    int pi;        /* dropout, recompute: the index of the case's p */
} rcase;

/* The device's generator actions (call.c). Each returns 0; 1 when the device
 * refused or gave a bad output (the case then has its verdict: error
 * backend_error / not_offered, or failed bad_output); -ENOMEM. Tensors come
 * back as malloc'd arrays the caller frees. */
int rg_seed(rcase *c, int gen, uint64_t seed);
int rg_uniform(rcase *c, int gen, int64_t n, float **ret);
int rg_dropout(rcase *c, int64_t n, double p, float **ret);
int rg_get_state(rcase *c, int gen, int8_t **ret, int64_t *ret_len);
int rg_set_state(rcase *c, int gen, const int8_t *state, int64_t len);
/* NV_RNG_RECOMPUTE: out[0] the forward y, out[1] dL/dx, out[2] the uniforms. */
int rg_recompute(rcase *c, int64_t n, double p, float *out[3]);
/* seed(gen, seed), then skip uniforms discarded: the generator at (seed, skip). */
int rg_seek(rcase *c, int gen, uint64_t seed, int64_t skip);

/* Judgement helpers (judge.c). */
/* The case's verdict: v with failure class cls and a message (only the first
 * verdict is kept). 0 or -ENOMEM. */
int rg_verdict(rcase *c, const char *v, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* One test of the case into "tests": {"name", "passed", "why", "detail"...}
 * (detail, stolen, may be NULL); a failed one makes the case failed with class
 * cls and the message. 0 or -ENOMEM. */
int rg_test(rcase *c, const char *name, bool passed, const char *cls, const char *why,
            json_t *detail, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Elements whose bits differ; *ret_first the first (or -1). */
int64_t rg_diff(const float *a, const float *b, int64_t n, int64_t *ret_first);

/* The overlap as a detail object {"shared", "first": {...}} (new reference). */
json_t *rg_overlap_json(const rg_overlap *o, const char *const *seg_names);

/* The checks (checks.c, checks_mask.c): into c->cj, with its verdict. 0 or -ENOMEM. */
int rg_check_seeding(rcase *c);
int rg_check_state(rcase *c);
int rg_check_streams(rcase *c);
int rg_check_dropout(rcase *c);
int rg_check_recompute(rcase *c);

#endif
