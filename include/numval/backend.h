/* numval backend ABI: what a device runtime implements so numval can validate it.
 *
 * A backend is a shared object exporting one symbol, nv_backend_entry, returning
 * a table of functions. numval-worker loads it with dlopen (backend spec
 * "plugin:/path/lib.so"); the built-in emulated accelerator ("emu:...") and the
 * exec harness bridge implement the same table. Documented in docs/BACKEND_ABI.md.
 *
 * Rules of the ABI:
 * - Tensors cross the ABI encoded in their dtype, little-endian, one element per
 *   storage unit (fp64: 8 bytes, fp32/tf32/int32: 4, bf16/fp16: 2, every 8-bit and
 *   sub-byte format: 1 byte, value in the low bits). Strides count elements.
 * - Outputs are allocated by the backend (so numval can check the shape and
 *   strides it chose) and released through release_tensor.
 * - Errors: a function returns NV_OK or a negative NV_E_* code and writes a
 *   NUL-terminated message into err (errlen bytes, always >= 256).
 * - Op attributes arrive as a JSON object text (e.g. {"axis":1}); unknown keys
 *   must be ignored, missing ones take the catalog default (docs/JOBS.md).
 * - A backend must be usable from several threads at once with one context each;
 *   numval never shares a context between threads.
 */
#ifndef NUMVAL_BACKEND_H
#define NUMVAL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 appended nv_backend.double_backward (and nv_double_backward_call);
 * version 3 appended nv_backend.train (nv_train_call); version 4 appended
 * nv_backend.rng (nv_rng_call) and nv_op_call.node; numval still loads
 * version-1, -2 and -3 tables, which end before rng (a plugin of version 3 or
 * older never reads nv_op_call.node); version 5 appended nv_backend.configure
 * (numval loads version-4 tables, which end before configure, as offering no
 * configure). */
#define NV_BACKEND_ABI_VERSION 5
#define NV_BACKEND_MAX_DIMS 8

enum {
    NV_OK = 0,
    NV_E_INVALID = -1,     /* invalid input: the op's documented refusal (bad shape, dtype, attr) */
    NV_E_SHAPE = -2,       /* shapes do not fit the op */
    NV_E_DTYPE = -3,       /* dtype not supported by the op or the device */
    NV_E_UNSUPPORTED = -4, /* op, backward or graph not offered by this backend */
    NV_E_NONDETERMINISTIC = -5, /* refused: op is non-deterministic in deterministic mode */
    NV_E_NOMEM = -6,
    NV_E_DEVICE = -7,      /* device or runtime failure */
};

/* Dtype codes: the values of nv_tensor_view.dtype and nv_op_call.out_dtype. The
 * numbers are fixed (a new dtype gets a new number; none is ever reused). The
 * numerics core's nv_dtype is this enum (core/numerics/dtype.h), so a plugin and
 * numval cannot disagree on a code; tests/unit/backends/test-dtype-abi.c checks the
 * numbers against docs/BACKEND_ABI.md "Dtype codes". Each element sits in its
 * storage unit, little-endian; the 6- and 4-bit formats in the low bits of one byte
 * (the high bits zero). */
enum nv_dt {
    NV_DT_FP64 = 0, /* IEEE 754 binary64 (1.11.52); 8 bytes */
    NV_DT_FP32 = 1, /* IEEE 754 binary32 (1.8.23); 4 bytes */
    NV_DT_TF32 = 2, /* 1.8.10 in an fp32 container, low 13 fraction bits 0; 4 bytes */
    NV_DT_BF16 = 3, /* bfloat16 (1.8.7: fp32's upper half); 2 bytes */
    NV_DT_FP16 = 4, /* IEEE 754 binary16 (1.5.10); 2 bytes */
    NV_DT_FP8_E4M3 = 5, /* OCP OFP8 E4M3 (e4m3fn, 1.4.3): no inf, NaN S.1111.111; 1 byte */
    NV_DT_FP8_E5M2 = 6, /* OCP OFP8 E5M2 (1.5.2): IEEE-like inf and NaN; 1 byte */
    NV_DT_FP6_E2M3 = 7, /* OCP MX FP6 E2M3 (1.2.3): no inf or NaN; 1 byte, low 6 bits */
    NV_DT_FP6_E3M2 = 8, /* OCP MX FP6 E3M2 (1.3.2): no inf or NaN; 1 byte, low 6 bits */
    NV_DT_FP4_E2M1 = 9, /* OCP MX FP4 E2M1 (1.2.1): no inf or NaN; 1 byte, low 4 bits */
    NV_DT_E8M0 = 10, /* OCP MX E8M0 scale: 2^(e - 127), 0xFF NaN, unsigned; 1 byte */
    NV_DT_INT8 = 11, /* two's complement; 1 byte */
    NV_DT_INT32 = 12, /* two's complement; 4 bytes */
};

