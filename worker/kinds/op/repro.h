/* Reproduction of a failure from its artifact alone (docs/ARTIFACTS.md
 * "Reproduction"): load and validate the container, rebuild the exact case (job
 * spec, op, attrs, dtypes, layout, exact inputs, tolerance), re-run it on a
 * backend in an isolated child process (a crashing backend cannot take the
 * worker down), and compare the device output bit for bit with the stored one. */
#ifndef NUMVAL_WORKER_REPRO_H
#define NUMVAL_WORKER_REPRO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/artifact.h"
#include "core/spec/jobspec.h"
#include "worker/backends/loader.h"
#include "worker/repro/repro_util.h"

/* One failing op case rebuilt from an artifact. Everything is owned. */
typedef struct nvw_repro {
    json_t *manifest; /* the artifact's manifest */
    char sha[65];     /* content id of the artifact bytes it was loaded from ("" if none) */
    nv_jobspec *js;   /* the parsed job spec (op, attrs, attrs_json) */
    nv_dtype dtype;   /* the case's input dtype */
    nv_dtype out_dt;  /* its output dtype */
    nv_layout layout; /* device layout of the plain inputs */
    nv_tolerance tol; /* the tolerance the case was judged by */
    int repeat;       /* forward calls per probe (>= 2 for "nondeterministic") */
    int n_in;
    nv_tensor *in[NV_JOB_MAX_TENSORS]; /* exact inputs, contiguous row-major */
    char failure_class[NVW_CLASS_MAX]; /* the stored failure class */
    int out_ndim;                      /* the stored device output ("output:0") */
    int64_t out_shape[NV_MAX_DIMS];
    int32_t out_dtype;
    uint8_t *out_bytes;
    size_t out_nbytes;
} nvw_repro;

/* Rebuild the case from a decoded artifact (borrowed). Nothing missing is ever
 * substituted: a manifest key, a tensor or a value that does not fit the op is an
 * error naming it. Returns 0, -EINVAL (message in *ret_err, malloc'd) or -ENOMEM. */
int nvw_repro_from_artifact(const nv_artifact *a, nvw_repro **ret, char **ret_err);

void nvw_repro_free(nvw_repro *rc); /* NULL is a no-op */

/* The failure signature of the case with failure class cls (NULL: the stored
 * one): {"kind","op","attrs","dtype","out_dtype","mode","failure_class","id"}
 * where id is the SHA-256 hex of the canonical JSON of the other keys. The
 * device build is not part of it, so the same bug in a later build is the same
 * signature. New reference, NULL on ENOMEM. */
json_t *nvw_repro_signature(const nvw_repro *rc, const char *cls);

/* The result of one probe: the case re-run on a set of inputs. */
typedef struct nvw_probe_out {
    char cls[NVW_CLASS_MAX]; /* "" passed; a compare class (ulp_exceeded ...),
                                "nondeterministic", "bad_output", "backend_error",
                                "crash" (the child died), "timeout", "probe_error" */
    char msg[256];           /* detail for crash, backend and probe errors */
    double max_ulp;
    int64_t mismatches;
    int32_t out_dtype; /* the device output, contiguous row-major encoded */
    int out_ndim;
    int64_t out_shape[NV_MAX_DIMS];
    uint8_t *out_bytes; /* malloc'd, NULL when there is no output */
    size_t out_nbytes;
} nvw_probe_out;

/* What a probe runs on: the loaded backend and the rebuilt case. */
typedef struct nvw_probe_env {
    const nvw_repro *rc;
    const nv_backend *table;
    const char *options;
    int timeout_ms; /* per probe; the child is killed after it (class "timeout") */
    bool isolate;   /* fork a child per probe (false only for benchmarks of the core) */
} nvw_probe_env;

/* Run the case on inputs in[0..rc->n_in) (contiguous tensors shaped like the
 * case's, possibly shrunk). Returns 0 with *ret filled (free with
 * nvw_probe_out_done), or -ENOMEM / -EAGAIN when no child could be started. */
int nvw_probe(const nvw_probe_env *env, nv_tensor *const *in, nvw_probe_out *ret);
void nvw_probe_out_done(nvw_probe_out *p);

/* Whether a probe's output equals the stored device output bit for bit. */
bool nvw_probe_same_output(const nvw_repro *rc, const nvw_probe_out *p);

/* The reproduction gate: run the stored case runs times; *ret_failed counts the
 * runs that failed with the stored class, *ret_bits those whose output equals the
 * stored one bit for bit. Returns 0 or a negative errno. */
int nvw_repro_gate(const nvw_probe_env *env, int runs, int *ret_failed, int *ret_bits,
                   nvw_probe_out *ret_first);

/* A neutral element for input i of the op (DESIGN.md "Failures, reproducers"):
 * the value that removes an element's influence (0 for sum, -inf or the lowest
 * finite for max and the softmax family, 1 where 0 is outside the domain), or
 * NAN when input i must not be neutralized (class indices, matmul scales). */
double nvw_neutral_value(const nvw_repro *rc, int i);

#endif
