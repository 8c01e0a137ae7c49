/* Helpers shared by the reproduction code of op, gradient and fused failures
 * (repro_util.c): the pipe I/O between a probe's forked child and its parent,
 * how a child that did not answer is classed, failure signature ids, and the
 * decoding of artifact tensors. The artifact loaders' messages go through
 * worker/runner/err.h (included here for them). */
#ifndef NUMVAL_WORKER_REPRO_UTIL_H
#define NUMVAL_WORKER_REPRO_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/artifact.h"
#include "core/numerics/tensor.h"
#include "worker/runner/err.h"

/* Room for a failure class name ("ulp_exceeded", "gradient_mismatch", "crash"...). */
#define NVW_CLASS_MAX 40

/* Fork a probe child with a pipe to its parent. Returns 0: in the child
 * *ret_pid is 0 and *ret_fd the pipe's write end; in the parent *ret_pid is the
 * child and *ret_fd the read end (the caller closes it and reaps the child).
 * -ENOMEM or -EAGAIN when no child could be started. */
int nvw_probe_fork(pid_t *ret_pid, int *ret_fd);

/* Write all n bytes (EINTR retried). 0 or -EIO. */
int nvw_write_all(int fd, const void *p, size_t n);
/* Read exactly n bytes before deadline_ms (CLOCK_MONOTONIC milliseconds).
 * 0, -ETIMEDOUT, or -EIO (closed early or a read error). */
int nvw_read_all(int fd, void *p, size_t n, int64_t deadline_ms);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t nvw_mono_ms(void);

/* A probe child that gave no answer: read error r (-ETIMEDOUT: killed after
 * timeout_ms) and its wait status, as class "timeout" or "crash" and a
 * message naming the signal or exit status. */
void nvw_probe_failed(int r, int status, int timeout_ms, char *cls, size_t cls_len, char *msg,
                      size_t msg_len);

/* Sets "id" in signature s to the SHA-256 hex of the canonical JSON of its
 * other keys (compact, sorted keys, 17 significant digits) and returns s;
 * NULL (s released) when out of memory. s NULL gives NULL. */
json_t *nvw_signature_id(json_t *s);

/* The values of an artifact tensor, decoded exactly in its own dtype (shape and
 * row-major order as stored). NULL when out of memory or the dtype is unknown. */
nv_tensor *nvw_artifact_values(const nv_artifact_tensor *at);
/* The same for a tensor that must have dtype want: -EINVAL with a message
 * naming the tensor and both dtypes otherwise; -ENOMEM. */
int nvw_artifact_tensor(const nv_artifact_tensor *at, nv_dtype want, nv_tensor **ret,
                        char **ret_err);

#endif
