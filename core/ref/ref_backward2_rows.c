/* Reference second-order VJPs of the row-wise ops and matmul (backward.h
 * nv_op_vjp2): the tangent along v of each VJP of ref_backward_rows.c. Per line
 * (n elements, s = softmax(x), G the line's output gradient), with
 * ds_j = s_j (v_j - s.v) the tangent of the softmax:
 *   sum, mean, max: 0 (the VJP does not depend on x);
 *   var: G d (v_j - mean(v)), d = 2 / (n - correction);
 *   norm2 (r = ||x||): G (v_j / r - x_j (x.v) / r^3);
 *   logsumexp: G ds_j;  cross_entropy: G ds_j;
 *   softmax: ds_j (gy_j - gy.s) - s_j (gy.ds);  log_softmax: -ds_j sum(gy);
 *   layer_norm / rms_norm, g = gy w, xh = (x - mu) r, r = (var + eps)^-1/2
 *   (rms: mu = 0, var = mean(x^2)), v = (vx, vw, vb):
 *     dr = -r^2 mean(xh vx), dxh_j = r (vx_j - mean(vx) - xh_j mean(xh vx))
 *     (rms: without mean(vx)), dg_j = gy_j vw_j,
 *     hx_j = dr (g_j - mg - xh_j mgx) + r (dg_j - dmg - dxh_j mgx - xh_j dmgx)
 *     with mg = mean(g), mgx = mean(g xh) and their tangents dmg = mean(dg),
 *     dmgx = mean(dg xh + g dxh) (rms: without the mg terms);
 *     hw_j = sum over lines of gy_j dxh_j; hb = 0;
 *   matmul: hA = gC vB^T, hB = vA^T gC.
 * mag: |.| on every term; |x - mu| enters as |x| + mean|x| and a computed
 * softmax as s (1 + |x_j| + |lse|), as the first-order magnitudes do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward_internal.h"
#include "numval/backend.h"

typedef struct line2 {
    int id;
    const nv_op_attrs *a;
    const nv_tensor *const *in;
    const double *const *v;
    double *const *hx, *const *mag;
    nvb_lines L;
    double *s, *ds, *dsa; /* n scratch each */
} line2;

static int64_t at(const line2 *c, int64_t l, int64_t j)
{
    return nvb_at(&c->L, l, j);
}

static double X(const line2 *c, int64_t l, int64_t j)
{
    return c->in[0]->data[at(c, l, j)];
}

static double V(const line2 *c, int k, int64_t e)
{
    return c->v[k] ? c->v[k][e] : 0;
}

static void put(const line2 *c, int k, int64_t e, double h, double m)
{
    if (c->hx && c->hx[k])
        c->hx[k][e] = h;
    if (c->mag && c->mag[k])
        c->mag[k][e] = m;
}

static void acc(const line2 *c, int k, int64_t e, double h, double m)
{
    if (c->hx && c->hx[k])
        c->hx[k][e] += h;
    if (c->mag && c->mag[k])
        c->mag[k][e] += m;
}

/* s, ds = tangent of s along v, dsa = its magnitude (with the computed
 * softmax's exponent error s (1 + |x_j| + |lse|)); returns lse. */
static double softmax_tangent(line2 *c, int64_t l)
{
    int64_t n = c->L.n;
    double m = X(c, l, 0), sum = 0, sv = 0, sva = 0;
    for (int64_t j = 1; j < n; j++)
        m = fmax(m, X(c, l, j));
    for (int64_t j = 0; j < n; j++)
        sum += c->s[j] = exp(X(c, l, j) - m);
    for (int64_t j = 0; j < n; j++) {
        c->s[j] /= sum;
        sv += c->s[j] * V(c, 0, at(c, l, j));
        sva += c->s[j] * fabs(V(c, 0, at(c, l, j)));
    }
    double lse = m + log(sum);
    for (int64_t j = 0; j < n; j++) {
        double vj = V(c, 0, at(c, l, j));
        c->ds[j] = c->s[j] * (vj - sv);
        c->dsa[j] = c->s[j] * (fabs(vj) + sva) * (1 + fabs(X(c, l, j)) + fabs(lse));
    }
    return lse;
}

