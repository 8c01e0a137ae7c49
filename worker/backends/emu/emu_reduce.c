/* emu reductions along an axis. Sums run in the accumulate dtype in the mode's
 * order (emu_sum.c); the elementwise steps of composite ops (x - max, exp, the
 * normalisation) run in the compute dtype, every intermediate rounded where a
 * kernel would store it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_internal.h"

typedef struct red {
    emu_call *c;
    const nv_op_attrs *a;
    nv_dtype cd, ad;
    int64_t outer, n, inner;
    /* n scratch values; NULL (inputs read in place, emu_reduce_view) where var
     * and norm2 may compute their terms as the sum reads them */
    double *tmp;
} red;

static emu_vec decoded(const double *x, int64_t st)
{
    return (emu_vec){.d = x, .st = st};
}

/* Reduction length 0 is possible for sum only (catalog.c refuses the others). */

static double row_max(const emu_vec *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        double v = emu_vec_at(x, j);
        if (isnan(v))
            return v;
        if (v > m)
            m = v;
    }
    return m;
}

/* tmp[j] = exp(x_j - m) in compute; returns the accumulated sum rounded to compute. */
static double exp_sum(red *r, const double *x, int64_t st, double m)
{
    emu_call *c = r->c;
    for (int64_t j = 0; j < r->n; j++) {
        double d = emu_add(c, r->cd, emu_round(c, r->cd, x[j * st]), -m);
        r->tmp[j] = emu_fn(c, NV_FN_EXP, d, r->cd);
    }
    return emu_round(c, r->cd, emu_sum(c, r->ad, r->tmp, 1, NULL, 0, r->n));
}

static double row_logsumexp(red *r, const double *x, int64_t st)
{
    emu_call *c = r->c;
    emu_vec xv = decoded(x, st);
    double m = emu_round(c, r->cd, row_max(&xv, r->n));
    if (isinf(m))
        return m; /* all -inf: -inf; any +inf: +inf (log of an infinite sum) */
    double s = exp_sum(r, x, st, m);
    return emu_add(c, r->cd, m, emu_fn(c, NV_FN_LOG, s, r->cd));
}

/* A term of var or norm2 computed from the value read: v rounded to accum,
 * then less the mean (var) or scaled by 2^-e (norm2). */
typedef struct term_map {
    emu_call *c;
    nv_dtype ad;
    double m;
    int e;
} term_map;

static double deviation(const void *ud, double v)
{
    const term_map *t = ud;
    return emu_add(t->c, t->ad, emu_round(t->c, t->ad, v), -t->m);
}

static double scaled(const void *ud, double v)
{
    const term_map *t = ud;
    return ldexp(emu_round(t->c, t->ad, v), -t->e);
}

/* The sum of the squares of f(x_j), f a term_map function: from r->tmp filled
 * in order j, or computed as the sum reads them, which gives the same terms
 * where no rounding draws from the stochastic stream (emu_reduce_view keeps
 * r->tmp under stochastic rounding, where the order of the draws is the
 * result's). */
static double sum_sq_of(red *r, const emu_vec *x, double (*f)(const void *, double),
                        const term_map *t)
{
    if (!r->tmp) {
        emu_vec fx = *x;
        fx.map = f;
        fx.map_ud = t;
        return emu_sum_vec(r->c, r->ad, &fx, &fx, r->n);
    }
    for (int64_t j = 0; j < r->n; j++)
        r->tmp[j] = f(t, emu_vec_at(x, j));
    return emu_sum(r->c, r->ad, r->tmp, 1, r->tmp, 1, r->n);
}

/* Variance: two-pass (mean, then the sum of squared deviations) or Welford's
 * update, each step rounded in accum (Higham §1.9, Chan-Golub-LeVeque 1983). */