typedef struct nv_tensor_view {
    int32_t dtype; /* an NV_DT_* code */
    int32_t ndim;
    int64_t shape[NV_BACKEND_MAX_DIMS];
    int64_t strides[NV_BACKEND_MAX_DIMS]; /* elements */
    void *data;                           /* points at element [0,...,0] */
} nv_tensor_view;

/* One operator invocation. The caller owns inputs; the backend fills outputs[]
 * (n_outputs set by the caller to the count the op produces) with tensors it
 * allocated. */
typedef struct nv_op_call {
    const char *op;         /* catalog name: "exp", "softmax", "matmul" ... */
    const char *attrs_json; /* JSON object text, never NULL ("{}" when none) */
    int32_t out_dtype;      /* NV_DT_* code the caller asks the result in */
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    int32_t n_outputs;
    nv_tensor_view *outputs;
    /* Set by the backend: 1 when the op ran on a host (CPU) fallback instead of the
     * device; numval reports it per case. The caller zeroes it before the call. */
    int32_t fell_back;
    /* Version 4: the name of the graph node this call runs, when the caller
     * runs a graph node by node (model and fused jobs' eager execution), else
     * NULL (op jobs). Information only: a backend computes the op the same
     * whatever it says (emu's accum_node= fault keys on it). */
    const char *node;
} nv_op_call;

/* Backward (vector-Jacobian product) of one op: given the forward inputs, the
 * tensors the device saved (saved[] as declared by describe's "saved" list for the
 * op), and the output gradient, produce one gradient per differentiable input. */
typedef struct nv_backward_call {
    const char *op;
    const char *attrs_json;
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    int32_t n_saved;
    const nv_tensor_view *saved;
    const nv_tensor_view *grad_output;
    int32_t n_grads;
    nv_tensor_view *grad_inputs; /* backend-allocated; dtype declared by the backend */
} nv_backward_call;

/* Double backward (the VJP of the VJP) of one op. With g_i = VJP(x, gy)_i the
 * gradients backward returns, the backend fills, per differentiable input k,
 * grad_inputs[k] = d/dx_k sum_i <g_i, grad_grads[i]>: the gradient of the
 * inputs that a framework's double backward gives when grad_grads is the
 * cotangent of the first-order gradients (equivalently H v, H the Hessian of
 * gy . f(x) over the differentiable inputs, v the stacked grad_grads; mixed
 * blocks included). Inputs, saved tensors and grad_output as for backward;
 * grad_grads has one tensor per differentiable input, shaped like it (a
 * zero tensor for a direction the caller does not want). */
typedef struct nv_double_backward_call {
    const char *op;
    const char *attrs_json;
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    int32_t n_saved;
    const nv_tensor_view *saved;
    const nv_tensor_view *grad_output;
    int32_t n_grads;                  /* differentiable inputs */
    const nv_tensor_view *grad_grads; /* n_grads directions, shaped like their inputs */
    nv_tensor_view *grad_inputs;      /* n_grads results, backend-allocated, dtype as backward's */
} nv_double_backward_call;

/* A graph (fused subgraph) call: graph_json is the graph spec of docs/JOBS.md.
 * Graph inputs in order; outputs: the graph's outputs, and when capture is set,
 * every node's output in topological order after them. */
typedef struct nv_graph_call {
    const char *graph_json;
    int32_t capture;
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    int32_t n_outputs;
    nv_tensor_view *outputs;
} nv_graph_call;

