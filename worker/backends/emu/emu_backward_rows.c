/* emu backward of the row-wise ops and matmul (see emu_backward.c). Every sum
 * runs through emu_sum in the accumulate dtype and the mode's order; the
 * elementwise steps round to the compute dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_backward.h"

typedef struct lines {
    int64_t outer, n, inner;
} lines;

static int64_t at(const lines *L, int64_t l, int64_t j)
{
    return ((l / L->inner) * L->n + j) * L->inner + (l % L->inner);
}

static lines lines_of(int id, const nv_op_attrs *a, const nv_tensor *x)
{
    int ax;
    if (id == EMU_B_LAYER_NORM || id == EMU_B_RMS_NORM)
        ax = x->ndim - 1;
    else if (id == EMU_B_CROSS_ENTROPY)
        ax = 1;
    else
        ax = a->axis < 0 ? a->axis + x->ndim : a->axis;
    lines L = {1, x->shape[ax], 1};
    for (int d = 0; d < ax; d++)
        L.outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        L.inner *= x->shape[d];
    return L;
}

typedef struct bw {
    emu_call *c;
    const nv_op_attrs *a;
    const emu_bwd_io *io;
    lines L;
    nv_dtype cd, ad;
    double *t1, *t2; /* n scratch each */
} bw;

static double X(const bw *b, int64_t l, int64_t j)
{
    return emu_round(b->c, b->cd, b->io->x[0]->data[at(&b->L, l, j)]);
}

/* Sum (y NULL) or dot product of two n-vectors of scratch, rounded to compute. */
static double sum(bw *b, const double *x, const double *y)
{
    return emu_round(b->c, b->cd, emu_sum(b->c, b->ad, x, 1, y, y ? 1 : 0, b->L.n));
}

static void reduce_line(bw *b, int id, int64_t l, double g, double *gx)
{
    emu_call *c = b->c;
    int64_t n = b->L.n;
    double y = b->io->y ? b->io->y->data[l] : 0; /* saved output (max, norm2, logsumexp) */
    bool taken = false;
    double mu = 0;
    if (id == EMU_B_VAR) {
        for (int64_t j = 0; j < n; j++)
            b->t1[j] = X(b, l, j);
        mu = emu_div(c, b->cd, sum(b, b->t1, NULL), (double)n);
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(&b->L, l, j);
        switch (id) {
        case EMU_B_SUM:
            gx[e] = g;
            break;
        case EMU_B_MEAN:
            gx[e] = emu_div(c, b->cd, g, (double)n);
            break;
        case EMU_B_MAX:
            gx[e] = !taken && X(b, l, j) == y ? g : 0;
            taken = taken || X(b, l, j) == y;
            break;
        case EMU_B_VAR: {
            double d = emu_add(c, b->cd, X(b, l, j), -mu);
            gx[e] = emu_div(c, b->cd, emu_mul(c, b->cd, emu_mul(c, b->cd, g, 2), d),
                            (double)(n - b->a->correction));
            break;
        }
        case EMU_B_NORM2:
            gx[e] = emu_div(c, b->cd, emu_mul(c, b->cd, g, X(b, l, j)), y);
            break;
        default: /* logsumexp: softmax recomputed from the saved lse */
            gx[e] = emu_mul(c, b->cd, g,
                            emu_fn(c, NV_FN_EXP, emu_add(c, b->cd, X(b, l, j), -y), b->cd));
            break;
        }
    }
}

static void softmax_line(bw *b, int id, int64_t l, double *gx)
{
    emu_call *c = b->c;
    int64_t n = b->L.n;
    for (int64_t j = 0; j < n; j++) {
        b->t1[j] = emu_round(c, b->cd, b->io->gy->data[at(&b->L, l, j)]);
        b->t2[j] = b->io->y->data[at(&b->L, l, j)];
    }
    if (id == EMU_B_SOFTMAX) {
        double dot = sum(b, b->t1, b->t2);
        for (int64_t j = 0; j < n; j++)
            gx[at(&b->L, l, j)] = emu_mul(c, b->cd, b->t2[j], emu_add(c, b->cd, b->t1[j], -dot));
        return;
    }
    double s = sum(b, b->t1, NULL);
    for (int64_t j = 0; j < n; j++) {
        double p = emu_fn(c, NV_FN_EXP, b->t2[j], b->cd);
        gx[at(&b->L, l, j)] = emu_add(c, b->cd, b->t1[j], -emu_mul(c, b->cd, p, s));
    }
}

/* mean and rstd as the forward kernel computes them (emu_reduce.c row_norm):
 * in the accumulate dtype, rstd rounded to compute. t1 gets x - mean (or x). */
