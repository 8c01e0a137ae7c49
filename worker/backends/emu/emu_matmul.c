/* emu matmul / bmm: C[m,n] = sum_k (A[m,k] sa(m,k)) (B[k,n] sb(k,n)) accumulated in
 * the accumulate dtype in the mode's order, each product rounded to it unless
 * fma=on. Scaled operands are dequantized element by element: an MX block scale
 * is the e8m0 value 2^(s-127), so X_i * 2^(s-127) is exact (OCP MX v1.0 §6.1); an
 * fp32 scale (tensor, channel, tile) is applied with one rounding to accum.
 *
 * A mode with scale= set is a device that scales only at that granularity: given
 * operands scaled another way, it re-quantizes them as its runtime would: the real
 * values X sa are grouped by the device's granularity, each group gets a scale
 * from its absolute maximum (e8m0 per OCP MX v1.0 §6.3: 2^(floor(log2 amax) - emax
 * of the element format); fp32: amax / max finite), and the elements are rounded
 * to the element dtype (nearest even, saturating). The loss of dynamic range is
 * the error such a device shows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_internal.h"

typedef struct mm {
    int64_t batch, M, K, N;
    int64_t a_batch_stride, b_batch_stride; /* 0 when an operand broadcasts */
} mm;

/* The scale applied to element (r, q) of an operand of rows x cols, for batch b. */
static double scale_of(const nv_op_attrs *a, const nv_tensor *s, bool is_a, int64_t b, int64_t r,
                       int64_t q, int64_t rows, int64_t cols)
{
    switch (a->scale) {
    case NV_SCALE_TENSOR:
        return s->data[0];
    case NV_SCALE_CHANNEL: {
        /* sa [.., M] per row of A; sb [.., N] per column of B. */
        int64_t per = is_a ? rows : cols;
        int64_t nb = s->numel / per;
        return s->data[(nb > 1 ? b : 0) * per + (is_a ? r : q)];
    }
    case NV_SCALE_BLOCK: {
        /* sa [.., M, K/block] along A's columns; sb [.., K/block, N] along B's rows. */
        int64_t sr = is_a ? rows : s->shape[s->ndim - 2];
        int64_t sc = is_a ? s->shape[s->ndim - 1] : cols;
        int64_t nb = s->numel / (sr * sc);
        int64_t rr = is_a ? r : r / a->block, qq = is_a ? q / a->block : q;
        return s->data[(nb > 1 ? b : 0) * sr * sc + rr * sc + qq];
    }
    case NV_SCALE_TILE: {
        int64_t sr = s->shape[s->ndim - 2], sc = s->shape[s->ndim - 1];
        int64_t nb = s->numel / (sr * sc);
        return s->data[(nb > 1 ? b : 0) * sr * sc + (r / a->tile_r) * sc + q / a->tile_c];
    }
    default:
        return 1.0;
    }
}

/* Group of element (r, q) of a rows x cols operand under granularity g. */
static int64_t group_of(nv_scale_granularity g, const emu_mode *m, bool is_a, int64_t r, int64_t q,
                        int64_t rows, int64_t cols)
{
    switch (g) {
    case NV_SCALE_CHANNEL:
        return is_a ? r : q;
    case NV_SCALE_BLOCK:
        return is_a ? r * ((cols + m->block - 1) / m->block) + q / m->block
                    : (r / m->block) * cols + q;
    case NV_SCALE_TILE:
        return (r / m->tile_r) * ((cols + m->tile_c - 1) / m->tile_c) + q / m->tile_c;
    default:
        (void)rows;
        return 0;
    }
}

/* Re-quantize real values v (rows x cols) at the device's granularity into dt. */
static int requantize(const emu_mode *m, nv_dtype dt, bool is_a, int64_t rows, int64_t cols,
                      double *v)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    int64_t n = rows * cols;
    double *amax = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!amax)
        return NV_E_NOMEM;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++) {
            int64_t gi = group_of(m->scale, m, is_a, r, q, rows, cols);
            double x = fabs(v[r * cols + q]);
            if (x > amax[gi] && isfinite(x))
                amax[gi] = x;
        }
    nv_round_mode sat = {NV_ROUND_NEAREST_EVEN, true, false};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++) {
            double am = amax[group_of(m->scale, m, is_a, r, q, rows, cols)];
            double sc = 1;
            if (am > 0 && m->scale == NV_SCALE_BLOCK) {
                int e = ilogb(am) - info->emax;
                sc = ldexp(1, e < -127 ? -127 : (e > 127 ? 127 : e));
            } else if (am > 0) {
                sc = (double)(float)(am / info->max_finite);
            }
            double *x = &v[r * cols + q];
            *x = nv_dtype_round(dt, *x / sc, &sat, 0) * sc;
        }
    free(amax);
    return NV_OK;
}

