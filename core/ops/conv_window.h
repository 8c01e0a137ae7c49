/* The windows of conv2d and avg_pool2d (nv_conv_geom, catalog.h) walked as
 * their backward passes gather them, so that the exact reference
 * (core/ref/ref_conv_backward.c) and emu's backward
 * (worker/backends/emu/emu_backward_conv.c) visit the same terms in the same
 * order:
 *  - from an input element (h, v): the kernel taps (i, j) whose output
 *    position (oh, ow) exists, h = oh s - p + i d and v = ow s - p + j d
 *    (the transposed convolution; Dumoulin & Visin, "A guide to convolution
 *    arithmetic for deep learning", 2016, §4), i major, then j;
 *  - from a patch position kk of group q: the outputs (n, oh, ow) whose patch
 *    reads x there (not the zero padding), n major, then oh, then ow, with the
 *    x element each reads.
 * and the terms of conv2d's dx and dW elements gathered along them (the dot
 * products both sides then sum, each in its own arithmetic). Header-only: the
 * loops are the inner loops of both backward passes. */
#ifndef NUMVAL_CORE_OPS_CONV_WINDOW_H
#define NUMVAL_CORE_OPS_CONV_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

/* The output row o in [0, n_out) a tap at offset off = i d reaches from input
 * row h (o s - p + off = h), or -1. The same for columns. */
static inline int64_t nv_conv_out_row(const nv_conv_geom *g, int64_t h, int64_t off, int64_t n_out)
{
    int64_t t = h + g->padding - off;
    if (t < 0 || t % g->stride)
        return -1;
    t /= g->stride;
    return t < n_out ? t : -1;
}

/* x element e of [n, c, h, w] (row-major) by its coordinates. */
typedef struct nv_conv_xpos {
    int64_t n, ch, h, v;
} nv_conv_xpos;

static inline nv_conv_xpos nv_conv_xpos_of(const nv_conv_geom *g, int64_t e)
{
    nv_conv_xpos p = {.v = e % g->w,
                      .h = (e / g->w) % g->h,
                      .ch = (e / (g->w * g->h)) % g->c,
                      .n = e / (g->w * g->h * g->c)};
    return p;
}

/* The row-major index of y[n, co, oh, ow]. */
static inline int64_t nv_conv_y_index(const nv_conv_geom *g, int64_t n, int64_t co, int64_t oh,
                                      int64_t ow)
{
    return ((n * g->co + co) * g->oh + oh) * g->ow + ow;
}

/* The taps reaching input (h, v):
 *   nv_conv_taps t = nv_conv_taps_start(g, h, v);
 *   while (nv_conv_taps_next(&t)) ... t.i, t.j, t.oh, t.ow ... */
typedef struct nv_conv_taps {
    const nv_conv_geom *g;
    int64_t h, v;
    int64_t i, j, oh, ow;
} nv_conv_taps;

static inline nv_conv_taps nv_conv_taps_start(const nv_conv_geom *g, int64_t h, int64_t v)
{
    nv_conv_taps t = {.g = g, .h = h, .v = v, .i = -1, .j = -1, .oh = -1, .ow = -1};
    return t;
}

static inline bool nv_conv_taps_next(nv_conv_taps *t)
{
    const nv_conv_geom *g = t->g;
    for (;;) {
        if (t->oh >= 0)
            while (++t->j < g->kw)
                if ((t->ow = nv_conv_out_row(g, t->v, t->j * g->dilation, g->ow)) >= 0)
                    return true;
        if (t->i + 1 >= g->kh)
            return false;
        t->i++;
        t->j = -1;
        t->oh = nv_conv_out_row(g, t->h, t->i * g->dilation, g->oh);
    }
}

/* The outputs whose patch of group q reads x at patch position kk:
 *   nv_conv_reads r = nv_conv_reads_start(g, q, kk);
 *   while (nv_conv_reads_next(&r)) ... r.n, r.oh, r.ow, x[r.e] ... */
typedef struct nv_conv_reads {
    const nv_conv_geom *g;
    int64_t q, kk;
    int64_t n, oh, ow, e;
} nv_conv_reads;

static inline nv_conv_reads nv_conv_reads_start(const nv_conv_geom *g, int64_t q, int64_t kk)
{
    bool none = g->oh <= 0 || g->ow <= 0;
    nv_conv_reads r = {.g = g, .q = q, .kk = kk, .n = none ? g->n : 0, .oh = 0, .ow = -1, .e = -1};
    return r;
}

static inline bool nv_conv_reads_next(nv_conv_reads *r)
{
    const nv_conv_geom *g = r->g;
    while (r->n < g->n) {
        if (++r->ow >= g->ow) {
            r->ow = 0;
            if (++r->oh >= g->oh) {
                r->oh = 0;
                if (++r->n >= g->n)
                    return false;
            }
        }
        r->e = nv_conv_x_index(g, r->n, r->q, r->oh, r->ow, r->kk);
        if (r->e >= 0)
            return true;
    }
    return false;
}

/* The terms of conv2d's dx at input element e: gy at each output a tap
 * reaches (into ta) times the kernel at that tap (into tb; 0 when w is NULL),
 * for every output channel of e's group. Returns the count; ta and tb hold
 * cog kh kw. */
static inline int64_t nv_conv_dx_terms(const nv_conv_geom *g, int64_t e, const double *gy,
                                       const double *w, double *ta, double *tb)
{
    nv_conv_xpos x = nv_conv_xpos_of(g, e);
    int64_t q = x.ch / g->cg, c = x.ch % g->cg, m = 0;
    nv_conv_taps t = nv_conv_taps_start(g, x.h, x.v);
    while (nv_conv_taps_next(&t))
        for (int64_t co = q * g->cog; co < (q + 1) * g->cog; co++) {
            ta[m] = gy[nv_conv_y_index(g, x.n, co, t.oh, t.ow)];
            tb[m++] = w ? w[co * g->k + (c * g->kh + t.i) * g->kw + t.j] : 0;
        }
    return m;
}

/* The terms of conv2d's dW at weight element f = co k + kk: gy of output
 * channel co (into ta) times the x each output's patch reads at kk (into tb;
 * 0 when x is NULL). Returns the count; ta and tb hold n oh ow. */
static inline int64_t nv_conv_dw_terms(const nv_conv_geom *g, int64_t f, const double *gy,
                                       const double *x, double *ta, double *tb)
{
    int64_t co = f / g->k, m = 0;
    nv_conv_reads r = nv_conv_reads_start(g, co / g->cog, f % g->k);
    while (nv_conv_reads_next(&r)) {
        ta[m] = gy[nv_conv_y_index(g, r.n, co, r.oh, r.ow)];
        tb[m++] = x ? x[r.e] : 0;
    }
    return m;
}

#endif