static void norm_stats(bw *b, bool layer, int64_t l, double *ret_mu, double *ret_rstd)
{
    emu_call *c = b->c;
    int64_t n = b->L.n;
    for (int64_t j = 0; j < n; j++)
        b->t2[j] = b->io->x[0]->data[at(&b->L, l, j)];
    double m = layer ? emu_div(c, b->ad, emu_sum(c, b->ad, b->t2, 1, NULL, 0, n), (double)n) : 0;
    for (int64_t j = 0; j < n; j++)
        b->t1[j] = layer ? emu_add(c, b->ad, emu_round(c, b->ad, b->t2[j]), -m)
                         : emu_round(c, b->ad, b->t2[j]);
    double ms = emu_div(c, b->ad, emu_sum(c, b->ad, b->t1, 1, b->t1, 1, n), (double)n);
    double den = emu_round(c, b->cd, emu_add(c, b->ad, ms, emu_round(c, b->ad, b->a->eps)));
    *ret_mu = m;
    *ret_rstd = emu_fn(c, NV_FN_RSQRT, den, b->cd);
}

/* gx of one row; xhat (row-major, numel) is kept for the weight gradient. */
static void norm_line(bw *b, bool layer, int64_t l, double *gx, double *xhat)
{
    emu_call *c = b->c;
    nv_dtype cd = b->cd;
    int64_t n = b->L.n;
    double mu, rstd;
    norm_stats(b, layer, l, &mu, &rstd);
    for (int64_t j = 0; j < n; j++) {
        int64_t e = at(&b->L, l, j);
        xhat[e] = emu_mul(c, cd, emu_round(c, cd, b->t1[j]), rstd);
        b->t2[j] = emu_mul(c, cd, emu_round(c, cd, b->io->gy->data[e]),
                           emu_round(c, cd, b->io->x[1]->data[j]));
    }
    double mg = layer ? emu_div(c, cd, sum(b, b->t2, NULL), (double)n) : 0;
    for (int64_t j = 0; j < n; j++)
        b->t1[j] = xhat[at(&b->L, l, j)];
    double mgx = emu_div(c, cd, sum(b, b->t2, b->t1), (double)n);
    for (int64_t j = 0; j < n; j++) {
        double v = emu_add(c, cd, b->t2[j], -emu_mul(c, cd, b->t1[j], mgx));
        if (layer)
            v = emu_add(c, cd, v, -mg);
        gx[at(&b->L, l, j)] = emu_mul(c, cd, rstd, v);
    }
}

/* Weight (and bias) gradients: column sums over the rows, in accum. */
static void norm_params(bw *b, bool layer, const double *xhat, double *gw, double *gb)
{
    int64_t rows = b->L.outer, n = b->L.n;
    for (int64_t k = 0; k < n; k++) {
        gw[k] = emu_sum(b->c, b->ad, b->io->gy->data + k, n, xhat + k, n, rows);
        if (layer)
            gb[k] = emu_sum(b->c, b->ad, b->io->gy->data + k, n, NULL, 0, rows);
    }
}

static void ce_line(bw *b, int64_t l, double g, double *gx)
{
    emu_call *c = b->c;
    int64_t n = b->L.n, t = (int64_t)b->io->x[1]->data[l];
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        m = fmax(m, X(b, l, j));
    for (int64_t j = 0; j < n; j++)
        b->t1[j] = emu_fn(c, NV_FN_EXP, emu_add(c, b->cd, X(b, l, j), -m), b->cd);
    double s = sum(b, b->t1, NULL);
    for (int64_t j = 0; j < n; j++) {
        double p = emu_div(c, b->cd, b->t1[j], s);
        gx[at(&b->L, l, j)] = emu_mul(c, b->cd, g, j == t ? emu_add(c, b->cd, p, -1) : p);
    }
}

