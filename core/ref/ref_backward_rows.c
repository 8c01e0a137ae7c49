/* Reference backward of the row-wise ops (reductions, softmax family, the
 * norms, cross_entropy) and of matmul/bmm, with the fp64 forwards that finite
 * differences differentiate. Formulas (y the forward output, n the line):
 *   sum: gx = gy; mean: gy / n; max: gy at the (unique) argmax;
 *   var: gx_j = gy 2 (x_j - mu) / (n - correction); norm2: gy x_j / ||x||;
 *   logsumexp: gy softmax(x)_j; softmax: s_j (gy_j - sum_k gy_k s_k);
 *   log_softmax: gy_j - s_j sum_k gy_k;
 *   layer_norm: g = gy w, gx = rstd (g - mean(g) - xhat mean(g xhat)),
 *     gw = sum_rows gy xhat, gb = sum_rows gy;
 *   rms_norm: r = (mean(x^2) + eps)^-1/2, gx = r (g - x r^2 mean(g x)),
 *     gw = sum_rows gy x r;
 *   cross_entropy: gz_j = gy_n (s_j - [j == t_n]) (/ N with "mean");
 *   matmul: gA = gC B^T, gB = A^T gC.
 * mag is the same product with |.| on every term; where a device works from a
 * saved or recomputed value (x - mu, the exponent x_j - lse), the magnitudes of
 * that value's operands enter, since its rounding error scales with them. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward_internal.h"
#include "numval/backend.h"

typedef struct rowctx {
    int id;
    const nv_op_attrs *a;
    const nv_tensor *const *in;
    nvb_lines L;
    int64_t cur, base; /* the line whose offset base is cached, and that base */
    double *buf;       /* n scratch (with a cache: its probabilities of the line) */
    double *own;       /* buf when it is ours */
    nv_ref_cache *rc;  /* may be NULL */
} rowctx;

/* Offset of element j of line l, the line's base cached (an integer division
 * per access would dominate the row loops). */
static inline int64_t AT(rowctx *c, int64_t l, int64_t j)
{
    if (l != c->cur) {
        c->cur = l;
        c->base = (l / c->L.inner) * c->L.n * c->L.inner + l % c->L.inner;
    }
    return c->base + j * c->L.inner;
}

static inline double X(rowctx *c, int64_t l, int64_t j)
{
    return c->in[0]->data[AT(c, l, j)];
}

static double line_max(rowctx *c, int64_t l, int64_t *ret_arg)
{
    double m = X(c, l, 0);
    int64_t arg = 0;
    for (int64_t j = 1; j < c->L.n; j++)
        if (X(c, l, j) > m)
            m = X(c, l, j), arg = j;
    if (ret_arg)
        *ret_arg = arg;
    return m;
}

static inline bool same_bits(double a, double b)
{
    uint64_t u, v;
    memcpy(&u, &a, sizeof u);
    memcpy(&v, &b, sizeof v);
    return u == v;
}

/* With a cache, before a line's work: entries of a line that changed are
 * dropped and its new values saved. */
static void line_sync(rowctx *c, int64_t l)
{
    nv_ref_cache *k = c->rc;
    int64_t b = AT(c, l, 0), st = c->L.inner, n = c->L.n;
    const double *x = c->in[0]->data + b;
    double *saved = k->x + b;
    if (k->have[l] & ~NVB_RC_EXP) {
        if (st == 1 && memcmp(x, saved, sizeof(double) * (size_t)n) == 0)
            return;
        int64_t j = 0;
        while (st != 1 && j < n && same_bits(x[j * st], saved[j * st]))
            j++;
        if (st != 1 && j == n)
            return;
    }
    if (st == 1)
        memcpy(saved, x, sizeof(double) * (size_t)n);
    for (int64_t j = 0; st != 1 && j < n; j++)
        saved[j * st] = x[j * st];
    k->have[l] &= NVB_RC_EXP;
}