static void reduce_line(line2 *c, int64_t l, double G)
{
    int64_t n = c->L.n;
    double aG = fabs(G);
    switch (c->id) {
    case NVO_VAR: {
        double mv = 0, mva = 0, d = 2 / (double)(n - c->a->correction);
        for (int64_t j = 0; j < n; j++)
            mv += V(c, 0, at(c, l, j)), mva += fabs(V(c, 0, at(c, l, j)));
        mv /= (double)n, mva /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            double vj = V(c, 0, at(c, l, j));
            put(c, 0, at(c, l, j), G * d * (vj - mv), aG * d * (fabs(vj) + mva));
        }
        return;
    }
    case NVO_NORM2: {
        double r2 = 0, xv = 0, xva = 0;
        for (int64_t j = 0; j < n; j++) {
            double xj = X(c, l, j), vj = V(c, 0, at(c, l, j));
            r2 += xj * xj, xv += xj * vj, xva += fabs(xj * vj);
        }
        double r = sqrt(r2), r3 = r * r2;
        for (int64_t j = 0; j < n; j++) {
            double xj = X(c, l, j), vj = V(c, 0, at(c, l, j));
            put(c, 0, at(c, l, j), G * (vj / r - xj * xv / r3),
                aG * (fabs(vj) / r + fabs(xj) * xva / r3));
        }
        return;
    }
    case NVO_LOGSUMEXP:
    case NVO_CROSS_ENTROPY:
        softmax_tangent(c, l);
        for (int64_t j = 0; j < n; j++)
            put(c, 0, at(c, l, j), G * c->ds[j], aG * c->dsa[j]);
        return;
    default: /* sum, mean, max */
        for (int64_t j = 0; j < n; j++)
            put(c, 0, at(c, l, j), 0, 0);
        return;
    }
}

static void softmax_line(line2 *c, int64_t l, const double *gy)
{
    int64_t n = c->L.n;
    softmax_tangent(c, l);
    double dot = 0, dota = 0, ddot = 0, ddota = 0, S = 0, Sa = 0;
    for (int64_t j = 0; j < n; j++) {
        double g = gy[at(c, l, j)];
        dot += g * c->s[j], dota += fabs(g) * c->s[j];
        ddot += g * c->ds[j], ddota += fabs(g) * c->dsa[j];
        S += g, Sa += fabs(g);
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(c, l, j);
        if (c->id == NVO_SOFTMAX)
            put(c, 0, e, c->ds[j] * (gy[e] - dot) - c->s[j] * ddot,
                c->dsa[j] * (fabs(gy[e]) + dota) + c->s[j] * ddota);
        else
            put(c, 0, e, -c->ds[j] * S, c->dsa[j] * Sa);
    }
}

/* Line statistics of layer_norm / rms_norm: mu (0 for rms), r, and the line's
 * mean |x| (for the magnitudes of x - mu). */
static void norm_stats(const line2 *c, int64_t l, double *mu, double *r, double *mabs)
{
    int64_t n = c->L.n;
    bool ln = c->id == NVO_LAYER_NORM;
    double m = 0, ma = 0, q = 0;
    for (int64_t j = 0; j < n; j++)
        m += X(c, l, j), ma += fabs(X(c, l, j));
    m = ln ? m / (double)n : 0;
    for (int64_t j = 0; j < n; j++)
        q += (X(c, l, j) - m) * (X(c, l, j) - m);
    *mu = m;
    *mabs = ln ? ma / (double)n : 0;
    *r = 1 / sqrt(q / (double)n + c->a->eps);
}

/* Sums over a line of layer_norm / rms_norm: values and magnitudes. */
typedef struct nsums {
    double mvx, a, mg, mgx, dmg, dmgx;       /* values */
    double amvx, aa, amg, amgx, admg, admgx; /* magnitudes */
} nsums;

