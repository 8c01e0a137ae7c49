/* emu's fused graph entry: runs a graph of catalog ops the way a fusing compiler
 * does. Inside the fused region a node's result is held in the intermediate
 * dtype (the accumulate dtype by default) and read by the next node without
 * being stored in the storage dtype; reductions run in the fused reduction order
 * and functions at the fused transcendental quality. Only the graph outputs are
 * rounded to their dtypes. A graph output no other node reads is computed
 * straight into its dtype (one rounding, as the op entry does); one that is also
 * read inside the region is held like any intermediate and rounded when written
 * out. With capture set, every node's held value follows the outputs, in
 * topological order, encoded in the dtype it was held in. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/graph.h"
#include "emu_internal.h"
#include "worker/backends/views/views.h"

static const char *const tr_names[] = {"exact", "libm", "fast"};

const char *emu_graph_mode_apply(struct emu_mode *m, const char *k, const char *v, bool *known)
{
    *known = true;
    if (!strcmp(k, "fused_intermediate")) {
        nv_dtype dt;
        const nv_dtype_info *di = nv_dtype_from_name(v, &dt) == 0 ? nv_dtype_get(dt) : NULL;
        if (!di || !di->is_float || dt == NV_DT_E8M0)
            return "a float dtype (fp32, bf16, ...)";
        m->fused.intermediate = dt;
        m->fused.intermediate_set = true;
        return NULL;
    }
    if (!strcmp(k, "fused_transcendental")) {
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, tr_names[i])) {
                m->fused.transcendental = i;
                m->fused.transcendental_set = true;
                return NULL;
            }
        return "exact, libm or fast";
    }
    if (!strcmp(k, "fused_accum_node")) {
        const char *colon = strrchr(v, ':');
        nv_dtype dt;
        const nv_dtype_info *di =
            colon && nv_dtype_from_name(colon + 1, &dt) == 0 ? nv_dtype_get(dt) : NULL;
        size_t len = colon ? (size_t)(colon - v) : 0;
        if (!di || !di->is_float || dt == NV_DT_E8M0 || len == 0 ||
            len >= sizeof m->fused.accum_node)
            return "NODE:DTYPE (a node name of at most 63 characters, a float dtype)";
        memcpy(m->fused.accum_node, v, len);
        m->fused.accum_node[len] = 0;
        m->fused.accum_node_dtype = dt;
        m->fused.accum_node_set = true;
        return NULL;
    }
    if (!strcmp(k, "fused_reduce")) {
        /* The reduce= parser on a scratch mode, so both knobs accept the same text. */
        char text[96], err[160];
        emu_mode tmp;
        snprintf(text, sizeof text, "reduce=%s", v);
        if (strlen(v) > 80 || emu_mode_parse(text, &tmp, err, sizeof err) != 0)
            return "sequential, pairwise, tree:K, splitk:K or random";
        m->fused.order = (int)tmp.order;
        m->fused.order_k = tmp.order_k;
        m->fused.order_set = true;
        return NULL;
    }
    *known = false;
    return NULL;
}