/* line_softmax through the cache: the line's probabilities and lse when it is
 * unchanged, else each exponential whose argument kept its bits. */
static double line_softmax_cached(rowctx *c, int64_t l)
{
    nv_ref_cache *k = c->rc;
    int64_t n = c->L.n, st = c->L.inner, b = l * n;
    c->buf = k->p + b;
    if (k->have[l] & NVB_RC_SOFTMAX)
        return k->lse[l];
    const double *x = c->in[0]->data + AT(c, l, 0);
    double m = x[0], s = 0;
    for (int64_t j = 1; j < n; j++)
        m = x[j * st] > m ? x[j * st] : m;
    bool memo = k->have[l] & NVB_RC_EXP;
    for (int64_t j = 0; j < n; j++) {
        double t = x[j * st] - m;
        if (!memo || !same_bits(t, k->arg[b + j])) {
            k->arg[b + j] = t;
            k->ex[b + j] = exp(t);
        }
        s += c->buf[j] = k->ex[b + j];
    }
    double inv = 1 / s;
    for (int64_t j = 0; j < n; j++)
        c->buf[j] *= inv;
    k->lse[l] = c->id == NVO_SOFTMAX ? 0 : m + log(s); /* softmax never reads it */
    k->have[l] |= NVB_RC_EXP | NVB_RC_SOFTMAX;
    return k->lse[l];
}

/* buf[j] = softmax_j; returns log-sum-exp (0 for softmax itself). */
static double line_softmax(rowctx *c, int64_t l)
{
    if (c->rc)
        return line_softmax_cached(c, l);
    const double *x = c->in[0]->data + AT(c, l, 0);
    int64_t st = c->L.inner;
    double m = x[0], s = 0;
    for (int64_t j = 1; j < c->L.n; j++) /* no argmax: a branch-free max */
        m = x[j * st] > m ? x[j * st] : m;
    for (int64_t j = 0; j < c->L.n; j++)
        s += c->buf[j] = exp(x[j * st] - m);
    double inv = 1 / s; /* one more rounding (2^-53): far below what the checks resolve */
    for (int64_t j = 0; j < c->L.n; j++)
        c->buf[j] *= inv;
    return c->id == NVO_SOFTMAX ? 0 : m + log(s); /* softmax never reads it */
}

static double line_mean(rowctx *c, int64_t l, double *ret_abs)
{
    double s = 0, sa = 0;
    for (int64_t j = 0; j < c->L.n; j++)
        s += X(c, l, j), sa += fabs(X(c, l, j));
    if (ret_abs)
        *ret_abs = sa / (double)c->L.n;
    return s / (double)c->L.n;
}

/* mean and 1/sqrt(var + eps) (layer_norm), or 0 and 1/sqrt(mean(x^2) + eps). */
static void line_norm(rowctx *c, int64_t l, double *mu, double *rstd)
{
    nv_ref_cache *k = c->rc;
    if (k && (k->have[l] & NVB_RC_NORM)) {
        *mu = k->mu[l];
        *rstd = k->rstd[l];
        return;
    }
    int64_t n = c->L.n, st = c->L.inner;
    const double *x = c->in[0]->data + AT(c, l, 0);
    double m = 0, q = 0;
    if (c->id == NVO_LAYER_NORM) { /* line_mean's mean */
        for (int64_t j = 0; j < n; j++)
            m += x[j * st];
        m /= (double)n;
    }
    for (int64_t j = 0; j < n; j++)
        q += (x[j * st] - m) * (x[j * st] - m);
    *mu = m;
    *rstd = 1 / sqrt(q / (double)c->L.n + c->a->eps);
    if (k) {
        k->mu[l] = *mu;
        k->rstd[l] = *rstd;
        k->have[l] |= NVB_RC_NORM;
    }
}