/* Device-driven training (docs/BACKEND_ABI.md "Device-driven training"): the
 * device runs a whole training step in its own framework. The backend keeps
 * the run's state (weights, optimizer, grad scaler, RNG) in its context. */
enum nv_train_action {
    NV_TRAIN_INIT = 0, /* config: the run; inputs: the initial fp32 weights */
    NV_TRAIN_STEP = 1, /* config {"step", "lr"}; inputs: x fp32, target int32 */
    NV_TRAIN_SAVE = 2, /* outputs[0]: the checkpoint, int8 bytes in the device's format */
    NV_TRAIN_LOAD = 3, /* config: the INIT config; inputs[0]: a SAVE checkpoint */
};

typedef struct nv_train_call {
    int32_t action;          /* an NV_TRAIN_* code */
    const char *config_json; /* JSON object text, never NULL */
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    /* STEP, P parameters: [0, P) the gradients the optimizer used (unscaled,
     * clipped; fp32), [P, 2P) the weights after the step, [2P, 3P) first moment
     * (AdamW exp_avg, SGD momentum buffer), [3P, 4P) AdamW exp_avg_sq (SGD:
     * zeros), [4P] the dropout multiplier (0 or 1/(1-p), fp32, [batch, hidden];
     * shape [0] without dropout); with the INIT config's "distributed" R ranks
     * also [4P + 1 + r P + i) rank r's gradient of parameter i and
     * [4P + 1 + R P, 4P + 1 + (R + 1) P) the all-reduced ones (fp32, scaled).
     * SAVE: 1. INIT, LOAD: 0. Backend-allocated. */
    int32_t n_outputs;
    nv_tensor_view *outputs;
    char *info;      /* caller's buffer: the backend writes a JSON object (STEP: loss,
                      * scale, found_inf, skipped, next_scale, growth_tracker,
                      * optimizer_steps, grad_norm, ops, deterministic (whether
                      * the config's "deterministic" was honoured), ranks,
                      * allreduce) */
    size_t info_len; /* >= 65536 */
} nv_train_call;

/* The device's random number generators (docs/BACKEND_ABI.md "Random number
 * generators"): numval drives them one action at a time and judges the
 * streams (docs/JOBS.md "RNG jobs"). The backend keeps generators 0 ..
 * NV_RNG_MAX_GENS - 1 in its context; generator 0 is the framework's default
 * one, the generator its dropout draws from. */
#define NV_RNG_MAX_GENS 64

enum nv_rng_action {
    NV_RNG_SEED = 0,      /* generator gen seeded with seed (created if new) */
    NV_RNG_UNIFORM = 1,   /* outputs[0]: n fp32 uniforms in [0, 1) from gen */
    NV_RNG_DROPOUT = 2,   /* outputs[0]: dropout(ones(n), p) from generator 0, fp32 */
    NV_RNG_GET_STATE = 3, /* outputs[0]: gen's state, int8 bytes in the device's format */
    NV_RNG_SET_STATE = 4, /* inputs[0]: a GET_STATE state; gen continues from it */
    /* Activation checkpointing on generator 0: y = dropout(x, p) of x = ones(n)
     * run under the framework's checkpoint (the forward keeps no mask), then n
     * uniforms drawn (the layers after it), then the backward of sum(y), which
     * recomputes the forward. outputs[0] y, outputs[1] dL/dx (the recomputed
     * forward's mask times 1/(1-p)), outputs[2] the n uniforms; all fp32 [n]. */
    NV_RNG_RECOMPUTE = 5,
};

typedef struct nv_rng_call {
    int32_t action; /* an NV_RNG_* code */
    int32_t gen;    /* 0 .. NV_RNG_MAX_GENS - 1 (SEED, UNIFORM, GET/SET_STATE) */
    uint64_t seed;  /* SEED */
    int64_t n;      /* UNIFORM, DROPOUT, RECOMPUTE: elements */
    double p;       /* DROPOUT, RECOMPUTE: the drop probability, in [0, 1) */
    int32_t n_inputs;
    const nv_tensor_view *inputs;
    int32_t n_outputs;       /* set by the caller: 1 (UNIFORM, DROPOUT, GET_STATE), 3, or 0 */
    nv_tensor_view *outputs; /* backend-allocated, released through release_tensor */
} nv_rng_call;