/* Operand (rows x cols, batch b) converted to the accumulate dtype, scaled; when
 * requant, first re-quantized at the device's own granularity. */
static int dequant(emu_call *c, const nv_op_attrs *a, const nv_tensor *x, const nv_tensor *s,
                   bool is_a, int64_t b, int64_t off, int64_t rows, int64_t cols, bool requant,
                   double *dst)
{
    nv_dtype ad = c->accum;
    if (!requant && a->scale == NV_SCALE_NONE) { /* the loop below without scales */
        for (int64_t i = 0; i < rows * cols; i++)
            dst[i] = emu_round(c, ad, x->data[off + i]);
        return NV_OK;
    }
    bool exact_scale = a->scale == NV_SCALE_BLOCK || a->scale == NV_SCALE_NONE;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++) {
            double v = x->data[off + r * cols + q];
            double sc = scale_of(a, s, is_a, b, r, q, rows, cols);
            if (requant)
                dst[r * cols + q] = v * sc; /* exact: e8m0, or two fp32 values */
            else if (a->scale == NV_SCALE_NONE)
                dst[r * cols + q] = emu_round(c, ad, v);
            else
                dst[r * cols + q] = exact_scale ? emu_round(c, ad, v * sc) : emu_mul(c, ad, v, sc);
        }
    if (!requant)
        return NV_OK;
    int rc = requantize(c->m, x->dtype, is_a, rows, cols, dst);
    for (int64_t i = 0; i < rows * cols; i++)
        dst[i] = emu_round(c, ad, dst[i]);
    return rc;
}

static int geometry(const nv_tensor *A, const nv_tensor *B, mm *g, char *err, size_t errlen)
{
    if (A->ndim < 2 || B->ndim < 2) {
        snprintf(err, errlen, "matmul operands must have at least 2 dimensions");
        return NV_E_SHAPE;
    }
    g->M = A->shape[A->ndim - 2];
    g->K = A->shape[A->ndim - 1];
    g->N = B->shape[B->ndim - 1];
    int64_t ab = A->numel / (g->M * g->K > 0 ? g->M * g->K : 1);
    int64_t bb = B->numel / (g->K * g->N > 0 ? g->K * g->N : 1);
    g->batch = ab > bb ? ab : bb;
    g->a_batch_stride = ab > 1 ? g->M * g->K : 0;
    g->b_batch_stride = bb > 1 ? g->K * g->N : 0;
    return NV_OK;
}

int emu_matmul(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
               const nv_tensor *const *in, double *out, char *err, size_t errlen)
{
    (void)op;
    const emu_mode *m = c->m;
    bool requant =
        m->scale_set && a->scale != NV_SCALE_NONE &&
        (m->scale != a->scale || (a->scale == NV_SCALE_BLOCK && m->block != a->block) ||
         (a->scale == NV_SCALE_TILE && (m->tile_r != a->tile_r || m->tile_c != a->tile_c)));
    mm g;
    int r = geometry(in[0], in[1], &g, err, errlen);
    if (r < 0)
        return r;
    const nv_tensor *sa = n_in > 2 ? in[2] : NULL, *sb = n_in > 3 ? in[3] : NULL;
    if (a->scale != NV_SCALE_NONE && (!sa || !sb)) {
        snprintf(err, errlen, "matmul with scale granularity needs scale_a and scale_b");
        return NV_E_INVALID;
    }
    size_t na = (size_t)(g.M * g.K), nb = (size_t)(g.K * g.N);
    double *abuf = malloc((na + nb + 1) * sizeof(double));
    if (!abuf) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    double *bbuf = abuf + na;
    /* batch_splitk (emu_internal.h): the split follows the call's row count. */
    emu_mode split_mode;
    emu_call split_call;
    if (m->batch_splitk && g.M > 1) {
        split_mode = *m;
        split_mode.order = EMU_ORDER_SPLITK;
        split_mode.order_k = (int)(1 + (g.M - 1) % 4);
        split_call = *c;
        split_call.m = &split_mode;
        c = &split_call;
    }
    for (int64_t b = 0; b < g.batch; b++) {
        if (dequant(c, a, in[0], sa, true, b, b * g.a_batch_stride, g.M, g.K, requant, abuf) ||
            dequant(c, a, in[1], sb, false, b, b * g.b_batch_stride, g.K, g.N, requant, bbuf)) {
            free(abuf);
            snprintf(err, errlen, "out of memory");
            return NV_E_NOMEM;
        }
        double *o = out + b * g.M * g.N;
        if (emu_dot_fast(c, c->accum, abuf, g.K, 1, bbuf, g.N, 1, o, g.M, g.K, g.N))
            continue; /* the same bits as the loop below (emu_sum.c) */
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                o[i * g.N + j] = emu_sum(c, c->accum, abuf + i * g.K, 1, bbuf + j, g.N, g.K);
    }
    free(abuf);
    return NV_OK;
}