/* mean |x| of the line (line_mean's ret_abs), through the cache. */
static double line_mean_abs(rowctx *c, int64_t l)
{
    nv_ref_cache *k = c->rc;
    if (k && (k->have[l] & NVB_RC_MABS))
        return k->mab[l];
    double mabs;
    line_mean(c, l, &mabs);
    if (k) {
        k->mab[l] = mabs;
        k->have[l] |= NVB_RC_MABS;
    }
    return mabs;
}

static double param(rowctx *c, int k, int64_t j)
{
    return c->in[k]->data[j];
}

static void forward_line(rowctx *c, int64_t l, double *out)
{
    int64_t n = c->L.n;
    double v = 0, mu, rstd;
    switch (c->id) {
    case NVO_SUM:
    case NVO_MEAN:
        for (int64_t j = 0; j < n; j++)
            v += X(c, l, j);
        out[l] = c->id == NVO_MEAN ? v / (double)n : v;
        return;
    case NVO_MAX:
        out[l] = line_max(c, l, NULL);
        return;
    case NVO_VAR:
        mu = line_mean(c, l, NULL);
        for (int64_t j = 0; j < n; j++)
            v += (X(c, l, j) - mu) * (X(c, l, j) - mu);
        out[l] = v / (double)(n - c->a->correction);
        return;
    case NVO_NORM2:
        for (int64_t j = 0; j < n; j++)
            v += X(c, l, j) * X(c, l, j);
        out[l] = sqrt(v);
        return;
    case NVO_LOGSUMEXP:
        out[l] = line_softmax(c, l);
        return;
    case NVO_CROSS_ENTROPY: {
        double lse = line_softmax(c, l);
        out[l] = lse - X(c, l, (int64_t)c->in[1]->data[l]);
        return;
    }
    case NVO_SOFTMAX:
    case NVO_LOG_SOFTMAX: {
        v = line_softmax(c, l);
        int64_t st = c->L.inner, b = AT(c, l, 0);
        const double *x = c->in[0]->data + b;
        for (int64_t j = 0; j < n; j++)
            out[b + j * st] = c->id == NVO_SOFTMAX ? c->buf[j] : x[j * st] - v;
        return;
    }
    default: { /* layer_norm, rms_norm */
        int64_t st = c->L.inner, b = AT(c, l, 0);
        const double *x = c->in[0]->data + b, *w = c->in[1]->data;
        const double *bias = c->id == NVO_LAYER_NORM ? c->in[2]->data : NULL;
        line_norm(c, l, &mu, &rstd);
        for (int64_t j = 0; j < n; j++) {
            double y = (x[j * st] - mu) * rstd * w[j];
            out[b + j * st] = bias ? y + bias[j] : y;
        }
        return;
    }
    }
}

/* The ops whose line work the cache holds. */
static bool cached_op(int id)
{
    switch (id) {
    case NVO_SOFTMAX:
    case NVO_LOG_SOFTMAX:
    case NVO_LOGSUMEXP:
    case NVO_CROSS_ENTROPY:
    case NVO_LAYER_NORM:
    case NVO_RMS_NORM:
        return true;
    default:
        return false;
    }
}

static int ctx_init(rowctx *c, int id, const nv_op_attrs *a, const nv_tensor *const *in,
                    nv_ref_cache *cache)
{
    size_t n;
    const nv_op_def *ops = nv_op_all(&n);
    c->id = id;
    c->cur = -1;
    c->a = a;
    c->in = in;
    c->buf = c->own = NULL;
    c->rc = NULL;
    if (nvb_lines_of(&ops[id], a, in[0], &c->L) < 0)
        return NV_E_SHAPE;
    if (cache && cached_op(id) && nvb_cache_bind(cache, id, a, &c->L) == 0) {
        c->rc = cache; /* (without memory for it: the uncached path, same values) */
        return 0;
    }
    c->buf = c->own = malloc(sizeof(double) * (size_t)(c->L.n > 0 ? c->L.n : 1));
    return c->buf ? 0 : NV_E_NOMEM;
}