json_t *emu_graph_mode_json(const struct emu_mode *m)
{
    char order[48];
    emu_order o = m->fused.order_set ? (emu_order)m->fused.order : m->order;
    int ok = m->fused.order_set ? m->fused.order_k : m->order_k;
    if (o == EMU_ORDER_TREE || o == EMU_ORDER_SPLITK || o == EMU_ORDER_RANDTREE)
        snprintf(order, sizeof order, "%s:%d", emu_order_name(o), ok);
    else
        snprintf(order, sizeof order, "%s", emu_order_name(o));
    const char *inter = m->fused.intermediate_set ? nv_dtype_name(m->fused.intermediate)
                        : m->accum_set            ? nv_dtype_name(m->accum)
                                                  : "fp32 (the node dtype when wider)";
    int tr = m->fused.transcendental_set ? m->fused.transcendental : (int)m->transcendental;
    json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "intermediate", inter, "transcendental",
                          tr_names[tr], "reduce", order, "outputs", "rounded once to their dtype");
    if (r && m->fused.accum_node_set &&
        json_object_set_new(r, "accum_node",
                            json_pack("{s:s, s:s}", "node", m->fused.accum_node, "accum",
                                      nv_dtype_name(m->fused.accum_node_dtype)))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* ---- execution ---- */

static atomic_uint_fast64_t graph_calls;

typedef struct gstate {
    emu_ctx *ctx;
    emu_mode fm; /* the mode with the fused knobs applied */
    nv_graph *g;
    nv_tensor *in[NV_GRAPH_MAX_INPUTS];
    nv_tensor **held; /* per node */
} gstate;

static bool wider(nv_dtype a, nv_dtype b)
{
    return nv_dtype_get(a)->mant_bits > nv_dtype_get(b)->mant_bits;
}

/* The dtype node k is held in inside the region. */
static nv_dtype held_dtype(const gstate *s, const nv_graph_node *n)
{
    const emu_mode *m = &s->ctx->mode;
    if (n->is_output && n->n_consumers == 0)
        return n->dtype;
    if (m->fused.intermediate_set)
        return m->fused.intermediate;
    nv_dtype h = m->accum_set ? m->accum : NV_DT_FP32;
    return wider(n->dtype, h) ? n->dtype : h;
}

static void call_setup(gstate *s, emu_call *ec, const nv_graph_node *n, nv_dtype storage)
{
    const emu_mode *m = &s->fm;
    memset(ec, 0, sizeof *ec);
    ec->m = m;
    ec->out = storage;
    ec->storage = storage;
    ec->compute = m->compute_set ? m->compute : (storage == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32);
    if (m->accum_set)
        ec->accum = m->accum;
    else if (n->op->kind == NV_OPK_MATMUL)
        ec->accum = n->attrs.acc_dtype;
    else
        ec->accum = ec->compute == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    if (m->fused.accum_node_set && !strcmp(n->name, m->fused.accum_node))
        ec->accum = m->fused.accum_node_dtype;
    ec->rm.rounding = m->rounding;
    ec->rm.saturate = m->saturate;
    ec->rm.ftz = m->ftz;
    ec->plain = m->rounding == NV_ROUND_NEAREST_EVEN && !m->saturate && !m->ftz;
    uint64_t k = atomic_fetch_add(&graph_calls, 1);
    ec->sr_state = m->seed ^ ((uint64_t)n->numel * 0x9E3779B97F4A7C15ull) ^ 0x6772617068ull;
    ec->order_state = m->seed ^ ((k + 1) * 0xD1B54A32D192ED03ull);
}

static int run_node(gstate *s, int k, char *err, size_t errlen)
{
    const nv_graph_node *n = &s->g->nodes[k];
    const nv_tensor *in[NV_GRAPH_NODE_INPUTS];
    for (int i = 0; i < n->n_in; i++)
        in[i] = n->in[i] < 0 ? s->in[-1 - n->in[i]] : s->held[n->in[i]];
    nv_dtype hd = held_dtype(s, n);
    nv_tensor *out = nv_tensor_new(hd, n->ndim, n->shape);
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    s->held[k] = out;
    emu_call ec;
    call_setup(s, &ec, n, hd);
    int r;
    switch (n->op->kind) {
    case NV_OPK_REDUCE:
        r = emu_reduce_op(&ec, n->op, &n->attrs, n->n_in, in, out->data, err, errlen);
        break;
    case NV_OPK_MATMUL:
        r = emu_matmul(&ec, n->op, &n->attrs, n->n_in, in, out->data, err, errlen);
        break;
    case NV_OPK_LAYOUT:
        r = nv_op_layout_eval(n->op, &n->attrs, n->n_in, in, out->data, err, errlen);
        break;
    case NV_OPK_CONV:
        r = emu_conv2d(&ec, n->op, &n->attrs, in, out->data, err, errlen);
        break;
    case NV_OPK_ROTARY:
        r = emu_rotary(&ec, &n->attrs, in, out->data, err, errlen);
        break;
    case NV_OPK_SELECT: /* int32 indices have no place in a fused float region */
        snprintf(err, errlen, "emu's graph entry does not fuse selections");
        r = NV_E_UNSUPPORTED;
        break;
    default:
        r = emu_elementwise(&ec, n->op, &n->attrs, n->n_in, in, out->data, err, errlen);
        break;
    }
    if (r < 0) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "node '%s' (op '%s'): %s", n->name, n->op->name, inner);
        return r;
    }
    for (int64_t i = 0; i < out->numel; i++)
        out->data[i] = emu_round(&ec, hd, out->data[i]);
    return NV_OK;
}

/* Encode t (values representable in its dtype unless to differs) as dtype to. */
static int encode(const gstate *s, const nv_tensor *t, nv_dtype to, nv_tensor_view *ret)
{
    const nv_dtype_info *di = nv_dtype_get(to);
    unsigned char *buf = malloc((size_t)(t->numel > 0 ? t->numel : 1) * (size_t)di->storage_bytes);
    if (!buf)
        return NV_E_NOMEM;
    nv_round_mode rm = {.rounding = s->fm.rounding == NV_ROUND_STOCHASTIC ? NV_ROUND_NEAREST_EVEN
                                                                          : s->fm.rounding,
                        .saturate = s->fm.saturate,
                        .ftz = s->fm.ftz};
    for (int64_t i = 0; i < t->numel; i++)
        nv_dtype_store_bits(to, buf, i, nv_dtype_encode(to, t->data[i], &rm, 0));
    memset(ret, 0, sizeof *ret);
    ret->dtype = (int32_t)to;
    ret->ndim = t->ndim;
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        ret->shape[d] = t->shape[d];
        ret->strides[d] = stride;
        stride *= t->shape[d];
    }
    ret->data = buf;
    return NV_OK;
}

