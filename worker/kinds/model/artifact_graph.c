/* The artifact of a failed model case in graph execution (docs/MODEL.md
 * "Localization"): a fused artifact (docs/ARTIFACTS.md "Fused reproducers")
 * of the first divergent node's layer. A node's capture is what the backend
 * held inside its region, which the op entry does not replay, so the
 * reproducer is the region again: the layer's nodes as a fused job's graph
 * (node names kept, so a fault keyed by a node name still applies), its inputs
 * the model's graph inputs the layer reads and, for the upstream nodes it
 * reads, the device's values (rounded to the node dtype where the backend held
 * them wider: a value crossing a region boundary is stored in its dtype), and
 * every node's capture as its fused value. The fused kind's gate, minimizer,
 * replay and `numval-worker repro` take it as they take a fused job's failure;
 * the manifest's "model" object says where it came from. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "core/spec/fusedspec.h"
#include "model_internal.h"

void model_sub_select(const mcase *c, model_sub *ls)
{
    const nv_graph *g = &c->g;
    memset(ls->ginput, 0, sizeof ls->ginput);
    memset(ls->upstream, 0, sizeof ls->upstream);
    for (int q = 0; q < g->n_nodes; q++)
        for (int i = 0; i < g->nodes[q].n_in; i++) {
            int id = g->nodes[q].in[i];
            if (ls->node[q] && id < 0)
                ls->ginput[-1 - id] = true;
            else if (ls->node[q] && !ls->node[id])
                ls->upstream[id] = true;
        }
}

static void select_layer(const mcase *c, int k, model_sub *ls)
{
    memset(ls, 0, sizeof *ls);
    const nv_graph *g = &c->g;
    ls->layer = c->j->s->node_layer[k];
    for (int q = 0; q < g->n_nodes; q++)
        ls->node[q] = c->j->s->node_layer[q] == ls->layer;
    model_sub_select(c, ls);
    ls->output[c->j->s->layers[ls->layer].output] = true;
    for (int q = 0; q < g->n_nodes; q++)
        for (int i = 0; i < g->nodes[q].n_in; i++) {
            int id = g->nodes[q].in[i];
            if (!ls->node[q] && id >= 0 && ls->node[id])
                ls->output[id] = true;
        }
    for (int o = 0; o < g->n_outputs; o++)
        if (ls->node[g->outputs[o]])
            ls->output[g->outputs[o]] = true;
}

static json_t *shape_json(int nd, const int64_t *sh)
{
    json_t *a = json_array();
    for (int d = 0; a && d < nd; d++)
        json_array_append_new(a, json_integer(sh[d]));
    return a;
}

static json_t *input_json(const char *name, int nd, const int64_t *sh, bool set, nv_dtype dt)
{
    json_t *o = json_pack("{s:s, s:o}", "name", name, "shape", shape_json(nd, sh));
    if (o && set)
        json_object_set_new(o, "dtype", json_string(nv_dtype_name(dt)));
    return o;
}

/* The fused graph of the layer: inputs (graph inputs, then upstream nodes, in
 * graph order), the layer's nodes in topological order, its outputs. */
