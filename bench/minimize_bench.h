/* Minimization cost (bench/minimize_bench.c): the rows of the table
 * for fused and gradient failures, each a stored failure artifact minimized by
 * numval's minimizer and by a plain ddmin baseline with the same probe budget
 * and deadline, every probe a forked child. */
#ifndef NUMVAL_BENCH_MINIMIZE_BENCH_H
#define NUMVAL_BENCH_MINIMIZE_BENCH_H

typedef struct mb_case {
    const char *label;    /* the fault, as the table names it */
    const char *artifact; /* the failure artifact (numval-worker run --artifacts) */
    const char *backend;  /* the backend spec its probes run on */
} mb_case;

/* One Markdown row per method. Returns 0, or -1 when the artifact or the
 * backend cannot be loaded (a row saying so is printed). */
int mb_fused(const mb_case *c, int budget, double deadline);
int mb_grad(const mb_case *c, int budget, double deadline);

#define MB_TIMEOUT_MS 60000 /* per probe, as the worker's default */
#define MB_GATE_RUNS 5      /* reproduction gate and re-verification runs */

#endif
