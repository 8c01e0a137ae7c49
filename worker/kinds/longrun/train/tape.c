/* The long-run tape: records catalog ops run on an executor under the AMP
 * policy and replays them backwards through the executor's backward entry. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

void nvw_tape_init(nvw_tape *tp, nvw_exec *ex)
{
    memset(tp, 0, sizeof *tp);
    tp->ex = ex;
}

void nvw_tape_done(nvw_tape *tp)
{
    for (int i = 0; i < tp->n_vals; i++) {
        if (!tp->vals[i].borrowed)
            nv_tensor_free(tp->vals[i].t);
        nv_tensor_free(tp->vals[i].g);
    }
    free(tp->vals);
    free(tp->nodes);
    memset(tp, 0, sizeof *tp);
}

static int add_val(nvw_tape *tp, nv_tensor *t, bool borrowed, bool need_grad)
{
    if (!t)
        return -ENOMEM;
    if (tp->n_vals == tp->cap_vals) {
        int cap = tp->cap_vals ? 2 * tp->cap_vals : 64;
        nvw_val *v = realloc(tp->vals, (size_t)cap * sizeof *v);
        if (!v) {
            if (!borrowed)
                nv_tensor_free(t);
            return -ENOMEM;
        }
        tp->vals = v, tp->cap_vals = cap;
    }
    tp->vals[tp->n_vals] = (nvw_val){.t = t, .borrowed = borrowed, .need_grad = need_grad};
    return tp->n_vals++;
}

int nvw_tape_leaf_borrow(nvw_tape *tp, nv_tensor *t)
{
    return add_val(tp, t, true, true);
}

int nvw_tape_leaf_own(nvw_tape *tp, nv_tensor *t)
{
    return add_val(tp, t, false, false);
}

/* Record node (kind, op, attrs, in[]) producing out tensor t. */
static int record(nvw_tape *tp, nvw_node_kind kind, const nv_op_def *op, const char *attrs, int n,
                  const int *in, nv_tensor *t)
{
    bool need = false;
    for (int i = 0; i < n; i++)
        need |= tp->vals[in[i]].need_grad;
    int id = add_val(tp, t, false, need);
    if (id < 0)
        return id;
    if (tp->n_nodes == tp->cap_nodes) {
        int cap = tp->cap_nodes ? 2 * tp->cap_nodes : 64;
        nvw_node *v = realloc(tp->nodes, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        tp->nodes = v, tp->cap_nodes = cap;
    }
    nvw_node *nd = &tp->nodes[tp->n_nodes++];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind, nd->op = op, nd->n_in = n, nd->out = id;
    snprintf(nd->attrs, sizeof nd->attrs, "%s", attrs ? attrs : "{}");
    memcpy(nd->in, in, (size_t)n * sizeof *in);
    return id;
}

static int cast_val(nvw_tape *tp, int v, nv_dtype to)
{
    nv_tensor *t = tp->vals[v].t;
    if (t->dtype == to || nvw_exec_fp64(tp->ex))
        return v;
    nv_tensor *c = NULL;
    int r = nvw_exec_cast(tp->ex, t, to, &c);
    if (r < 0)
        return r;
    char attrs[48];
    snprintf(attrs, sizeof attrs, "{\"to\":\"%s\"}", nv_dtype_name(to));
    return record(tp, NVW_N_CAST, nv_op_find("cast"), attrs, 1, &v, c);
}

static int rank(nv_dtype d)
{
    return d == NV_DT_FP64 ? 4 : d == NV_DT_FP32 ? 3 : d == NV_DT_TF32 ? 2 : 1;
}

int nvw_tape_op(nvw_tape *tp, const char *opname, const char *attrs, int n, const int *in)
{
    nvw_exec *ex = tp->ex;
    const nv_op_def *op = nv_op_find(opname);
    if (!op || n > NV_OP_MAX_INPUTS) {
        snprintf(ex->err, sizeof ex->err, "op '%s' is not in the catalog", opname);
        return -EINVAL;
    }
    int cin[NV_OP_MAX_INPUTS];
    nv_dtype target = NV_DT_FP64;
    if (!nvw_exec_fp64(ex)) {
        nvw_amp_cat cat = ex->amp.enabled ? nvw_amp_category(&ex->amp, opname) : NVW_AMP_PROMOTE;
        nv_dtype widest = NV_DT_COUNT;
        for (int i = 0; i < n; i++) {
            nv_dtype d = tp->vals[in[i]].t->dtype;
            if (!op->inputs[i].is_index && (widest == NV_DT_COUNT || rank(d) > rank(widest)))
                widest = d;
        }
        target = cat == NVW_AMP_LOW ? ex->amp.low : cat == NVW_AMP_FP32 ? NV_DT_FP32 : widest;
    }
    for (int i = 0; i < n; i++) {
        cin[i] = in[i];
        if (!nvw_exec_fp64(ex) && !op->inputs[i].is_index) {
            int c = cast_val(tp, in[i], target);
            if (c < 0)
                return c;
            cin[i] = c;
        }
    }
    nv_tensor *ins[NV_OP_MAX_INPUTS];
    for (int i = 0; i < n; i++)
        ins[i] = tp->vals[cin[i]].t;
    nv_tensor *out = NULL;
    int r = nvw_exec_forward(ex, op, attrs, n, ins, target, &out);
    if (r < 0)
        return r;
    return record(tp, NVW_N_OP, op, attrs, n, cin, out);
}

int nvw_tape_expand(nvw_tape *tp, int v, int64_t rows)
{
    nv_tensor *t = tp->vals[v].t;
    int64_t shape[2] = {rows, t->numel};
    nv_tensor *o = nv_tensor_new(t->dtype, 2, shape);
    if (!o)
        return -ENOMEM;
    bool dense = nv_tensor_dense(t);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < t->numel; c++)
            o->data[r * t->numel + c] = t->data[nv_tensor_offset_lin(t, dense, c)];
    return record(tp, NVW_N_EXPAND, NULL, NULL, 1, &v, o);
}