int nvb_forward_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, double *out,
                     nv_ref_cache *cache)
{
    rowctx c;
    int r = ctx_init(&c, id, a, in, cache);
    if (r < 0)
        return r;
    int64_t lines = c.L.outer * c.L.inner;
    bool mean = id == NVO_CROSS_ENTROPY && a->reduction_mean; /* output: one scalar */
    double *loss = mean ? malloc(sizeof(double) * (size_t)(lines + 1)) : out;
    if (!loss) {
        free(c.own);
        return NV_E_NOMEM;
    }
    for (int64_t l = 0; l < lines; l++) {
        if (c.rc)
            line_sync(&c, l);
        forward_line(&c, l, loss);
    }
    if (mean) {
        double s = 0;
        for (int64_t l = 0; l < lines; l++)
            s += loss[l];
        out[0] = s / (double)lines;
        free(loss);
    }
    free(c.own);
    return 0;
}

/* ---- VJPs, one line at a time ---- */

typedef struct vjp_out {
    double *const *gx;
    double *const *mag;
} vjp_out;

static void put(const vjp_out *o, int k, int64_t e, double g, double m)
{
    if (o->gx && o->gx[k])
        o->gx[k][e] = g;
    if (o->mag && o->mag[k])
        o->mag[k][e] = m;
}

static void acc(const vjp_out *o, int k, int64_t e, double g, double m)
{
    if (o->gx && o->gx[k])
        o->gx[k][e] += g;
    if (o->mag && o->mag[k])
        o->mag[k][e] += m;
}

static void vjp_reduce_line(rowctx *c, int64_t l, double g, const vjp_out *o)
{
    int64_t n = c->L.n, arg;
    double ag = fabs(g), mu, mabs, nrm = 0;
    switch (c->id) {
    case NVO_SUM:
    case NVO_MEAN: {
        double d = c->id == NVO_MEAN ? 1 / (double)n : 1;
        for (int64_t j = 0; j < n; j++)
            put(o, 0, AT(c, l, j), g * d, ag * d);
        return;
    }
    case NVO_MAX:
        line_max(c, l, &arg);
        for (int64_t j = 0; j < n; j++)
            put(o, 0, AT(c, l, j), j == arg ? g : 0, j == arg ? ag : 0);
        return;
    case NVO_VAR: {
        mu = line_mean(c, l, &mabs);
        double d = 2 / (double)(n - c->a->correction);
        for (int64_t j = 0; j < n; j++)
            put(o, 0, AT(c, l, j), g * d * (X(c, l, j) - mu), ag * d * (fabs(X(c, l, j)) + mabs));
        return;
    }
    case NVO_NORM2:
        for (int64_t j = 0; j < n; j++)
            nrm += X(c, l, j) * X(c, l, j);
        nrm = sqrt(nrm);
        for (int64_t j = 0; j < n; j++)
            put(o, 0, AT(c, l, j), g * X(c, l, j) / nrm, ag * fabs(X(c, l, j)) / nrm);
        return;
    default: { /* logsumexp */
        double lse = line_softmax(c, l);
        for (int64_t j = 0; j < n; j++)
            put(o, 0, AT(c, l, j), g * c->buf[j],
                ag * c->buf[j] * (1 + fabs(X(c, l, j)) + fabs(lse)));
        return;
    }
    }
}

/* softmax's gradient alone (no magnitudes): the terms of vjp_softmax_line
 * that it needs, in the same order. */
static void vjp_softmax_line_gx(rowctx *c, int64_t l, const double *gy, double *gx)
{
    int64_t n = c->L.n, st = c->L.inner, b = AT(c, l, 0);
    line_softmax(c, l);
    const double *s = c->buf, *g = gy + b;
    double dot = 0;
    for (int64_t j = 0; j < n; j++)
        dot += g[j * st] * s[j];
    for (int64_t j = 0; j < n; j++)
        gx[b + j * st] = s[j] * (g[j * st] - dot);
}

