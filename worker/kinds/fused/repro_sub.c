/* Subgraphs of a fused failure (repro_fused.h nvw_fsub_build): removed nodes
 * become placeholder inputs fed their reference values, extents shrink to
 * prefixes of the stored tensors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "core/ref/reference.h"
#include "repro_fused.h"

/* Reference values of every node on the stored inputs, rounded to the node's
 * dtype (placeholders are graph inputs: exactly representable in their dtype). */
static int ensure_ref(nvw_frepro *fr)
{
    const nv_graph *g = fr->g;
    if (g->n_nodes == 0 || fr->ref[0])
        return 0;
    nv_tensor **hi = calloc((size_t)g->n_nodes, sizeof *hi);
    nv_tensor **abs = calloc((size_t)g->n_nodes, sizeof *abs);
    char err[256] = "";
    int r = hi && abs
                ? nv_graph_reference(g, (const nv_tensor *const *)fr->in, hi, abs, err, sizeof err)
                : -ENOMEM;
    for (int k = 0; r == 0 && k < g->n_nodes; k++) {
        const nv_graph_node *n = &g->nodes[k];
        fr->ref[k] = nv_tensor_new(n->dtype, n->ndim, n->shape);
        if (!fr->ref[k]) {
            r = -ENOMEM;
            break;
        }
        for (int64_t e = 0; e < n->numel; e++)
            fr->ref[k]->data[e] = nv_dtype_round(n->dtype, hi[k]->data[e], &NV_ROUND_DEFAULT, 0);
    }
    for (int k = 0; k < g->n_nodes; k++) {
        if (hi)
            nv_tensor_free(hi[k]);
        if (abs)
            nv_tensor_free(abs[k]);
        if (r < 0 && fr->ref[k]) {
            nv_tensor_free(fr->ref[k]);
            fr->ref[k] = NULL;
        }
    }
    free(hi);
    free(abs);
    return r < 0 ? (r == -ENOMEM || r == NV_E_NOMEM ? -ENOMEM : -EINVAL) : 0;
}

/* The window extent e maps to: its length (e when unmapped) and *ret_off. */
static int64_t map_extent(const nvw_fsub *sub, int64_t e, int64_t *ret_off)
{
    *ret_off = 0;
    for (int i = 0; i < sub->n_map; i++)
        if (sub->from[i] == e) {
            *ret_off = sub->off[i];
            return sub->to[i];
        }
    return e;
}

/* The window [off[d], off[d] + sh[d]) of contiguous t along every dim (each
 * within t->shape[d]). */
static nv_tensor *window(const nv_tensor *t, const int64_t *sh, const int64_t *off)
{
    nv_tensor *o = nv_tensor_new(t->dtype, t->ndim, sh);
    if (!o)
        return NULL;
    int64_t idx[NV_MAX_DIMS] = {0};
    for (int64_t k = 0; k < o->numel; k++) {
        int64_t src = 0;
        for (int d = 0; d < t->ndim; d++)
            src = src * t->shape[d] + off[d] + idx[d];
        o->data[k] = t->data[src];
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < sh[d])
                break;
            idx[d] = 0;
        }
    }
    return o;
}

static json_t *shape_json(int nd, const int64_t *sh)
{
    json_t *a = json_array();
    for (int d = 0; a && d < nd; d++)
        if (json_array_append_new(a, json_integer(sh[d])))
            return json_decref(a), NULL;
    return a;
}

