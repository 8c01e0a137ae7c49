/* conv2d and avg_pool2d: the exact references (geometry in core/ops/conv.c).
 * conv2d: each output is the dot product of its input patch (zero where it
 * reads the padding) with one weight row, summed exactly and rounded once
 * (nv_dd_dot, ddsum.h), as matmul's reference: the patch is gathered like an
 * im2col row, per channel group. abs_sum receives sum |x w| over the patch
 * (Higham, Accuracy and Stability, §3.5: |y - fl(y)| <= gamma_K |x|^T |w|),
 * peak the larger of it and the largest operand, as matmul's. avg_pool2d: the
 * window's values (zeros for the padding when they count) through mean's
 * exact reference (nvo_mean_exact: the exact sum divided in MPFR, rounded
 * once), abs_sum and peak as mean's. */
#include <math.h>
#include <stdlib.h>

#include "ddsum.h"
#include "numval/backend.h"
#include "ref_internal.h"

static int ref_avg_pool(const nv_op_attrs *a, const nv_tensor *x, const nv_ref_out *o)
{
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, NULL, &g) < 0)
        return NV_E_SHAPE;
    double *win = malloc(sizeof(double) * (size_t)(g.k + 1));
    if (!win)
        return NV_E_NOMEM;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < g.c; c++)
            for (int64_t oh = 0; oh < g.oh; oh++)
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    int64_t m = 0;
                    for (int64_t kk = 0; kk < g.k; kk++) {
                        int64_t e = nv_conv_x_index(&g, n, c, oh, ow, kk);
                        if (e >= 0)
                            win[m++] = x->data[nv_tensor_offset_linear(x, e)];
                    }
                    double hi, lo;
                    nv_mag abs, peak;
                    nvo_mean_exact_div(win, m, nv_pool_divisor(&g, a, oh, ow), &hi, &lo, &abs,
                                       &peak);
                    int64_t e = ((n * g.c + c) * g.oh + oh) * g.ow + ow;
                    o->hi->data[nv_tensor_offset_linear(o->hi, e)] = hi;
                    if (o->lo)
                        o->lo->data[nv_tensor_offset_linear(o->lo, e)] = lo;
                    if (o->abs_sum)
                        nvo_put_abs(o, nv_tensor_offset_linear(o->abs_sum, e),
                                    o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, e) : 0, abs);
                    if (o->peak)
                        nvo_put_peak(o, nv_tensor_offset_linear(o->peak, e), peak);
                }
    free(win);
    return 0;
}

int nvo_ref_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o)
{
    if (id == NVO_AVG_POOL2D)
        return ref_avg_pool(a, in[0], o);
    const nv_tensor *x = in[0], *w = in[1];
    nv_conv_geom g;
    if (nv_conv_geom_of(a, x, w, &g) < 0)
        return NV_E_SHAPE;
    double *wr = malloc(sizeof(double) * (size_t)(g.co * g.k + 1));
    double *patch = malloc(sizeof(double) * (size_t)(g.k + 1));
    double *wmax = malloc(sizeof(double) * (size_t)(g.co + 1));
    int r = NV_E_NOMEM;
    if (!wr || !patch || !wmax)
        goto out;
    for (int64_t co = 0; co < g.co; co++) {
        wmax[co] = 0;
        for (int64_t kk = 0; kk < g.k; kk++) {
            double v = w->data[nv_tensor_offset_linear(w, co * g.k + kk)];
            wr[co * g.k + kk] = v;
            if (isfinite(v))
                wmax[co] = fmax(wmax[co], fabs(v));
        }
    }
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t q = 0; q < g.groups; q++)
            for (int64_t oh = 0; oh < g.oh; oh++)
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    double pmax = 0;
                    for (int64_t kk = 0; kk < g.k; kk++) {
                        int64_t e = nv_conv_x_index(&g, n, q, oh, ow, kk);
                        patch[kk] = e < 0 ? 0 : x->data[nv_tensor_offset_linear(x, e)];
                        if (isfinite(patch[kk]))
                            pmax = fmax(pmax, fabs(patch[kk]));
                    }
                    for (int64_t co = q * g.cog; co < (q + 1) * g.cog; co++) {
                        double hi, lo;
                        nv_mag abs = {0, 0};
                        nv_dd_dot(patch, 1, wr + co * g.k, 1, g.k, &hi, &lo, &abs);
                        int64_t e = ((n * g.co + co) * g.oh + oh) * g.ow + ow;
                        o->hi->data[nv_tensor_offset_linear(o->hi, e)] = hi;
                        if (o->lo)
                            o->lo->data[nv_tensor_offset_linear(o->lo, e)] = lo;
                        if (o->abs_sum)
                            nvo_put_abs(o, nv_tensor_offset_linear(o->abs_sum, e),
                                        o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, e) : 0,
                                        abs);
                        if (o->peak) {
                            nv_mag ma = nv_mag_from_d(fmax(pmax, wmax[co]));
                            nvo_put_peak(o, nv_tensor_offset_linear(o->peak, e),
                                         nv_mag_cmp(ma, abs) > 0 ? ma : abs);
                        }
                    }
                }
    r = 0;
out:
    free(wr);
    free(patch);
    free(wmax);
    return r;
}