static void vjp_softmax_line(rowctx *c, int64_t l, const double *gy, const vjp_out *o)
{
    if (c->id == NVO_SOFTMAX && !o->mag && o->gx && o->gx[0]) {
        vjp_softmax_line_gx(c, l, gy, o->gx[0]);
        return;
    }
    int64_t n = c->L.n;
    double lse = line_softmax(c, l), dot = 0, dabs = 0, sum = 0, sabs = 0;
    for (int64_t j = 0; j < n; j++) {
        double g = gy[AT(c, l, j)];
        dot += g * c->buf[j];
        dabs += fabs(g) * c->buf[j];
        sum += g;
        sabs += fabs(g);
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t e = AT(c, l, j);
        double s = c->buf[j];
        if (c->id == NVO_SOFTMAX)
            put(o, 0, e, s * (gy[e] - dot), s * (fabs(gy[e]) + dabs));
        else /* the device's exp(y_j) carries |y_j| = |x_j - lse| of error */
            put(o, 0, e, gy[e] - s * sum,
                fabs(gy[e]) + s * sabs * (1 + fabs(X(c, l, j)) + fabs(lse)));
    }
}

/* The norms' gradients alone (no magnitudes): the terms of vjp_norm_line
 * that they need, in the same order; gx[k] NULL skips input k. */
static void vjp_norm_line_gx(rowctx *c, int64_t l, const double *gy, double *const *gx)
{
    int64_t n = c->L.n, st = c->L.inner, b = AT(c, l, 0);
    bool ln = c->id == NVO_LAYER_NORM;
    const double *x = c->in[0]->data + b, *w = c->in[1]->data, *g = gy + b;
    double mu, rstd, mg = 0, mgx = 0;
    line_norm(c, l, &mu, &rstd);
    if (gx[0]) {
        for (int64_t j = 0; j < n; j++) {
            double gj = g[j * st] * w[j];
            mg += gj;
            mgx += gj * ((x[j * st] - mu) * rstd);
        }
        mg /= (double)n, mgx /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            double gj = g[j * st] * w[j], xh = (x[j * st] - mu) * rstd;
            gx[0][b + j * st] = ln ? rstd * (gj - mg - xh * mgx) : rstd * (gj - xh * mgx);
        }
    }
    for (int64_t j = 0; gx[1] && j < n; j++)
        gx[1][j] += g[j * st] * ((x[j * st] - mu) * rstd);
    for (int64_t j = 0; ln && gx[2] && j < n; j++)
        gx[2][j] += g[j * st];
}

static void vjp_norm_line(rowctx *c, int64_t l, const double *gy, const vjp_out *o)
{
    if (!o->mag && o->gx) {
        vjp_norm_line_gx(c, l, gy, o->gx);
        return;
    }
    int64_t n = c->L.n;
    bool ln = c->id == NVO_LAYER_NORM;
    double mu, rstd, mabs = 0, mg = 0, mgx = 0, amg = 0, amgx = 0;
    line_norm(c, l, &mu, &rstd);
    if (ln)
        mabs = line_mean_abs(c, l);
    for (int64_t j = 0; j < n; j++) {
        double g = gy[AT(c, l, j)] * param(c, 1, j);
        double xh = (X(c, l, j) - mu) * rstd, axh = (fabs(X(c, l, j)) + mabs) * rstd;
        mg += g, amg += fabs(g);
        mgx += g * xh, amgx += fabs(g) * axh;
    }
    mg /= (double)n, amg /= (double)n, mgx /= (double)n, amgx /= (double)n;
    for (int64_t j = 0; j < n; j++) {
        int64_t e = AT(c, l, j);
        double g = gy[e] * param(c, 1, j), ag = fabs(g);
        double xh = (X(c, l, j) - mu) * rstd, axh = (fabs(X(c, l, j)) + mabs) * rstd;
        if (ln)
            put(o, 0, e, rstd * (g - mg - xh * mgx), rstd * (ag + amg + axh * amgx));
        else
            put(o, 0, e, rstd * (g - xh * mgx), rstd * (ag + axh * amgx));
        acc(o, 1, j, gy[e] * xh, fabs(gy[e]) * axh);
        if (ln)
            acc(o, 2, j, gy[e], fabs(gy[e]));
    }
}

