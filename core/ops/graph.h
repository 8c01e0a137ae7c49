/* Graphs of catalog ops for fused jobs (docs/JOBS.md "Fused jobs"): parsing and
 * validation with errors that name the node and its JSON pointer, topological
 * order, dtype and shape inference through the catalog. In core/ops so numvald
 * validates graphs with the same code as the worker; the reference execution of
 * a graph is core/ref/reference.h.
 *
 * A graph is {"inputs": [{"name", "shape", "dtype"?, "value"?}...],
 *             "nodes": [{"name", "op", "inputs": [names...], "attrs"?, "dtype"?}...],
 *             "outputs": [node names...]}.
 * A node input names a graph input or another node. A transposed operand is a
 * graph input given in its transposed shape (e.g. kT [d, L] for Q K^T) or the
 * output of a transpose node. */
#ifndef NUMVAL_GRAPH_H
#define NUMVAL_GRAPH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

#define NV_GRAPH_MAX_NODES 256
#define NV_GRAPH_MAX_INPUTS 64
#define NV_GRAPH_MAX_NAME 64
#define NV_GRAPH_MAX_EXTENT (INT64_C(1) << 27)      /* elements per tensor, as op jobs */
#define NV_GRAPH_NODE_INPUTS (NV_OP_MAX_INPUTS + 2) /* op inputs + matmul scales */

typedef struct nv_graph_input {
    char name[NV_GRAPH_MAX_NAME];
    bool dtype_set; /* false: the case dtype (the job's "dtypes") */
    nv_dtype dtype; /* after nv_graph_infer: the dtype of this case */
    int ndim;
    int64_t shape[NV_MAX_DIMS];
    int64_t numel;
    bool has_value; /* "value": a constant tensor (rounded to dtype) instead of a class */
    double value;
} nv_graph_input;

typedef struct nv_graph_node {
    char name[NV_GRAPH_MAX_NAME];
    int json_index; /* position in "nodes" of the spec (for JSON pointers) */
    const nv_op_def *op;
    nv_op_attrs attrs;
    char *attrs_json; /* compact JSON text for backends, "{}" when none */
    int n_in;
    int in[NV_GRAPH_NODE_INPUTS]; /* >= 0: node index (topological); < 0: graph input -1-i */
    bool dtype_set;               /* "dtype" given: the node's output dtype */
    nv_dtype dtype;               /* after nv_graph_infer: the node's output dtype */
    int ndim;
    int64_t shape[NV_MAX_DIMS];
    int64_t numel;
    bool is_output;
    int n_consumers; /* nodes reading this node's output */
} nv_graph_node;

typedef struct nv_graph {
    int n_inputs;
    nv_graph_input inputs[NV_GRAPH_MAX_INPUTS];
    int n_nodes;
    nv_graph_node *nodes; /* topological order: every node after the nodes it reads */
    int n_outputs;
    int outputs[NV_GRAPH_MAX_NODES]; /* node indices, in "outputs" order */
    bool any_dtype_unset;            /* some graph input takes the case dtype */
} nv_graph;

/* Parse and validate the structure of graph object g: names unique and known,
 * ops in the catalog, attributes valid, no cycle. base is the JSON pointer of g
 * in the enclosing document ("/graph"). On error returns -EINVAL with
 * *ret_pointer (e.g. "/graph/nodes/2/inputs/1") and *ret_msg naming the node and
 * the value in quotes (both malloc'd, may be NULL pointers to ignore); -ENOMEM
 * possible. *ret (free with nv_graph_free) only on success. */
int nv_graph_parse(const json_t *g, const char *base, nv_graph **ret, char **ret_pointer,
                   char **ret_msg);
void nv_graph_free(nv_graph *g); /* NULL is a no-op */

/* Give the inputs without a "dtype" the dtype dt (ignored when every input has
 * one), then infer each node's dtype and shape through nv_op_infer in
 * topological order. A node's dtype: its "dtype", else cast's "to", else for a
 * matmul of 8-bit or narrower operands the acc dtype, else the dtype of its
 * first input. Errors as nv_graph_parse, naming the node. */
int nv_graph_infer(nv_graph *g, nv_dtype dt, const char *base, char **ret_pointer, char **ret_msg);

/* Index of the graph input or node called name: >= 0 node, < 0 input (-1-i),
 * INT32_MIN when unknown. */
int nv_graph_lookup(const nv_graph *g, const char *name);

/* Canonical text of a graph object (keys sorted, compact), malloc'd; the fused
 * job's graph hash is its SHA-256. NULL on ENOMEM. */
char *nv_graph_canonical(const json_t *g);

/* The reduction length of node k for the bound metric, given its input shapes. */
int64_t nv_graph_reduction_len(const nv_graph *g, int k);

#endif
