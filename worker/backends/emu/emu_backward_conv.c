/* emu backward of conv2d and avg_pool2d (see emu_backward.c; the formulas are
 * core/ref/ref_conv_backward.c's). conv2d's input gradient is gathered per x
 * element, as a transposed-convolution (implicit-GEMM dgrad) kernel computes
 * it: the taps (i, j) whose output position exists, the group's output
 * channels, one dot product of gy with the kernel in the accumulate dtype in
 * the mode's order (emu_sum). The weight gradient (wgrad) is the dot product
 * of gy with the zero-padded input over (n, oh, ow), zero-padding terms
 * skipped. avg_pool2d scatters gy / divisor (a division in the compute dtype)
 * over each window in output order, adding in the accumulate dtype, as a
 * per-output scatter kernel (aten's CPU avg_pool2d backward) does. Nothing is
 * saved for avg_pool2d: the input's shape comes with the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/conv_window.h"
#include "emu_backward.h"

static int conv_grads(emu_call *c, const nv_conv_geom *g, const emu_bwd_io *io, double *ta,
                      double *tb)
{
    const double *x = io->x[0]->data, *w = io->x[1]->data, *gy = io->gy->data;
    for (int64_t e = 0; e < io->x[0]->numel; e++) {
        int64_t m = nv_conv_dx_terms(g, e, gy, w, ta, tb);
        io->gx[0][e] = emu_sum(c, c->accum, ta, 1, tb, 1, m);
    }
    for (int64_t f = 0; f < g->co * g->k; f++) {
        int64_t m = nv_conv_dw_terms(g, f, gy, x, ta, tb);
        io->gx[1][f] = emu_sum(c, c->accum, ta, 1, tb, 1, m);
    }
    return NV_OK;
}

static int pool_grad(emu_call *c, const nv_conv_geom *g, const nv_op_attrs *a, const emu_bwd_io *io,
                     unsigned char *seen)
{
    for (int64_t o = 0; o < io->gy->numel; o++) {
        int64_t ow = o % g->ow, oh = (o / g->ow) % g->oh, nc = o / (g->ow * g->oh);
        double gv = emu_div(c, c->compute, emu_round(c, c->compute, io->gy->data[o]),
                            (double)nv_pool_divisor(g, a, oh, ow));
        for (int64_t kk = 0; kk < g->k; kk++) {
            int64_t e = nv_conv_x_index(g, nc / g->c, nc % g->c, oh, ow, kk);
            if (e < 0)
                continue;
            io->gx[0][e] = seen[e] ? emu_add(c, c->accum, io->gx[0][e], gv) : gv;
            seen[e] = 1;
        }
    }
    return NV_OK;
}

int emu_bwd_conv(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const emu_bwd_io *io,
                 char *err, size_t errlen)
{
    bool pool = strcmp(op->name, "avg_pool2d") == 0;
    if (!pool && (!io->x[0] || !io->x[1])) {
        snprintf(err, errlen, "backward of '%s' needs the saved x and weight (input:0, input:1)",
                 op->name);
        return NV_E_INVALID;
    }
    nv_conv_geom g;
    if (nv_conv_geom_of(a, io->shape0, pool ? NULL : io->x[1], &g) < 0) {
        snprintf(err, errlen, "backward of '%s': shapes do not infer", op->name);
        return NV_E_SHAPE;
    }
    int64_t cap = pool ? io->shape0->numel : g.cog * g.kh * g.kw + g.n * g.oh * g.ow;
    int r = NV_E_NOMEM;
    if (pool) {
        unsigned char *seen = calloc((size_t)(cap + 1), 1);
        if (seen)
            r = pool_grad(c, &g, a, io, seen);
        free(seen);
    } else {
        double *ta = malloc(sizeof(double) * (size_t)(cap + 1));
        double *tb = malloc(sizeof(double) * (size_t)(cap + 1));
        if (ta && tb)
            r = conv_grads(c, &g, io, ta, tb);
        free(ta);
        free(tb);
    }
    if (r == NV_E_NOMEM)
        snprintf(err, errlen, "out of memory");
    return r;
}
