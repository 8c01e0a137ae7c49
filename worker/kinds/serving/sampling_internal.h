/* The sampling check's state, shared by check_sampling.c (the runs) and
 * sampling_judge.c (the statistics, the verdict and the case's "sampling"
 * object). Only those two include it. */
#ifndef NUMVAL_WORKER_SERVING_SAMPLING_INTERNAL_H
#define NUMVAL_WORKER_SERVING_SAMPLING_INTERNAL_H

#include "serving_internal.h"

typedef struct sstate {
    scase *c;
    sv_model m;
    int64_t *prompt;            /* [prompt] */
    double *logits;             /* [V] the device's next-token logits after the prompt */
    double *p;                  /* [V] the reference distribution of those logits */
    int64_t *draws, *again;     /* [draws] the draws, and the same draws rerun */
    int64_t *gen[2];            /* [steps] the sampled generation, twice */
    uint64_t base_draws, base_gen; /* the first counters (offsets) of each */
    int64_t draw_diff, draw_diffs; /* first differing draw (-1: none), how many */
    int64_t gen_diff, gen_diffs;
} sstate;

/* Judge the runs of st (docs/SERVING.md "Repeated sampling"): reproducibility,
 * support, the G-test at level alpha with power >= power against a
 * total-variation bias tv, categories expecting < min_expected pooled; the
 * case's "sampling" object and verdict. 0 or -ENOMEM. */
int sv_sampling_judge(sstate *st, double alpha, double tv, double power, double min_expected);

#endif
