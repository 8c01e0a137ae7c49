/* Serving pairs (docs/SERVING.md "Artifacts", docs/ARTIFACTS.md "Serving
 * pairs"): the reproducer of a variance failure, two calls of one op on the
 * device (a: the request alone, b: the request among others) whose outputs
 * must agree bit for bit in the request's box and do not. Loaded from an
 * artifact (pair.c), probed in a forked child (pair.c), gated, minimized and
 * replayed (pair_min.c, pair_gate.c). */
#ifndef NUMVAL_WORKER_SERVING_PAIR_H
#define NUMVAL_WORKER_SERVING_PAIR_H

#include <jansson.h>

#include "common/artifact.h"
#include "core/ops/catalog.h"
#include "serving_internal.h"
#include "worker/backends/loader.h"

/* The manifest's "serving_pair" "version"; a change that breaks readers
 * bumps it, and a reader refuses versions it does not know. */
#define SV_PAIR_VERSION 1

typedef struct sv_pair {
    json_t *manifest; /* owned reference */
    const nv_op_def *op;
    char *attrs; /* JSON text */
    nv_dtype out_dt;
    int n_in;
    nv_tensor *in[2][2]; /* [call][input] */
    nv_tensor *out[2];   /* the stored device outputs */
    sv_box in_box[2][2], out_box[2];
    char node[SV_SITE_LEN], check[24], cls[40], case_dtype[16];
    char backend[512];
} sv_pair;

/* The pair of a decoded artifact: 0, or -EINVAL with *ret_err (malloc'd)
 * naming the key or tensor that is missing or wrong, -ENOMEM. */
int sv_pair_from_artifact(const nv_artifact *a, sv_pair **ret, char **ret_err);
int sv_pair_from_buffer(const uint8_t *buf, size_t len, sv_pair **ret, char **ret_err);
/* A deep copy (manifest shared by reference); NULL on ENOMEM. */
sv_pair *sv_pair_clone(const sv_pair *p);
void sv_pair_free(sv_pair *p);

/* The serving signature {kind, check, node's op, dtype (the call's output
 * dtype), case_dtype, mode, failure_class} with its id; NULL on ENOMEM. */
json_t *sv_pair_signature(const sv_pair *p);

/* One probe: cls "" when the two calls agree in the box, the stored class
 * when they do not, else what went wrong (backend_error, bad_output, crash,
 * timeout, probe_error) with msg. */
typedef struct sv_pprobe {
    char cls[40];
    char msg[256];
    int64_t differ; /* values of the box that differ */
    int bits[2];    /* each call's output equals the stored one bit for bit */
} sv_pprobe;

/* Probe p on backend b in a forked child (killed after timeout_ms). With out
 * (2 slots), each call's device output (new tensors) when it ran. 0, or a
 * negative errno when no child could be run. */
int sv_pair_probe(const sv_pair *p, const nvw_backend *b, int timeout_ms, sv_pprobe *ret,
                  nv_tensor **out);

/* The pair's manifest object ("serving_pair") for p's boxes, a new
 * reference (pair.c). */
json_t *sv_pair_json(const sv_pair *p);
/* A box as the manifest holds it: {"offset", "extent"}, null for a parameter
 * (localize.c). */
json_t *sv_box_json(const sv_box *b);

#endif