json_t *model_sub_graph(const mcase *c, const model_sub *ls)
{
    const nv_graph *g = &c->g;
    json_t *ins = json_array(), *nodes = json_array(), *outs = json_array();
    for (int i = 0; ins && i < g->n_inputs; i++)
        if (ls->ginput[i])
            json_array_append_new(ins, input_json(g->inputs[i].name, g->inputs[i].ndim,
                                                  g->inputs[i].shape, g->inputs[i].dtype_set,
                                                  g->inputs[i].dtype));
    for (int q = 0; ins && q < g->n_nodes; q++)
        if (ls->upstream[q])
            json_array_append_new(ins, input_json(g->nodes[q].name, g->nodes[q].ndim,
                                                  g->nodes[q].shape, g->nodes[q].dtype != c->dt,
                                                  g->nodes[q].dtype));
    for (int q = 0; nodes && q < g->n_nodes; q++) {
        if (!ls->node[q])
            continue;
        const nv_graph_node *n = &g->nodes[q];
        json_t *in = json_array();
        for (int i = 0; in && i < n->n_in; i++)
            json_array_append_new(in, json_string(n->in[i] < 0 ? g->inputs[-1 - n->in[i]].name
                                                               : g->nodes[n->in[i]].name));
        json_t *nj = json_pack("{s:s, s:s, s:o}", "name", n->name, "op", n->op->name, "inputs", in);
        json_t *attrs = n->attrs_json ? json_loads(n->attrs_json, 0, NULL) : NULL;
        if (nj && json_object_size(attrs) > 0)
            json_object_set(nj, "attrs", attrs);
        json_decref(attrs);
        if (nj && n->dtype_set)
            json_object_set_new(nj, "dtype", json_string(nv_dtype_name(n->dtype)));
        json_array_append_new(nodes, nj);
        if (ls->output[q])
            json_array_append_new(outs, json_string(n->name));
    }
    if (!ins || !nodes || !outs) {
        json_decref(ins);
        json_decref(nodes);
        json_decref(outs);
        return NULL;
    }
    return json_pack("{s:o, s:o, s:o}", "inputs", ins, "nodes", nodes, "outputs", outs);
}

/* The value of upstream node q as the subgraph's input: the device's, in the
 * node dtype. */
nv_tensor *model_upstream_value(const mcase *c, int q)
{
    const nv_tensor *d = c->dev[q];
    nv_tensor *t = nv_tensor_new(c->g.nodes[q].dtype, d->ndim, d->shape);
    for (int64_t e = 0; t && e < t->numel; e++)
        t->data[e] = nv_dtype_round(t->dtype, d->data[e], &NV_ROUND_DEFAULT, 0);
    return t;
}

/* The graph hash of a fused spec the model kind builds: the fused kind's own
 * parse, so the artifact's signature is the one its replay computes. 0, or
 * < 0 when spec is NULL or does not parse (the fused validator's refusal). */
int model_fused_graph_hash(const json_t *spec, char *ret_hash)
{
    nv_fusedspec *fs = NULL;
    char *ptr = NULL, *msg = NULL;
    int r = spec ? nv_fusedspec_parse(spec, &fs, &ptr, &msg) : -ENOMEM;
    if (r == 0)
        nv_sha256_hex(fs->graph_text, strlen(fs->graph_text), ret_hash);
    nv_fusedspec_free(fs);
    free(ptr);
    free(msg);
    return r;
}

/* The fused job and its case: the judged dtype of a fused node is its own
 * dtype when intermediate_dtype is the case dtype (worker/kinds/fused/report.c),
 * the dtype the model judged the op in. */