int emu_bwd_rows(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                 const emu_bwd_io *io, char *err, size_t errlen)
{
    (void)op;
    bw b = {.c = c, .a = a, .io = io, .cd = c->compute, .ad = c->accum};
    b.L = lines_of(id, a, io->shape0);
    int64_t n = b.L.n, nl = b.L.outer * b.L.inner;
    b.t1 = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    b.t2 = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double *xhat = NULL;
    bool norm = id == EMU_B_LAYER_NORM || id == EMU_B_RMS_NORM;
    if (norm)
        xhat = malloc(sizeof(double) * (size_t)(nl * n > 0 ? nl * n : 1));
    int r = NV_OK;
    if (!b.t1 || !b.t2 || (norm && !xhat)) {
        snprintf(err, errlen, "out of memory");
        r = NV_E_NOMEM;
        goto out;
    }
    for (int64_t l = 0; l < nl; l++) {
        switch (id) {
        case EMU_B_SOFTMAX:
        case EMU_B_LOG_SOFTMAX:
            softmax_line(&b, id, l, io->gx[0]);
            break;
        case EMU_B_LAYER_NORM:
        case EMU_B_RMS_NORM:
            norm_line(&b, id == EMU_B_LAYER_NORM, l, io->gx[0], xhat);
            break;
        case EMU_B_CROSS_ENTROPY: {
            double g = emu_round(c, b.cd, io->gy->data[a->reduction_mean ? 0 : l]);
            if (a->reduction_mean)
                g = emu_div(c, b.cd, g, (double)nl);
            ce_line(&b, l, g, io->gx[0]);
            break;
        }
        default:
            reduce_line(&b, id, l, emu_round(c, b.cd, io->gy->data[l]), io->gx[0]);
            break;
        }
    }
    if (norm)
        norm_params(&b, id == EMU_B_LAYER_NORM, xhat, io->gx[1],
                    id == EMU_B_LAYER_NORM ? io->gx[2] : NULL);
out:
    free(b.t1);
    free(b.t2);
    free(xhat);
    return r;
}

/* gA = gC B^T (sum over N), gB = A^T gC (sum over M), per batch. */
int emu_bwd_matmul(emu_call *c, const emu_bwd_io *io)
{
    const nv_tensor *A = io->x[0], *B = io->x[1];
    int nd = A->ndim;
    int64_t M = A->shape[nd - 2], K = A->shape[nd - 1], N = B->shape[nd - 1], batch = 1;
    for (int d = 0; d < nd - 2; d++)
        batch *= A->shape[d];
    for (int64_t z = 0; z < batch; z++) {
        const double *a = A->data + z * M * K, *bm = B->data + z * K * N;
        const double *g = io->gy->data + z * M * N;
        double *ga = io->gx[0] + z * M * K, *gb = io->gx[1] + z * K * N;
        /* emu_dot_fast: the same bits as the emu_sum loops, where it applies */
        if (!emu_dot_fast(c, c->accum, g, N, 1, bm, 1, N, ga, M, N, K))
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < K; k++)
                    ga[m * K + k] = emu_sum(c, c->accum, g + m * N, 1, bm + k * N, 1, N);
        if (!emu_dot_fast(c, c->accum, a, 1, K, g, N, 1, gb, K, M, N))
            for (int64_t k = 0; k < K; k++)
                for (int64_t n = 0; n < N; n++)
                    gb[k * N + n] = emu_sum(c, c->accum, a + k, K, g + n, N, M);
    }
    return NV_OK;
}

/* Data movement: the scatter-add of gy into the element each output was moved
 * from (core/ops/layout.c nv_op_layout_sources), in output order; repeated
 * embedding ids (and an element that is the maximum of several overlapping
 * pooling windows) accumulate in the accumulate dtype, as an index_add kernel
 * does. Only the ids are saved for embedding (the weight's shape comes with
 * the call), the input for max_pool2d (its argmax). */
int emu_bwd_layout(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const emu_bwd_io *io,
                   char *err, size_t errlen)
{
    bool pool = strcmp(op->name, "max_pool2d") == 0;
    const nv_tensor *in[2] = {pool ? io->x[0] : io->shape0, io->x[1]};
    int n_in = op->n_inputs;
    if ((n_in > 1 && !in[1]) || !in[0]) {
        snprintf(err, errlen, "backward of '%s' needs the saved %s", op->name,
                 pool ? "input (input:0)" : "ids (input:1)");
        return NV_E_INVALID;
    }
    int64_t n_out = io->gy->numel, n_x = io->shape0->numel;
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(n_out + 1));
    unsigned char *seen = calloc((size_t)(n_x + 1), 1);
    int r = src && seen ? nv_op_layout_sources(op, a, n_in, in, n_out, src) : NV_E_NOMEM;
    for (int64_t o = 0; r == NV_OK && o < n_out; o++) {
        double g = emu_round(c, c->compute, io->gy->data[o]);
        double *dst = &io->gx[0][src[o]];
        *dst = seen[src[o]] ? emu_add(c, c->accum, *dst, g) : g;
        seen[src[o]] = 1;
    }
    if (r == NV_E_NOMEM)
        snprintf(err, errlen, "out of memory");
    else if (r != NV_OK)
        snprintf(err, errlen, "backward of '%s': ids outside the weight's rows", op->name);
    free(src);
    free(seen);
    return r;
}
