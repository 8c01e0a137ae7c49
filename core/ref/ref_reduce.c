/* Exact references of the reductions along an axis.
 *
 * Accuracy (what "exact" means here; it must be far below any output dtype's ulp
 * so that a measured error is the device's):
 * - sum, mean, norm2: exact sums (nvo_sum_exact: a long accumulator, the exact
 *   sum split into hi + lo, within 2^-105); mean divides that by n (~2^-104);
 *   norm2 sums the exact squares (TwoProd, after scaling by a power of two so no
 *   square overflows or underflows) and takes a double-double square root
 *   (one Newton step, ~2^-100).
 * - max: exact selection with IEEE 754-2019 §9.6 maximum semantics (NaN propagates).
 * - var: exact whatever the algorithm the device uses (attr "algorithm" only tells
 *   the device): with S = sum x and Q = sum x^2 summed exactly in MPFR,
 *   n Q - S^2 is computed exactly, then divided by n (n - correction) at 128 bits.
 * - logsumexp, softmax, log_softmax, cross_entropy: e_j = exp(x_j - m) by a
 *   double-double exp (relative error below 2^-96, ref_composed.c), their sum
 *   exact, log s in MPFR at 128 bits, the rest in double-double: relative error
 *   below 2^-94 of |y| (softmax) and of |x_k - m| + |log s| (log domain).
 * - layer_norm, rms_norm: mean and variance exact (MPFR), then 1/sqrt and the
 *   affine step in MPFR at 128 bits: relative error below 2^-120.
 *   Either way at most 2^-41 ulp of fp64, and far less of narrower formats.
 *
 * abs_sum (the bound metric's sum |x_i|, Higham-style, see docs/TOLERANCES.md):
 *   sum: sum|x_i|; mean: sum|x_i| / n; max: |max|; norm2: the norm (all terms are
 *   positive: relative error of sum x^2 is gamma_n); var: sqrt(Q S2) / (n - c)
 *   with S2 = sum (x_i - mean)^2 (Chan, Golub & LeVeque 1983: the relative error
 *   of the two-pass and updating algorithms grows with kappa = sqrt(Q / S2); this
 *   is kappa times the variance); softmax: y_i (1 + |x_i - m| + sum_j y_j |x_j - m|)
 *   (the exponent arguments are rounded relative to |x - m|); log_softmax and
 *   logsumexp: |x_i - m| (resp. |m|) + |log s| + 1 + sum_j y_j |x_j - m|;
 *   cross_entropy: that of logsumexp plus |x_target|; layer_norm: |w_i| kappa
 *   (|xhat_i| + 1) + |b_i| with kappa = max(1, rms(x) / sqrt(var + eps));
 *   rms_norm: |y_i|. */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "ref_internal.h"

typedef nvo_lines lines;

void nvo_line_index(const lines *L, int64_t l, int64_t k, int64_t *idx)
{
    for (int i = L->x->ndim - 1; i >= 0; i--) {
        if (i == L->ax) {
            idx[i] = k;
            continue;
        }
        idx[i] = l % L->x->shape[i];
        l /= L->x->shape[i];
    }
}

void nvo_line_gather(const lines *L, int64_t l, double *buf)
{
    int64_t idx[NV_MAX_DIMS];
    nvo_line_index(L, l, 0, idx);
    int64_t base = nv_tensor_offset(L->x, idx);
    int64_t st = L->x->strides[L->ax];
    for (int64_t k = 0; k < L->len; k++)
        buf[k] = L->x->data[base + k * st];
}

int64_t nvo_line_out_off(const lines *L, const nv_tensor *t, bool removes, int64_t l, int64_t k)
{
    if (removes)
        return nv_tensor_offset_linear(t, l);
    int64_t idx[NV_MAX_DIMS];
    nvo_line_index(L, l, k, idx);
    return nv_tensor_offset(t, idx);
}

void nvo_line_put_mags(const nv_ref_out *o, const lines *L, bool removes, int64_t l, int64_t k,
                       nv_mag abs, nv_mag peak)
{
    if (o->abs_sum)
        nvo_put_abs(o, nvo_line_out_off(L, o->abs_sum, removes, l, k),
                    o->abs_exp ? nvo_line_out_off(L, o->abs_exp, removes, l, k) : 0, abs);
    if (o->peak)
        nvo_put_peak(o, nvo_line_out_off(L, o->peak, removes, l, k), peak);
}