static double row_var(red *r, const emu_vec *x)
{
    emu_call *c = r->c;
    nv_dtype ad = r->ad;
    double denom = (double)(r->n - r->a->correction);
    if (!r->a->welford) {
        term_map t = {c, ad, emu_div(c, ad, emu_sum_vec(c, ad, x, NULL, r->n), (double)r->n), 0};
        return emu_div(c, ad, sum_sq_of(r, x, deviation, &t), denom);
    }
    double mean = 0, m2 = 0;
    for (int64_t j = 0; j < r->n; j++) {
        double v = emu_round(c, ad, emu_vec_at(x, j));
        double delta = emu_add(c, ad, v, -mean);
        mean = emu_add(c, ad, mean, emu_div(c, ad, delta, (double)(j + 1)));
        double delta2 = emu_add(c, ad, v, -mean);
        m2 = c->m->fma ? emu_fma(c, ad, delta, delta2, m2)
                       : emu_add(c, ad, m2, emu_mul(c, ad, delta, delta2));
    }
    return emu_div(c, ad, m2, denom);
}

/* norm2 with the scaling of LAPACK's nrm2 (Blue's and Hammarling's idea, here by
 * a power of two): the squares of x 2^s, 2^s bringing max |x| near 1, are summed
 * in the accumulate dtype and the root is scaled back. A power of two is exact
 * and commutes with rounding away from the subnormals, so the result is that of
 * the plain sum of squares wherever that neither overflows nor underflows, and
 * the intermediate squares of values near the format's max or min stay in range
 * (docs/TOLERANCES.md "Intermediate overflow": a device that does not scale
 * overflows its accumulator, a documented outcome, or underflows to a wrong 0). */
static double row_norm2(red *r, const emu_vec *x)
{
    emu_call *c = r->c;
    double mx = 0;
    for (int64_t j = 0; j < r->n; j++) {
        double v = emu_vec_at(x, j);
        if (isfinite(v))
            mx = fmax(mx, fabs(v));
    }
    term_map t = {c, r->ad, 0, 0};
    if (mx > 0)
        frexp(mx, &t.e);
    double s = emu_sqrt(c, r->ad, sum_sq_of(r, x, scaled, &t));
    return emu_round(c, r->ad, ldexp(s, t.e));
}

/* layer_norm / rms_norm over the last axis (inner == 1). */
static void row_norm(red *r, bool layer, const double *x, const double *w, const double *b,
                     double *y)
{
    emu_call *c = r->c;
    nv_dtype ad = r->ad, cd = r->cd;
    int64_t n = r->n;
    double m = 0;
    if (layer)
        m = emu_div(c, ad, emu_sum(c, ad, x, 1, NULL, 0, n), (double)n);
    for (int64_t j = 0; j < n; j++)
        r->tmp[j] = layer ? emu_add(c, ad, emu_round(c, ad, x[j]), -m) : emu_round(c, ad, x[j]);
    double ms = emu_div(c, ad, emu_sum(c, ad, r->tmp, 1, r->tmp, 1, n), (double)n);
    double den = emu_round(c, cd, emu_add(c, ad, ms, emu_round(c, ad, r->a->eps)));
    double rstd = emu_fn(c, NV_FN_RSQRT, den, cd);
    for (int64_t j = 0; j < n; j++) {
        double v = emu_mul(c, cd, emu_round(c, cd, r->tmp[j]), rstd);
        double wj = emu_round(c, cd, w[j]);
        if (!layer)
            y[j] = emu_mul(c, cd, v, wj);
        else if (c->m->fma)
            y[j] = emu_fma(c, cd, v, wj, emu_round(c, cd, b[j]));
        else
            y[j] = emu_add(c, cd, emu_mul(c, cd, v, wj), emu_round(c, cd, b[j]));
    }
}

