/* emu conv2d: im2col and a matmul per channel group. Per image and group,
 * the patches form A [OH*OW, K] (zero where they read the padding) and the
 * group's weight B [K, Cog] (its rows transposed); each output is the dot
 * product of a patch with a weight row, accumulated in the accumulate dtype
 * in the mode's order, operands rounded to it first, exactly as emu_matmul's
 * NONE-scale path (emu_sum, with the fp32 fma fast path where it gives the
 * same bits). This is how cuDNN's implicit-GEMM algorithms and im2col
 * frameworks compute a convolution (a grouped one as one GEMM per group); the
 * geometry is core/ops/conv.c's.
 *
 * avg_pool2d: each window's values (zeros for the padding when
 * count_include_pad) summed in the accumulate dtype in the mode's order and
 * divided by the divisor there, as emu's mean. */
#include <stdio.h>
#include <stdlib.h>

#include "emu_internal.h"

static int avg_pool(emu_call *c, const nv_op_attrs *a, const nv_tensor *x, double *out, char *err,
                    size_t errlen)
{
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, NULL, &g) < 0) {
        snprintf(err, errlen, "avg_pool2d: shapes do not infer");
        return NV_E_SHAPE;
    }
    double *win = malloc(sizeof(double) * (size_t)(g.k + 1));
    if (!win) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    nv_dtype ad = c->accum;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t ch = 0; ch < g.c; ch++)
            for (int64_t oh = 0; oh < g.oh; oh++)
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    int64_t m = 0;
                    for (int64_t kk = 0; kk < g.k; kk++) {
                        int64_t e = nv_conv_x_index(&g, n, ch, oh, ow, kk);
                        if (e >= 0)
                            win[m++] = emu_round(c, ad, x->data[e]);
                        else if (a->count_include_pad)
                            win[m++] = 0;
                    }
                    double s = emu_sum(c, ad, win, 1, NULL, 0, m);
                    out[((n * g.c + ch) * g.oh + oh) * g.ow + ow] =
                        emu_div(c, ad, s, (double)nv_pool_divisor(&g, a, oh, ow));
                }
    free(win);
    return NV_OK;
}

int emu_conv2d(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *const *in,
               double *out, char *err, size_t errlen)
{
    if (strcmp(op->name, "avg_pool2d") == 0)
        return avg_pool(c, a, in[0], out, err, errlen);
    const nv_tensor *x = in[0], *w = in[1];
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, w, &g) < 0) {
        snprintf(err, errlen, "conv2d: shapes do not infer");
        return NV_E_SHAPE;
    }
    int64_t m = g.oh * g.ow, cog = g.cog;
    double *abuf = malloc(sizeof(double) * (size_t)(m * g.k + g.k * g.co + m * cog + 1));
    if (!abuf) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    double *bbuf = abuf + m * g.k, *obuf = bbuf + g.k * g.co;
    nv_dtype ad = c->accum;
    /* group q's weight: bbuf + q K Cog, [K, Cog] */
    for (int64_t co = 0; co < g.co; co++) {
        int64_t q = co / cog, j = co % cog;
        for (int64_t kk = 0; kk < g.k; kk++)
            bbuf[q * g.k * cog + kk * cog + j] = emu_round(c, ad, w->data[co * g.k + kk]);
    }
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t q = 0; q < g.groups; q++) {
            const double *bq = bbuf + q * g.k * cog;
            for (int64_t p = 0; p < m; p++)
                for (int64_t kk = 0; kk < g.k; kk++) {
                    int64_t e = nv_conv_x_index(&g, n, q, p / g.ow, p % g.ow, kk);
                    abuf[p * g.k + kk] = e < 0 ? 0 : emu_round(c, ad, x->data[e]);
                }
            if (!emu_dot_fast(c, ad, abuf, g.k, 1, bq, cog, 1, obuf, m, g.k, cog))
                for (int64_t p = 0; p < m; p++)
                    for (int64_t j = 0; j < cog; j++)
                        obuf[p * cog + j] = emu_sum(c, ad, abuf + p * g.k, 1, bq + j, cog, g.k);
            for (int64_t p = 0; p < m; p++)
                for (int64_t j = 0; j < cog; j++)
                    out[(n * g.co + q * cog + j) * m + p] = obuf[p * cog + j];
        }
    free(abuf);
    return NV_OK;
}
