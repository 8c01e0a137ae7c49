/* Internal interface of the long-run job (worker/kinds/longrun/run.c, train_*.c). */
#ifndef NUMVAL_WORKER_TRAIN_INTERNAL_H
#define NUMVAL_WORKER_TRAIN_INTERNAL_H

#include "core/spec/longrunspec.h"
#include "stats.h"
#include "tape.h"

nv_tensor *nvw_tensor_like(const nv_tensor *t, nv_dtype dt);
/* Count exact zeros of a low-precision gradient into ex->lowp_grad_*. */
void nvw_exec_count_lowp(nvw_exec *ex, const nv_tensor *g);
/* Backward of one catalog op on the executor: gx[i] for differentiable inputs
 * (NULL for the others). y: the forward output (saved tensors). */
int nvw_exec_backward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                      nv_tensor *const *in, const nv_tensor *y, const nv_tensor *gy,
                      nv_tensor **gx);
int nvw_exec_cast(nvw_exec *ex, nv_tensor *t, nv_dtype to, nv_tensor **ret);

/* ---- the model (worker/kinds/longrun/train/model.c) ---- */
#define NVW_MAX_PARAMS 24

typedef struct nvw_param {
    char name[32];  /* "fc1.weight" */
    char layer[16]; /* "fc1": per-layer gradient norms */
    nv_tensor *w;   /* master (fp32 on the device, fp64 on the host) */
    nv_tensor *g;   /* gradient of this step (unscaled), NULL when none */
    double *m, *v;  /* optimizer state */
} nvw_param;

typedef struct nvw_model {
    const nv_longrun_spec *s;
    nvw_param p[NVW_MAX_PARAMS];
    int n_params;
    nv_dtype master; /* fp32 (device) or fp64 (host) */
} nvw_model;

/* Parameters initialized from the run seed (Philox stream per parameter). */
int nvw_model_init(nvw_model *m, const nv_longrun_spec *s, uint64_t seed, nv_dtype master);
void nvw_model_done(nvw_model *m);
/* Build the forward of a batch on the tape: x [B, in] (mlp) or [B, T, d] (transformer),
 * target int32 [B]. Returns the id of the scalar mean cross-entropy loss value. */
int nvw_model_loss(nvw_model *m, nvw_tape *tp, nv_tensor *x, nv_tensor *target);

/* ---- the synthetic dataset (worker/kinds/longrun/train/data.c) ---- */
typedef struct nvw_data {
    const nv_longrun_spec *s;
    int64_t in_numel; /* per example */
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

/* ---- one training run (worker/kinds/longrun/train/loop.c) ---- */
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
} nvw_run;

/* Train one seed on ex (host or device); fills run. Returns 0 or negative with
 * run->err set. */
int nvw_train_run(const nv_longrun_spec *s, const nvw_data *d, nvw_exec *ex, uint64_t seed,
                  nvw_run *run);
void nvw_run_done(nvw_run *r);

#endif
