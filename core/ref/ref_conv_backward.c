/* Reference backward of the windowed linear ops (core/ops/conv.c): conv2d
 * and avg_pool2d. conv2d is bilinear in (x, w), so with the forward
 *   y[n, co, oh, ow] = sum_{c, i, j} x[n, q Cg + c, oh s - p + i d, ow s - p + j d] w[co, c, i, j]
 * its VJP is
 *   gx[n, q Cg + c, h, v] = sum_{co in q, i, j: h = oh s - p + i d, v = ow s - p + j d}
 *                           gy[n, co, oh, ow] w[co, c, i, j]
 * (the transposed convolution: gy dilated by the stride, correlated with the
 * spatially flipped kernel, each tap i meeting output row oh = (h + p - i d)
 * / s where that divides) and
 *   gw[co, c, i, j] = sum_{n, oh, ow} gy[n, co, oh, ow] x[n, q Cg + c, oh s - p + i d, ow s - p + j
 * d] (the correlation of the zero-padded x with gy), e.g. Dumoulin & Visin, "A guide to convolution
 * arithmetic for deep learning", 2016, §4. Each element is gathered as one dot product and summed
 * exactly, rounded once (nv_dd_dot, ddsum.h), so the reference is the correctly rounded fp64 value;
 * mag is the same sum of |terms|. The second-order VJP of a bilinear map has only the mixed blocks:
 * hx = gx(gy, w := v_w), hw = gw(x := v_x, gy), as matmul's.
 *
 * avg_pool2d is linear: gx[e] = sum over the windows o containing e of gy[o]
 * / divisor(o), summed exactly (each term gy / divisor rounded once, a 2^-53
 * relative error per term), and its second-order VJP is zero. */
#include <math.h>
#include <stdlib.h>

#include "backward_internal.h"
#include "core/ops/conv_window.h"
#include "ddsum.h"
#include "numval/backend.h"

static int geom(int id, const nv_op_attrs *a, const nv_tensor *const *in, nv_conv_geom *g)
{
    return nv_conv_geom_of(a, in[0], id == NVO_AVG_POOL2D ? NULL : in[1], g) < 0 ? NV_E_INVALID : 0;
}

int nvb_forward_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, double *out)
{
    nv_conv_geom g;
    if (geom(id, a, in, &g) < 0)
        return NV_E_INVALID;
    bool pool = id == NVO_AVG_POOL2D;
    double *patch = malloc(sizeof(double) * (size_t)(g.k + 1));
    if (!patch)
        return NV_E_NOMEM;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t co = 0; co < g.co; co++)
            for (int64_t oh = 0; oh < g.oh; oh++)
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    for (int64_t kk = 0; kk < g.k; kk++) {
                        int64_t e = nv_conv_x_index(&g, n, co / g.cog, oh, ow, kk);
                        patch[kk] = e < 0 ? 0 : in[0]->data[e];
                    }
                    double hi, lo;
                    nv_mag abs;
                    if (pool)
                        nv_dd_sum(patch, g.k, 1, &hi, &lo, &abs);
                    else
                        nv_dd_dot(patch, 1, in[1]->data + co * g.k, 1, g.k, &hi, &lo, &abs);
                    double d = pool ? (double)nv_pool_divisor(&g, a, oh, ow) : 1;
                    out[((n * g.co + co) * g.oh + oh) * g.ow + ow] = (hi + lo) / d;
                }
    free(patch);
    return 0;
}

/* gx from (gy, w) and gw from (x, gy) for conv2d; either array may be NULL
 * to skip that gradient (and its mag). xd, wd: the values multiplied in. */
static int conv_vjp(const nv_conv_geom *g, const double *xd, const double *wd, const double *gy,
                    double *gx, double *magx, double *gw, double *magw)
{
    int64_t len = g->cog * g->kh * g->kw, lw = g->n * g->oh * g->ow;
    int64_t cap = len > lw ? len : lw;
    double *ta = malloc(sizeof(double) * (size_t)(cap + 1));
    double *tb = malloc(sizeof(double) * (size_t)(cap + 1));
    if (!ta || !tb) {
        free(ta);
        free(tb);
        return NV_E_NOMEM;
    }
    for (int64_t e = 0; (gx || magx) && e < g->n * g->c * g->h * g->w; e++) {
        int64_t m = nv_conv_dx_terms(g, e, gy, wd, ta, tb);
        double hi, lo;
        nv_mag abs;
        nv_dd_dot(ta, 1, tb, 1, m, &hi, &lo, &abs);
        if (gx)
            gx[e] = hi;
        if (magx)
            magx[e] = nv_mag_to_d(abs);
    }
    for (int64_t f = 0; (gw || magw) && f < g->co * g->k; f++) {
        int64_t m = nv_conv_dw_terms(g, f, gy, xd, ta, tb);
        double hi, lo;
        nv_mag abs;
        nv_dd_dot(ta, 1, tb, 1, m, &hi, &lo, &abs);
        if (gw)
            gw[f] = hi;
        if (magw)
            magw[f] = nv_mag_to_d(abs);
    }
    free(ta);
    free(tb);
    return 0;
}