static void vjp_ce_line(rowctx *c, int64_t l, double g, const vjp_out *o)
{
    int64_t t = (int64_t)c->in[1]->data[l];
    double m = line_max(c, l, NULL);
    line_softmax(c, l);
    for (int64_t j = 0; j < c->L.n; j++) {
        double s = c->buf[j], hot = j == t;
        /* The device's exponent x_j - max carries |x_j| + |max| of error. */
        put(o, 0, AT(c, l, j), g * (s - hot),
            fabs(g) * (s * (1 + fabs(X(c, l, j)) + fabs(m)) + hot));
    }
}

int nvb_vjp_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                 double *const *gx, double *const *mag, nv_ref_cache *cache)
{
    rowctx c;
    int r = ctx_init(&c, id, a, in, cache);
    if (r < 0)
        return r;
    vjp_out o = {gx, mag};
    int64_t lines = c.L.outer * c.L.inner;
    for (int k = 1; k <= 2 && (id == NVO_LAYER_NORM || id == NVO_RMS_NORM); k++) {
        if (k == 2 && id != NVO_LAYER_NORM)
            break;
        for (int64_t j = 0; j < c.L.n; j++)
            put(&o, k, j, 0, 0);
    }
    for (int64_t l = 0; l < lines; l++) {
        if (c.rc)
            line_sync(&c, l);
        switch (id) {
        case NVO_SOFTMAX:
        case NVO_LOG_SOFTMAX:
            vjp_softmax_line(&c, l, gy, &o);
            break;
        case NVO_LAYER_NORM:
        case NVO_RMS_NORM:
            vjp_norm_line(&c, l, gy, &o);
            break;
        case NVO_CROSS_ENTROPY:
            vjp_ce_line(&c, l, a->reduction_mean ? gy[0] / (double)lines : gy[l], &o);
            break;
        default:
            vjp_reduce_line(&c, l, gy[l], &o);
            break;
        }
    }
    free(c.own);
    return 0;
}

/* ---- matmul / bmm (no scales) ---- */

typedef struct mm {
    int64_t batch, M, K, N;
} mm;

static mm mm_dims(const nv_tensor *const *in)
{
    const nv_tensor *A = in[0], *B = in[1];
    int nd = A->ndim;
    mm d = {1, A->shape[nd - 2], A->shape[nd - 1], B->shape[nd - 1]};
    for (int k = 0; k < nd - 2; k++)
        d.batch *= A->shape[k];
    return d;
}

int nvb_forward_matmul(const nv_tensor *const *in, double *out)
{
    mm d = mm_dims(in);
    const double *A = in[0]->data, *B = in[1]->data;
    for (int64_t b = 0; b < d.batch; b++)
        for (int64_t m = 0; m < d.M; m++)
            for (int64_t n = 0; n < d.N; n++) {
                double s = 0;
                for (int64_t k = 0; k < d.K; k++)
                    s += A[(b * d.M + m) * d.K + k] * B[(b * d.K + k) * d.N + n];
                out[(b * d.M + m) * d.N + n] = s;
            }
    return 0;
}

