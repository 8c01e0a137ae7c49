/* The device's execution of a model case (model_internal.h): eager, node by
 * node through the op entry (every backend has one), or the whole model in one
 * call of the graph entry with capture ("execution": "graph"). */
#include <errno.h>
#include <stdlib.h>

#include <string.h>
#include <time.h>

#include "model_internal.h"
#include "worker/backends/exec.h"
#include "worker/backends/views/views.h"
#include "worker/runner/graph_exec.h"

/* Eager: node by node through forward, every node's output captured (the
 * model run eagerly, as a framework runs it without a compiler). */
static int run_eager(mcase *c, const nv_tensor_view *inv, nv_tensor **dev)
{
    nvw_eager_fail f;
    int r = nvw_graph_eager(c->j->b.table, c->ctx, &c->g, inv, dev, &f);
    if (r != 1)
        return r;
    const char *v, *cls;
    char msg[1024];
    nvw_eager_verdict(&c->g, &f, "", "the output's dtype or shape differs from the model's", &v,
                      &cls, msg, sizeof msg);
    r = model_verdict(c, v, cls, "%s", msg);
    return r < 0 ? r : 1;
}

/* An exec harness's graph request (docs/EXEC_PROTOCOL.md "Optional requests"):
 * the job's "compile" and "autocast" and which graph inputs are parameters (the
 * harness makes them its modules' nn.Parameters); the compiler's IR it answers
 * goes into the case as "compiled". */
static int exec_graph(mcase *c, nv_graph_call *call, char *err, size_t errlen)
{
    const nv_modelspec *s = c->j->s;
    json_t *params = json_array();
    for (int i = 0; params && i < c->g.n_inputs; i++)
        if (s->inputs[i].is_param)
            json_array_append_new(params, json_string(c->g.inputs[i].name));
    json_t *o = json_pack("{s:s, s:s, s:o?}", "compile", s->compile, "autocast", s->autocast,
                          "params", params);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return snprintf(err, errlen, "out of memory"), NV_E_NOMEM;
    char *compiled = NULL;
    int br = nvw_exec_graph(c->ctx, call, text, &compiled, err, errlen);
    free(text);
    json_error_t jerr;
    json_t *cj = compiled ? json_loads(compiled, 0, &jerr) : NULL;
    if (cj)
        json_object_set_new(c->cj, "compiled", cj);
    free(compiled);
    return br;
}

/* Graph: one nv_backend.graph call with capture. A node's value is its graph
 * output (rounded to the node dtype) where it is one, else its capture, in
 * whatever float dtype the backend held it (docs/BACKEND_ABI.md "Fused
 * graphs"). */
static int run_graph(mcase *c, const nv_tensor_view *inv, nv_tensor **dev)
{
    const nv_graph *g = &c->g;
    int nout = g->n_outputs + g->n_nodes;
    nv_tensor_view *v = calloc((size_t)nout, sizeof *v);
    if (!v)
        return -ENOMEM;
    nv_graph_call call = {.graph_json = c->j->s->graph_text,
                          .capture = 1,
                          .n_inputs = g->n_inputs,
                          .inputs = inv,
                          .n_outputs = nout,
                          .outputs = v};
    char err[MODEL_ERRLEN] = "";
    int r = 0, br;
    if (c->j->b.table == nvw_exec_table())
        br = exec_graph(c, &call, err, sizeof err);
    else
        br = c->j->b.table->graph(c->ctx, &call, err, sizeof err);
    if (br == NV_E_UNSUPPORTED && !strncmp(err, "not offered:", 12)) {
        r = model_verdict(c, "error", "not_offered", "%s", err);
        r = r < 0 ? r : 1;
    } else if (br != NV_OK) {
        r = model_verdict(c, "error", "backend_error",
                          "the backend's graph entry returned %d: '%s'", br, err);
        r = r < 0 ? r : 1;
    }
    for (int i = 0; r == 0 && i < nout; i++) {
        bool output = i < g->n_outputs;
        int k = output ? g->outputs[i] : i - g->n_outputs;
        const nv_graph_node *n = &g->nodes[k];
        const nv_dtype_info *di = nv_dtype_get((nv_dtype)v[i].dtype);
        bool fits = v[i].data && v[i].ndim == n->ndim &&
                    (output ? nvw_view_fits(&v[i], n->dtype, n) : di && di->is_float);
        for (int d = 0; fits && d < n->ndim; d++)
            fits = v[i].shape[d] == n->shape[d];
        if (!fits) {
            r = model_verdict(c, "failed", "bad_output",
                              "graph %s of node '%s': no data, or its dtype or shape differs "
                              "from the model's",
                              output ? "output" : "capture", n->name);
            r = r < 0 ? r : 1;
        } else if (output || !dev[k]) {
            nv_tensor *t = nvw_tensor_from_view(&v[i], false);
            if (!t)
                r = -ENOMEM;
            nv_tensor_free(dev[k]);
            dev[k] = t;
        }
    }
    for (int i = 0; br == NV_OK && i < nout; i++)
        if (v[i].data && c->j->b.table->release_tensor)
            c->j->b.table->release_tensor(c->ctx, &v[i]);
    free(v);
    return r;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The case's "seconds": {"device": wall seconds in the backend's forward or
 * graph calls, "device_forwards": how many whole-model forwards} (what
 * bench/model_torch_bench.py compares; bench/result_identity.py drops
 * "seconds"). */
static void add_seconds(mcase *c, double dt)
{
    json_t *s = json_object_get(c->cj, "seconds");
    if (!s && json_object_set_new(c->cj, "seconds", s = json_object()) < 0)
        return;
    json_object_set_new(s, "device", json_real(json_real_value(json_object_get(s, "device")) + dt));
    json_object_set_new(
        s, "device_forwards",
        json_integer(json_integer_value(json_object_get(s, "device_forwards")) + 1));
}

int model_device(mcase *c, nv_tensor *const *in, nv_tensor **dev)
{
    nv_tensor_view inv[NV_GRAPH_MAX_INPUTS];
    int n_inv = 0, r = 0;
    for (; r == 0 && n_inv < c->g.n_inputs; n_inv++)
        r = nvw_view_from_tensor(in[n_inv], &inv[n_inv]);
    double t0 = now_s();
    if (r == 0)
        r = c->j->s->graph_exec ? run_graph(c, inv, dev) : run_eager(c, inv, dev);
    if (r == 0)
        add_seconds(c, now_s() - t0);
    for (int i = 0; i < n_inv; i++)
        nvw_view_free(&inv[i]);
    return r;
}
