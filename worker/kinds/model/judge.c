/* The judgement of a model case (docs/MODEL.md "Judgement"): per node the
 * norm-wise errors of the device and of the model-dtype reference against the
 * fp64 reference and the band, per layer and across depth, the first divergent
 * layer and op with the op's local error; the logits criteria and the
 * classifier's accuracy gap are logits.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/opmeta.h"
#include "core/numerics/compare.h"
#include "core/ref/reference.h"
#include "model_internal.h"
#include "worker/runner/band.h"

double model_rel_err(const nv_tensor *x, const nv_tensor *r)
{
    return nvw_band_rel_err(x, r);
}

/* ULP statistics of x against r in dtype dt (nv_compare's, with no limit). */
static void ulp_stats(const nv_tensor *x, const nv_tensor *r, nv_dtype dt, mnode *m)
{
    nv_compare_input in = {.dtype = dt, .n = r->numel, .got = x->data, .exact = r->data};
    nv_tolerance tol = {.metric = NV_TOL_ULP, .max_ulp = INFINITY};
    nv_compare_result res;
    if (nv_compare(&in, &tol, &res) == 0) {
        m->ulp_max = res.max_ulp;
        m->ulp_mean = res.mean_ulp;
        m->ulp_p99 = res.p99_ulp;
    }
}

/* Per node: errors, the longest reduction feeding it, the band
 * (worker/runner/band.h). */
static int node_figures(mcase *c)
{
    const nv_graph *g = &c->g;
    nvw_band *b = calloc((size_t)g->n_nodes, sizeof *b);
    if (!b)
        return -ENOMEM;
    for (int k = 0; k < g->n_nodes; k++) {
        b[k].e_dev = model_rel_err(c->dev[k], c->r64[k]);
        b[k].e_dt = model_rel_err(c->rdt[k], c->r64[k]);
    }
    nvw_band_finish(g, MODEL_BAND_FACTOR, c->u_acc, b);
    for (int k = 0; k < g->n_nodes; k++) {
        mnode *m = &c->res[k];
        m->e_dev = b[k].e_dev;
        m->e_dt = b[k].e_dt;
        m->band = b[k].band;
        m->k_red = b[k].k_red;
        m->in_band = b[k].in_band;
        ulp_stats(c->dev[k], c->r64[k], g->nodes[k].dtype, m);
    }
    free(b);
    return 0;
}

static int set_num(json_t *o, const char *k, double v)
{
    return json_object_set_new(o, k, nvw_json_num(v));
}

