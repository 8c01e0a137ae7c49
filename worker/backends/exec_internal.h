/* Internals of the exec backend (exec.c: the protocol and the backend table;
 * exec_proc.c: the harness process, its pipes and its messages). Only
 * worker/backends/exec*.c include this. */
#ifndef NUMVAL_WORKER_EXEC_INTERNAL_H
#define NUMVAL_WORKER_EXEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "numval/backend.h"

#define LINE_MAX_BYTES (1 << 20)
#define STDERR_TAIL 4096
#define PAYLOAD_MAX ((int64_t)1 << 32)
#define EXEC_SPARES 4
#define PIPE_BYTES (1 << 20)

typedef struct exec_ctx {
    char *command;
    pid_t pid;    /* -1 when no harness runs */
    int to_fd;    /* harness stdin */
    int from_fd;  /* harness stdout */
    int err_fd;   /* unlinked temp file holding the harness's stderr */
    char *describe;
    char *rbuf;   /* bytes read from the harness, not yet consumed */
    size_t rlen;
    uint64_t next_id;
    int protocol; /* the version the running harness answered (1 or 2) */
    char *compiled; /* the last reply's "compiled" object (JSON text), NULL when none */
    int timeout_ms;
    int start_timeout_ms; /* for the hello: importing a runtime takes seconds */
    /* Released output buffers kept for the next reply: a fresh malloc of a large
     * tensor is fresh pages (page faults and zeroing) on every call. */
    void *spare[EXEC_SPARES];
    size_t spare_len[EXEC_SPARES];
    json_t *reply_info; /* the last ok reply's "info" object, or NULL */
} exec_ctx;

/* Send one request (hdr gets "id" and "tensors") and read its reply into outs
 * (exec.c); any conversation failure kills the harness. */
/* Whether the running harness's hello lists request in describe's "requests"
 * (docs/EXEC_PROTOCOL.md "Optional requests"). */
bool exec_offers(const exec_ctx *c, const char *request);
int exec_transact(exec_ctx *c, json_t *hdr, const nv_tensor_view *const *ins, int n_ins,
                  nv_tensor_view *outs, int n_outs, int32_t *ret_fell_back, char *err,
                  size_t errlen);
/* The optional "train" request (exec_train.c, docs/EXEC_PROTOCOL.md "Optional
 * requests"). */
int exec_train(void *ctx, nv_train_call *call, char *err, size_t errlen);
/* The optional "rng" request (exec_rng.c). */
int exec_rng(void *ctx, nv_rng_call *call, char *err, size_t errlen);
/* The optional "configure" request (exec_configure.c). */
int exec_configure(void *ctx, const char *config_json, char *answer, size_t answer_len,
                   char *err, size_t errlen);

/* Monotonic clock in milliseconds (deadlines). */
int64_t exec_now_ms(void);
/* err = what went wrong (printf-style) plus the harness's stderr tail. */
void exec_fail(exec_ctx *c, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Kill the harness and close its pipes; the next call starts a fresh one. */
void exec_harness_kill(exec_ctx *c);
/* Pipe I/O against a deadline: 0, or a negative errno (-ETIMEDOUT, -EPIPE, ...). */
int exec_write_all(exec_ctx *c, const void *buf, size_t n, int64_t deadline);
/* One line without its newline (*ret malloc'd), at most LINE_MAX_BYTES. */
int exec_read_line(exec_ctx *c, char **ret, int64_t deadline);
int exec_read_exact(exec_ctx *c, uint8_t *dst, size_t n, int64_t deadline);
/* The I/O failure r in words ("timed out", "the harness exited" ...). */
const char *exec_io_what(int r);
/* Spawn the harness and exchange hellos (protocol 1 or NVW_EXEC_PROTOCOL):
 * NV_OK, or NV_E_* with err set and no harness left running. */
int exec_harness_start(exec_ctx *c, char *err, size_t errlen);

#endif
