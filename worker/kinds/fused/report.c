/* Layer-by-layer comparison of a fused case and its JSON.
 *
 * Judgement (the verdict): each node's fused value against the node's reference
 * evaluated on the values the fused execution itself fed it (its captured
 * upstream values; graph inputs are exact), so a node is judged on its own error
 * and errors made upstream are not charged to it again. The tolerance is the
 * job's for the node, else the op's default in the dtype the value must be held
 * in: a graph output in its dtype; an intermediate in the wider of its dtype and
 * the job's "intermediate_dtype" (fp32 by default), the precision a fused region
 * promises to keep (a cast node in its target). The first node in topological
 * order outside its tolerance, all nodes it reads being within theirs, is the
 * first divergent node.
 *
 * Report (along the way): each node's end-to-end error against the graph
 * reference in the node's dtype, for the fused and the unfused execution, so
 * fused error <= unfused error shows where fusion keeps more precision. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/reference.h"
#include "fused_internal.h"

int fused_verdict(fcase *c, const char *v, const char *cls, const char *fmt, ...)
{
    int r = json_object_set_new(c->cj, "verdict", json_string(v));
    if (cls)
        r |= json_object_set_new(c->cj, "failure_class", json_string(cls));
    if (fmt) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r |= json_object_set_new(c->cj, "error", json_string(msg));
    }
    return r ? -ENOMEM : 0;
}

static json_t *num(double x)
{
    if (isnan(x))
        return json_string("nan");
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

/* The dtype node k's fused value is judged in (see the top of this file). */
static nv_dtype judge_dtype(const fcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    if (n->is_output || n->op->kind == NV_OPK_CAST)
        return n->dtype;
    nv_dtype id = c->j->s->intermediate;
    return nv_dtype_get(id)->mant_bits > nv_dtype_get(n->dtype)->mant_bits ? id : n->dtype;
}

/* A node judged in dtype dt that reads values held wider than dt (a graph
 * output fed by fp32 intermediates) is computed in the wider compute dtype and
 * rounded again to dt: Figueroa's theorem (double rounding is innocuous for
 * +-x/ and sqrt, p' >= 2p + 2; "When is double rounding innocuous?", 1995) needs
 * the operands in the narrow format, so the shipped 0.5 ulp gets the first
 * rounding's half ulp of the wider dtype on top, in ulps of dt. */
static double double_rounding_ulps(const fcase *c, int k, nv_dtype dt)
{
    const nv_graph_node *n = &c->g.nodes[k];
    int widest = -1;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && c->fus[n->in[i]])
            if (nv_dtype_get(c->fus[n->in[i]]->dtype)->mant_bits > widest)
                widest = nv_dtype_get(c->fus[n->in[i]]->dtype)->mant_bits;
    int mb = nv_dtype_get(dt)->mant_bits;
    /* Half an ulp of the wider dtype, doubled: the two roundings may straddle a
     * binade boundary, where the wide ulp is twice the narrow one's share. */
    return widest > mb ? ldexp(1.0, mb - widest) : 0;
}

static int node_tolerance(fcase *c, int k, nv_dtype dt, bool job, nv_tolerance *ret)
{
    const nv_graph_node *n = &c->g.nodes[k];
    const nv_tolerance *t = job ? nv_fusedspec_node_tolerance(c->j->s, k) : NULL;
    if (t) {
        *ret = *t;
        return 0;
    }
    int r = nv_op_default_tolerance(n->op, &n->attrs, dt, ret);
    double extra = job && ret->metric == NV_TOL_ULP ? double_rounding_ulps(c, k, dt) : 0;
    if (r < 0 || extra == 0)
        return r;
    ret->max_ulp += extra;
    size_t len = strlen(ret->reason);
    snprintf(ret->reason + len, sizeof ret->reason - len,
             "; plus %g ulp: inputs held wider than %s inside the fused region, computed there "
             "and rounded again (double rounding; Figueroa 1995 covers only narrow operands)",
             extra, nv_dtype_name(dt));
    return 0;
}

/* The accumulator a reduction or matmul node is judged by under the
 * intermediate-overflow rule (compare.h, docs/TOLERANCES.md), as for op jobs:
 * describe()'s contract entry of the node's input dtype, else of its dtype. */
typedef struct node_acc {
    const double *peak; /* NULL: no accumulation, no rule */
    nv_dtype dtype, range;
} node_acc;