/* Add one subgraph input (entry JSON ij, stored tensor t) with mapped extents. */
static int add_input(const nvw_fsub *sub, json_t *inputs, json_t *ij, const nv_tensor *t,
                     nv_tensor **ins, int *n)
{
    int64_t sh[NV_MAX_DIMS], off[NV_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        sh[d] = map_extent(sub, t->shape[d], &off[d]);
        if (off[d] < 0 || sh[d] < 1 || off[d] + sh[d] > t->shape[d]) {
            json_decref(ij); /* not handed to inputs */
            return -EINVAL;
        }
    }
    json_t *shape = shape_json(t->ndim, sh);
    if (!ij || !shape || json_object_set_new(ij, "shape", shape) ||
        json_array_append_new(inputs, ij))
        return -ENOMEM;
    if (!(ins[*n] = window(t, sh, off)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

static bool reads(const nv_graph_node *n, int id)
{
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] == id)
            return true;
    return false;
}

/* Whether a kept node reads graph input or node id. */
static bool kept_reader(const nvw_frepro *fr, const nvw_fsub *sub, int id)
{
    for (int k = 0; k < fr->g->n_nodes; k++)
        if (sub->keep[k] && reads(&fr->g->nodes[k], id))
            return true;
    return false;
}

static int build_graph(nvw_frepro *fr, const nvw_fsub *sub, json_t *graph, nv_tensor **ins, int *n)
{
    const nv_graph *g = fr->g;
    const json_t *og = json_object_get(fr->spec, "graph");
    json_t *inputs = json_array(), *nodes = json_array(), *outputs = json_array();
    if (!inputs || !nodes || !outputs || json_object_set_new(graph, "inputs", inputs) ||
        json_object_set_new(graph, "nodes", nodes) ||
        json_object_set_new(graph, "outputs", outputs))
        return -ENOMEM;
    int r = 0;
    for (int i = 0; r == 0 && i < g->n_inputs; i++)
        if (kept_reader(fr, sub, -1 - i))
            r = add_input(sub, inputs,
                          json_deep_copy(json_array_get(json_object_get(og, "inputs"), (size_t)i)),
                          fr->in[i], ins, n);
    for (int k = 0; r == 0 && k < g->n_nodes; k++) {
        const nv_graph_node *nd = &g->nodes[k];
        if (sub->keep[k]) {
            json_t *nj = json_deep_copy(
                json_array_get(json_object_get(og, "nodes"), (size_t)nd->json_index));
            bool out = nd->is_output || !kept_reader(fr, sub, k);
            r = !nj || json_array_append_new(nodes, nj) ||
                        (out && json_array_append_new(outputs, json_string(nd->name)))
                    ? -ENOMEM
                    : 0;
        } else if (kept_reader(fr, sub, k)) {
            json_t *ij =
                json_pack("{s:s, s:s}", "name", nd->name, "dtype", nv_dtype_name(nd->dtype));
            r = add_input(sub, inputs, ij, fr->ref[k], ins, n);
        }
    }
    return r;
}

/* node_tolerances of kept nodes only; "dtypes" only while an input takes it. */
static int fix_spec(const nvw_frepro *fr, const nvw_fsub *sub, json_t *spec, const json_t *graph)
{
    json_t *nt = json_object_get(spec, "node_tolerances");
    for (int k = 0; nt && k < fr->g->n_nodes; k++)
        if (!sub->keep[k])
            json_object_del(nt, fr->g->nodes[k].name);
    bool untyped = false;
    size_t i;
    json_t *ij;
    json_array_foreach(json_object_get(graph, "inputs"), i, ij) untyped =
        untyped || !json_object_get(ij, "dtype");
    if (!untyped)
        json_object_del(spec, "dtypes");
    else if (!json_object_get(spec, "dtypes") &&
             json_object_set_new(spec, "dtypes", json_pack("[s]", nv_dtype_name(fr->dt))))
        return -ENOMEM;
    return 0;
}

int nvw_fsub_build(nvw_frepro *fr, const nvw_fsub *sub, json_t **ret_spec, nv_tensor ***ret_in,
                   int *ret_n)
{
    bool any = false;
    for (int k = 0; k < fr->g->n_nodes; k++)
        any = any || sub->keep[k];
    if (!any)
        return -EINVAL;
    int r = ensure_ref(fr);
    if (r < 0)
        return r;
    json_t *spec = json_deep_copy(fr->spec), *graph = json_object();
    nv_tensor **ins = calloc(NV_GRAPH_MAX_INPUTS + NV_GRAPH_MAX_NODES, sizeof *ins);
    int n = 0;
    r = spec && graph && ins ? build_graph(fr, sub, graph, ins, &n) : -ENOMEM;
    if (r == 0)
        r = fix_spec(fr, sub, spec, graph);
    if (r == 0 && json_object_set(spec, "graph", graph))
        r = -ENOMEM;
    json_decref(graph);
    if (r == 0) {
        /* The subgraph must parse and infer (a shrunk extent may break a shape rule). */
        nv_graph *pg = NULL;
        char *ptr = NULL, *msg = NULL;
        r = nv_graph_parse(json_object_get(spec, "graph"), "/graph", &pg, &ptr, &msg);
        if (r == 0)
            r = nv_graph_infer(pg, fr->dt, "/graph", &ptr, &msg);
        nv_graph_free(pg);
        free(ptr);
        free(msg);
    }
    if (r < 0) {
        for (int i = 0; i < n; i++)
            nv_tensor_free(ins[i]);
        free(ins);
        json_decref(spec);
        return r == -ENOMEM ? r : -EINVAL;
    }
    *ret_spec = spec;
    *ret_in = ins;
    *ret_n = n;
    return 0;
}
