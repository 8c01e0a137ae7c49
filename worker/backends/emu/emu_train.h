/* emu's device-driven training state (emu_train.c) and the models' steps:
 * the MLP's hand-written forward and backward (emu_train.c) and the CNN's,
 * composed of emu's own op entries (emu_train_cnn.c). Only emu_train*.c
 * include this. */
#ifndef NUMVAL_WORKER_EMU_TRAIN_H
#define NUMVAL_WORKER_EMU_TRAIN_H

#include <jansson.h>

#include "emu_internal.h"

/* Parameters of either model: mlp fc1.weight [in, hidden], fc1.bias,
 * fc2.weight [hidden, classes], fc2.bias; cnn conv1.weight [h, 1, 3, 3],
 * conv2.weight [2h, h, 3, 3], head.weight [2h (in/4)^2, classes], head.bias. */
#define NP 4

enum { EMU_TM_MLP, EMU_TM_CNN };

typedef struct emu_train {
    const emu_mode *mode; /* the context's (storage=, accum= ...) */
    int model;            /* EMU_TM_* */
    int in, hid, cls;
    bool relu, amp, adamw, scaler;
    nv_dtype low;
    double dropout, clip, loss_weight;
    double beta1, beta2, eps, wd, momentum;
    double init_scale, growth, backoff;
    int64_t interval;
    uint64_t seed;
    int64_t n[NP];
    int ndim[NP];
    int64_t shape[NP][4];
    double *w[NP], *m[NP], *v[NP];
    double scale; /* fp32 value, as torch keeps it */
    int64_t tracker, opt_steps, rng_calls;
    /* distributed: ranks > 1 split the batch and all-reduce their gradients */
    int ranks;
    bool tree;
    nv_dtype reduce_dt;
    bool deterministic; /* the job asks for it (emu is deterministic anyway) */
} emu_train_t;

/* The CNN's forward and backward of one batch (x [B, 1, in, in] fp32, y the
 * labels) through emu's own op entries on ctx, so the mode's knobs (storage=,
 * accum=, reduce= ...) apply as they do to op jobs: g[i] the scaled gradient
 * of parameter i, *ret_loss the unscaled loss, ops the forward's read-back
 * appended. NV_OK or an NV_E_* code with err. */
int emu_train_cnn_grads(emu_ctx *ctx, const emu_train_t *t, const nv_tensor_view *x,
                        const int32_t *y, int64_t B, double **g, double *ret_loss, json_t *ops,
                        char *err, size_t errlen);

#endif