static void node_accumulator(const fcase *c, int k, const nv_tensor *peak, node_acc *ret)
{
    const nv_graph_node *n = &c->g.nodes[k];
    ret->peak = peak ? peak->data : NULL;
    const json_t *contract = json_object_get(c->j->b.describe, "contract");
    nv_dtype in_dt = n->n_in > 0 && n->in[0] >= 0 ? c->g.nodes[n->in[0]].dtype
                     : n->n_in > 0                ? c->g.inputs[-1 - n->in[0]].dtype
                                                  : n->dtype;
    const json_t *entry = json_object_get(contract, nv_dtype_name(in_dt));
    if (!entry)
        entry = json_object_get(contract, nv_dtype_name(n->dtype));
    nv_op_accumulator(n->op, &n->attrs, n->dtype, entry, &ret->dtype, &ret->range, NULL);
}

static int compare_one(fcase *c, int k, nv_dtype dt, const nv_tolerance *tol, const nv_tensor *got,
                       const nv_tensor *hi_wide, const nv_tensor *abs, const node_acc *acc,
                       fnode_cmp *ret)
{
    const nv_graph_node *n = &c->g.nodes[k];
    /* The node's reference is computed for fp32 (or fp64): in dt, values beyond
     * dt's range are what a correct device returns there (Inf for fp16, ...). */
    nv_tensor *hi = nv_tensor_contiguous(hi_wide);
    if (!hi)
        return -ENOMEM;
    nv_ref_to_dtype(hi, NULL, dt);
    nv_compare_input ci = {
        .dtype = dt,
        .n = n->numel,
        .got = got->data,
        .exact = hi->data,
        .exact_lo = NULL,
        .abs_sum = abs ? abs->data : NULL,
        .reduction_len = nv_graph_reduction_len(&c->g, k),
    };
    if (acc && acc->peak) {
        ci.peak = acc->peak;
        ci.acc_dtype = acc->dtype;
        ci.acc_range = acc->range;
    }
    int r = nv_compare(&ci, tol, &ret->cmp);
    nv_tensor_free(hi);
    ret->ok = r == 0 && ret->cmp.failure == NV_FAIL_NONE && ret->cmp.mismatches == 0;
    return r;
}

static json_t *cmp_json(const nv_compare_result *m)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I}", "max_ulp", num(m->max_ulp), "mean_ulp",
                     num(m->mean_ulp), "p99_ulp", num(m->p99_ulp), "max_abs", num(m->max_abs),
                     "max_rel", num(m->max_rel), "mismatches", (json_int_t)m->mismatches);
}

static json_t *fused_json(const fnode_res *r, nv_dtype held)
{
    json_t *local = cmp_json(&r->fused.cmp);
    if (local) {
        json_object_set_new(local, "dtype", json_string(nv_dtype_name(r->judge)));
        json_object_set_new(local, "headroom", num(r->fused.cmp.headroom));
        json_object_set_new(local, "within_tolerance", json_boolean(r->fused.ok));
        /* Outputs whose accumulator demand exceeds the declared accumulator's
         * range, counted apart as for op jobs (docs/TOLERANCES.md). */
        if (r->fused.cmp.intermediate_overflows > 0)
            json_object_set_new(local, "intermediate_overflows",
                                json_integer(r->fused.cmp.intermediate_overflows));
    }
    return json_pack("{s:s, s:o, s:o}", "held_dtype", nv_dtype_name(held), "local", local,
                     "end_to_end", cmp_json(&r->e2e_fused.cmp));
}

static json_t *tol_json(const nv_tolerance *t)
{
    json_t *j = nv_tolerance_to_json(t);
    if (j)
        json_object_set_new(j, "source", json_string(t->source[0] ? t->source : "default"));
    return j;
}

static json_t *node_json(fcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    const fnode_res *res = &c->res[k];
    json_t *shape = json_array(), *ins = json_array();
    for (int d = 0; shape && d < n->ndim; d++)
        json_array_append_new(shape, json_integer(n->shape[d]));
    for (int i = 0; ins && i < n->n_in; i++)
        json_array_append_new(ins, json_string(n->in[i] < 0 ? c->g.inputs[-1 - n->in[i]].name
                                                            : c->g.nodes[n->in[i]].name));
    const char *state = res->fused.ok    ? "within_tolerance"
                        : res->inputs_ok ? "diverged"
                                         : "diverged_after_input";
    nv_dtype held = c->fus[k] ? c->fus[k]->dtype : n->dtype;
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:o, s:o, s:{s:o}, s:s}", "name", n->name,
                     "op", n->op->name, "dtype", nv_dtype_name(n->dtype), "shape", shape, "inputs",
                     ins, "output", n->is_output, "tolerance", tol_json(&res->tol), "fused",
                     fused_json(res, held), "unfused", "end_to_end",
                     cmp_json(&res->e2e_unfused.cmp), "state", state);
}

