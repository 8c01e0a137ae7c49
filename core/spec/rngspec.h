/* RNG job specs (docs/JOBS.md "RNG jobs"): which checks of the device's random
 * number generators to run (seeding, state save and restore, non-overlapping
 * streams, dropout, recomputation under activation checkpointing) and their
 * sizes. In core/spec so numvald refuses a bad job with the code the worker
 * runs. */
#ifndef NUMVAL_RNGSPEC_H
#define NUMVAL_RNGSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define NV_RNG_MAX_P 8               /* dropout probabilities of one job */
#define NV_RNG_MAX_WINDOWS (1 << 22) /* streams x 2 x n: windows the overlap test sorts */

typedef enum nv_rng_check {
    NV_RNGC_SEEDING,   /* same seed, same stream; different seeds, different streams */
    NV_RNGC_STATE,     /* a restored state reproduces the continuation bitwise */
    NV_RNGC_STREAMS,   /* parallel streams and successive draws share no window */
    NV_RNGC_DROPOUT,   /* mask reproducible from seed + offset; keep rate; scale (per p) */
    NV_RNGC_RECOMPUTE, /* a checkpointed forward's recomputation replays its numbers (per p) */
    NV_RNGC_COUNT
} nv_rng_check;

typedef struct nv_rngspec {
    uint64_t seed;
    int64_t n;   /* uniforms per draw (seeding, state, streams) */
    int streams; /* parallel generators of the streams check */
    int window;  /* consecutive values a shared window has */
    int n_p;
    double p[NV_RNG_MAX_P];
    int64_t dropout_n; /* elements of each dropout mask */
    int64_t offset;    /* uniforms drawn after seeding, before the mask */
    double alpha;      /* significance of the keep-rate test */
    bool check[NV_RNGC_COUNT];
    int64_t n_cases;
} nv_rngspec;

/* The check's name in specs and results ("seeding", ...). */
const char *nv_rng_check_name(nv_rng_check c);

/* Validate and parse; same contract as nv_jobspec_parse (jobspec.h): -EINVAL
 * with the JSON pointer and a message, or -ENOMEM. *ret is the caller's (free). */
int nv_rngspec_parse(const json_t *spec, nv_rngspec **ret, char **ret_pointer, char **ret_msg);
int nv_rngspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

/* Case i: its check and, for dropout and recompute, the index of its p (else
 * -1). Cases run seeding, state, streams, then dropout and recompute per p. */
void nv_rngspec_case(const nv_rngspec *s, int64_t i, nv_rng_check *ret_check, int *ret_p);

#endif
