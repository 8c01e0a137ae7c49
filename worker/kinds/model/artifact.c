/* The artifact of a failed model case (docs/MODEL.md "Localization"): the
 * first divergent node as an op case. A model artifact is an op artifact
 * (docs/ARTIFACTS.md): its spec an op job of the node's op, attributes and
 * input shapes, its tensors the node's inputs as the device saw them (graph
 * inputs, or the device's own outputs of the nodes it reads) and the device's
 * output, its tolerance and failure class the op's shipped default and what
 * that tolerance says of the output. So the op kind's gate, minimizer, replay
 * and `numval-worker repro` take it as they take an op failure, and a model
 * failure ends as a permanent suite case of one op. The manifest's "model"
 * object says where the op came from (job, case, layer, node). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/compare.h"
#include "core/ops/catalog.h"
#include "core/ref/reference.h"
#include "model_internal.h"

/* The op job of node k: its op and attrs, per-input shapes, the first float
 * input's dtype (the case dtype the op kind derives the output dtype from). */
static json_t *op_spec(const mcase *c, int k, nv_tensor *const *in, nv_dtype *ret_dt)
{
    const nv_graph_node *n = &c->g.nodes[k];
    json_t *attrs = json_loads(n->attrs_json, 0, NULL);
    json_t *shapes = json_array(), *one = json_array();
    nv_dtype dt = n->dtype;
    bool have = false;
    for (int i = 0; one && i < n->n_in; i++) {
        json_t *s = json_array();
        for (int d = 0; s && d < in[i]->ndim; d++)
            json_array_append_new(s, json_integer(in[i]->shape[d]));
        if (!s || json_array_append_new(one, s)) {
            json_decref(one);
            one = NULL;
        }
        if (!have && !n->op->inputs[i].is_index) {
            dt = in[i]->dtype;
            have = true;
        }
    }
    json_t *spec = NULL;
    if (attrs && shapes && one && !json_array_append_new(shapes, one))
        spec = json_pack("{s:s, s:s, s:O, s:[s], s:O, s:[s], s:I}", "kind", "op", "op", n->op->name,
                         "attrs", attrs, "dtypes", nv_dtype_name(dt), "shapes", shapes, "inputs",
                         "normal", "seed", (json_int_t)c->j->s->seed);
    else
        json_decref(one);
    json_decref(attrs);
    json_decref(shapes);
    *ret_dt = dt;
    return spec;
}

/* The op kind's judgement of the device output got on inputs in[] (as its
 * probe judges it, worker/kinds/op/repro_probe.c): the shipped default
 * tolerance in the output dtype, the declared accumulator for a reduction or
 * matmul. *ret_cls "" when within the tolerance. 0, NV_E_* or -ENOMEM. */
int model_judge_op(const mcase *c, int k, nv_tensor *const *in, nv_dtype dt, nv_tolerance *tol,
                   nv_compare_result *cmp, char cls[48])
{
    const nv_graph_node *n = &c->g.nodes[k];
    const nv_tensor *got = c->dev[k];
    cls[0] = 0;
    memset(tol, 0, sizeof *tol);
    if (nv_op_default_tolerance(n->op, &n->attrs, n->dtype, tol) < 0)
        return NV_E_INVALID;
    if (!tol->source[0])
        snprintf(tol->source, sizeof tol->source, "default");
    nv_tensor *hi = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    nv_tensor *lo = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    nv_tensor *abs = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    nv_tensor *aexp = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    nv_tensor *peak = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    int r = hi && lo && abs && aexp && peak ? 0 : -ENOMEM;
    nv_ref_out ro = {.hi = hi, .lo = lo, .abs_sum = abs, .abs_exp = aexp, .peak = peak};
    if (r == 0)
        r = nv_op_reference_ex(n->op, &n->attrs, n->n_in, (const nv_tensor *const *)in, &ro);
    if (r == 0) {
        nv_compare_input ci = {
            .dtype = n->dtype,
            .n = got->numel,
            .got = got->data,
            .exact = hi->data,
            .exact_lo = lo->data,
            .abs_sum = abs->data,
            .reduction_len =
                nv_op_reduction_len(n->op, &n->attrs, n->n_in, (const nv_tensor *const *)in),
            .zero_sign = nv_op_zero_sign_judged(n->op),
            .abs_exp = aexp->data,
        };
        if (n->op->kind == NV_OPK_REDUCE || n->op->kind == NV_OPK_MATMUL) {
            const json_t *contract = json_object_get(c->j->b.describe, "contract");
            const json_t *entry = json_object_get(contract, nv_dtype_name(dt));
            if (!entry)
                entry = json_object_get(contract, nv_dtype_name(n->dtype));
            bool declared;
            nv_op_accumulator(n->op, &n->attrs, n->dtype, entry, &ci.acc_dtype, &ci.acc_range,
                              &declared);
            ci.peak = peak->data;
        }
        r = nv_compare(&ci, tol, cmp) < 0 ? NV_E_INVALID : 0;
        if (r == 0 && (cmp->failure != NV_FAIL_NONE || cmp->mismatches > 0))
            snprintf(cls, 48, "%s", nv_failure_class_name(cmp->failure));
    }
    nv_tensor_free(hi);
    nv_tensor_free(lo);
    nv_tensor_free(abs);
    nv_tensor_free(aexp);
    nv_tensor_free(peak);
    return r;
}

json_t *model_tolerance_json(const nv_tolerance *tol)
{
    json_t *t = nv_tolerance_to_json(tol);
    if (t && (json_object_set_new(t, "version", json_integer(tol->version)) ||
              json_object_set_new(t, "source", json_string(tol->source)))) {
        json_decref(t);
        return NULL;
    }
    return t;
}