static json_t *mismatches_json(const fcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    const nv_compare_result *cmp = &c->res[k].fused.cmp;
    json_t *a = json_array();
    for (int m = 0; a && m < cmp->n_first && m < NV_COMPARE_FIRST; m++) {
        const nv_mismatch *mm = &cmp->first[m];
        json_t *idx = json_array();
        int64_t rest = mm->index, id[NV_MAX_DIMS];
        for (int d = n->ndim - 1; d >= 0; d--) {
            id[d] = rest % n->shape[d];
            rest /= n->shape[d];
        }
        for (int d = 0; idx && d < n->ndim; d++)
            json_array_append_new(idx, json_integer(id[d]));
        json_array_append_new(
            a, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "node", n->name, "index", idx,
                         "got", num(mm->got), "exact", num(mm->exact), "ulp_error",
                         num(mm->ulp_err), "abs_error", num(mm->abs_err), "allowed",
                         num(mm->allowed), "kind", nv_failure_class_name(mm->kind)));
    }
    return a;
}

/* Worst fused and unfused errors over the graph outputs; "fused_le_unfused"
 * compares the largest absolute errors (fusion that keeps intermediates wider
 * than their dtype should not lose to the node-by-node execution). */
static int summary(fcase *c, int first)
{
    double fu = 0, un = 0, fulp = 0, frel = 0;
    int64_t mism = 0;
    for (int o = 0; o < c->g.n_outputs; o++) {
        const fnode_res *r = &c->res[c->g.outputs[o]];
        fu = fmax(fu, r->e2e_fused.cmp.max_abs);
        un = fmax(un, r->e2e_unfused.cmp.max_abs);
        fulp = fmax(fulp, r->e2e_fused.cmp.max_ulp);
        frel = fmax(frel, r->e2e_fused.cmp.max_rel);
        mism += r->fused.cmp.mismatches;
    }
    int k = first >= 0 ? first : c->g.outputs[0];
    int e = json_object_set_new(c->cj, "max_ulp", num(fulp)) |
            json_object_set_new(c->cj, "max_abs", num(fu)) |
            json_object_set_new(c->cj, "max_rel", num(frel)) |
            json_object_set_new(c->cj, "mismatches", json_integer(mism)) |
            json_object_set_new(c->cj, "unfused_max_abs", num(un)) |
            json_object_set_new(c->cj, "fused_le_unfused", json_boolean(fu <= un)) |
            json_object_set_new(c->cj, "tolerance", tol_json(&c->res[k].tol));
    return e ? -ENOMEM : 0;
}

static int first_divergent(fcase *c, int first)
{
    json_t *fd = json_null();
    if (first >= 0) {
        const nv_graph_node *n = &c->g.nodes[first];
        const fnode_res *r = &c->res[first];
        fd = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:o, s:o}", "node", n->name, "op",
                       n->op->name, "execution", "fused", "dtype", nv_dtype_name(r->judge),
                       "max_ulp", num(r->fused.cmp.max_ulp), "max_abs", num(r->fused.cmp.max_abs),
                       "headroom", num(r->fused.cmp.headroom), "mismatches",
                       (json_int_t)r->fused.cmp.mismatches, "end_to_end_max_ulp",
                       num(r->e2e_fused.cmp.max_ulp), "unfused_end_to_end_max_ulp",
                       num(r->e2e_unfused.cmp.max_ulp));
    }
    if (!fd || json_object_set_new(c->cj, "first_divergent", fd))
        return -ENOMEM;
    if (first >= 0 && json_object_set_new(c->cj, "first_mismatches", mismatches_json(c, first)))
        return -ENOMEM;
    return 0;
}

/* on_failure: the graph, the inputs and every node's fused capture and unfused
 * output, serially under the job lock. */