static json_t *fused_manifest(mcase *c, int k, const model_sub *ls, const char *cls, json_t *graph,
                              char *ret_hash)
{
    const json_t *d = c->j->b.describe;
    const char *dn = nv_dtype_name(c->dt);
    json_t *spec = json_pack("{s:s, s:O, s:[s], s:[s], s:I, s:s}", "kind", "fused", "graph", graph,
                             "dtypes", dn, "inputs", "normal", "seed", (json_int_t)c->j->s->seed,
                             "intermediate_dtype", dn);
    if (model_fused_graph_hash(spec, ret_hash) < 0) {
        json_decref(spec);
        return NULL;
    }
    const nv_graph_node *n = &c->g.nodes[k];
    const mnode *res = &c->res[k];
    json_t *fd = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "node", n->name, "op", n->op->name,
                           "execution", "fused", "dtype", nv_dtype_name(n->dtype), "e_dev",
                           nvw_json_num(res->e_dev), "band", nvw_json_num(res->band));
    json_t *cs = fd ? json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:s, s:s, s:s, s:O}", "index", 0,
                                "op", "fused", "dtype", dn, "input", "normal", "sample", 0,
                                "seed", (json_int_t)c->j->s->seed, "graph_hash", ret_hash,
                                "verdict", "failed", "failure_class", cls, "first_divergent", fd)
                    : NULL;
    json_t *origin = json_pack(
        "{s:O?, s:s, s:I, s:s, s:s, s:s, s:s}", "job", json_object_get(c->j->b.spec_json, "name"),
        "graph_hash", c->j->graph_hash, "case_index", (json_int_t)c->index, "case_dtype", dn,
        "layer", c->j->s->layers[ls->layer].name, "node", n->name, "execution", "graph");
    json_t *m = cs && origin ? json_pack("{s:o, s:O, s:O, s:s, s:s, s:O?, s:O?, s:O?, s:O?, "
                                         "s:s, s:O, s:O}",
                                         "spec", spec, "case", cs, "graph", graph, "graph_hash",
                                         ret_hash, "backend", c->j->b.backend_spec, "device",
                                         json_object_get(d, "device"), "mode",
                                         json_object_get(d, "mode"), "contract",
                                         json_object_get(d, "contract"), "backend_build",
                                         json_object_get(d, "build"), "failure_class", cls,
                                         "first_divergent", fd, "model", origin)
                             : NULL;
    json_decref(fd);
    json_decref(cs);
    json_decref(origin);
    return m;
}

int model_graph_artifact(mcase *c, int k, const char *cls)
{
    const nv_graph *g = &c->g;
    model_sub *ls = malloc(sizeof *ls);
    if (!ls)
        return -ENOMEM;
    select_layer(c, k, ls);
    int cap = g->n_inputs + 2 * g->n_nodes, n = 0, r = -ENOMEM;
    const char **names = calloc((size_t)cap, sizeof *names);
    const nv_tensor **ts = calloc((size_t)cap, sizeof *ts);
    nv_tensor **owned = calloc((size_t)g->n_nodes, sizeof *owned);
    char(*buf)[NV_GRAPH_MAX_NAME + 16] = calloc((size_t)cap, sizeof *buf);
    json_t *graph = model_sub_graph(c, ls), *m = NULL;
    char hash[65] = "";
    if (!names || !ts || !owned || !buf || !graph)
        goto out;
    if (!(m = fused_manifest(c, k, ls, cls, graph, hash))) {
        r = model_localized(c, "none", "the layer's subgraph is not a valid fused graph");
        goto out;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (ls->ginput[i]) {
            snprintf(buf[n], sizeof buf[n], "input:%s", g->inputs[i].name);
            ts[n++] = c->in[i];
        }
    for (int q = 0; q < g->n_nodes; q++)
        if (ls->upstream[q]) {
            if (!(owned[q] = model_upstream_value(c, q)))
                goto out;
            snprintf(buf[n], sizeof buf[n], "input:%s", g->nodes[q].name);
            ts[n++] = owned[q];
        }
    for (int q = 0; q < g->n_nodes; q++)
        if (ls->node[q]) {
            snprintf(buf[n], sizeof buf[n], "fused:%s", g->nodes[q].name);
            ts[n++] = c->dev[q];
        }
    for (int i = 0; i < n; i++)
        names[i] = buf[i];
    r = nvw_store_failure(&c->j->b, c->cj, (int)c->index, m, n, names, ts);
    if (r > 0)
        r = model_localized(c, "fused_case",
                            "graph execution: the layer of the first divergent node as a "
                            "fused case, its inputs as the device held them; the op alone "
                            "fails its default tolerance on the values the backend held");
out:
    for (int q = 0; owned && q < g->n_nodes; q++)
        nv_tensor_free(owned[q]);
    json_decref(m);
    json_decref(graph);
    free(owned);
    free(names);
    free(ts);
    free(buf);
    free(ls);
    return r;
}
