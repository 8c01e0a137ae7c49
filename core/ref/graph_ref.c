/* Reference execution of a graph (reference.h): every node through nv_op_reference
 * in topological order. A node's inputs are the graph inputs as given and, for
 * node inputs, the hi part of the upstream reference: intermediate references
 * are therefore exact functions of the exact upstream values up to one rounding
 * of each upstream value to a double (refmath.h: within 2^-45 relative where a
 * transcendental's fp64 fast path decided, the double nearest the exact value
 * for sums and products), far below the ULPs of any dtype a graph is judged in. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/* The dtype a node's reference is computed for: the cast's target for cast
 * nodes (a cast's exact value is its rounded value), fp64 for fp64 nodes, else
 * fp32. Deciding fp32 rounding is enough for every narrower node dtype and keeps
 * transcendentals on the fp64 fast path (refmath.h) instead of MPFR. */
static nv_dtype ref_dtype(const nv_graph_node *n)
{
    if (n->op->kind == NV_OPK_CAST)
        return n->attrs.cast_to;
    return n->dtype == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
}

/* Whether input i of node n carries data values (not a class index or a scale). */
static bool data_input(const nv_graph_node *n, int i)
{
    return i < n->op->n_inputs && !n->op->inputs[i].is_index;
}

static bool needs_abs(const nv_graph_node *n)
{
    return nv_op_accumulates(n->op);
}

/* Views of the node's inputs for the reference: shallow copies of the graph
 * inputs and upstream hi tensors; when a node input is among the data inputs,
 * every data input is tagged with the widest reference dtype so the catalog's
 * same-dtype rules hold (values are doubles, exact in fp64). */
static void node_inputs(const nv_graph *g, int k, const nv_tensor *const *gin, nv_tensor *const *hi,
                        nv_tensor *views)
{
    const nv_graph_node *n = &g->nodes[k];
    bool from_node = false, wide = false;
    for (int i = 0; i < n->n_in; i++) {
        int id = n->in[i];
        views[i] = id < 0 ? *gin[-1 - id] : *hi[id];
        if (data_input(n, i)) {
            from_node = from_node || id >= 0;
            wide = wide || views[i].dtype == NV_DT_FP64;
        }
    }
    for (int i = 0; from_node && i < n->n_in; i++)
        if (data_input(n, i))
            views[i].dtype = wide ? NV_DT_FP64 : NV_DT_FP32;
}

int nv_graph_node_reference(const nv_graph *g, int k, const nv_tensor *const *in,
                            nv_tensor *const *vals, nv_tensor **ret_hi, nv_tensor **ret_abs,
                            char *err, size_t errlen)
{
    return nv_graph_node_reference_ex(g, k, in, vals, ret_hi, ret_abs, NULL, err, errlen);
}

int nv_graph_node_reference_ex(const nv_graph *g, int k, const nv_tensor *const *in,
                               nv_tensor *const *vals, nv_tensor **ret_hi, nv_tensor **ret_abs,
                               nv_tensor **ret_peak, char *err, size_t errlen)
{
    assert(g && in && vals && ret_hi && ret_abs && err);
    assert(k >= 0 && k < g->n_nodes);
    const nv_graph_node *n = &g->nodes[k];
    nv_tensor views[NV_GRAPH_NODE_INPUTS];
    const nv_tensor *vp[NV_GRAPH_NODE_INPUTS];
    node_inputs(g, k, in, vals, views);
    for (int i = 0; i < n->n_in; i++)
        vp[i] = &views[i];
    nv_tensor *hi = nv_tensor_new(ref_dtype(n), n->ndim, n->shape);
    nv_tensor *abs = needs_abs(n) ? nv_tensor_new(NV_DT_FP64, n->ndim, n->shape) : NULL;
    nv_tensor *peak =
        ret_peak && needs_abs(n) ? nv_tensor_new(NV_DT_FP64, n->ndim, n->shape) : NULL;
    if (!hi || (needs_abs(n) && !abs) || (ret_peak && needs_abs(n) && !peak)) {
        nv_tensor_free(hi);
        nv_tensor_free(abs);
        nv_tensor_free(peak);
        snprintf(err, errlen, "out of memory for the reference of node '%s'", n->name);
        return -ENOMEM;
    }
    nv_ref_out o = {.hi = hi, .abs_sum = abs, .peak = peak};
    int r = nv_op_reference_ex(n->op, &n->attrs, n->n_in, vp, &o);
    if (r < 0) {
        snprintf(err, errlen, "the reference of node '%s' (op '%s') failed (code %d)", n->name,
                 n->op->name, r);
        nv_tensor_free(hi);
        nv_tensor_free(abs);
        nv_tensor_free(peak);
        return r;
    }
    hi->dtype = n->dtype;
    *ret_hi = hi;
    *ret_abs = abs;
    if (ret_peak)
        *ret_peak = peak;
    return 0;
}

int nv_graph_reference(const nv_graph *g, const nv_tensor *const *in, nv_tensor **ret_hi,
                       nv_tensor **ret_abs, char *err, size_t errlen)
{
    assert(g && in && ret_hi && ret_abs && err);
    int r = 0;
    for (int k = 0; k < g->n_nodes; k++)
        ret_hi[k] = ret_abs[k] = NULL;
    for (int k = 0; k < g->n_nodes && r == 0; k++)
        r = nv_graph_node_reference(g, k, in, ret_hi, &ret_hi[k], &ret_abs[k], err, errlen);
    if (r < 0) {
        for (int k = 0; k < g->n_nodes; k++) {
            nv_tensor_free(ret_hi[k]);
            nv_tensor_free(ret_abs[k]);
            ret_hi[k] = ret_abs[k] = NULL;
        }
    }
    return r;
}