static int report_failure(fcase *c)
{
    fjob *j = c->j;
    if (!j->b.opts || !j->b.opts->on_failure)
        return 0;
    int cap = c->g.n_inputs + 2 * c->g.n_nodes;
    const char **names = calloc((size_t)cap, sizeof *names);
    const nv_tensor **ts = calloc((size_t)cap, sizeof *ts);
    char(*buf)[NV_GRAPH_MAX_NAME + 16] = calloc((size_t)cap, sizeof *buf);
    json_t *m = NULL;
    int n = 0, r = -ENOMEM;
    if (!names || !ts || !buf)
        goto out;
    for (int i = 0; i < c->g.n_inputs; i++, n++) {
        snprintf(buf[n], sizeof buf[n], "input:%s", c->g.inputs[i].name);
        ts[n] = c->in[i];
    }
    for (int k = 0; k < c->g.n_nodes; k++) {
        snprintf(buf[n], sizeof buf[n], "fused:%s", c->g.nodes[k].name);
        ts[n++] = c->g.nodes[k].is_output ? c->fout[k] : c->fus[k];
        snprintf(buf[n], sizeof buf[n], "unfused:%s", c->g.nodes[k].name);
        ts[n++] = c->unf[k];
    }
    for (int i = 0; i < n; i++)
        names[i] = buf[i];
    m = json_pack(
        "{s:O, s:O, s:O?, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "spec",
        j->b.spec_json, "case", c->cj, "graph", json_object_get(j->b.spec_json, "graph"),
        "graph_hash", j->graph_hash, "backend", j->b.backend_spec, "device",
        json_object_get(j->b.describe, "device"), "mode", json_object_get(j->b.describe, "mode"),
        "contract", json_object_get(j->b.describe, "contract"), "backend_build",
        json_object_get(j->b.describe, "build"), "tolerance", json_object_get(c->cj, "tolerance"),
        "failure_class", json_object_get(c->cj, "failure_class"), "first_divergent",
        json_object_get(c->cj, "first_divergent"), "first_mismatches",
        json_object_get(c->cj, "first_mismatches"));
    if (!m)
        goto out;
    nvw_store_failure(&j->b, c->cj, (int)c->index, m, n, names, ts);
    r = 0;
out:
    json_decref(m);
    free(names);
    free(ts);
    free(buf);
    return r;
}

/* Node k's local reference: the graph reference when it reads only graph
 * inputs, else the node's reference on the fused capture of its inputs; for a
 * reduction or matmul node always computed here, with its accumulator demand
 * in *peak (else NULL). */
static int local_reference(fcase *c, int k, nv_tensor **hi, nv_tensor **abs, nv_tensor **peak,
                           bool *owned)
{
    const nv_graph_node *n = &c->g.nodes[k];
    bool reads_nodes = false;
    for (int i = 0; i < n->n_in; i++)
        reads_nodes = reads_nodes || n->in[i] >= 0;
    bool accumulates = nv_op_accumulates(n->op);
    *owned = reads_nodes || accumulates;
    *peak = NULL;
    if (!*owned) {
        *hi = c->ref[k];
        *abs = c->abs[k];
        return 0;
    }
    char err[FUSED_ERRLEN];
    return nv_graph_node_reference_ex(&c->g, k, (const nv_tensor *const *)c->in, c->fus, hi, abs,
                                      accumulates ? peak : NULL, err, sizeof err);
}

static int compare_node(fcase *c, int k)
{
    const nv_graph_node *n = &c->g.nodes[k];
    fnode_res *res = &c->res[k];
    res->judge = judge_dtype(c, k);
    if (node_tolerance(c, k, res->judge, true, &res->tol) < 0 ||
        node_tolerance(c, k, n->dtype, false, &res->etol) < 0)
        return fused_verdict(c, "error", "no_tolerance",
                             "no tolerance for node '%s' (op '%s', "
                             "dtype '%s')",
                             n->name, n->op->name, nv_dtype_name(res->judge)) < 0
                   ? -ENOMEM
                   : 1;
    const nv_tensor *fv = n->is_output ? c->fout[k] : c->fus[k];
    nv_tensor *hi = NULL, *abs = NULL, *peak = NULL;
    bool owned;
    int r = local_reference(c, k, &hi, &abs, &peak, &owned);
    if (r == -ENOMEM || r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0)
        return fused_verdict(c, "error", "reference",
                             "the reference of node '%s' on the fused "
                             "inputs failed (%d)",
                             n->name, r) < 0
                   ? -ENOMEM
                   : 1;
    node_acc acc;
    node_accumulator(c, k, peak, &acc);
    r = compare_one(c, k, res->judge, &res->tol, fv, hi, abs, &acc, &res->fused);
    if (owned) {
        nv_tensor_free(hi);
        nv_tensor_free(abs);
        nv_tensor_free(peak);
    }
    /* End to end (reported): against the graph reference, without the rule. */
    if (r == 0)
        r = compare_one(c, k, n->dtype, &res->etol, fv, c->ref[k], c->abs[k], NULL,
                        &res->e2e_fused);
    if (r == 0)
        r = compare_one(c, k, n->dtype, &res->etol, c->unf[k], c->ref[k], c->abs[k], NULL,
                        &res->e2e_unfused);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return fused_verdict(c, "error", "bad_tolerance",
                             "the tolerance of node '%s' does "
                             "not apply to op '%s' (a 'bound' tolerance needs a reduction or "
                             "matmul)",
                             n->name, n->op->name) < 0
                   ? -ENOMEM
                   : 1;
    return 0;
}