static int pool_vjp(const nv_conv_geom *g, const nv_op_attrs *a, const double *gy, double *gx,
                    double *mag)
{
    int64_t cap = g->kh * g->kw;
    double *ta = malloc(sizeof(double) * (size_t)(cap + 1));
    double *tb = malloc(sizeof(double) * (size_t)(cap + 1));
    if (!ta || !tb) {
        free(ta);
        free(tb);
        return NV_E_NOMEM;
    }
    for (int64_t e = 0; e < g->n * g->c * g->h * g->w; e++) {
        /* pool geometry: one output channel per channel, dilation 1 */
        nv_conv_xpos x = nv_conv_xpos_of(g, e);
        int64_t m = 0;
        nv_conv_taps t = nv_conv_taps_start(g, x.h, x.v);
        while (nv_conv_taps_next(&t)) {
            ta[m] = gy[nv_conv_y_index(g, x.n, x.ch, t.oh, t.ow)];
            tb[m++] = 1.0 / (double)nv_pool_divisor(g, a, t.oh, t.ow);
        }
        double hi, lo;
        nv_mag abs;
        nv_dd_dot(ta, 1, tb, 1, m, &hi, &lo, &abs);
        if (gx)
            gx[e] = hi;
        if (mag)
            mag[e] = nv_mag_to_d(abs);
    }
    free(ta);
    free(tb);
    return 0;
}

int nvb_vjp_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                 double *const *gx, double *const *mag)
{
    nv_conv_geom g;
    if (geom(id, a, in, &g) < 0)
        return NV_E_INVALID;
    double *gx0 = gx ? gx[0] : NULL, *m0 = mag ? mag[0] : NULL;
    if (id == NVO_AVG_POOL2D)
        return pool_vjp(&g, a, gy, gx0, m0);
    return conv_vjp(&g, in[0]->data, in[1]->data, gy, gx0, m0, gx ? gx[1] : NULL,
                    mag ? mag[1] : NULL);
}

int nvb_vjp2_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                  const double *const *v, double *const *hx, double *const *mag)
{
    nv_conv_geom g;
    if (geom(id, a, in, &g) < 0)
        return NV_E_INVALID;
    if (id == NVO_AVG_POOL2D) {
        for (int64_t e = 0; e < in[0]->numel; e++) {
            if (hx && hx[0])
                hx[0][e] = 0;
            if (mag && mag[0])
                mag[0][e] = 0;
        }
        return 0;
    }
    /* hx = d/dx <gw(x, gy), v_w> = gx(gy, v_w); hw = gw(v_x, gy) */
    return conv_vjp(&g, v[0], v[1], gy, hx ? hx[0] : NULL, mag ? mag[0] : NULL, hx ? hx[1] : NULL,
                    mag ? mag[1] : NULL);
}

/* The most taps i in [0, k) whose offsets i d share one residue mod s: the
 * most output rows (or columns) one input row meets. */
static int64_t taps_per_row(int64_t k, int64_t d, int64_t s)
{
    int64_t best = 0;
    for (int64_t r = 0; r < s && r < k * d + 1; r++) {
        int64_t cnt = 0;
        for (int64_t i = 0; i < k; i++)
            cnt += (i * d) % s == r;
        best = cnt > best ? cnt : best;
    }
    return best;
}

int64_t nvb_conv_sum_len(int id, const nv_op_attrs *a, const nv_tensor *const *in, int i)
{
    nv_conv_geom g;
    if (geom(id, a, in, &g) < 0)
        return 1;
    if (i == 1) /* the weight: every output position of every image */
        return g.n * g.oh * g.ow;
    int64_t taps =
        taps_per_row(g.kh, g.dilation, g.stride) * taps_per_row(g.kw, g.dilation, g.stride);
    int64_t n = (id == NVO_AVG_POOL2D ? 1 : g.cog) * taps;
    return n > 0 ? n : 1;
}