int nvw_tape_transpose(nvw_tape *tp, int v)
{
    nv_tensor *t = tp->vals[v].t;
    nv_tensor view = *t;
    int nd = t->ndim;
    view.shape[nd - 1] = t->shape[nd - 2], view.shape[nd - 2] = t->shape[nd - 1];
    view.strides[nd - 1] = t->strides[nd - 2], view.strides[nd - 2] = t->strides[nd - 1];
    nv_tensor *o = nv_tensor_contiguous(&view);
    if (!o)
        return -ENOMEM;
    return record(tp, NVW_N_TRANSPOSE, NULL, NULL, 1, &v, o);
}

static nv_tensor *reshaped(const nv_tensor *t, int ndim, const int64_t *shape)
{
    nv_tensor *c = nv_tensor_contiguous(t);
    if (!c)
        return NULL;
    c->ndim = ndim;
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        c->shape[d] = shape[d];
        c->strides[d] = st;
        st *= shape[d];
    }
    return c;
}

int nvw_tape_reshape(nvw_tape *tp, int v, int ndim, const int64_t *shape)
{
    nv_tensor *o = reshaped(tp->vals[v].t, ndim, shape);
    if (!o)
        return -ENOMEM;
    return record(tp, NVW_N_RESHAPE, NULL, NULL, 1, &v, o);
}

/* g += dg on the executor (the device's add; fp64 on the host); takes dg. */
static int accumulate(nvw_tape *tp, int v, nv_tensor *dg)
{
    nvw_val *x = &tp->vals[v];
    if (!x->g) {
        x->g = dg;
        return 0;
    }
    nv_tensor *ins[2] = {x->g, dg}, *sum = NULL;
    int r = nvw_exec_forward(tp->ex, nv_op_find("add"), "{}", 2, ins, x->g->dtype, &sum);
    nv_tensor_free(dg);
    if (r < 0)
        return r;
    nv_tensor_free(x->g);
    x->g = sum;
    return 0;
}

static int node_backward(nvw_tape *tp, const nvw_node *nd)
{
    nvw_exec *ex = tp->ex;
    nv_tensor *gy = tp->vals[nd->out].g;
    nv_tensor *src = tp->vals[nd->in[0]].t;
    nv_tensor *g = NULL;
    int r = 0;
    switch (nd->kind) {
    case NVW_N_CAST: /* the gradient goes back in the source dtype */
        r = nvw_exec_cast(ex, gy, src->dtype, &g);
        if (r == 0)
            nvw_exec_count_lowp(ex, g);
        break;
    case NVW_N_EXPAND: {
        nv_tensor *one = gy;
        r = nvw_exec_forward(ex, nv_op_find("sum"), "{\"axis\":0}", 1, &one, src->dtype, &g);
        break;
    }
    case NVW_N_TRANSPOSE: {
        nv_tensor view = *gy;
        int k = gy->ndim;
        view.shape[k - 1] = gy->shape[k - 2], view.shape[k - 2] = gy->shape[k - 1];
        view.strides[k - 1] = gy->strides[k - 2], view.strides[k - 2] = gy->strides[k - 1];
        g = nv_tensor_contiguous(&view);
        r = g ? 0 : -ENOMEM;
        break;
    }
    case NVW_N_RESHAPE:
        g = reshaped(gy, src->ndim, src->shape);
        r = g ? 0 : -ENOMEM;
        break;
    case NVW_N_OP: {
        nv_tensor *ins[NV_OP_MAX_INPUTS], *gx[NV_OP_MAX_INPUTS];
        for (int i = 0; i < nd->n_in; i++)
            ins[i] = tp->vals[nd->in[i]].t;
        r = nvw_exec_backward(ex, nd->op, nd->attrs, nd->n_in, ins, tp->vals[nd->out].t, gy, gx);
        for (int i = 0; i < nd->n_in; i++) {
            if (r == 0 && gx[i] && tp->vals[nd->in[i]].need_grad) {
                r = accumulate(tp, nd->in[i], gx[i]);
                gx[i] = NULL;
            }
            nv_tensor_free(gx[i]);
        }
        return r;
    }
    }
    if (r < 0)
        return r;
    return accumulate(tp, nd->in[0], g);
}

int nvw_tape_backward(nvw_tape *tp, int loss, double seed)
{
    nv_tensor *l = tp->vals[loss].t;
    nv_tensor *g = nv_tensor_new(l->dtype, l->ndim, l->shape);
    if (!g)
        return -ENOMEM;
    for (int64_t i = 0; i < g->numel; i++)
        g->data[i] = nv_dtype_round(l->dtype, seed, &NV_ROUND_DEFAULT, 0);
    tp->vals[loss].g = g;
    for (int k = tp->n_nodes - 1; k >= 0; k--) {
        const nvw_node *nd = &tp->nodes[k];
        if (!tp->vals[nd->out].g || !tp->vals[nd->out].need_grad)
            continue;
        int r = node_backward(tp, nd);
        if (r < 0)
            return r;
        if (!tp->vals[nd->out].borrowed) { /* intermediate gradients are done with */
            nv_tensor_free(tp->vals[nd->out].g);
            tp->vals[nd->out].g = NULL;
        }
    }
    return 0;
}
