/* A large reduction case (sum, mean, max, norm2, var) without its input held
 * as doubles: the device reduces the whole tensor in one call, so its encoded
 * input (the view it reads, in the case's layout) is there once, whole; the
 * values are generated into it block by block from the input's stream
 * (core/numerics/inputs.h, element order), and the exact reference reads the
 * lines back from it in pieces of one block (nv_op_reference_lines), so that
 * nothing else of the input's size exists: 8 bytes per element of doubles and
 * the reference's contiguous copy of them are gone, 2-4 bytes per element of
 * the view remain (the device's own input).
 *
 * The result is the whole case's bit for bit: the view holds the values the
 * whole case encodes (the same stream, the same encoding, the same poison in a
 * strided layout's gaps); each value is exact in the input's dtype, so the
 * reference decodes the values it would have read from the doubles; the
 * reference of a line cut in pieces is that of the line (ref_reduce_line.c).
 * A failing case's artifact is made from the whole inputs, generated again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/opmeta.h"
#include "core/ref/reference.h"
#include "worker/backends/views/views.h"
#include "case_internal.h"

bool nvw_op_streamed(const case_state *cs)
{
    int64_t be = nvw_op_block_elems(cs->job);
    return be >= 0 && cs->s->op->kind == NV_OPK_REDUCE && nv_op_reference_streams(cs->s->op) &&
           cs->n_in == 1 && cs->s->op->n_inputs == 1 && cs->meta[0].ndim >= 1 &&
           cs->meta[0].numel > be;
}

/* The storage strides nvw_op_make_layout gives meta in layout l. */
static void layout_strides(const nv_tensor *meta, nv_layout l, int64_t *st)
{
    int nd = meta->ndim;
    memcpy(st, meta->strides, sizeof(int64_t) * (size_t)nd);
    if (l == NV_LAYOUT_TRANSPOSED && nd >= 2) {
        /* the last two dims stored swapped, row-major */
        int64_t s = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int src = d == nd - 1 ? nd - 2 : d == nd - 2 ? nd - 1 : d;
            st[src] = s;
            s *= meta->shape[src];
        }
    } else if (l == NV_LAYOUT_STRIDED) {
        for (int d = 0; d < nd; d++)
            st[d] = 2 * meta->strides[d];
    }
}

int nvw_op_make_inputs_streamed(case_state *cs)
{
    const nv_tensor *m = &cs->meta[0];
    nv_layout l = cs->c.layout;
    int64_t st[NV_MAX_DIMS];
    layout_strides(m, l, st);
    nv_input_request rq;
    nvw_op_input_request(cs, 0, &rq);
    nv_input_stream s;
    int r = nv_inputs_stream_init(&s, &rq, m->numel);
    if (r < 0)
        return r;
    double fill = l == NV_LAYOUT_STRIDED ? nvw_op_poison(m->dtype) : 0;
    if ((r = nvw_view_alloc(m->dtype, m->ndim, m->shape, st, fill, &cs->views[0])) < 0)
        return r;
    cs->n_views = 1;
    int64_t be = nvw_op_block_elems(cs->job);
    double *v = malloc((size_t)be * sizeof *v);
    if (!v)
        return -ENOMEM;
    /* Runs along the last axis, as nvw_view_decode walks a view. */
    nv_tensor lay = *m;
    memcpy(lay.strides, st, sizeof st);
    int64_t inner = m->shape[m->ndim - 1], ist = st[m->ndim - 1];
    for (int64_t k0 = 0; r == 0 && k0 < m->numel; k0 += be) {
        int64_t n = m->numel - k0 < be ? m->numel - k0 : be;
        if ((r = nv_inputs_stream_next(&s, v, n)) < 0)
            break;
        for (int64_t j = 0; j < n;) {
            int64_t k = k0 + j, run = inner - k % inner;
            run = run < n - j ? run : n - j;
            nvw_view_put_run(&cs->views[0], nv_tensor_offset_linear(&lay, k), ist, run, v + j);
            j += run;
        }
    }
    free(v);
    return r;
}

/* The lines of the view for nv_op_reference_lines. */
typedef struct view_lines {
    const nv_tensor_view *v;
    const nv_tensor *meta;
    int ax;
} view_lines;

static const double *view_read(void *ud, int64_t line, int64_t k0, int64_t n, double *buf)
{
    const view_lines *vl = ud;
    const nv_tensor *m = vl->meta;
    int64_t off = 0;
    for (int d = m->ndim - 1; d >= 0; d--) {
        if (d == vl->ax)
            continue;
        off += line % m->shape[d] * vl->v->strides[d];
        line /= m->shape[d];
    }
    int64_t st = vl->v->strides[vl->ax];
    nvw_view_get_run(vl->v, off + k0 * st, st, n, buf);
    return buf;
}

int nvw_op_reference_streamed(case_state *cs, char *err)
{
    cs->hi = nv_tensor_new(cs->out_dt, cs->out_ndim, cs->out_shape);
    cs->lo = nv_tensor_new(cs->out_dt, cs->out_ndim, cs->out_shape);
    cs->abs = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    cs->abs_exp = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    cs->peak = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    if (!cs->hi || !cs->lo || !cs->abs || !cs->abs_exp || !cs->peak)
        return -ENOMEM;
    const nv_op_def *op = cs->s->op;
    view_lines vl = {.v = &cs->views[0], .meta = &cs->meta[0],
                     .ax = nvo_norm_axis(op, &cs->s->attrs, cs->meta[0].ndim)};
    if (vl.ax < 0) {
        snprintf(err, ERRLEN, "the reference of '%s' failed (%s)", op->name,
                 nvw_op_code_name(NV_E_SHAPE));
        return NV_E_SHAPE;
    }
    nv_ref_out ro = {
        .hi = cs->hi, .lo = cs->lo, .abs_sum = cs->abs, .abs_exp = cs->abs_exp, .peak = cs->peak};
    int r = nv_op_reference_lines(op, &cs->s->attrs, &cs->meta[0], view_read, &vl,
                                  nvw_op_block_elems(cs->job), &ro);
    if (r < 0)
        snprintf(err, ERRLEN, "the reference of '%s' failed (%s)", op->name, nvw_op_code_name(r));
    return r;
}