/* A line of L's tensor in memory: a pointer into it when the axis is
 * contiguous, else gathered once into the reader's buffer (len values) and
 * kept for the line's further passes. */
typedef struct tensor_lines {
    const lines *L;
    int64_t gathered; /* the line in buf, -1: none */
} tensor_lines;

static const double *tensor_read(void *ud, int64_t l, int64_t k0, int64_t n, double *buf)
{
    (void)n;
    tensor_lines *t = ud;
    const lines *L = t->L;
    if (L->x->strides[L->ax] == 1 || L->len <= 1) {
        int64_t idx[NV_MAX_DIMS];
        nvo_line_index(L, l, k0, idx);
        return L->x->data + nv_tensor_offset(L->x, idx);
    }
    if (t->gathered != l) {
        nvo_line_gather(L, l, buf);
        t->gathered = l;
    }
    return buf + k0;
}

/* hi, lo, abs_sum and peak of line l into o's tensors. */
static void put_line(const lines *L, int64_t l, double hi, double lo, nv_mag abs, nv_mag peak,
                     const nv_ref_out *o)
{
    o->hi->data[nvo_line_out_off(L, o->hi, true, l, 0)] = hi;
    if (o->lo)
        o->lo->data[nvo_line_out_off(L, o->lo, true, l, 0)] = isfinite(hi) ? lo : 0;
    nvo_line_put_mags(o, L, true, l, 0, abs, peak);
}

/* Every line through rd (whose read and chunk are set). */
static int reduce_lines(int id, const nv_op_attrs *a, const lines *L, nvo_rd *rd,
                        const nv_ref_out *o)
{
    for (int64_t l = 0; l < L->n_lines; l++) {
        double hi, lo;
        nv_mag abs, peak;
        rd->line = l;
        rd->len = L->len;
        int r = nvo_reduce_line(id, a, rd, &hi, &lo, &abs, &peak);
        if (r < 0)
            return r;
        put_line(L, l, hi, lo, abs, peak, o);
    }
    return 0;
}

static int lines_of(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x, lines *ret,
                    int64_t n_out)
{
    *ret = (lines){.x = x, .ax = nvo_norm_axis(op, a, x->ndim)};
    if (ret->ax < 0)
        return NV_E_SHAPE;
    ret->len = x->shape[ret->ax];
    ret->n_lines = ret->len ? x->numel / ret->len : n_out;
    return 0;
}

int nvo_ref_reduce(int id, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const nv_ref_out *o)
{
    (void)n_in;
    lines L;
    int r = lines_of(nv_op_all(NULL) + id, a, in[0], &L, o->hi->numel);
    if (r < 0)
        return r;
    if (!nvo_reduce_removes_axis(id) || id == NVO_LOGSUMEXP)
        return nvo_ref_composed(id, a, &L, in, o);
    tensor_lines t = {.L = &L, .gathered = -1};
    nvo_rd rd = {.read = tensor_read, .ud = &t, .chunk = L.len > 0 ? L.len : 1};
    if (!(rd.buf = malloc(sizeof(double) * (size_t)(L.len + 1))))
        return NV_E_NOMEM;
    r = reduce_lines(id, a, &L, &rd, o);
    free(rd.buf);
    return r;
}

bool nv_op_reference_streams(const nv_op_def *op)
{
    int id = nvo_op_id(op);
    return id == NVO_SUM || id == NVO_MEAN || id == NVO_MAX || id == NVO_NORM2 || id == NVO_VAR;
}

int nvo_ref_reduce_lines(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                         nv_ref_read_fn read, void *ud, int64_t chunk, const nv_ref_out *o)
{
    lines L;
    int r = lines_of(op, a, x, &L, o->hi->numel);
    if (r < 0)
        return r;
    nvo_rd rd = {.read = read, .ud = ud, .chunk = chunk};
    if (!(rd.buf = malloc(sizeof(double) * (size_t)chunk)))
        return NV_E_NOMEM;
    r = reduce_lines(nvo_op_id(op), a, &L, &rd, o);
    free(rd.buf);
    return r;
}
