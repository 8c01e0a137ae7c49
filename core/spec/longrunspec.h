/* Long-run job specs (docs/JOBS.md "Long-run jobs"): validation and
 * the parsed form the long-run runner (worker/kinds/longrun/run.c) trains from. */
#ifndef NUMVAL_LONGRUNSPEC_H
#define NUMVAL_LONGRUNSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/dtype.h"

#define NV_LR_MAX_SEEDS 64

typedef enum nv_lr_model { NV_LR_MLP, NV_LR_TRANSFORMER, NV_LR_CNN } nv_lr_model;

typedef struct nv_longrun_spec {
    nv_lr_model model;
    bool relu;                   /* "activation": "gelu" (default) | "relu" */
    int in_dim, hidden, classes; /* mlp; transformer: in_dim = d_model, hidden = ffn;
                                  * cnn: in_dim = the image side, hidden = conv1's
                                  * channels (conv2 has twice as many) */
    int seq;                     /* transformer sequence length */
    uint64_t data_seed;
    int teacher_hidden;
    double temperature;
    int eval_examples;
    bool adamw; /* "optimizer": "adamw" | "sgd" (momentum) */
    double lr, beta1, beta2, eps, weight_decay, momentum;
    bool cosine;
    int warmup;
    double min_lr_ratio;
    int64_t steps;
    int batch;
    int n_seeds;
    uint64_t seeds[NV_LR_MAX_SEEDS];
    int log_every;
    double loss_weight;
    bool amp; /* low-precision device run under the policy */
    nv_dtype amp_dtype;
    json_t *policy;         /* the AMP policy object (owned) */
    int64_t policy_version; /* 0 when the job names none */
    bool scaler;
    double init_scale, growth, backoff;
    int growth_interval;
    double alpha;           /* Welch's t-test level */
    int trim;               /* trimmed-mean rule: drop this many runs at each end */
    double band_k;          /* trimmed-mean rule: band = band_k * sd of the reference */
    double band_floor;      /* ... and at least this fraction of the reference mean */
    double envelope_margin; /* envelope widened by this fraction of the loss */
    bool deterministic;     /* repeat seed 0 on the device and compare bits */
    /* "device_training": whole steps on the device (nv_backend.train) */
    bool driven;
    double clip;           /* clip_grad_norm max norm, 0: none */
    double dropout;        /* dropout probability after the activation */
    int64_t checkpoint_at; /* checkpoint after this many steps and resume (0: none) */
    /* "device_training.distributed": the batch split across ranks (1: none),
     * gradients all-reduced by the device in the declared algorithm and dtype */
    int ranks;
    bool allreduce_tree; /* "algorithm": "ring" (default) | "tree" */
    nv_dtype allreduce_dtype;
} nv_longrun_spec;

/* Whether the JSON object is a long-run job ("kind": "longrun"). */
bool nv_longrun_is(const json_t *spec);
/* Validate and parse; same contract as nv_jobspec_parse (jobspec.h): -EINVAL with
 * the JSON pointer and a message naming the offending value, or -ENOMEM. */
int nv_longrun_parse(const json_t *spec, nv_longrun_spec **ret, char **ret_pointer, char **ret_msg);
void nv_longrun_free(nv_longrun_spec *s); /* NULL is a no-op */
int nv_longrun_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

#endif
