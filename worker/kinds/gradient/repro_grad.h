/* Reproduction and minimization of gradient failures (docs/ARTIFACTS.md
 * "Gradient reproducers"): a gradient failure artifact (the job spec, the
 * case, the exact inputs, the output gradient (cotangent), the device's
 * forward output and gradients, the tolerance each gradient was judged by) is
 * rebuilt without random data, its device check re-run in a forked child per
 * probe (the gradient runner's own case code, worker/kinds/gradient/case.c), and
 * minimized by delta debugging over the inputs and the cotangent.
 *
 * Gradient failure signature: {"kind": "gradient", "op", "attrs", "dtype",
 * "mode": the backend's numerical mode, "check": "device" or "determinism",
 * "failure_class": gradient_mismatch, nondeterminism, bad_output,
 * backend_error, crash or timeout} and "id", the SHA-256 of the canonical JSON
 * of the other keys. */
#ifndef NUMVAL_WORKER_REPRO_GRAD_H
#define NUMVAL_WORKER_REPRO_GRAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/artifact.h"
#include "core/spec/gradspec.h"
#include "worker/backends/loader.h"
#include "worker/repro/ddmin.h"
#include "worker/repro/repro_util.h"

#define NVW_GCHECK_MAX 16

/* A stored device gradient, kept encoded for bit-for-bit comparison. */
typedef struct nvw_gstored {
    char name[40]; /* "grad_input:K" */
    int32_t dtype;
    int ndim;
    int64_t shape[NV_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
} nvw_gstored;

/* A gradient failure rebuilt from its artifact. Everything is owned. */
typedef struct nvw_grepro {
    json_t *manifest; /* the artifact's manifest (a copy) */
    char sha[65];     /* content id of the artifact bytes ("" if none) */
    nv_gradspec *gs;  /* the parsed job spec */
    nv_dtype dtype;   /* the case dtype */
    int64_t case_index;
    int n_in;
    nv_tensor *in[NV_JOB_MAX_TENSORS]; /* exact inputs ("input:K") */
    nv_tensor *gy;                     /* the output gradient ("grad_output:0") */
    char cls[NVW_CLASS_MAX];           /* stored failure class */
    char check[NVW_GCHECK_MAX];        /* "device" or "determinism" */
    int n_stored;
    nvw_gstored stored[NV_OP_MAX_INPUTS]; /* the device gradients ("grad_input:K") */
} nvw_grepro;

/* Rebuild from a decoded artifact (borrowed). -ENOTSUP when it is not of a
 * gradient job; -EINVAL with *ret_err naming the missing or inconsistent key
 * or tensor (nothing is substituted); -ENOMEM. */
int nvw_grepro_from_artifact(const nv_artifact *a, nvw_grepro **ret, char **ret_err);
/* The same from encoded bytes (sets sha), and from a file ("-" is stdin). */
int nvw_grepro_from_buffer(const uint8_t *buf, size_t len, nvw_grepro **ret, char **ret_err);
int nvw_grepro_load(const char *path, nvw_grepro **ret, char **ret_err);
void nvw_grepro_free(nvw_grepro *gr); /* NULL is a no-op */

/* The signature with class cls (NULL: the stored one). New reference, NULL on
 * ENOMEM. */
json_t *nvw_grepro_signature(const nvw_grepro *gr, const char *cls);

/* What a probe runs on. */
typedef struct nvw_genv {
    const nvw_grepro *gr;
    const nvw_backend *b;
    const char *backend_spec; /* recorded in the probe's artifact */
    int timeout_ms;           /* per probe (0: 60 s); the child is killed after it */
} nvw_genv;

/* One probe's outcome. */
typedef struct nvw_gprobe_out {
    char verdict[16];        /* passed, failed, error; "" when the child gave none */
    char cls[NVW_CLASS_MAX]; /* "" passed; a class, or crash, timeout, probe_error */
    char check[NVW_GCHECK_MAX];
    char msg[256];
    double headroom;    /* worst error / allowed over the device's gradients */
    int64_t mismatches; /* over all gradients */
    int bits; /* 1: every device gradient equals the stored one; 0: not; -1: nothing to compare */
    uint8_t *buf; /* the probe's case as an artifact (encoded), NULL when none */
    size_t len;
    char sha[65];
} nvw_gprobe_out;

/* Run the device check of the stored case on inputs in[0..gr->n_in) and output
 * gradient gy (shaped for those inputs) in a forked child. Returns 0 with *ret
 * filled (free with nvw_gprobe_out_done), -EAGAIN / -ENOMEM when no child ran. */
int nvw_gprobe(const nvw_genv *env, nv_tensor *const *in, const nv_tensor *gy, nvw_gprobe_out *ret);
void nvw_gprobe_out_done(nvw_gprobe_out *p);

/* Whether a probe failed with the stored signature (class and check). */
bool nvw_gprobe_same(const nvw_grepro *gr, const nvw_gprobe_out *p);

/* The gate: runs probes of the stored case; *ret_failed fail with the
 * signature, *ret_bits have bit-identical gradients. ret_first (may be NULL)
 * receives the first probe. Returns 0 or a negative errno. */
int nvw_grepro_gate(const nvw_genv *env, int runs, int *ret_failed, int *ret_bits,
                    nvw_gprobe_out *ret_first);

/* The neutral value of tensor i (inputs 0..n_in-1, then the output gradient
 * at n_in): 0 for the output gradient (its element then contributes nothing
 * to any input gradient); for inputs a value inside the op's differentiable
 * domain (1 where 0 is a kink, a pole or outside it; NAN for class indices,
 * max's inputs whose ties are kinks, and maximum/minimum). */
double nvw_grad_neutral_value(const nvw_grepro *gr, int i);

typedef struct nvw_gmin_result {
    int gate_runs, gate_failed, gate_bits;
    bool flaky, verified;
    int probes;
    double seconds;
    const char *stop;
    int64_t numel_before, numel_after;           /* inputs and output gradient */
    int64_t nonneutral_before, nonneutral_after; /* elements not at their neutral value */
    int n;                                       /* gr->n_in + 1 */
    nv_tensor *t[NVW_DD_MAX_TENSORS];            /* minimized inputs, then the cotangent */
    nvw_gprobe_out last;                         /* the final verification probe */
} nvw_gmin_result;

/* Gate, delta debugging (shape window, neutral elements of the inputs and the
 * cotangent, simple values) with the signature fixed, re-verification. A
 * flaky case is not minimized. Returns 0 or a negative errno. */
int nvw_gminimize(const nvw_genv *env, const nvw_min_opts *o, nvw_gmin_result *ret);
void nvw_gmin_result_done(nvw_gmin_result *r);

/* The minimized artifact: the final verification probe's artifact with
 * "signature", "minimized_from", "repro_rate", "minimized" and the keys of
 * extra (may be NULL; the agent's job_id and attempt) added. *ret_buf
 * malloc'd, sha its content id. */
int nvw_gminimized_artifact(const nvw_grepro *gr, const nvw_gmin_result *m, const json_t *extra,
                            uint8_t **ret_buf, size_t *ret_len, char sha[65]);

#endif
