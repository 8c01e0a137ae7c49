/* The artifact of an eager model failure whose first divergent op is within
 * its own tolerance (docs/MODEL.md "Localization", "A composition"): the
 * error is the composition's, so the reproducer is the smallest subgraph that
 * still leaves the model's band. Candidates end at the first divergent node k
 * and hold k's ancestors from a start node on: k's layer; then the layers
 * before it, one more at a time; then, inside the first span that fails, the
 * start moved forward to the last node at which the span still fails. Each is
 * judged on the host exactly as the fused kind judges the artifact
 * (worker/runner/band.h): both references of the subgraph fed the graph
 * inputs and the device's values of the upstream nodes it reads (eager
 * execution stores every value in its node dtype, so the device's output of
 * the subgraph fed those inputs is what it captured), against the device's
 * captured output. The artifact is a fused job with "composition":
 * {"execution": "unfused"}; every node's eager value is stored as its
 * "unfused:" value, so the fused kind's gate, minimizer and replay take it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "core/spec/fusedspec.h"
#include "model_internal.h"

typedef struct cand {
    model_sub ls;
    json_t *graph;
    nv_graph *g; /* graph parsed and inferred for the case dtype */
    nvw_band out; /* k's figures */
} cand;

static void cand_free(cand *cd)
{
    json_decref(cd->graph);
    nv_graph_free(cd->g);
    cd->graph = NULL;
    cd->g = NULL;
}

/* The model graph input called name, else the device's value of the node
 * called name; NULL when neither. */
static const nv_tensor *value_of(const mcase *c, const char *name)
{
    for (int i = 0; i < c->g.n_inputs; i++)
        if (!strcmp(c->g.inputs[i].name, name))
            return c->in[i];
    int q = nv_graph_lookup(&c->g, name);
    return q < 0 ? NULL : c->dev[q];
}

/* Candidate starting at node s: k's ancestors with index >= s, k the output.
 * 0 with cd->out set (in_band false: the candidate fails), NV_E_*, -ENOMEM. */
static int judge(mcase *c, int k, const bool *anc, int s, cand *cd)
{
    memset(&cd->ls, 0, sizeof cd->ls);
    cd->ls.layer = c->j->s->node_layer[k];
    for (int q = s; q <= k; q++)
        cd->ls.node[q] = anc[q];
    cd->ls.output[k] = true;
    model_sub_select(c, &cd->ls);
    char *ptr = NULL, *msg = NULL;
    cd->graph = model_sub_graph(c, &cd->ls);
    int r = cd->graph ? nv_graph_parse(cd->graph, "", &cd->g, &ptr, &msg) : -ENOMEM;
    if (r == 0)
        r = nv_graph_infer(cd->g, c->dt, "", &ptr, &msg);
    free(ptr);
    free(msg);
    if (r < 0)
        return r == -ENOMEM ? r : NV_E_INVALID;
    const nv_graph *g = cd->g;
    nv_tensor **in = calloc((size_t)g->n_inputs, sizeof *in);
    nv_tensor **own = calloc((size_t)g->n_inputs, sizeof *own);
    const nv_tensor **dev = calloc((size_t)g->n_nodes, sizeof *dev);
    nvw_band *b = calloc((size_t)g->n_nodes, sizeof *b);
    r = in && own && dev && b ? 0 : -ENOMEM;
    for (int i = 0; r == 0 && i < g->n_inputs; i++) {
        const nv_tensor *t = value_of(c, g->inputs[i].name);
        int q = nv_graph_lookup(&c->g, g->inputs[i].name);
        if (q >= 0 && !(own[i] = model_upstream_value(c, q)))
            r = -ENOMEM;
        in[i] = own[i] ? own[i] : (nv_tensor *)t;
        if (r == 0 && !in[i])
            r = NV_E_INVALID;
    }
    int out = r == 0 ? nv_graph_lookup(g, c->g.nodes[k].name) : -1;
    if (r == 0 && out >= 0)
        dev[out] = c->dev[k];
    char err[MODEL_ERRLEN];
    if (r == 0)
        r = out < 0 ? NV_E_INVALID
                    : nvw_band_judge(g, in, dev, MODEL_BAND_FACTOR, c->u_acc, b, err, sizeof err);
    if (r == 0)
        cd->out = b[out];
    for (int i = 0; own && i < g->n_inputs; i++)
        nv_tensor_free(own[i]);
    free(in);
    free(own);
    free(dev);
    free(b);
    return r;
}