static json_t *node_json(const mcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    const mnode *m = &c->res[k];
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "name", n->name, "layer",
                          c->j->s->layers[c->j->s->node_layer[k]].name, "op", n->op->name,
                          "dtype", nv_dtype_name(n->dtype), "reduction_len", (json_int_t)m->k_red,
                          "state", m->in_band ? "in_band" : "out_of_band");
    if (!o || set_num(o, "e_dev", m->e_dev) || set_num(o, "e_dtype_ref", m->e_dt) ||
        set_num(o, "band", m->band) || set_num(o, "ulp_max", m->ulp_max) ||
        set_num(o, "ulp_mean", m->ulp_mean) || set_num(o, "ulp_p99", m->ulp_p99)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The layers: the output node's errors, whether every node is in its band. */
static json_t *layers_json(const mcase *c)
{
    const nv_modelspec *s = c->j->s;
    json_t *arr = json_array();
    for (int l = 0; arr && l < s->n_layers; l++) {
        bool in = true;
        for (int k = 0; k < c->g.n_nodes; k++)
            in = in && (s->node_layer[k] != l || c->res[k].in_band);
        const mnode *m = &c->res[s->layers[l].output];
        json_t *o = json_pack("{s:s, s:s, s:b}", "name", s->layers[l].name, "output",
                              c->g.nodes[s->layers[l].output].name, "in_band", in);
        if (!o || set_num(o, "e_dev", m->e_dev) || set_num(o, "e_dtype_ref", m->e_dt) ||
            set_num(o, "band", m->band) || json_array_append_new(arr, o)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* Growth across depth: the first and last layer outputs' errors. */
static json_t *growth_json(const mcase *c)
{
    const nv_modelspec *s = c->j->s;
    const mnode *a = &c->res[s->layers[0].output];
    const mnode *b = &c->res[s->layers[s->n_layers - 1].output];
    json_t *o = json_object();
    if (!o || set_num(o, "e_dev_first", a->e_dev) || set_num(o, "e_dev_last", b->e_dev) ||
        set_num(o, "e_dtype_ref_first", a->e_dt) || set_num(o, "e_dtype_ref_last", b->e_dt) ||
        set_num(o, "e_dev_ratio", a->e_dev > 0 ? b->e_dev / a->e_dev : 0) ||
        set_num(o, "e_dtype_ref_ratio", a->e_dt > 0 ? b->e_dt / a->e_dt : 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The op's own error at node k: its reference recomputed from the device's
 * inputs, judged by the op's shipped default tolerance in the node dtype. */
static json_t *local_json(const mcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    nv_tensor *hi = NULL, *abs = NULL;
    char err[MODEL_ERRLEN] = "";
    int r = nv_graph_node_reference(&c->g, k, (const nv_tensor *const *)c->in, c->dev, &hi, &abs,
                                    err, sizeof err);
    if (r < 0)
        return json_pack("{s:s}", "error", err);
    nv_tolerance tol;
    json_t *o = NULL;
    if (nv_op_default_tolerance(n->op, &n->attrs, n->dtype, &tol) == 0) {
        nv_compare_input in = {.dtype = n->dtype,
                               .n = hi->numel,
                               .got = c->dev[k]->data,
                               .exact = hi->data,
                               .abs_sum = abs ? abs->data : NULL,
                               .reduction_len = nv_graph_reduction_len(&c->g, k)};
        nv_compare_result res;
        if (nv_compare(&in, &tol, &res) == 0) {
            o = json_pack("{s:s, s:I, s:o}", "verdict",
                          res.mismatches ? "outside_tolerance" : "within_tolerance", "mismatches",
                          (json_int_t)res.mismatches, "tolerance", nv_tolerance_to_json(&tol));
            if (o && (set_num(o, "max_ulp", res.max_ulp) || set_num(o, "headroom", res.headroom))) {
                json_decref(o);
                o = NULL;
            }
        }
    }
    nv_tensor_free(hi);
    nv_tensor_free(abs);
    return o ? o : json_pack("{s:s}", "error", "no default tolerance for the op in this dtype");
}

/* The first node outside its band, its layer and op, or null. */
static json_t *first_divergent(const mcase *c, int *ret_k)
{
    *ret_k = -1;
    for (int k = 0; k < c->g.n_nodes; k++) {
        if (c->res[k].in_band)
            continue;
        *ret_k = k;
        const nv_graph_node *n = &c->g.nodes[k];
        json_t *o = json_pack("{s:s, s:s, s:s, s:o*}", "layer",
                              c->j->s->layers[c->j->s->node_layer[k]].name, "node", n->name, "op",
                              n->op->name, "local", local_json(c, k));
        if (o && (set_num(o, "e_dev", c->res[k].e_dev) || set_num(o, "band", c->res[k].band))) {
            json_decref(o);
            o = NULL;
        }
        return o;
    }
    return json_null();
}

static int layer_criterion(json_t *crit, int n_out)
{
    json_t *o = json_pack(
        "{s:b, s:I, s:s, s:s}", "passed", n_out == 0, "out_of_band", (json_int_t)n_out,
        "tolerance", "e_dev <= 4 (e_dtype_ref + K u_acc) + u, every node",
        "reason",
        "a device of the model's dtype makes rounding errors of the model-dtype reference's size "
        "(factor 4: not the same errors), plus what accumulating K terms in the declared "
        "accumulator adds to first order (Higham 2002 eq. 4.4), plus one rounding (u)");
    return !o || json_object_set_new(crit, "layers", o) ? -ENOMEM : 0;
}

int model_judge(mcase *c)
{
    if (node_figures(c) < 0)
        return -ENOMEM;
    json_t *nodes = json_array(), *crit = json_object();
    int n_out = 0, k_first;
    for (int k = 0; nodes && k < c->g.n_nodes; k++) {
        n_out += !c->res[k].in_band;
        if (json_array_append_new(nodes, node_json(c, k))) {
            json_decref(nodes);
            nodes = NULL;
        }
    }
    json_t *fd = first_divergent(c, &k_first);
    int r = nodes && crit && fd ? 0 : -ENOMEM;
    if (r == 0 && (json_object_set_new(c->cj, "accumulator", json_string(c->acc_name)) ||
                   set_num(c->cj, "band_factor", MODEL_BAND_FACTOR) ||
                   json_object_set_new(c->cj, "nodes", nodes) ||
                   json_object_set_new(c->cj, "layers", layers_json(c)) ||
                   json_object_set_new(c->cj, "growth", growth_json(c)) ||
                   json_object_set_new(c->cj, "first_divergent", fd)))
        r = -ENOMEM;
    else if (r < 0) {
        json_decref(nodes);
        json_decref(fd);
    }
    nodes = fd = NULL;
    r = r ? r : layer_criterion(crit, n_out);
    const char *fail = n_out ? "out_of_band" : NULL;
    r = r ? r : model_logits_criteria(c, crit, &fail);
    if (r == 0 && json_object_set_new(c->cj, "criteria", crit))
        r = -ENOMEM;
    else if (r != 0)
        json_decref(crit);
    if (r != 0)
        return r < 0 ? r : 0; /* 1: the decode gave the case its verdict */
    if (!fail)
        return model_verdict(c, "passed", NULL, NULL);
    if (k_first >= 0) {
        r = model_verdict(c, "failed", fail,
                          "first divergent layer '%s', op '%s' (node '%s'): e_dev %.3g outside "
                          "the band %.3g",
                          c->j->s->layers[c->j->s->node_layer[k_first]].name,
                          c->g.nodes[k_first].op->name, c->g.nodes[k_first].name,
                          c->res[k_first].e_dev, c->res[k_first].band);
        return r ? r : model_report_failure(c, k_first);
    }
    return model_verdict(c, "failed", fail, "every layer is within its band; criterion '%s' failed",
                         fail);
}
