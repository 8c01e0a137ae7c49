/* The gate and minimization of a serving pair (pair_min.c). */
#ifndef NUMVAL_WORKER_SERVING_PAIR_MIN_H
#define NUMVAL_WORKER_SERVING_PAIR_MIN_H

#include <stdatomic.h>
#include <stdio.h>

#include "pair.h"

typedef struct sv_pmin_opts {
    int runs;          /* gate and re-verification */
    int budget;        /* most probes of the search */
    double deadline_s; /* for the search */
    int timeout_ms;    /* per probe */
    atomic_int *cancel;
} sv_pmin_opts;

typedef struct sv_pmin_result {
    int gate_runs, gate_failed, gate_bits;
    bool flaky, verified;
    sv_pair *best; /* the minimized pair (owned; NULL when flaky) */
    int probes;
    double seconds;
    const char *stop; /* done, budget, deadline, cancelled */
    int64_t elements_before, nonzero_before, elements_after, nonzero_after;
    int64_t rows_before, rows_after; /* of the batched call */
    int64_t differ;                  /* values differing in the last verification */
} sv_pmin_result;

/* runs probes of p: how many failed with the stored class, how many gave
 * both stored outputs bit for bit. 0 or a negative errno. */
int sv_pair_gate(const sv_pair *p, const nvw_backend *b, int runs, int timeout_ms, int *failed,
                 int *bits);
/* Gate, minimize, re-verify (docs/ARTIFACTS.md "Serving pairs"). 0 or a
 * negative errno; m->best is the caller's to free. */
int sv_pair_minimize(const sv_pair *p, const nvw_backend *b, const sv_pmin_opts *o,
                     sv_pmin_result *m);

#endif