/* Parse the graph and check the call's inputs against it. */
static int load_graph(gstate *s, nv_graph_call *call, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *j = json_loads(call->graph_json ? call->graph_json : "", 0, &jerr);
    bool parsed = j != NULL;
    char *ptr = NULL, *msg = NULL;
    int r = j ? nv_graph_parse(j, "", &s->g, &ptr, &msg) : -EINVAL;
    json_decref(j);
    if (r == 0 && call->n_inputs != s->g->n_inputs) {
        snprintf(err, errlen, "the graph has %d inputs, the call passes '%d'", s->g->n_inputs,
                 call->n_inputs);
        return NV_E_INVALID;
    }
    nv_dtype dt = NV_DT_FP32;
    for (int i = 0; r == 0 && i < s->g->n_inputs; i++)
        if (!s->g->inputs[i].dtype_set)
            dt = (nv_dtype)call->inputs[i].dtype;
    if (r == 0)
        r = nv_graph_infer(s->g, dt, "", &ptr, &msg);
    if (r < 0) {
        snprintf(err, errlen, "invalid graph: %s%s%s", ptr ? ptr : "", ptr ? ": " : "",
                 msg ? msg : (parsed ? "out of memory" : "graph_json is not JSON"));
        free(ptr);
        free(msg);
        return r == -ENOMEM ? NV_E_NOMEM : NV_E_INVALID;
    }
    for (int i = 0; i < s->g->n_inputs; i++) {
        const nv_graph_input *gi = &s->g->inputs[i];
        const nv_tensor_view *v = &call->inputs[i];
        if (v->dtype != (int32_t)gi->dtype) {
            snprintf(err, errlen, "graph input '%s' has dtype '%d', the graph says '%s'", gi->name,
                     (int)v->dtype, nv_dtype_name(gi->dtype));
            return NV_E_DTYPE;
        }
        bool same = v->ndim == gi->ndim;
        for (int d = 0; same && d < gi->ndim; d++)
            same = v->shape[d] == gi->shape[d];
        if (!same) {
            snprintf(err, errlen, "graph input '%s' does not have the graph's shape", gi->name);
            return NV_E_SHAPE;
        }
        s->in[i] = nvw_tensor_from_view(v, s->ctx->mode.daz);
        if (!s->in[i]) {
            snprintf(err, errlen, "graph input '%s' is not a valid tensor view", gi->name);
            return NV_E_INVALID;
        }
    }
    return NV_OK;
}

static int write_outputs(gstate *s, nv_graph_call *call, char *err, size_t errlen)
{
    const nv_graph *g = s->g;
    int want = g->n_outputs + (call->capture ? g->n_nodes : 0);
    if (call->n_outputs != want || !call->outputs) {
        snprintf(err, errlen, "the graph produces %d outputs%s, the call asks for '%d'", want,
                 call->capture ? " with capture" : "", call->n_outputs);
        return NV_E_INVALID;
    }
    for (int i = 0; i < want; i++)
        call->outputs[i].data = NULL;
    for (int i = 0; i < want; i++) {
        int k = i < g->n_outputs ? g->outputs[i] : i - g->n_outputs;
        nv_dtype to = i < g->n_outputs ? g->nodes[k].dtype : s->held[k]->dtype;
        if (encode(s, s->held[k], to, &call->outputs[i]) < 0) {
            for (int q = 0; q < i; q++) {
                free(call->outputs[q].data);
                call->outputs[q].data = NULL;
            }
            snprintf(err, errlen, "out of memory");
            return NV_E_NOMEM;
        }
    }
    return NV_OK;
}

int emu_graph(void *vctx, nv_graph_call *call, char *err, size_t errlen)
{
    gstate s;
    memset(&s, 0, sizeof s);
    s.ctx = vctx;
    s.fm = s.ctx->mode;
    if (s.fm.fused.transcendental_set)
        s.fm.transcendental = (emu_transcendental)s.fm.fused.transcendental;
    if (s.fm.fused.order_set) {
        s.fm.order = (emu_order)s.fm.fused.order;
        s.fm.order_k = s.fm.fused.order_k;
    }
    int r = load_graph(&s, call, err, errlen);
    if (r < 0)
        goto out;
    s.held = calloc((size_t)s.g->n_nodes, sizeof *s.held);
    if (!s.held) {
        snprintf(err, errlen, "out of memory");
        r = NV_E_NOMEM;
        goto out;
    }
    for (int k = 0; k < s.g->n_nodes && r == NV_OK; k++)
        r = run_node(&s, k, err, errlen);
    if (r == NV_OK)
        r = write_outputs(&s, call, err, errlen);
out:
    for (int i = 0; s.g && i < s.g->n_inputs; i++)
        nv_tensor_free(s.in[i]);
    for (int k = 0; s.held && k < s.g->n_nodes; k++)
        nv_tensor_free(s.held[k]);
    free(s.held);
    nv_graph_free(s.g);
    return r;
}