static int compare_nodes(fcase *c, int *ret_first)
{
    *ret_first = -1;
    for (int k = 0; k < c->g.n_nodes; k++) {
        int r = compare_node(c, k);
        if (r != 0)
            return r;
        const nv_graph_node *n = &c->g.nodes[k];
        fnode_res *res = &c->res[k];
        res->inputs_ok = true;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !c->res[n->in[i]].fused.ok)
                res->inputs_ok = false;
        if (!res->fused.ok && res->inputs_ok && *ret_first < 0)
            *ret_first = k;
    }
    return 0;
}

/* Every node within its tolerance: the composition criterion decides. Its
 * first divergent node is the first graph output outside the band, judged in
 * its dtype (the signature's "dtype"), class out_of_band. */
static int composition_verdict(fcase *c)
{
    int k;
    int r = fused_composition(c, &k);
    if (r != 0)
        return r < 0 ? r : 0;
    if (k < 0)
        return fused_verdict(c, "passed", NULL, NULL);
    const nv_graph_node *n = &c->g.nodes[k];
    const json_t *outs = json_object_get(json_object_get(c->cj, "composition"), "outputs");
    const json_t *fig = NULL;
    for (size_t i = 0; i < json_array_size(outs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(outs, i), "node")), n->name))
            fig = json_array_get(outs, i);
    json_t *fd = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O?, s:O?}", "node", n->name, "op",
                           n->op->name, "execution",
                           c->j->s->composition_fused ? "fused" : "unfused", "dtype",
                           nv_dtype_name(n->dtype), "criterion", "composition", "e_dev",
                           json_object_get(fig, "e_dev"), "band", json_object_get(fig, "band"));
    if (!fd || json_object_set_new(c->cj, "first_divergent", fd) ||
        json_object_set_new(c->cj, "first_mismatches", json_array()))
        return -ENOMEM;
    r = fused_verdict(c, "failed", "out_of_band",
                      "composition: graph output '%s' (op '%s') has e_dev %.3g, outside the band "
                      "%.3g, while every node is within its own tolerance",
                      n->name, n->op->name, json_number_value(json_object_get(fig, "e_dev")),
                      json_number_value(json_object_get(fig, "band")));
    return r < 0 ? r : report_failure(c);
}

int fused_compare(fcase *c)
{
    int first;
    int r = compare_nodes(c, &first);
    if (r != 0)
        return r < 0 ? r : 0;
    json_t *nodes = json_array();
    if (!nodes || json_object_set_new(c->cj, "nodes", nodes))
        return -ENOMEM;
    for (int k = 0; k < c->g.n_nodes; k++) {
        json_t *nj = node_json(c, k);
        if (!nj || json_array_append_new(nodes, nj))
            return -ENOMEM;
    }
    if (summary(c, first) < 0 || first_divergent(c, first) < 0)
        return -ENOMEM;
    if (first < 0 && c->j->s->composition)
        return composition_verdict(c);
    if (first < 0)
        return fused_verdict(c, "passed", NULL, NULL);
    const nv_graph_node *n = &c->g.nodes[first];
    const fnode_res *res = &c->res[first];
    r = fused_verdict(c, "failed", nv_failure_class_name(res->fused.cmp.failure),
                      "first divergent node '%s' (op '%s'): the fused value is %.3g ulp (%s) "
                      "from the node's reference on its fused inputs, outside its tolerance "
                      "(headroom %.3g), while every node it reads was within tolerance",
                      n->name, n->op->name, res->fused.cmp.max_ulp, nv_dtype_name(res->judge),
                      res->fused.cmp.headroom);
    return r < 0 ? r : report_failure(c);
}

int fused_timing(fcase *c)
{
    return json_object_set_new(c->cj, "timing_ms",
                               json_pack("{s:f, s:f, s:f, s:f}", "reference", c->t_ref, "unfused",
                                         c->t_unf, "fused_capture", c->t_fus, "compare", c->t_cmp))
               ? -ENOMEM
               : 0;
}
