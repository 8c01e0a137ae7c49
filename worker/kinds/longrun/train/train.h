/* Long-run training, as the long-run runner (worker/kinds/longrun/) uses it:
 * the synthetic teacher dataset, one training run of a seed on an executor (the
 * host fp64 reference or the device, tape.h) and the statistics that judge the
 * runs (stats.h). */
#ifndef NUMVAL_WORKER_TRAIN_H
#define NUMVAL_WORKER_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/spec/longrunspec.h"
#include "stats.h"
#include "tape.h"

#define NVW_MAX_PARAMS 24 /* parameters of a model (and layers of a run's norms) */

/* ---- the synthetic dataset (data.c) ---- */
typedef struct nvw_data {
    const nv_longrun_spec *s;
    int64_t in_numel;   /* per example */
    int64_t teacher_in; /* the teacher's input features (cnn: the pixels) */
    double *t1, *t2;  /* teacher weights */
    nv_tensor *eval_x, *eval_y;
    double bayes_loss; /* mean teacher entropy over the eval inputs */
} nvw_data;

int nvw_data_init(nvw_data *d, const nv_longrun_spec *s);
void nvw_data_done(nvw_data *d);
/* The training batch of (run seed, step): fresh inputs, labels sampled from the
 * teacher. dt: the input dtype (fp32 device, fp64 host). */
int nvw_data_batch(const nvw_data *d, uint64_t seed, int64_t step, nv_dtype dt, nv_tensor **ret_x,
                   nv_tensor **ret_y);

/* ---- one training run (loop.c) ---- */
typedef struct nvw_point {
    int64_t step;
    double loss; /* eval loss (mean cross entropy on the eval set) */
    double train_loss;
    double grad_norm; /* global, unscaled */
    double scale;
    int64_t nonfinite; /* non-finite gradient elements this step */
    int skipped;
    double lowp_zero_frac; /* exact zeros among low-precision gradient elements */
    double layer_norms[NVW_MAX_PARAMS];
    /* At matched weights (shadow.c), device runs only: checked when the step's
     * gradient was compared (not on a skipped step); per parameter and, folded,
     * per layer, the squared norms of the device's and the declared-precision
     * reference's gradient errors against the fp64 gradient of the same weights
     * and batch, and of that gradient; the eval loss of the same weights computed
     * by the device and by the declared-precision reference (NAN when not). */
    bool checked;
    double p_dev_err2[NVW_MAX_PARAMS], p_decl_err2[NVW_MAX_PARAMS], p_ref2[NVW_MAX_PARAMS];
    double dev_err2[NVW_MAX_PARAMS], decl_err2[NVW_MAX_PARAMS], ref2[NVW_MAX_PARAMS];
    double eval_dev, eval_decl;
} nvw_point;

typedef struct nvw_run {
    uint64_t seed;
    bool host;
    nvw_point *pts;
    int n_pts;
    int64_t skipped_steps, nonfinite_total;
    double final_loss;
    double lowp_zero_frac; /* over the whole run */
    double seconds;
    int64_t steps_done;
    char err[512];
    int n_layers;
    char layers[NVW_MAX_PARAMS][16];
    /* Device-driven training (driven.c): the first step check that failed
     * (fail_class "" when none), counts, and per step the bits a resumed run
     * must repeat (scale, dropout mask, loss and state). */
    bool driven;
    char fail_class[32];
    int64_t fail_step;
    char fail_why[480];
    int64_t checked_steps, growths, backoffs;
    uint64_t *scale_bits, *mask_hash, *state_hash; /* [steps] */
    char ops[1024]; /* the first step's autocast read-back (JSON text) */
    /* distributed steps (allreduce.c): reduced elements judged, equal to the
     * exact sum rounded once, not judged (a non-finite term), the largest
     * error / bound */
    int64_t ar_elements, ar_exact, ar_skipped;
    double ar_worst;
    /* the steps' info.deterministic (whether the device ran with
     * deterministic algorithms): -1 no step said, 0 some step said false, 1
     * every step said true */
    int det_honoured;
} nvw_run;

/* Where a device-driven run checkpoints and restores (driven.c): after `at`
 * steps SAVE, open a fresh context of table (options), LOAD and continue. */
typedef struct nvw_resume {
    int64_t at;
    const nv_backend *table;
    const char *options;
} nvw_resume;

/* One seed trained by the device's own steps (nv_backend.train), each step
 * checked against the host reference step from the same state. resume: NULL
 * for an uninterrupted run. 0 or negative with run->err. */
int nvw_train_driven(const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                     const nvw_resume *resume, nvw_run *run);

/* Distributed steps (allreduce.c): k of the declared reduction's bound
 * gamma_k sum |g_r| (docs/JOBS.md "Distributed gradient reduction") and the
 * bound in words, with its source. */
int nvw_allreduce_k(const nv_longrun_spec *s);
void nvw_allreduce_bound_text(const nv_longrun_spec *s, char *out, size_t n);

/* Train one seed on ex (host or device); fills run. Returns 0 or negative with
 * run->err set. */
int nvw_train_run(const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                  nvw_run *run);
void nvw_run_done(nvw_run *r);

#endif