/* The op case's manifest (the keys nvw_repro_from_artifact reads, as the op
 * kind writes them) and where it came from. */
static json_t *manifest(const mcase *c, int k, json_t *spec, nv_dtype dt, const nv_tolerance *tol,
                        const nv_compare_result *cmp, const char *cls)
{
    const nv_graph_node *n = &c->g.nodes[k];
    const json_t *d = c->j->b.describe;
    json_t *tj = model_tolerance_json(tol), *shape = json_array();
    for (int i = 0; shape && i < n->ndim; i++)
        json_array_append_new(shape, json_integer(n->shape[i]));
    json_t *cs =
        tj && shape
            ? json_pack("{s:i, s:s, s:s, s:s, s:O, s:s, s:s, s:i, s:I, s:O, s:s, s:I}", "index", 0,
                        "op", n->op->name, "dtype", nv_dtype_name(dt), "out_dtype",
                        nv_dtype_name(n->dtype), "shape", shape, "layout", "contiguous", "input",
                        "normal", "sample", 0, "seed", (json_int_t)c->j->s->seed, "tolerance", tj,
                        "failure_class", cls, "mismatches", (json_int_t)cmp->mismatches)
            : NULL;
    if (cs)
        json_object_set_new(cs, "max_ulp", nvw_json_num(cmp->max_ulp));
    const json_t *name = json_object_get(c->j->b.spec_json, "name");
    const json_t *build = json_object_get(c->j->b.spec_json, "build");
    json_t *m = NULL;
    if (cs)
        m = json_pack("{s:O, s:O, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O}", "spec", spec, "case",
                      cs, "backend", c->j->b.backend_spec, "device", json_object_get(d, "device"),
                      "mode", json_object_get(d, "mode"), "contract",
                      json_object_get(d, "contract"), "backend_build", json_object_get(d, "build"),
                      "build", build ? build : json_object_get(d, "build"), "attrs",
                      json_object_get(spec, "attrs"));
    static const char *const from_case[] = {
        "index",  "op",   "dtype",     "out_dtype", "shape",      "layout",        "input",
        "sample", "seed", "tolerance", "max_ulp",   "mismatches", "failure_class", NULL};
    for (int i = 0; m && from_case[i]; i++)
        json_object_set(m, from_case[i], json_object_get(cs, from_case[i]));
    json_t *origin =
        m ? json_pack("{s:O?, s:s, s:I, s:s, s:s, s:s, s:s}", "job", name, "graph_hash",
                      c->j->graph_hash, "case_index", (json_int_t)c->index, "case_dtype",
                      nv_dtype_name(c->dt), "layer", c->j->s->layers[c->j->s->node_layer[k]].name,
                      "node", n->name, "execution", "eager")
          : NULL;
    if (m && (!origin || json_object_set_new(m, "model", origin))) {
        json_decref(m);
        m = NULL;
    }
    json_decref(tj);
    json_decref(shape);
    json_decref(cs);
    return m;
}

int model_localized(mcase *c, const char *state, const char *why)
{
    json_t *o = json_pack("{s:s, s:s}", "state", state, "reason", why);
    return !o || json_object_set_new(c->cj, "localized", o) ? -ENOMEM : 0;
}

int model_report_failure(mcase *c, int k)
{
    const nvw_run_opts *o = c->j->b.opts;
    if (!o || !o->on_failure)
        return 0;
    const nv_graph_node *n = &c->g.nodes[k];
    nv_tensor *in[NV_GRAPH_NODE_INPUTS];
    for (int i = 0; i < n->n_in; i++)
        in[i] = n->in[i] < 0 ? c->in[-1 - n->in[i]] : c->dev[n->in[i]];
    nv_dtype dt;
    json_t *spec = op_spec(c, k, in, &dt);
    if (!spec)
        return -ENOMEM;
    nv_tolerance tol;
    nv_compare_result cmp;
    char cls[48];
    int r = model_judge_op(c, k, in, dt, &tol, &cmp, cls);
    if (r == 0 && !cls[0] && !c->j->s->graph_exec) {
        json_decref(spec);
        return model_composition_artifact(c, k);
    }
    if (r < 0 || !cls[0]) {
        json_decref(spec);
        if (r == -ENOMEM || r == NV_E_NOMEM)
            return -ENOMEM;
        return model_localized(
            c, "none",
            r < 0 ? "the op has no default tolerance or reference for these inputs"
                  : "graph execution: the op is within its default tolerance on the values "
                    "the backend held; a composition case is made in eager execution only (a "
                    "subgraph re-run as its own region does not hold the values the model's "
                    "region held)");
    }
    if (c->j->s->graph_exec) {
        json_decref(spec);
        return model_graph_artifact(c, k, cls);
    }
    json_t *m = manifest(c, k, spec, dt, &tol, &cmp, cls);
    json_decref(spec);
    if (!m)
        return -ENOMEM;
    const char *names[NV_GRAPH_NODE_INPUTS + 1];
    const nv_tensor *ts[NV_GRAPH_NODE_INPUTS + 1];
    char buf[NV_GRAPH_NODE_INPUTS][24];
    for (int i = 0; i < n->n_in; i++) {
        snprintf(buf[i], sizeof buf[i], "input:%d", i);
        names[i] = buf[i];
        ts[i] = in[i];
    }
    names[n->n_in] = "output:0";
    ts[n->n_in] = c->dev[k];
    r = nvw_store_failure(&c->j->b, c->cj, (int)c->index, m, n->n_in + 1, names, ts);
    json_decref(m);
    if (r > 0)
        r = model_localized(c, "op_case",
                            "the first divergent op alone, on its inputs as the "
                            "device saw them, fails its default tolerance");
    return r;
}