static void norm_line(line2 *c, int64_t l, const double *gy)
{
    int64_t n = c->L.n;
    bool ln = c->id == NVO_LAYER_NORM;
    const double *w = c->in[1]->data;
    double mu, r, mabs;
    norm_stats(c, l, &mu, &r, &mabs);
    nsums z;
    memset(&z, 0, sizeof z);
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(c, l, j);
        double xh = (X(c, l, j) - mu) * r, axh = (fabs(X(c, l, j)) + mabs) * r;
        double vx = V(c, 0, e), g = gy[e] * w[j];
        z.mvx += vx, z.amvx += fabs(vx);
        z.a += xh * vx, z.aa += axh * fabs(vx);
        z.mg += g, z.amg += fabs(g);
        z.mgx += g * xh, z.amgx += fabs(g) * axh;
    }
    double inv = 1 / (double)n;
    z.mvx = ln ? z.mvx * inv : 0, z.amvx = ln ? z.amvx * inv : 0;
    z.a *= inv, z.aa *= inv, z.mg *= inv, z.amg *= inv, z.mgx *= inv, z.amgx *= inv;
    double dr = -r * r * z.a, adr = r * r * z.aa;
    /* second pass: the tangents dxh and dg, their means, and hw */
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(c, l, j);
        double xh = (X(c, l, j) - mu) * r, axh = (fabs(X(c, l, j)) + mabs) * r;
        double vx = V(c, 0, e), g = gy[e] * w[j], dg = gy[e] * V(c, 1, j);
        double dxh = r * (vx - z.mvx - xh * z.a), adxh = r * (fabs(vx) + z.amvx + axh * z.aa);
        c->ds[j] = dxh, c->dsa[j] = adxh;
        z.dmg += dg, z.admg += fabs(dg);
        z.dmgx += dg * xh + g * dxh, z.admgx += fabs(dg) * axh + fabs(g) * adxh;
        acc(c, 1, j, gy[e] * dxh, fabs(gy[e]) * adxh);
    }
    z.dmg *= inv, z.admg *= inv, z.dmgx *= inv, z.admgx *= inv;
    if (!ln)
        z.mg = z.amg = z.dmg = z.admg = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(c, l, j);
        double xh = (X(c, l, j) - mu) * r, axh = (fabs(X(c, l, j)) + mabs) * r;
        double g = gy[e] * w[j], dg = gy[e] * V(c, 1, j);
        double h = dr * (g - z.mg - xh * z.mgx) + r * (dg - z.dmg - c->ds[j] * z.mgx - xh * z.dmgx);
        double m = adr * (fabs(g) + z.amg + axh * z.amgx) +
                   r * (fabs(dg) + z.admg + c->dsa[j] * z.amgx + axh * z.admgx);
        put(c, 0, e, h, m);
    }
}

int nvb_vjp2_rows(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                  const double *const *v, double *const *hx, double *const *mag)
{
    size_t nops;
    const nv_op_def *ops = nv_op_all(&nops);
    line2 c = {.id = id, .a = a, .in = in, .v = v, .hx = hx, .mag = mag};
    if (nvb_lines_of(&ops[id], a, in[0], &c.L) < 0)
        return NV_E_SHAPE;
    size_t n = (size_t)(c.L.n > 0 ? c.L.n : 1);
    c.s = malloc(3 * n * sizeof(double));
    if (!c.s)
        return NV_E_NOMEM;
    c.ds = c.s + n, c.dsa = c.ds + n;
    int64_t lines = c.L.outer * c.L.inner;
    bool norm = id == NVO_LAYER_NORM || id == NVO_RMS_NORM;
    for (int k = 1; norm && k <= (id == NVO_LAYER_NORM ? 2 : 1); k++)
        for (int64_t j = 0; j < c.L.n; j++)
            put(&c, k, j, 0, 0); /* hw accumulates over the lines; hb stays 0 */
    for (int64_t l = 0; l < lines; l++) {
        if (id == NVO_SOFTMAX || id == NVO_LOG_SOFTMAX)
            softmax_line(&c, l, gy);
        else if (norm)
            norm_line(&c, l, gy);
        else if (id == NVO_CROSS_ENTROPY)
            reduce_line(&c, l, a->reduction_mean ? gy[0] / (double)lines : gy[l]);
        else
            reduce_line(&c, l, gy[l]);
    }
    free(c.s);
    return 0;
}

/* ---- matmul / bmm: the VJP is linear in each operand, so only the mixed
 * blocks remain: hA[m,k] = sum_n gC[m,n] vB[k,n], hB[k,n] = sum_m vA[m,k] gC[m,n] ---- */

int nvb_vjp2_matmul(const nv_tensor *const *in, const double *gy, const double *const *v,
                    double *const *hx, double *const *mag)
{
    const nv_tensor *A = in[0], *B = in[1];
    int nd = A->ndim;
    int64_t M = A->shape[nd - 2], K = A->shape[nd - 1], N = B->shape[nd - 1], batch = 1;
    for (int d = 0; d < nd - 2; d++)
        batch *= A->shape[d];
    const double *vA = v[0], *vB = v[1];
    for (int64_t b = 0; b < batch; b++) {
        const double *G = gy + b * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < K; k++) {
                double s = 0, sa = 0;
                for (int64_t n = 0; vB && n < N; n++) {
                    double t = G[m * N + n] * vB[(b * K + k) * N + n];
                    s += t, sa += fabs(t);
                }
                int64_t e = (b * M + m) * K + k;
                if (hx && hx[0])
                    hx[0][e] = s;
                if (mag && mag[0])
                    mag[0][e] = sa;
            }
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0, sa = 0;
                for (int64_t m = 0; vA && m < M; m++) {
                    double t = vA[(b * M + m) * K + k] * G[m * N + n];
                    s += t, sa += fabs(t);
                }
                int64_t e = (b * K + k) * N + n;
                if (hx && hx[1])
                    hx[1][e] = s;
                if (mag && mag[1])
                    mag[1][e] = sa;
            }
    }
    return 0;
}
