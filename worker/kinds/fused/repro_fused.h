/* Reproduction and minimization of fused failures (docs/ARTIFACTS.md "Fused
 * reproducers"): a fused failure artifact (the job spec, the graph, the case,
 * the inputs and every node's fused and unfused values) is rebuilt, re-run on
 * the stored inputs in a forked child per probe, and minimized: nodes are
 * removed by turning them into graph inputs ("placeholders") fed their
 * reference values rounded to the node's dtype, then input extents are shrunk.
 *
 * Fused failure signature: {"kind": "fused", "op": the first divergent node's
 * op, "dtype": the dtype it was judged in, "case_dtype", "mode": the backend's
 * mode, "failure_class"} and "id", the SHA-256 of the canonical JSON of the
 * other keys. The graph hash is not part of it: minimization changes the graph,
 * the bug (which op diverges, in which precision, how) stays. */
#ifndef NUMVAL_WORKER_REPRO_FUSED_H
#define NUMVAL_WORKER_REPRO_FUSED_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/artifact.h"
#include "core/ops/graph.h"
#include "worker/backends/loader.h"

#define NVW_FNAME_MAX 64

/* A fused failure rebuilt from its artifact. Everything is owned. */
typedef struct nvw_frepro {
    json_t *manifest;
    char sha[65];    /* content id of the artifact bytes */
    json_t *spec;    /* probe spec: the job's, reduced to this case's dtype and class */
    nv_graph *g;     /* the graph inferred for the case dtype */
    nv_dtype dt;     /* the case dtype */
    nv_tensor **in;  /* g->n_inputs stored inputs ("input:NAME") */
    nv_tensor **fus; /* g->n_nodes stored values of the judged execution ("fused:NODE";
                        "unfused:NODE" under a composition criterion of the unfused one) */
    char stored[12];   /* that prefix: "fused:" or "unfused:" */
    nv_tensor **ref; /* reference values rounded to each node's dtype (lazy) */
    char cls[NVW_FNAME_MAX], op[NVW_FNAME_MAX], judge[NVW_FNAME_MAX], node[NVW_FNAME_MAX];
    char backend[512]; /* the spec probes run on (recorded in a minimized artifact) */
} nvw_frepro;

/* Read and rebuild a fused artifact ("-" is stdin). -ENOTSUP when the artifact
 * is not of a fused job (the caller tries the op loader); -EINVAL with
 * *ret_err naming what is missing or wrong; -ENOMEM. */
int nvw_frepro_load(const char *path, nvw_frepro **ret, char **ret_err);
/* The same from compressed artifact bytes in memory (not kept), or from a
 * decoded artifact a whose content id is sha (copied; NULL: unknown). */
int nvw_frepro_from_buffer(const uint8_t *buf, size_t len, nvw_frepro **ret, char **ret_err);
int nvw_frepro_from_artifact(const nv_artifact *a, const char *sha, nvw_frepro **ret,
                             char **ret_err);
void nvw_frepro_free(nvw_frepro *fr); /* NULL is a no-op */

/* The signature of a failure of first divergent op op judged in judge with
 * class cls (NULL: the stored ones). New reference, NULL on ENOMEM. */
json_t *nvw_frepro_signature(const nvw_frepro *fr, const char *op, const char *judge,
                             const char *cls);

/* A subgraph: the nodes kept (by topological index of fr->g) and input extents
 * mapped (every extent from[i] of a graph input becomes the window
 * [off[i], off[i] + to[i]) of its indices: a prefix when off[i] is 0). */
typedef struct nvw_fsub {
    bool keep[NV_GRAPH_MAX_NODES];
    int n_map;
    int64_t from[2 * NV_MAX_DIMS * NV_GRAPH_MAX_INPUTS], to[2 * NV_MAX_DIMS * NV_GRAPH_MAX_INPUTS];
    int64_t off[2 * NV_MAX_DIMS * NV_GRAPH_MAX_INPUTS];
} nvw_fsub;

/* The probe spec and inputs of subgraph sub: kept nodes as in the graph, each
 * removed node a kept node reads becomes an input of its name, dtype and shape
 * fed its reference value; outputs are the kept nodes that were outputs or that
 * no kept node reads. -EINVAL when the subgraph is empty or does not infer.
 * *ret_in: *ret_n new tensors (free each and the array). */
