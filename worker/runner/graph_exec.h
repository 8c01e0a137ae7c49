/* What the kinds that run a graph of catalog ops share (fused, model): the
 * graph of one case (the spec's graph inferred for the case dtype) and the
 * eager execution, node by node through the backend's op entry with every
 * node's output kept. The kinds judge the values and word their verdicts. */
#ifndef NUMVAL_WORKER_RUNNER_GRAPH_EXEC_H
#define NUMVAL_WORKER_RUNNER_GRAPH_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/numerics/tensor.h"
#include "core/ops/graph.h"
#include "numval/backend.h"

/* The spec's graph sg with dtype dt inferred, into g: the nodes copied
 * (malloc'd: free g->nodes), attrs_json and everything else borrowed from sg,
 * which the case threads share. 0, -ENOMEM or the negative errno of
 * nv_graph_infer (the graph does not infer for dt). */
int nvw_case_graph(const nv_graph *sg, nv_dtype dt, nv_graph *g);

/* Whether a backend's output view has data, dtype dt and node n's shape. */
bool nvw_view_fits(const nv_tensor_view *v, nv_dtype dt, const nv_graph_node *n);

/* Why an eager run stopped at a node. */
typedef enum nvw_eager_stop {
    NVW_EAGER_BACKEND_ERROR = 1, /* forward returned status, with the backend's message */
    NVW_EAGER_BAD_OUTPUT,        /* the output has no data, or not the node's dtype and shape */
} nvw_eager_stop;

typedef struct nvw_eager_fail {
    nvw_eager_stop stop;
    int node;   /* topological index of the node it stopped at */
    int status; /* forward's NV_* status (NVW_EAGER_BACKEND_ERROR) */
    char err[512];
} nvw_eager_fail;

/* Graph g on context ctx of backend t, node by node through t->forward, each
 * node fed the graph inputs inv[] and the device's own outputs of the nodes it
 * reads (every intermediate held in the node's dtype by the device, as op jobs
 * run it), each call naming its node (nv_op_call.node); node k's output into out[k] (new tensors; the caller frees them on
 * every return). 0; 1 with *fail saying where and why it stopped; -ENOMEM. */
int nvw_graph_eager(const nv_backend *t, void *ctx, const nv_graph *g, const nv_tensor_view *inv,
                    nv_tensor **out, nvw_eager_fail *fail);

/* The verdict, failure class and message of a stopped eager run: "error",
 * "backend_error", "WHO node 'N' (op 'OP'): the backend returned S: 'ERR'"; or
 * "failed", "bad_output", "WHO node 'N' (op 'OP'): BAD ('DTYPE')". who may be
 * "" (no word before "node"). */
void nvw_eager_verdict(const nv_graph *g, const nvw_eager_fail *f, const char *who, const char *bad,
                       const char **ret_verdict, const char **ret_cls, char *msg, size_t len);

#endif