static void row_softmax(red *r, bool log_form, const double *x, int64_t st, double *y)
{
    emu_call *c = r->c;
    nv_dtype cd = r->cd;
    emu_vec xv = decoded(x, st);
    double m = emu_round(c, cd, row_max(&xv, r->n));
    double s = exp_sum(r, x, st, m);
    double ls = log_form ? emu_fn(c, NV_FN_LOG, s, cd) : 0;
    for (int64_t j = 0; j < r->n; j++) {
        if (log_form)
            y[j * st] = emu_add(c, cd, emu_add(c, cd, emu_round(c, cd, x[j * st]), -m), -ls);
        else
            y[j * st] = emu_div(c, cd, r->tmp[j], s);
    }
}

static int cross_entropy(red *r, const nv_tensor *logits, const nv_tensor *target, double *out,
                         char *err, size_t errlen)
{
    emu_call *c = r->c;
    int64_t rows = logits->shape[0], C = logits->shape[1];
    double *loss =
        r->a->reduction_mean ? malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double)) : out;
    if (!loss) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    for (int64_t i = 0; i < rows; i++) {
        double t = target->data[i];
        if (!(t >= 0 && t < (double)C)) {
            snprintf(err, errlen, "cross_entropy: target '%g' of row %lld is outside [0, %lld)", t,
                     (long long)i, (long long)C);
            if (loss != out)
                free(loss);
            return NV_E_INVALID;
        }
        const double *x = logits->data + i * C;
        double lse = row_logsumexp(r, x, 1);
        loss[i] = emu_add(c, r->cd, lse, -emu_round(c, r->cd, x[(int64_t)t]));
    }
    if (loss != out) {
        out[0] = emu_div(c, r->ad, emu_sum(c, r->ad, loss, 1, NULL, 0, rows), (double)rows);
        free(loss);
    }
    return NV_OK;
}

typedef enum red_kind {
    R_SUM,
    R_MEAN,
    R_MAX,
    R_VAR,
    R_NORM2,
    R_LSE,
    R_SOFTMAX,
    R_LOGSOFTMAX
} red_kind;

static red_kind kind_of(const char *name)
{
    static const char *const names[] = {"sum",   "mean",      "max",     "var",
                                        "norm2", "logsumexp", "softmax", "log_softmax"};
    for (int k = 0; k < 8; k++)
        if (!strcmp(name, names[k]))
            return (red_kind)k;
    return R_LOGSOFTMAX;
}

/* The input of reduce_rows: a decoded row-major tensor x, or (x NULL) a view v
 * read in place, decoded element by element with DAZ daz. */
typedef struct red_in {
    const double *x;
    const nv_tensor_view *v;
    bool daz;
    int ax;
} red_in;

/* Row (o, i) of the input: the n elements along the axis with outer index o and
 * inner index i (row-major over the axes before and after it). */
static emu_vec row_of(const red *r, const red_in *in, int64_t o, int64_t i)
{
    if (in->x)
        return decoded(in->x + o * r->n * r->inner + i, r->inner);
    const nv_tensor_view *v = in->v;
    int64_t off = 0;
    for (int d = v->ndim - 1; d > in->ax; d--) {
        off += i % v->shape[d] * v->strides[d];
        i /= v->shape[d];
    }
    for (int d = in->ax - 1; d >= 0; d--) {
        off += o % v->shape[d] * v->strides[d];
        o /= v->shape[d];
    }
    nv_dtype dt = (nv_dtype)v->dtype;
    return (emu_vec){.enc = (const char *)v->data + off * nv_dtype_get(dt)->storage_bytes,
                     .dt = dt,
                     .daz = in->daz,
                     .st = v->strides[in->ax]};
}

