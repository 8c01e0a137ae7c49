/* Internal interface of the long-run training (the folder's own files, and the
 * unit test of the executor, tests/unit/longrun/test-train-exec.c). */
#ifndef NUMVAL_WORKER_TRAIN_INTERNAL_H
#define NUMVAL_WORKER_TRAIN_INTERNAL_H

#include "train.h"
#include "worker/backends/views/views.h"

/* The executor's tensors across the ABI (exec.c): nvw_view_from_tensor and
 * nvw_tensor_from_view with a fast path for contiguous bf16 that gives the same
 * bytes and values. */
int nvw_exec_to_view(const nv_tensor *t, nv_tensor_view *ret);
nv_tensor *nvw_exec_from_view(const nv_tensor_view *v);

nv_tensor *nvw_tensor_like(const nv_tensor *t, nv_dtype dt);
/* Count exact zeros of a low-precision gradient into ex->lowp_grad_*. */
void nvw_exec_count_lowp(nvw_exec *ex, const nv_tensor *g);
/* Backward of one catalog op on the executor: gx[i] for differentiable inputs
 * (NULL for the others). y: the forward output (saved tensors). */
int nvw_exec_backward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                      nv_tensor *const *in, const nv_tensor *y, const nv_tensor *gy,
                      nv_tensor **gx);
int nvw_exec_cast(nvw_exec *ex, nv_tensor *t, nv_dtype to, nv_tensor **ret);

/* ---- the model (model.c) ---- */

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
    /* Device-driven training: the dropout multiplier of this step after the
     * MLP's activation ([batch, hidden], borrowed), NULL when none. */
    const nv_tensor *mask;
} nvw_model;

/* Parameters initialized from the run seed (Philox stream per parameter). */
int nvw_model_init(nvw_model *m, const nv_longrun_spec *s, uint64_t seed, nv_dtype master);
void nvw_model_done(nvw_model *m);
/* Build the forward of a batch on the tape: x [B, in] (mlp) or [B, T, d] (transformer),
 * target int32 [B]. Returns the id of the scalar mean cross-entropy loss value. */
int nvw_model_loss(nvw_model *m, nvw_tape *tp, nv_tensor *x, nv_tensor *target);

/* ---- at matched weights (shadow.c) ----
 * The gradient of step t's batch at the device model's weights (the device's
 * loss scale `scale`) by the fp64 and
 * the declared-precision references, compared with the device's (m's p[i].g),
 * into pt's p_* fields; and the eval loss of the weights on the device and by
 * the declared-precision reference. 0 or negative. */
int nvw_shadow_grads(const nvw_model *m, const nvw_data *d, const nvw_exec *dev, uint64_t seed,
                     int64_t t, double scale, double clip, double *ret_norm64, nvw_point *pt);
/* Device-driven step checks (driven_check.c): false with why set when the
 * step fails them. */
bool nvw_drive_autocast_ok(const nvw_amp *amp, const json_t *ops, char *why, size_t n);
bool nvw_drive_update_ok(const nv_longrun_spec *s, const nvw_model *pre, nv_tensor *const *g,
                         nv_tensor *const *w, nv_tensor *const *m1, nv_tensor *const *m2,
                         double lr, int64_t t, char *why, size_t n);

/* Distributed steps (allreduce.c): the check of one step's reduced gradient
 * (red[P]) against the exact sum of the ranks' gradients (rank_g[r * P + i]):
 * false with why naming the bound at the first element beyond it; counts into
 * run's ar_* fields. */
bool nvw_allreduce_ok(const nv_longrun_spec *s, const nvw_model *m, nv_tensor *const *rank_g,
                      nv_tensor *const *red, nvw_run *run, char *why, size_t n);

/* The eval loss of m's weights by the host fp64 reference (loop.c). */
int nvw_eval_loss(nvw_model *m, const nvw_data *d, nvw_exec *ex, double *ret);
int nvw_shadow_eval(const nvw_model *m, const nvw_data *d, nvw_exec *dev, double *ret_dev,
                    double *ret_decl);

#endif
