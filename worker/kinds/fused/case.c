/* One case of a fused job: the graph inputs, the three executions (reference,
 * unfused node by node through forward, fused through graph with capture) and
 * the layer-by-layer comparison. The result JSON is built in worker/kinds/fused/report.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ref/reference.h"
#include "fused_internal.h"
#include "worker/runner/graph_exec.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Shape of input i of node n (graph input or upstream node). */
static const int64_t *input_shape(const nv_graph *g, const nv_graph_node *n, int i, int *ret_nd)
{
    int id = n->in[i];
    if (id < 0) {
        *ret_nd = g->inputs[-1 - id].ndim;
        return g->inputs[-1 - id].shape;
    }
    *ret_nd = g->nodes[id].ndim;
    return g->nodes[id].shape;
}

/* The generator request of graph input i: the domain, target and reduction of
 * the first node that reads it; the stream is keyed by the input's name. */
static void input_request(const fcase *c, int i, nv_input_request *rq)
{
    const nv_graph *g = &c->g;
    memset(rq, 0, sizeof *rq);
    rq->dtype = g->inputs[i].dtype;
    rq->target = rq->dtype;
    rq->cls = c->cls;
    rq->seed = c->j->s->seed ^ (fnv1a(g->inputs[i].name) * 0x9E3779B97F4A7C15ull);
    rq->case_index = (uint32_t)c->index;
    rq->index_range = 1;
    for (int k = 0; k < g->n_nodes; k++) {
        const nv_graph_node *n = &g->nodes[k];
        for (int p = 0; p < n->n_in; p++) {
            if (n->in[p] != -1 - i)
                continue;
            int nd;
            const int64_t *sh = input_shape(g, n, 0, &nd);
            rq->domain = nv_op_input_domain(n->op, p);
            rq->tensor_index = p;
            rq->target = n->dtype;
            rq->index_range = nd > 0 ? sh[nd - 1] : 1;
            if (n->op->kind == NV_OPK_MATMUL)
                rq->reduction_len = nd > 0 ? sh[nd - 1] : 0;
            else if (n->op->kind == NV_OPK_REDUCE && nd > 0) {
                int ax = n->attrs.axis < 0 ? n->attrs.axis + nd : n->attrs.axis;
                rq->reduction_len = sh[ax >= 0 && ax < nd ? ax : nd - 1];
            }
            return;
        }
    }
}

static int make_inputs(fcase *c)
{
    const nv_graph *g = &c->g;
    for (int i = 0; i < g->n_inputs; i++) {
        const nv_graph_input *gi = &g->inputs[i];
        c->in[i] = nv_tensor_new(gi->dtype, gi->ndim, gi->shape);
        if (!c->in[i])
            return -ENOMEM;
        if (c->j->given) {
            const nv_tensor *t = c->j->given[i];
            if (!t || t->dtype != gi->dtype || t->numel != gi->numel)
                return -EINVAL;
            memcpy(c->in[i]->data, t->data, (size_t)gi->numel * sizeof(double));
        } else if (gi->has_value) {
            double v = nv_dtype_round(gi->dtype, gi->value, &NV_ROUND_DEFAULT, 0);
            for (int64_t k = 0; k < gi->numel; k++)
                c->in[i]->data[k] = v;
        } else {
            nv_input_request rq;
            input_request(c, i, &rq);
            int r = nv_inputs_generate(&rq, c->in[i]->data, gi->numel);
            if (r < 0)
                return r;
        }
        int r = nvw_view_from_tensor(c->in[i], &c->inv[i]);
        if (r < 0)
            return r;
        c->n_inv = i + 1;
    }
    return 0;
}

static void release(fcase *c, nv_tensor_view *v)
{
    if (v->data && c->j->b.table->release_tensor)
        c->j->b.table->release_tensor(c->ctx, v);
    v->data = NULL;
}

/* Node by node through forward: every intermediate stored in the node's dtype
 * by the device, exactly as op jobs run it. */
static int run_unfused(fcase *c)
{
    nvw_eager_fail f;
    int r = nvw_graph_eager(c->j->b.table, c->ctx, &c->g, c->inv, c->unf, &f);
    if (r != 1)
        return r;
    const char *v, *cls;
    char msg[1024];
    nvw_eager_verdict(&c->g, &f, "unfused", "output dtype or shape differs from the graph's", &v,
                      &cls, msg, sizeof msg);
    r = fused_verdict(c, v, cls, "%s", msg);
    return r < 0 ? r : 1;
}

