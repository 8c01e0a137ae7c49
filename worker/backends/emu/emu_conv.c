/* emu conv2d: im2col and a matmul. Per image, the patches form A [OH*OW, K]
 * (zero where they read the padding) and the weight B [K, Co] (its rows
 * transposed); each output is the dot product of a patch with a weight row,
 * accumulated in the accumulate dtype in the mode's order, operands rounded
 * to it first, exactly as emu_matmul's NONE-scale path (emu_sum, with the
 * fp32 fma fast path where it gives the same bits). This is how cuDNN's
 * implicit-GEMM algorithms and im2col frameworks compute a convolution; the
 * geometry is core/ops/conv.c's. */
#include <stdio.h>
#include <stdlib.h>

#include "emu_internal.h"

int emu_conv2d(emu_call *c, const nv_op_attrs *a, const nv_tensor *const *in, double *out,
               char *err, size_t errlen)
{
    const nv_tensor *x = in[0], *w = in[1];
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, w, &g) < 0) {
        snprintf(err, errlen, "conv2d: shapes do not infer");
        return NV_E_SHAPE;
    }
    int64_t m = g.oh * g.ow;
    double *abuf = malloc(sizeof(double) * (size_t)(m * g.k + g.k * g.co + m * g.co + 1));
    if (!abuf) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    double *bbuf = abuf + m * g.k, *obuf = bbuf + g.k * g.co;
    nv_dtype ad = c->accum;
    for (int64_t co = 0; co < g.co; co++)
        for (int64_t kk = 0; kk < g.k; kk++)
            bbuf[kk * g.co + co] = emu_round(c, ad, w->data[co * g.k + kk]);
    for (int64_t n = 0; n < g.n; n++) {
        for (int64_t p = 0; p < m; p++)
            for (int64_t kk = 0; kk < g.k; kk++) {
                int64_t e = nv_conv_x_index(&g, n, p / g.ow, p % g.ow, kk);
                abuf[p * g.k + kk] = e < 0 ? 0 : emu_round(c, ad, x->data[e]);
            }
        if (!emu_dot_fast(c, ad, abuf, g.k, 1, bbuf, g.co, 1, obuf, m, g.k, g.co))
            for (int64_t p = 0; p < m; p++)
                for (int64_t co = 0; co < g.co; co++)
                    obuf[p * g.co + co] = emu_sum(c, ad, abuf + p * g.k, 1, bbuf + co, g.co, g.k);
        for (int64_t p = 0; p < m; p++)
            for (int64_t co = 0; co < g.co; co++)
                out[(n * g.co + co) * m + p] = obuf[p * g.co + co];
    }
    free(abuf);
    return NV_OK;
}
