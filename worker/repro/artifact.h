/* Failure artifacts (docs/ARTIFACTS.md): a failed case's record from the runner
 * (nvw_failure: manifest, exact inputs, device outputs) as one artifact
 * container, built from what the caller passes explicitly. Agent mode uploads it
 * (worker/agent/), `run --artifacts DIR` writes it to a directory (save.c), and
 * the probe children of the gradient and fused reproducers build their case's
 * artifact with it. */
#ifndef NUMVAL_WORKER_REPRO_ARTIFACT_H
#define NUMVAL_WORKER_REPRO_ARTIFACT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/runner/run.h"

/* Where a failure came from, for the manifest keys the runner's own manifest
 * lacks. Everything is borrowed. */
typedef struct nvw_artifact_origin {
    const char *backend_spec; /* "backend" when the manifest has none ("" unknown) */
    const json_t *spec;       /* "spec" when the manifest has none; may be NULL */
    const json_t *job_id;     /* "job_id" and "attempt" when not NULL (agent mode) */
    json_int_t attempt;
} nvw_artifact_origin;

/* The compressed artifact of failure f: the runner's manifest with the
 * container's keys ("format", "version", "case_index", "tensors") and those of
 * origin (may be NULL: backend "", no spec, no job) added, then every tensor of
 * f contiguous and encoded. *ret_buf is malloc'd (*ret_len bytes), sha[65] its
 * content id. Returns 0 or a negative errno (-ENOMEM, -EINVAL for a tensor the
 * ABI cannot encode). */
int nvw_failure_artifact(const nvw_failure *f, const nvw_artifact_origin *origin,
                         uint8_t **ret_buf, size_t *ret_len, char sha[65]);

/* nvw_failure_fn writing each failure's artifact to directory ud (a char *) as
 * SHA.nvart and returning its content id (save.c). */
int nvw_save_failure(void *ud, const nvw_failure *f, char **ret_artifact_id);

/* Read a whole file ("-": stdin) into *ret (malloc'd, *ret_len bytes). 0, or
 * -errno of the open, -EIO for a read error, -ENOMEM. */
int nvw_read_file(const char *path, uint8_t **ret, size_t *ret_len);

#endif