int nvw_fsub_build(nvw_frepro *fr, const nvw_fsub *sub, json_t **ret_spec, nv_tensor ***ret_in,
                   int *ret_n);

/* One probe's outcome. */
typedef struct nvw_fprobe {
    char verdict[16];        /* passed, failed, error; "" when the child gave none */
    char cls[NVW_FNAME_MAX]; /* failure class, or crash, timeout, probe_error */
    char op[NVW_FNAME_MAX], judge[NVW_FNAME_MAX], node[NVW_FNAME_MAX]; /* first divergent */
    double max_ulp;
    int bits;     /* 1: every node's fused value equals the stored one; 0: not; -1: unknown */
    char sha[65]; /* the artifact written (when asked for one) */
    char msg[256];
} nvw_fprobe;

/* Run spec on inputs in[0..n) in a forked child (killed after timeout_ms).
 * stored: compare every fused value with fr->fus (only for the stored graph).
 * artifact_path (may be NULL): on a failure the child writes the case's
 * artifact there, its manifest extended with the keys of extra (may be NULL).
 * Returns 0 with *ret filled, -EAGAIN / -ENOMEM when no child could be run. */
int nvw_fprobe_run(const nvw_frepro *fr, const nvw_backend *b, const json_t *spec,
                   nv_tensor *const *in, int n, int timeout_ms, bool stored,
                   const char *artifact_path, const json_t *extra, nvw_fprobe *ret);

/* Whether a probe failed with the stored signature (op, judged dtype, class). */
bool nvw_fprobe_same(const nvw_frepro *fr, const nvw_fprobe *p);

typedef struct nvw_fmin_opts {
    int budget;         /* most probes (0: 500) */
    double deadline_s;  /* 0: 300 s */
    int gate_runs;      /* 0: 5 */
    int timeout_ms;     /* per probe (0: 60 s) */
    FILE *progress;     /* may be NULL */
    atomic_int *cancel; /* stop (stop "cancelled") when it becomes non-zero; may be NULL */

} nvw_fmin_opts;

typedef struct nvw_fmin_result {
    int gate_runs, gate_failed, gate_bits;
    bool flaky, verified;
    int probes;
    double seconds;
    const char *stop; /* done, budget, deadline, cancelled */
    int nodes_before, nodes_after;
    int64_t elements_before, elements_after; /* all graph input elements */
    nvw_fsub sub;                            /* the minimized subgraph */
    nvw_fprobe last;                         /* the final verification probe */
} nvw_fmin_result;

/* Gate (stored graph, gate_runs probes), then delta debugging over the kept
 * nodes, then extent shrinking, then re-verification. A flaky case (fewer than
 * half the gate runs fail with the signature) is not minimized. Cancelled
 * (*o->cancel non-zero), it stops before the next probe with stop "cancelled",
 * not verified; a gate cut short by the deadline or a cancel is neither flaky
 * nor minimized (stop "deadline" / "cancelled"). Returns 0 or a negative errno
 * (a probe could not be run). */
int nvw_fminimize(nvw_frepro *fr, const nvw_backend *b, const nvw_fmin_opts *o,
                  nvw_fmin_result *ret);

/* The minimized case as a new artifact (docs/ARTIFACTS.md "Fused
 * minimization"): the subgraph of m re-run once on b, its case artifact with
 * "signature", "minimized_from", "repro_rate" and "minimized", plus the keys of
 * extra (may be NULL). Written to path, or (path NULL) to a temporary file read
 * back into *ret_buf (malloc'd, *ret_len bytes; may be NULL with path). The
 * final probe in *ret (its sha the content id). -EIO when the re-run did not
 * fail (no artifact), -EAGAIN / -ENOMEM. */
int nvw_fminimized_artifact(nvw_frepro *fr, const nvw_backend *b, const nvw_fmin_result *m,
                            int timeout_ms, const char *path, const json_t *extra,
                            uint8_t **ret_buf, size_t *ret_len, nvw_fprobe *ret);

/* The names of the nodes sub keeps, in graph order. New reference. */
json_t *nvw_fsub_nodes(const nvw_frepro *fr, const nvw_fsub *sub);

#endif