int nvb_vjp_matmul(const nv_tensor *const *in, const double *gy, double *const *gx,
                   double *const *mag)
{
    mm d = mm_dims(in);
    const double *A = in[0]->data, *B = in[1]->data;
    vjp_out o = {gx, mag};
    for (int64_t b = 0; b < d.batch; b++) {
        const double *G = gy + b * d.M * d.N;
        for (int64_t m = 0; m < d.M; m++)
            for (int64_t k = 0; k < d.K; k++) {
                double s = 0, sa = 0;
                for (int64_t n = 0; n < d.N; n++) {
                    double t = G[m * d.N + n] * B[(b * d.K + k) * d.N + n];
                    s += t, sa += fabs(t);
                }
                put(&o, 0, (b * d.M + m) * d.K + k, s, sa);
            }
        for (int64_t k = 0; k < d.K; k++)
            for (int64_t n = 0; n < d.N; n++) {
                double s = 0, sa = 0;
                for (int64_t m = 0; m < d.M; m++) {
                    double t = A[(b * d.M + m) * d.K + k] * G[m * d.N + n];
                    s += t, sa += fabs(t);
                }
                put(&o, 1, (b * d.K + k) * d.N + n, s, sa);
            }
    }
    return 0;
}

/* ---- sensitivity to the saved output (backward.h nv_op_vjp_sens) ---- */

static double sens_unary(int id, double x, double g)
{
    double y, ag = fabs(g);
    switch (id) {
    case NVO_TANH:
        y = tanh(x);
        return ag * 2 * y * y;
    case NVO_SIGMOID:
        y = 1 / (1 + exp(-x));
        return ag * y * (1 + 2 * y);
    case NVO_EXP:
        return ag * exp(x);
    case NVO_EXP2:
        return ag * M_LN2 * exp2(x);
    case NVO_EXPM1:
        return ag * fabs(expm1(x));
    case NVO_SQRT:
        return ag * 0.5 / sqrt(x);
    case NVO_RSQRT:
        return ag * 1.5 / (x * sqrt(x));
    case NVO_RECIPROCAL:
        return ag * 2 / (x * x);
    default:
        return 0;
    }
}

int nv_op_vjp_sens(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const double *gy, double *sens)
{
    assert(in && gy && sens);
    int id = nvo_op_id(op);
    if (id < 0 || n_in < 1)
        return NV_E_INVALID;
    if (op->kind == NV_OPK_ROTARY)
        return nvb_sens_rotary(a, in, gy, sens);
    if (op->kind != NV_OPK_REDUCE) {
        for (int64_t e = 0; e < in[0]->numel; e++)
            sens[e] = op->kind == NV_OPK_UNARY ? sens_unary(id, in[0]->data[e], gy[e]) : 0;
        return 0;
    }
    rowctx c;
    int r = ctx_init(&c, id, a, in, NULL);
    if (r < 0)
        return r;
    for (int64_t l = 0; l < c.L.outer * c.L.inner; l++) {
        double lse = line_softmax(&c, l), dabs = 0, sabs = 0, nrm = 0;
        for (int64_t j = 0; j < c.L.n; j++) {
            int64_t e = AT(&c, l, j);
            double g = id == NVO_SOFTMAX || id == NVO_LOG_SOFTMAX ? gy[e] : 0;
            dabs += fabs(g) * c.buf[j];
            sabs += fabs(g);
            nrm += X(&c, l, j) * X(&c, l, j);
        }
        for (int64_t j = 0; j < c.L.n; j++) {
            int64_t e = AT(&c, l, j);
            double s = c.buf[j], v = 0;
            if (id == NVO_SOFTMAX)
                v = s * (fabs(gy[e]) + 2 * dabs);
            else if (id == NVO_LOG_SOFTMAX)
                v = s * fabs(X(&c, l, j) - lse) * sabs;
            else if (id == NVO_NORM2)
                v = fabs(gy[l] * X(&c, l, j)) / sqrt(nrm);
            else if (id == NVO_LOGSUMEXP)
                v = fabs(gy[l]) * s * fabs(lse);
            sens[e] = v;
        }
    }
    free(c.own);
    return 0;
}