/* The smallest failing candidate into *best (its level "layer", "layers" or
 * "nodes"); 1 when none fails, 0, NV_E_* or -ENOMEM. */
static int search(mcase *c, int k, cand *best, const char **level, int *tries)
{
    const nv_graph *g = &c->g;
    bool anc[NV_GRAPH_MAX_NODES] = {false};
    anc[k] = true;
    for (int q = k; q >= 0; q--)
        for (int i = 0; anc[q] && i < g->nodes[q].n_in; i++)
            if (g->nodes[q].in[i] >= 0)
                anc[g->nodes[q].in[i]] = true;
    const int *nl = c->j->s->node_layer;
    int span = -1, r = 0;
    *tries = 0;
    for (int l = nl[k]; l >= 0 && span < 0; l--) {
        int s = k;
        while (s > 0 && nl[s - 1] >= l)
            s--;
        cand cd = {0};
        r = judge(c, k, anc, s, &cd);
        ++*tries;
        cand_free(&cd);
        if (r < 0)
            return r;
        if (!cd.out.in_band) {
            span = s;
            *level = l == nl[k] ? "layer" : "layers";
        }
    }
    if (span < 0)
        return 1;
    for (int s = k; s >= span; s--) {
        if (!anc[s] && s != span)
            continue;
        r = judge(c, k, anc, s, best);
        ++*tries;
        if (r < 0 || !best->out.in_band) {
            if (r == 0 && s > span)
                *level = "nodes";
            return r;
        }
        cand_free(best);
    }
    return 1; /* not reached: the span itself fails */
}

static json_t *manifest(mcase *c, int k, const cand *cd, const char *level, char *hash)
{
    const json_t *d = c->j->b.describe;
    const char *dn = nv_dtype_name(c->dt);
    const nv_graph_node *n = &c->g.nodes[k];
    json_t *spec = json_pack(
        "{s:s, s:O, s:[s], s:[s], s:I, s:s, s:{s:s, s:f}}", "kind", "fused", "graph", cd->graph,
        "dtypes", dn, "inputs", "normal", "seed", (json_int_t)c->j->s->seed, "intermediate_dtype",
        dn, "composition", "execution", "unfused", "band_factor", MODEL_BAND_FACTOR);
    if (model_fused_graph_hash(spec, hash) < 0) {
        json_decref(spec);
        return NULL;
    }
    json_t *fd = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o}", "node", n->name, "op",
                           n->op->name, "execution", "unfused", "dtype", nv_dtype_name(n->dtype),
                           "criterion", "composition", "e_dev", nvw_json_num(cd->out.e_dev),
                           "band", nvw_json_num(cd->out.band));
    json_t *cs = fd ? json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:s, s:s, s:s, s:O}", "index", 0,
                                "op", "fused", "dtype", dn, "input", "normal", "sample", 0,
                                "seed", (json_int_t)c->j->s->seed, "graph_hash", hash,
                                "verdict", "failed", "failure_class", "out_of_band",
                                "first_divergent", fd)
                    : NULL;
    json_t *origin = json_pack(
        "{s:O?, s:s, s:I, s:s, s:s, s:s, s:s, s:{s:s, s:i}}", "job",
        json_object_get(c->j->b.spec_json, "name"), "graph_hash", c->j->graph_hash,
        "case_index", (json_int_t)c->index, "case_dtype", dn, "layer",
        c->j->s->layers[c->j->s->node_layer[k]].name, "node", n->name, "execution", "eager",
        "composition", "level", level, "nodes", cd->g->n_nodes);
    json_t *m = cs && origin ? json_pack("{s:o, s:O, s:O, s:s, s:s, s:O?, s:O?, s:O?, s:O?, "
                                         "s:s, s:O, s:O}",
                                         "spec", spec, "case", cs, "graph", cd->graph,
                                         "graph_hash", hash, "backend", c->j->b.backend_spec,
                                         "device", json_object_get(d, "device"), "mode",
                                         json_object_get(d, "mode"), "contract",
                                         json_object_get(d, "contract"), "backend_build",
                                         json_object_get(d, "build"), "failure_class",
                                         "out_of_band", "first_divergent", fd, "model", origin)
                             : NULL;
    if (!m)
        json_decref(spec);
    json_decref(fd);
    json_decref(cs);
    json_decref(origin);
    return m;
}

