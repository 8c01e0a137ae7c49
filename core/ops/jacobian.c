/* The Jacobian structure of the catalog ops (jacobian.h): which output elements
 * depend on which input elements, from the op's kind and shapes alone. */
#include "jacobian.h"

#include <errno.h>
#include <stdlib.h>

#include "opmeta.h"

const char *nv_jac_kind_name(nv_jac_kind k)
{
    static const char *const names[] = {"diagonal", "row_block", "bilinear", "dense", "gather"};
    return (unsigned)k < 5 ? names[k] : "?";
}

static bool elementwise(const nv_op_def *op)
{
    return op->kind == NV_OPK_UNARY || op->kind == NV_OPK_BINARY || op->kind == NV_OPK_TERNARY;
}

nv_jac_kind nv_op_jac_kind(const nv_op_def *op, const nv_op_attrs *a)
{
    if (elementwise(op))
        return NV_JAC_DIAGONAL;
    if (op->kind == NV_OPK_MATMUL)
        return NV_JAC_BILINEAR;
    /* max pooling moves one element per output too, but which one depends on
     * the values (the argmax) and this structure may not: its windows and
     * conv2d's patches overlap, so every output may depend on every input */
    if (nvo_op_id(op) == NVO_MAX_POOL2D || op->kind == NV_OPK_CONV)
        return NV_JAC_DENSE;
    if (op->kind == NV_OPK_LAYOUT)
        return NV_JAC_GATHER;
    if (nvo_op_id(op) == NVO_CROSS_ENTROPY && a->reduction_mean)
        return NV_JAC_DENSE;
    return NV_JAC_ROW_BLOCK;
}

bool nv_op_has_backward(const nv_op_def *op, const nv_op_attrs *a)
{
    if (!op || !op->differentiable || op->kind == NV_OPK_CAST)
        return false;
    return op->kind != NV_OPK_MATMUL || a->scale == NV_SCALE_NONE;
}

bool nv_op_grad_input(const nv_op_def *op, int i)
{
    return op && i >= 0 && i < op->n_inputs && !op->inputs[i].is_index;
}

int nvb_lines_of(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x, nvb_lines *ret)
{
    int ax = nvo_norm_axis(op, a, x->ndim);
    if (ax < 0)
        return -EINVAL;
    ret->outer = ret->inner = 1;
    for (int d = 0; d < ax; d++)
        ret->outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        ret->inner *= x->shape[d];
    ret->n = x->shape[ax];
    return 0;
}

/* ---- structure ---- */

static int map_alloc(nv_jac_map *m)
{
    m->in_group = malloc(sizeof(int64_t) * (size_t)(m->n_in ? m->n_in : 1));
    m->in_pos = malloc(sizeof(int64_t) * (size_t)(m->n_in ? m->n_in : 1));
    m->out_group = malloc(sizeof(int64_t) * (size_t)(m->n_out ? m->n_out : 1));
    size_t ns = (size_t)(m->n_groups * m->n_pos);
    m->slot = malloc(sizeof(int64_t) * (ns ? ns : 1));
    if (!m->in_group || !m->in_pos || !m->out_group || !m->slot)
        return -ENOMEM;
    for (size_t k = 0; k < ns; k++)
        m->slot[k] = -1;
    return 0;
}

static void map_set(nv_jac_map *m, int64_t e, int64_t g, int64_t p)
{
    m->in_group[e] = g;
    m->in_pos[e] = p;
    m->slot[g * m->n_pos + p] = e;
}

/* Row-wise: x's lines are the groups, the position along the line the
 * position; weight/bias element k is group k at position 0. */