typedef struct nv_backend {
    uint32_t abi_version; /* NV_BACKEND_ABI_VERSION the backend was built against */
    uint32_t struct_size; /* sizeof(nv_backend) at build time */
    const char *name;

    /* Create a context from the option text after the backend kind in the spec
     * (for "emu:accum=fp32" that is "accum=fp32"; may be ""). */
    int (*open)(const char *options, void **ret_ctx, char *err, size_t errlen);
    void (*close)(void *ctx);

    /* JSON object text describing the device, owned by the backend and valid until
     * close: {"device": str, "build": {...identity...}, "mode": {...numerical
     * mode...}, "contract": {...dtype contract...}, "inference_only": bool,
     * "nondeterministic_ops": [str...], "saved": {"op": ["input:0"|"output:0"]},
     * "gradient_dtype": "input" | a dtype name (the dtype of every gradient;
     * "input", the default: each gradient in its input's dtype)}. A backend that
     * declares "inference_only": true must refuse backward with an NV_E_* code
     * and a message (numval calls it once to check). */
    const char *(*describe)(void *ctx);

    int (*forward)(void *ctx, nv_op_call *call, char *err, size_t errlen);
    /* May be NULL (no backward: an inference-only backend). Gradients come in
     * describe's "gradient_dtype". */
    int (*backward)(void *ctx, nv_backward_call *call, char *err, size_t errlen);
    /* May be NULL (no fused execution). */
    int (*graph)(void *ctx, nv_graph_call *call, char *err, size_t errlen);

    /* Release a tensor's data the backend allocated in outputs/grad_inputs. */
    void (*release_tensor)(void *ctx, nv_tensor_view *t);

    /* ---- ABI version 2 ---- */
    /* May be NULL (no double backward: gradient jobs check second order on the
     * reference only). NV_E_UNSUPPORTED for an op it does not offer. */
    int (*double_backward)(void *ctx, nv_double_backward_call *call, char *err, size_t errlen);

    /* ---- ABI version 3 ---- */
    /* May be NULL (no device-driven training). NV_E_UNSUPPORTED for a config it
     * does not offer, with a message that starts "not offered:". */
    int (*train)(void *ctx, nv_train_call *call, char *err, size_t errlen);

    /* ---- ABI version 4 ---- */
    /* May be NULL (RNG jobs refused). NV_E_UNSUPPORTED for an action it does
     * not offer, with a message that starts "not offered:". */
    int (*rng)(void *ctx, nv_rng_call *call, char *err, size_t errlen);

    /* ---- ABI version 5 ---- */
    /* May be NULL (not offered). The job's settings for this context, a JSON
     * object text {"deterministic": bool}, called right after open and before
     * any other call when the job demands a setting; unknown keys are ignored.
     * The backend writes into answer (answer_len >= 4096) a JSON object text
     * {"deterministic": bool}: what it will actually honour on this context
     * (docs/BACKEND_ABI.md "Per-job settings"). */
    int (*configure)(void *ctx, const char *config_json, char *answer, size_t answer_len,
                     char *err, size_t errlen);
} nv_backend;

/* The size of a version-1 table (everything before double_backward), of a
 * version-2 one (before train), of a version-3 one (before rng) and of a
 * version-4 one (before configure). */
#define NV_BACKEND_V1_SIZE offsetof(nv_backend, double_backward)
#define NV_BACKEND_V2_SIZE offsetof(nv_backend, train)
#define NV_BACKEND_V3_SIZE offsetof(nv_backend, rng)
#define NV_BACKEND_V4_SIZE offsetof(nv_backend, configure)

/* The one symbol a plugin exports. */
typedef const nv_backend *(*nv_backend_entry_fn)(void);
#define NV_BACKEND_ENTRY_SYMBOL "nv_backend_entry"

#ifdef __cplusplus
}
#endif

#endif