static void reduce_rows(red *r, red_kind k, const red_in *in, double *out)
{
    emu_call *c = r->c;
    nv_dtype ad = r->ad;
    int64_t st = r->inner;
    for (int64_t o = 0; o < r->outer; o++) {
        for (int64_t i = 0; i < r->inner; i++) {
            emu_vec row = row_of(r, in, o, i);
            double *yrow = out + o * r->n * r->inner + i; /* shape-keeping ops */
            double *dst = out + o * r->inner + i;         /* axis-removing ops */
            switch (k) {
            case R_SUM:
                *dst = emu_sum_vec(c, ad, &row, NULL, r->n);
                break;
            case R_MEAN:
                *dst = emu_div(c, ad, emu_sum_vec(c, ad, &row, NULL, r->n), (double)r->n);
                break;
            case R_MAX:
                *dst = row_max(&row, r->n);
                break;
            case R_VAR:
                *dst = row_var(r, &row);
                break;
            case R_NORM2:
                *dst = row_norm2(r, &row);
                break;
            case R_LSE: /* decoded inputs only (emu_reduce_reads_view) */
                *dst = row_logsumexp(r, row.d, st);
                break;
            case R_SOFTMAX:
                row_softmax(r, false, row.d, st, yrow);
                break;
            case R_LOGSOFTMAX:
                row_softmax(r, true, row.d, st, yrow);
                break;
            }
        }
    }
}

static int norm_axis(const nv_op_attrs *a, const char *name, int ndim)
{
    if (!strcmp(name, "layer_norm") || !strcmp(name, "rms_norm"))
        return ndim - 1;
    if (!strcmp(name, "cross_entropy"))
        return 1;
    return a->axis < 0 ? a->axis + ndim : a->axis;
}

/* r for the reduction of op along its axis of a tensor of this shape; the axis. */
static int red_init(red *r, emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int ndim,
                    const int64_t *shape)
{
    int ax = norm_axis(a, op->name, ndim);
    *r = (red){c, a, c->compute, c->accum, 1, shape[ax], 1, NULL};
    for (int d = 0; d < ax; d++)
        r->outer *= shape[d];
    for (int d = ax + 1; d < ndim; d++)
        r->inner *= shape[d];
    return ax;
}

static double *tmp_new(const red *r, char *err, size_t errlen)
{
    double *t = malloc((size_t)(r->n > 0 ? r->n : 1) * sizeof(double));
    if (!t)
        snprintf(err, errlen, "out of memory");
    return t;
}

int emu_reduce_op(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
                  const nv_tensor *const *in, double *out, char *err, size_t errlen)
{
    const nv_tensor *x = in[0];
    red r;
    red_in ri = {.x = x->data, .ax = red_init(&r, c, op, a, x->ndim, x->shape)};
    if (!(r.tmp = tmp_new(&r, err, errlen)))
        return NV_E_NOMEM;
    int rc = NV_OK;
    if (!strcmp(op->name, "cross_entropy")) {
        rc = cross_entropy(&r, x, in[1], out, err, errlen);
    } else if (!strcmp(op->name, "layer_norm") || !strcmp(op->name, "rms_norm")) {
        bool layer = op->name[0] == 'l';
        for (int64_t o = 0; o < r.outer; o++)
            row_norm(&r, layer, x->data + o * r.n, in[1]->data, layer ? in[2]->data : NULL,
                     out + o * r.n);
    } else {
        reduce_rows(&r, kind_of(op->name), &ri, out);
    }
    (void)n_in;
    free(r.tmp);
    return rc;
}

bool emu_reduce_reads_view(const nv_op_def *op)
{
    return op->kind == NV_OPK_REDUCE && kind_of(op->name) <= R_NORM2;
}

int emu_reduce_view(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const nv_tensor_view *v,
                    bool daz, double *out, char *err, size_t errlen)
{
    red r;
    red_in ri = {.v = v, .daz = daz, .ax = red_init(&r, c, op, a, v->ndim, v->shape)};
    red_kind k = kind_of(op->name);
    bool tmp =
        ((k == R_VAR && !a->welford) || k == R_NORM2) && c->rm.rounding == NV_ROUND_STOCHASTIC;
    if (tmp && !(r.tmp = tmp_new(&r, err, errlen)))
        return NV_E_NOMEM;
    reduce_rows(&r, k, &ri, out);
    free(r.tmp);
    return NV_OK;
}