static void map_rows(nv_jac_map *m, const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                     int i, bool dense)
{
    nvb_lines L;
    nvb_lines_of(op, a, x, &L);
    bool removes = nvo_reduce_removes_axis(nvo_op_id(op)) || nvo_op_id(op) == NVO_CROSS_ENTROPY;
    for (int64_t o = 0; o < m->n_out; o++) {
        if (dense)
            m->out_group[o] = 0;
        else if (i > 0)
            m->out_group[o] = o % L.n; /* column k of [.., C] */
        else
            m->out_group[o] = removes ? o : (o / (L.n * L.inner)) * L.inner + o % L.inner;
    }
    for (int64_t e = 0; e < m->n_in; e++) {
        if (dense)
            map_set(m, e, 0, e);
        else if (i > 0)
            map_set(m, e, e, 0);
        else
            map_set(m, e, (e / (L.n * L.inner)) * L.inner + e % L.inner, (e / L.inner) % L.n);
    }
}

/* Matmul [.., M, K] x [.., K, N]: C[b, m, n] depends on A[b, m, :] (group
 * (b, m), position k) and on B[b, :, n] (group (b, n), position k). */
static void map_matmul(nv_jac_map *m, const nv_tensor *A, const nv_tensor *B, int i)
{
    int nd = A->ndim;
    int64_t M = A->shape[nd - 2], K = A->shape[nd - 1], N = B->shape[nd - 1];
    for (int64_t o = 0; o < m->n_out; o++) {
        int64_t b = o / (M * N), r = (o / N) % M, c = o % N;
        m->out_group[o] = i == 0 ? b * M + r : b * N + c;
    }
    for (int64_t e = 0; e < m->n_in; e++) {
        if (i == 0)
            map_set(m, e, e / K, e % K);
        else
            map_set(m, e, (e / (K * N)) * N + e % N, (e / N) % K);
    }
}

static int64_t out_numel(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                         const nv_tensor *const *in)
{
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    if (nv_op_infer(op, a, n_in, in, &nd, shape, err, sizeof err) < 0)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

int nv_jac_map_new(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   int i, nv_jac_map **ret)
{
    if (!nv_op_has_backward(op, a) || !nv_op_grad_input(op, i) || i >= n_in)
        return -EINVAL;
    nv_jac_map *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->n_in = in[i]->numel;
    m->n_out = out_numel(op, a, n_in, in);
    nv_jac_kind k = nv_op_jac_kind(op, a);
    const nv_tensor *x = in[0];
    if (m->n_out < 0) {
        free(m);
        return -EINVAL;
    }
    if (k == NV_JAC_DIAGONAL || k == NV_JAC_GATHER) {
        m->n_groups = m->n_in;
        m->n_pos = 1;
    } else if (k == NV_JAC_DENSE) {
        m->n_groups = 1;
        m->n_pos = m->n_in;
    } else if (k == NV_JAC_BILINEAR) {
        int nd = x->ndim;
        m->n_pos = x->shape[nd - 1];
        m->n_groups = m->n_in / (m->n_pos ? m->n_pos : 1);
    } else if (i > 0) {
        m->n_groups = m->n_in;
        m->n_pos = 1;
    } else {
        nvb_lines L;
        nvb_lines_of(op, a, x, &L);
        m->n_pos = L.n;
        m->n_groups = L.outer * L.inner;
    }
    if (map_alloc(m) < 0) {
        nv_jac_map_free(m);
        return -ENOMEM;
    }
    if (k == NV_JAC_DIAGONAL) {
        for (int64_t e = 0; e < m->n_in; e++) {
            m->out_group[e] = e;
            map_set(m, e, e, 0);
        }
    } else if (k == NV_JAC_GATHER) {
        /* group = the input element, the outputs moved from it its outputs */
        for (int64_t e = 0; e < m->n_in; e++)
            map_set(m, e, e, 0);
        if (nv_op_layout_sources(op, a, n_in, in, m->n_out, m->out_group) != 0) {
            nv_jac_map_free(m);
            return -EINVAL;
        }
    } else if (k == NV_JAC_BILINEAR) {
        map_matmul(m, in[0], in[1], i);
    } else {
        map_rows(m, op, a, x, i, k == NV_JAC_DENSE);
    }
    *ret = m;
    return 0;
}

void nv_jac_map_free(nv_jac_map *m)
{
    if (!m)
        return;
    free(m->in_group);
    free(m->in_pos);
    free(m->out_group);
    free(m->slot);
    free(m);
}
