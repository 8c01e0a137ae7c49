/* What every kind's runner is given and gives back: the run options (threads,
 * progress, what becomes of a failed case, cancel), the failure record a
 * runner hands over for each failed case, and the runner signature. The
 * runners are reached through the kind table (worker/kinds/kinds.h). */
#ifndef NUMVAL_WORKER_RUN_H
#define NUMVAL_WORKER_RUN_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/numerics/tensor.h"

typedef void (*nvw_progress_fn)(void *ud, int64_t done, int64_t total);

typedef struct nvw_failure {
    int case_index;
    const json_t *case_json; /* the case as it appears in the result */
    const json_t *manifest;  /* spec, seed, device, build, mode, tolerance, mismatches */
    int n_tensors;
    const char *const *names;        /* "input:0", "output:0" ... */
    const nv_tensor *const *tensors; /* exact inputs and device outputs */
} nvw_failure;

/* Called serially for each failed case; may store an artifact and return its id
 * (malloc'd), which the runner writes into the case JSON as "artifact". */
typedef int (*nvw_failure_fn)(void *ud, const nvw_failure *f, char **ret_artifact_id);

/* The artifact whose content id is sha, hash-verified: 0 with *ret_buf
 * (malloc'd, *ret_len bytes), or a negative errno with a message in msg. */
typedef int (*nvw_fetch_fn)(void *ud, const char *sha, uint8_t **ret_buf, size_t *ret_len,
                            char *msg, size_t msglen);

typedef struct nvw_run_opts {
    int threads; /* 0: all cores */
    nvw_progress_fn progress;
    nvw_failure_fn on_failure;
    nvw_fetch_fn fetch_artifact; /* suite jobs replay stored artifacts (agent mode); may be NULL */
    void *ud;                    /* passed to progress, on_failure and fetch_artifact */
    atomic_int *cancel;          /* polled between cases (another thread sets it); may be NULL */
    /* Elements per block of the op kind's blocked cases (worker/kinds/op/blocks.c):
     * 0 the default (2^16), < 0 never in blocks; tests set it to hold the
     * blocked result to the whole case's. */
    int64_t op_block_elems;
} nvw_run_opts;

/* The signature of every kind's runner, and of nvw_run_job
 * (worker/kinds/kinds.h), which picks the kind: returns 0 when the job ran
 * (verdict inside *ret_result, a new reference), -EINVAL for a bad spec
 * (*ret_err: malloc'd message naming the JSON pointer), another negative errno
 * for an infrastructure error (*ret_err set). */
typedef int (*nvw_run_fn)(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                          json_t **ret_result, char **ret_err);

#endif