static int store(mcase *c, int k, const cand *cd, const char *level)
{
    const nv_graph *g = cd->g;
    int cap = g->n_inputs + g->n_nodes, n = 0, r = -ENOMEM;
    const char **names = calloc((size_t)cap, sizeof *names);
    const nv_tensor **ts = calloc((size_t)cap, sizeof *ts);
    nv_tensor **own = calloc((size_t)cap, sizeof *own);
    char(*buf)[NV_GRAPH_MAX_NAME + 16] = calloc((size_t)cap, sizeof *buf);
    char hash[65] = "";
    json_t *m = names && ts && own && buf ? manifest(c, k, cd, level, hash) : NULL;
    if (!m)
        goto out;
    for (int i = 0; i < g->n_inputs; i++, n++) {
        int q = nv_graph_lookup(&c->g, g->inputs[i].name);
        snprintf(buf[n], sizeof buf[n], "input:%s", g->inputs[i].name);
        if (q >= 0 && !(own[n] = model_upstream_value(c, q)))
            goto out;
        ts[n] = own[n] ? own[n] : value_of(c, g->inputs[i].name);
    }
    for (int q = 0; q < g->n_nodes; q++, n++) {
        snprintf(buf[n], sizeof buf[n], "unfused:%s", g->nodes[q].name);
        ts[n] = c->dev[nv_graph_lookup(&c->g, g->nodes[q].name)];
    }
    for (int i = 0; i < n; i++)
        names[i] = buf[i];
    r = nvw_store_failure(&c->j->b, c->cj, (int)c->index, m, n, names, ts);
out:
    for (int i = 0; own && i < cap; i++)
        nv_tensor_free(own[i]);
    json_decref(m);
    free(names);
    free(ts);
    free(own);
    free(buf);
    return r;
}

int model_composition_artifact(mcase *c, int k)
{
    cand best = {0};
    const char *level = "layer";
    int tries = 0;
    int r = search(c, k, &best, &level, &tries);
    if (r == -ENOMEM || r == NV_E_NOMEM) {
        cand_free(&best);
        return -ENOMEM;
    }
    if (r != 0) {
        cand_free(&best);
        return model_localized(
            c, "none",
            r == 1 ? "the first divergent op is within its default tolerance on the inputs the "
                     "device gave it, and no subgraph ending at it (its layer, the layers before "
                     "it) leaves the band fed the captured inputs: the error is inherited"
                   : "the composition's subgraph could not be built or judged");
    }
    r = store(c, k, &best, level);
    json_t *comp = r > 0 ? json_pack("{s:s, s:i, s:i, s:o, s:o, s:o}", "level", level, "nodes",
                                     best.g->n_nodes, "candidates", tries, "e_dev",
                                     nvw_json_num(best.out.e_dev), "e_dtype_ref",
                                     nvw_json_num(best.out.e_dt), "band",
                                     nvw_json_num(best.out.band))
                         : NULL;
    cand_free(&best);
    if (r <= 0)
        return r;
    r = model_localized(c, "composition_case",
                        "the first divergent op is within its default tolerance on the inputs the "
                        "device gave it; the smallest subgraph ending at it whose output, fed the "
                        "captured inputs, leaves the band is a fused case judged by the "
                        "composition criterion");
    if (r == 0 && (!comp || json_object_set_new(json_object_get(c->cj, "localized"),
                                                "composition", comp)))
        r = -ENOMEM;
    return r;
}
