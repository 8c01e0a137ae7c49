/* One short command run from the event loop without blocking it (uv_spawn):
 * the Slurm client programs a pool calls (sbatch, squeue). Its stdout is
 * collected up to a size limit, the start of its stderr kept for messages,
 * and it is killed past a time limit. */
#ifndef NUMVAL_DAEMON_POOL_RUN_H
#define NUMVAL_DAEMON_POOL_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct nvd_run nvd_run;

/* status: the exit status (>= 0); -ETIMEDOUT when it ran past its time limit,
 * -E2BIG when it wrote more than max_out bytes, -EINTR when a signal ended it
 * (also after nvd_run_kill), or the libuv error of a failed start. out (NUL
 * terminated, len bytes) and err (the first 1 KiB of stderr, NUL terminated;
 * for a failed start the reason) are valid during the call only. */
typedef void (*nvd_run_fn)(void *ud, int status, const char *out, size_t len, const char *err);

/* Start argv[0] (searched in PATH when it has no '/') with argv and env
 * (NULL-terminated; both copied by the child before this returns). fn runs
 * exactly once, from the loop, after the child has exited and its output is
 * read; then the run frees itself. 0, or -ENOMEM (fn is not called). */
int nvd_run_start(uv_loop_t *loop, char *const *argv, char *const *env, uint64_t timeout_ms,
                  size_t max_out, nvd_run_fn fn, void *ud, nvd_run **ret);
/* SIGTERM the child (fn still runs, with -EINTR or its exit status). */
void nvd_run_kill(nvd_run *r);

#endif
