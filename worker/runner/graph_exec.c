/* Graph cases and their eager execution (graph_exec.h). */
#include "graph_exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/backends/views/views.h"

int nvw_case_graph(const nv_graph *sg, nv_dtype dt, nv_graph *g)
{
    *g = *sg;
    g->nodes = malloc((size_t)sg->n_nodes * sizeof *g->nodes);
    if (!g->nodes)
        return -ENOMEM;
    memcpy(g->nodes, sg->nodes, (size_t)sg->n_nodes * sizeof *g->nodes);
    char *ptr = NULL, *msg = NULL;
    int r = nv_graph_infer(g, dt, "/graph", &ptr, &msg);
    free(ptr);
    free(msg);
    return r;
}

bool nvw_view_fits(const nv_tensor_view *v, nv_dtype dt, const nv_graph_node *n)
{
    if (!v->data || v->dtype != (int32_t)dt || v->ndim != n->ndim)
        return false;
    for (int d = 0; d < n->ndim; d++)
        if (v->shape[d] != n->shape[d])
            return false;
    return true;
}

int nvw_graph_eager(const nv_backend *t, void *ctx, const nv_graph *g, const nv_tensor_view *inv,
                    nv_tensor **out, nvw_eager_fail *fail)
{
    nv_tensor_view *outs = calloc((size_t)g->n_nodes, sizeof *outs);
    if (!outs)
        return -ENOMEM;
    int r = 0;
    for (int k = 0; k < g->n_nodes && r == 0; k++) {
        const nv_graph_node *n = &g->nodes[k];
        nv_tensor_view ins[NV_GRAPH_NODE_INPUTS];
        for (int i = 0; i < n->n_in; i++)
            ins[i] = n->in[i] < 0 ? inv[-1 - n->in[i]] : outs[n->in[i]];
        nv_op_call call = {.op = n->op->name,
                           .attrs_json = n->attrs_json,
                           .out_dtype = (int32_t)n->dtype,
                           .n_inputs = n->n_in,
                           .inputs = ins,
                           .n_outputs = 1,
                           .outputs = &outs[k],
                           .node = n->name};
        fail->err[0] = 0;
        int br = t->forward(ctx, &call, fail->err, sizeof fail->err);
        if (br != NV_OK || !nvw_view_fits(&outs[k], n->dtype, n)) {
            fail->stop = br != NV_OK ? NVW_EAGER_BACKEND_ERROR : NVW_EAGER_BAD_OUTPUT;
            fail->node = k;
            fail->status = br;
            r = 1;
        } else if (!(out[k] = nvw_tensor_from_view(&outs[k], false)))
            r = -ENOMEM;
    }
    for (int k = 0; k < g->n_nodes; k++)
        if (outs[k].data && t->release_tensor)
            t->release_tensor(ctx, &outs[k]);
    free(outs);
    return r;
}

void nvw_eager_verdict(const nv_graph *g, const nvw_eager_fail *f, const char *who, const char *bad,
                       const char **ret_verdict, const char **ret_cls, char *msg, size_t len)
{
    const nv_graph_node *n = &g->nodes[f->node];
    bool be = f->stop == NVW_EAGER_BACKEND_ERROR;
    *ret_verdict = be ? "error" : "failed";
    *ret_cls = be ? "backend_error" : "bad_output";
    if (be)
        snprintf(msg, len, "%s%snode '%s' (op '%s'): the backend returned %d: '%s'", who,
                 *who ? " " : "", n->name, n->op->name, f->status, f->err);
    else
        snprintf(msg, len, "%s%snode '%s' (op '%s'): %s ('%s')", who, *who ? " " : "", n->name,
                 n->op->name, bad, nv_dtype_name(n->dtype));
}
