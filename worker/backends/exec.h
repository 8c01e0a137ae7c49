/* The exec backend: an external harness process as the device, spoken to over its
 * stdin/stdout with the framed protocol of docs/EXEC_PROTOCOL.md. The option text
 * (after "exec:") is the command line, run through /bin/sh. One harness process per
 * context; a harness that dies, hangs or talks nonsense errors the call (with its
 * stderr tail in the message) and is replaced by a fresh one on the next call. */
#ifndef NUMVAL_WORKER_EXEC_H
#define NUMVAL_WORKER_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numval/backend.h"

/* The exec protocol version the worker speaks (docs/EXEC_PROTOCOL.md); 2 added
 * double_backward. A harness answering 1 is served without it. */
#define NVW_EXEC_PROTOCOL 2

/* The exec backend's table (static storage). */
const nv_backend *nvw_exec_table(void);

/* The graph request (docs/EXEC_PROTOCOL.md "Optional requests"), sent only to a
 * harness whose hello lists "graph" in describe's "requests" (else
 * NV_E_UNSUPPORTED and err "not offered: harness '...' ..."). ctx is an exec
 * context, call as for nv_backend.graph; options_json (NULL: none) is a JSON
 * object copied into the request's "options" (how the harness runs the graph:
 * "compile", "autocast", "params"). On NV_OK *ret_compiled (when not NULL) is
 * the reply's "compiled" object as malloc'd JSON text, or NULL when the reply
 * has none (an uncompiled run). The model kind calls it; the table has no
 * graph entry (fused jobs are not sent it). */
int nvw_exec_graph(void *ctx, nv_graph_call *call, const char *options_json, char **ret_compiled,
                   char *err, size_t errlen);

/* Whether the harness of exec context ctx lists request in its hello's
 * describe "requests" (starting the harness if none runs; false when it cannot
 * start). */
bool nvw_exec_offers(void *ctx, const char *request);

/* The serve request (docs/EXEC_PROTOCOL.md "Optional requests"): request_json
 * is the request's header object without "type", "id" and "tensors" (added
 * here); ins[0..n_ins) its tensors, outs[0..n_outs) (n_outs 0 or 1, zeroed)
 * the reply's, malloc'd (release them through the table's release_tensor).
 * NV_E_UNSUPPORTED with err "not offered: ..." when the harness does not list
 * "serve". The serving kind calls it (worker/kinds/serving/steps.c). */
int nvw_exec_serve(void *ctx, const char *request_json, const nv_tensor_view *ins, int n_ins,
                   nv_tensor_view *outs, int n_outs, char *err, size_t errlen);

/* Read one reply frame to request id (header line + payloads, docs/EXEC_PROTOCOL.md)
 * from fd exactly as the backend reads a harness's stdout, for tests and the
 * fuzzer (tests/fuzz). outs[0..n_outs) must come zeroed. NV_OK with them filled
 * (each data malloc'd, the caller frees it), the harness's error code, or
 * NV_E_DEVICE / NV_E_NOMEM with err set and no buffers left in outs. timeout_ms
 * bounds the whole read. */
int nvw_exec_read_reply(int fd, uint64_t id, nv_tensor_view *outs, int n_outs, int timeout_ms,
                        char *err, size_t errlen);

#endif
