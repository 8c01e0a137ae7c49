/* Long-run training: a small reverse-mode tape whose every forward and
 * backward op runs on an executor: the device (the backend's own forward and
 * backward entries through the loader) or the host reference (the catalog's
 * plain fp64 forward and reference VJP, core/ref/backward.h). The AMP policy
 * chooses each device op's dtype (worker/kinds/longrun/train/amp.c); the host reference runs fp64.
 */
#ifndef NUMVAL_WORKER_TRAIN_TAPE_H
#define NUMVAL_WORKER_TRAIN_TAPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/tensor.h"
#include "core/ops/catalog.h"
#include "worker/backends/loader.h"

/* AMP categories (PyTorch autocast's op lists as the model). */
typedef enum nvw_amp_cat {
    NVW_AMP_PROMOTE, /* widest float input dtype (also ops the policy does not list) */
    NVW_AMP_LOW,     /* cast float inputs to the low-precision dtype */
    NVW_AMP_FP32,    /* cast float inputs to fp32 */
} nvw_amp_cat;

#define NVW_AMP_MAX_OPS 48

typedef struct nvw_amp {
    bool enabled;
    nv_dtype low;    /* bf16, fp16 ... */
    nv_dtype master; /* "master_weights": the dtype the device keeps weights in */
    int n_low, n_fp32, n_promote;
    char low_ops[NVW_AMP_MAX_OPS][24], fp32_ops[NVW_AMP_MAX_OPS][24],
        promote_ops[NVW_AMP_MAX_OPS][24];
} nvw_amp;

/* Parse a policy object {"low_precision": [op..], "fp32": [op..], "promote": [op..]};
 * unknown op names are refused naming them. Returns 0 or -EINVAL with *ret_msg. */
int nvw_amp_parse(const json_t *policy, nv_dtype low, nvw_amp *ret, char **ret_msg);
nvw_amp_cat nvw_amp_category(const nvw_amp *a, const char *op);
/* The shipped default policy (same content as suites/amp_policy_default.json). */
const char *nvw_amp_default_json(void);

typedef struct nvw_exec {
    bool host; /* fp64 host reference */
    /* With host: the declared-precision reference. The tape treats it as the
     * device (the AMP policy's casts and dtypes), the host computes each op in
     * fp64 and rounds its output once to that dtype (round to nearest even,
     * IEEE 754-2019 4.3.1): every op as accurate as its declared output dtype
     * allows, the yardstick of the device's gradient and eval errors. */
    bool declared;
    const nv_backend *table; /* device */
    void *ctx;
    const json_t *saved; /* describe()'s "saved" object */
    nvw_amp amp;
    int64_t calls;
    int64_t lowp_grad_elems, lowp_grad_zero; /* low-precision gradients seen / exactly 0 */
    char err[512];
} nvw_exec;

typedef struct nvw_val {
    nv_tensor *t;  /* owned unless borrowed */
    nv_tensor *g;  /* gradient (owned) */
    bool borrowed; /* a parameter's master tensor */
    bool need_grad;
} nvw_val;

typedef enum nvw_node_kind {
    NVW_N_OP,        /* a catalog op */
    NVW_N_CAST,      /* dtype conversion (device cast op; backward casts back) */
    NVW_N_EXPAND,    /* [C] -> [N, C] row broadcast (backward: sum over axis 0) */
    NVW_N_TRANSPOSE, /* swap the last two dims (copy) */
    NVW_N_RESHAPE,   /* same elements, new shape */
} nvw_node_kind;

typedef struct nvw_node {
    nvw_node_kind kind;
    const nv_op_def *op;
    char attrs[96];
    int in[NV_OP_MAX_INPUTS];
    int n_in;
    int out;
} nvw_node;

typedef struct nvw_tape {
    nvw_exec *ex;
    nvw_val *vals;
    int n_vals, cap_vals;
    nvw_node *nodes;
    int n_nodes, cap_nodes;
} nvw_tape;

void nvw_tape_init(nvw_tape *tp, nvw_exec *ex);
void nvw_tape_done(nvw_tape *tp); /* frees values (not borrowed ones) and nodes */

/* Leaves. leaf_borrow: a parameter (need_grad), not freed by the tape.
 * leaf_own: the tape takes t (an input, no gradient). Return the value id or
 * a negative errno. */
int nvw_tape_leaf_borrow(nvw_tape *tp, nv_tensor *t);
int nvw_tape_leaf_own(nvw_tape *tp, nv_tensor *t);

/* A catalog op under the AMP policy: casts inputs by the op's category, runs it
 * on the executor and records it. Returns the output's value id or negative
 * (ex->err says why). */
int nvw_tape_op(nvw_tape *tp, const char *op, const char *attrs, int n, const int *in);
int nvw_tape_expand(nvw_tape *tp, int v, int64_t rows);
int nvw_tape_transpose(nvw_tape *tp, int v);
int nvw_tape_reshape(nvw_tape *tp, int v, int ndim, const int64_t *shape);

/* Reverse pass from the scalar value `loss` with seed gradient `seed` (fp32 on
 * the device, fp64 on the host). Gradients of borrowed leaves land in their .g.
 * Returns 0 or negative (ex->err). */
int nvw_tape_backward(nvw_tape *tp, int loss, double seed);

/* True for the fp64 host reference, whose values carry no device dtype. */
static inline bool nvw_exec_fp64(const nvw_exec *ex)
{
    return ex->host && !ex->declared;
}

/* Executor primitives (also used for evaluation without a tape). */
int nvw_exec_forward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                     nv_tensor *const *in, nv_dtype out_dt, nv_tensor **ret);

#endif