/* The graph entry with capture: outputs, then every node's held value. */
static int run_fused(fcase *c)
{
    const nv_graph *g = &c->g;
    int nout = g->n_outputs + g->n_nodes;
    nv_tensor_view *v = calloc((size_t)nout, sizeof *v);
    if (!v)
        return -ENOMEM;
    nv_graph_call call = {.graph_json = c->j->s->graph_text,
                          .capture = 1,
                          .n_inputs = g->n_inputs,
                          .inputs = c->inv,
                          .n_outputs = nout,
                          .outputs = v};
    char err[FUSED_ERRLEN] = "";
    int r = 0, br = c->j->b.table->graph(c->ctx, &call, err, sizeof err);
    if (br != NV_OK) {
        r = fused_verdict(c, "error", "backend_error",
                          "fused execution: the backend's graph entry returned %d: '%s'", br, err);
        r = r < 0 ? r : 1;
    }
    for (int i = 0; r == 0 && i < nout; i++) {
        int k = i < g->n_outputs ? g->outputs[i] : i - g->n_outputs;
        const nv_graph_node *n = &g->nodes[k];
        nv_dtype want = i < g->n_outputs ? n->dtype : (nv_dtype)v[i].dtype;
        if (!nv_dtype_get(want) || !nvw_view_fits(&v[i], want, n)) {
            r = fused_verdict(c, "failed", "bad_output",
                              "fused %s of node '%s': no data, or dtype or shape differs from the "
                              "graph's",
                              i < g->n_outputs ? "output" : "capture", n->name);
            r = r < 0 ? r : 1;
            break;
        }
        nv_tensor *t = nvw_tensor_from_view(&v[i], false);
        if (!t) {
            r = -ENOMEM;
            break;
        }
        if (i < g->n_outputs)
            c->fout[k] = t;
        else
            c->fus[k] = t;
    }
    for (int i = 0; br == NV_OK && i < nout; i++)
        release(c, &v[i]);
    free(v);
    return r;
}

static int alloc_arrays(fcase *c)
{
    size_t n = (size_t)c->g.n_nodes;
    c->ref = calloc(n, sizeof *c->ref);
    c->abs = calloc(n, sizeof *c->abs);
    c->unf = calloc(n, sizeof *c->unf);
    c->fus = calloc(n, sizeof *c->fus);
    c->fout = calloc(n, sizeof *c->fout);
    c->res = calloc(n, sizeof *c->res);
    return c->ref && c->abs && c->unf && c->fus && c->fout && c->res ? 0 : -ENOMEM;
}

static int run_body(fcase *c)
{
    int r = nvw_case_graph(c->j->s->graph, c->dt, &c->g);
    if (r == 0 && c->j->s->n_dtypes == 0 &&
        json_object_set_new(c->cj, "dtype",
                            json_string(nv_dtype_name(c->g.nodes[c->g.outputs[0]].dtype))))
        return -ENOMEM;
    if (r < 0)
        return r == -ENOMEM ? r
                            : fused_verdict(c, "error", "inputs",
                                            "the graph does not "
                                            "infer for dtype '%s'",
                                            nv_dtype_name(c->dt));
    if ((r = alloc_arrays(c)) < 0)
        return r;
    if ((r = make_inputs(c)) < 0)
        return r == -ENOMEM ? r
                            : fused_verdict(c, "error", "inputs",
                                            "could not make the "
                                            "inputs of this case (%d)",
                                            r);
    double t0 = now_ms();
    char err[FUSED_ERRLEN] = "";
    r = nv_graph_reference(&c->g, (const nv_tensor *const *)c->in, c->ref, c->abs, err, sizeof err);
    c->t_ref = now_ms() - t0;
    if (r == -ENOMEM || r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0)
        return fused_verdict(c, "error", "reference", "%s", err);
    t0 = now_ms();
    r = run_unfused(c);
    c->t_unf = now_ms() - t0;
    if (r != 0)
        return r < 0 ? r : 0;
    t0 = now_ms();
    r = run_fused(c);
    c->t_fus = now_ms() - t0;
    if (r != 0)
        return r < 0 ? r : 0;
    t0 = now_ms();
    r = fused_compare(c);
    c->t_cmp = now_ms() - t0;
    return r;
}

static void free_case(fcase *c)
{
    for (int i = 0; i < c->n_inv; i++)
        nvw_view_free(&c->inv[i]);
    for (int i = 0; i < c->g.n_inputs; i++)
        nv_tensor_free(c->in[i]);
    for (int k = 0; c->ref && k < c->g.n_nodes; k++) {
        nv_tensor_free(c->ref[k]);
        nv_tensor_free(c->abs[k]);
        nv_tensor_free(c->unf[k]);
        nv_tensor_free(c->fus[k]);
        nv_tensor_free(c->fout[k]);
    }
    free(c->ref);
    free(c->abs);
    free(c->unf);
    free(c->fus);
    free(c->fout);
    free(c->res);
    free(c->g.nodes);
}

json_t *nvw_fused_case(fjob *j, void *ctx, int64_t i)
{
    fcase c;
    memset(&c, 0, sizeof c);
    c.j = j;
    c.ctx = ctx;
    c.index = i;
    nv_fusedspec_case(j->s, i, &c.dt, &c.cls, &c.sample);
    c.cj = json_pack("{sI ss ss ss sI sI ss}", "index", (json_int_t)i, "op", "fused", "dtype",
                     nv_dtype_name(c.dt), "input", nv_input_class_name(c.cls), "sample",
                     (json_int_t)c.sample, "seed", (json_int_t)j->s->seed, "graph_hash",
                     j->graph_hash);
    if (!c.cj)
        return NULL;
    int r = run_body(&c);
    if (r == 0 && !json_object_get(c.cj, "verdict"))
        r = fused_verdict(&c, "error", "internal", "the case ended without a verdict");
    if (r == 0 && fused_timing(&c) < 0)
        r = -ENOMEM;
    if (r < 0 && fused_verdict(&c, "error", "out_of_memory", "out of memory") < 0) {
        json_decref(c.cj);
        c.cj = NULL;
    }
    free_case(&c);
    return c.cj;
}
