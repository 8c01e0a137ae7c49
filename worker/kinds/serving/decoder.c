/* The decoder served op by op (serving_internal.h): the model kind's
 * decoder-lm (docs/MODEL.md "The decoder-only transformer": embedding,
 * pre-norm blocks of rotary causal self-attention and a SwiGLU MLP, final
 * rms_norm and unembedding) with the same ops in the same order, run on a
 * batch of requests whose keys and values live in a KV cache held here. The
 * cache holds what the device's cache_write returned; a step attends to the
 * cached positions and to its own fresh keys and values, as a prefill does
 * for all of its positions. Moving rows between requests and tensors is the
 * server's memory layout, done here; every value is computed by an op. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"
#include "worker/runner/params.h"

static nv_tensor *tnew(nv_dtype dt, int nd, int64_t a, int64_t b, int64_t c)
{
    int64_t shape[3] = {a, b, c};
    return nv_tensor_new(dt, nd, shape);
}

static nv_tensor *param(const sv_model *m, const char *name, int nd, int64_t a, int64_t b,
                        nv_model_input rule, int sample)
{
    nv_tensor *t = tnew(m->dt, nd, a, b, 1);
    if (t)
        nvw_param_fill(t, &rule, name, m->s->seed, sample);
    return t;
}

#define NORMAL(std) ((nv_model_input){.init = NV_MINIT_NORMAL, .a = (std), .is_param = true})
#define ONES ((nv_model_input){.init = NV_MINIT_VALUE, .a = 1, .is_param = true})

int sv_model_init(sv_model *m, const nv_servingspec *s, nv_dtype dt, int sample, int64_t max_pos)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->dt = dt;
    m->hd = s->width / s->heads;
    m->max_pos = max_pos;
    snprintf(m->heads_attrs, sizeof m->heads_attrs, "{\"heads\": %d}", s->heads);
    int64_t D = s->width, V = s->vocab, F = s->ffn;
    double fd = 1 / sqrt((double)D), ff = 1 / sqrt((double)F);
    nv_model_input cos_r = {.init = NV_MINIT_ROPE_COS, .a = s->rope_base, .hd = m->hd};
    nv_model_input sin_r = {.init = NV_MINIT_ROPE_SIN, .a = s->rope_base, .hd = m->hd};
    nv_model_input rot_r = {.init = NV_MINIT_ROTATE_HALF, .hd = m->hd};
    m->wte = param(m, "wte", 2, V, D, NORMAL(1.0), sample);
    m->cos = param(m, "rope_cos", 2, max_pos, D, cos_r, sample);
    m->sin = param(m, "rope_sin", 2, max_pos, D, sin_r, sample);
    m->rot = param(m, "rot_half", 2, D, D, rot_r, sample);
    m->g_final = param(m, "g_final", 1, D, 1, ONES, sample);
    m->w_unembed = param(m, "w_unembed", 2, D, V, NORMAL(fd), sample);
    m->layer = calloc((size_t)s->layers, sizeof *m->layer);
    m->served = sv_steps_new();
    if (!m->served || !m->wte || !m->cos || !m->sin || !m->rot || !m->g_final || !m->w_unembed ||
        !m->layer)
        return -ENOMEM;
    for (int l = 0; l < s->layers; l++) {
        sv_layer *y = &m->layer[l];
        char n[64];
#define P(field, nd, a, b, rule)                                                                   \
    (snprintf(n, sizeof n, "decoder.%d.%s", l, #field),                                            \
     (y->field = param(m, n, nd, a, b, rule, sample)) != NULL)
        if (!(P(g_attn, 1, D, 1, ONES) && P(wq, 2, D, D, NORMAL(fd)) &&
              P(wk, 2, D, D, NORMAL(fd)) && P(wv, 2, D, D, NORMAL(fd)) &&
              P(wo, 2, D, D, NORMAL(fd)) && P(g_mlp, 1, D, 1, ONES) &&
              P(w_gate, 2, D, F, NORMAL(fd)) && P(w_up, 2, D, F, NORMAL(fd)) &&
              P(w_down, 2, F, D, NORMAL(ff))))
            return -ENOMEM;
#undef P
    }
    return s->weights[0] ? sv_weights_fill(m) : 0;
}

void sv_model_done(sv_model *m)
{
    nv_tensor *t[] = {m->wte, m->cos, m->sin, m->rot, m->g_final, m->w_unembed};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        nv_tensor_free(t[i]);
    for (int l = 0; m->layer && l < m->s->layers; l++) {
        sv_layer *y = &m->layer[l];
        nv_tensor *u[] = {y->g_attn, y->wq,     y->wk,   y->wv,    y->wo,
                          y->g_mlp,  y->w_gate, y->w_up, y->w_down};
        for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
            nv_tensor_free(u[i]);
    }
    free(m->layer);
    sv_steps_release(m);
}

int sv_cache_init(sv_cache *c, const sv_model *m, int64_t cap)
{
    memset(c, 0, sizeof *c);
    c->cap = cap;
    c->id = sv_steps_cache_id();
    int L = m->s->layers;
    c->k = calloc((size_t)L, sizeof *c->k);
    c->v = calloc((size_t)L, sizeof *c->v);
    if (!c->k || !c->v)
        return -ENOMEM;
    size_t n = (size_t)cap * (size_t)m->s->width;
    for (int l = 0; l < L; l++)
        if (!(c->k[l] = malloc(n * sizeof(double))) || !(c->v[l] = malloc(n * sizeof(double))))
            return -ENOMEM;
    return 0;
}

void sv_cache_done(sv_cache *c, const sv_model *m)
{
    sv_steps_forget(m, c);
    for (int l = 0; l < m->s->layers; l++) {
        if (c->k)
            free(c->k[l]);
        if (c->v)
            free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* The state of one forward step. */
typedef struct fwd {
    sv_exec *x;
    const sv_model *m;
    int nb;
    const int64_t *n;
    sv_cache *const *cache;
    int64_t N, *off; /* rows of the batch; first row of each request */
    int layer;       /* the block being run, -1 outside the blocks */
    /* the attention call being run: its first request and sizes; traced
     * only when it holds the traced request */
    int att_r0;
    int64_t att_nq, att_nk;
    bool att_traced;
} fwd;

/* The box of the traced request t in a tensor of this step (trace.c), by
 * kind: P a parameter (whole), R rows in dim 0, H rows in dim 1 ([H, N, Dh]),
 * and in an attention call ([B*H, ., .], the request's H heads in dim 0):
 * Q its query rows ([., nq, Dh]), K its positions ([., nk, Dh]), T positions
 * in dim 2 ([., Dh, nk]), S query rows by positions ([., nq, nk]). */
static void box_of(const fwd *f, char kind, const nv_tensor *t, sv_box *b)
{
    int tr = f->x->trace->target;
    int64_t H = f->m->s->heads, L = f->cache[tr]->len + f->n[tr];
    b->nd = t->ndim;
    b->param = kind == 'P';
    for (int d = 0; d < t->ndim; d++) {
        b->off[d] = 0;
        b->ext[d] = t->shape[d];
    }
    int rows = kind == 'R' ? 0 : kind == 'H' ? 1 : -1;
    if (rows >= 0) {
        b->off[rows] = f->off[tr];
        b->ext[rows] = f->n[tr];
        return;
    }
    if (kind == 'P')
        return;
    b->off[0] = (tr - f->att_r0) * H;
    b->ext[0] = H;
    if (kind == 'Q' || kind == 'S')
        b->ext[1] = f->n[tr];
    if (kind == 'K')
        b->ext[1] = L;
    if (kind == 'T' || kind == 'S')
        b->ext[2] = L;
}

/* op(a) or op(a, b) at decoder node `node` (the model kind's name, under
 * decoder.L. inside a block): a new tensor, NULL after a failure (x->rc) or
 * when an input is missing (an earlier failure); the inputs stay the
 * caller's. boxes: the box kinds (box_of) of the output, then of each input,
 * for the trace of a traced step. */
static nv_tensor *op2(fwd *f, const char *node, const char *boxes, const char *name,
                      const char *attrs, nv_tensor *a, nv_tensor *b, int n)
{
    const nv_tensor *in[2] = {a, b};
    nv_tensor *out = NULL;
    if (!a || (n == 2 && !b) || sv_op(f->x, name, attrs, n, in, &out) < 0)
        return NULL;
    sv_trace *tr = f->x->trace;
    bool attention = strchr("QKTS", boxes[0]) != NULL;
    if (tr && (!attention || f->att_traced)) {
        char site[SV_SITE_LEN];
        if (f->layer >= 0)
            snprintf(site, sizeof site, "decoder.%d.%s", f->layer, node);
        else
            snprintf(site, sizeof site, "%s", node);
        sv_box ib[2], ob;
        for (int i = 0; i < n; i++)
            box_of(f, boxes[1 + i], in[i], &ib[i]);
        box_of(f, boxes[0], out, &ob);
        if (sv_trace_call(tr, site, name, attrs, n, in, ib, out, &ob) < 0) {
            nv_tensor_free(out);
            f->x->rc = -ENOMEM;
            snprintf(f->x->err, sizeof f->x->err, "op '%s': out of memory (trace)", name);
            return NULL;
        }
    }
    return out;
}
#define op(f, node, boxes, name, attrs, a, b) op2(f, node, boxes, name, attrs, a, b, 2)
#define op1(f, node, boxes, name, attrs, a) op2(f, node, boxes, name, attrs, a, NULL, 1)

/* rows [pos, pos + n) of a [max_pos, D] table for every request, stacked. */
static nv_tensor *table_rows(fwd *f, const nv_tensor *tab)
{
    int64_t D = f->m->s->width;
    nv_tensor *t = tnew(f->m->dt, 2, f->N, D, 1);
    for (int r = 0; t && r < f->nb; r++)
        memcpy(t->data + f->off[r] * D, tab->data + f->cache[r]->len * D,
               (size_t)(f->n[r] * D) * sizeof(double));
    return t;
}

/* x_cos + (x R) sin: the rotary embedding as the model kind composes it. */
static nv_tensor *rope(fwd *f, const char *w, nv_tensor *x, nv_tensor *cs, nv_tensor *sn)
{
    char nc[8], nr[8], ns[8], nn[8];
    snprintf(nc, sizeof nc, "%s_cos", w);
    snprintf(nr, sizeof nr, "%s_rot", w);
    snprintf(ns, sizeof ns, "%s_sin", w);
    snprintf(nn, sizeof nn, "%s_r", w);
    nv_tensor *xc = op(f, nc, "RRR", "mul", NULL, x, cs);
    nv_tensor *xr = op(f, nr, "RRP", "matmul", NULL, x, f->m->rot);
    nv_tensor *xs = op(f, ns, "RRR", "mul", NULL, xr, sn);
    nv_tensor *out = xc && xs ? op(f, nn, "RRR", "add", NULL, xc, xs) : NULL;
    nv_tensor_free(xc);
    nv_tensor_free(xr);
    nv_tensor_free(xs);
    return out;
}

/* Element [h, t, j] of a [H, T, Dh] tensor. */
#define AT(t, T, h, i, j, dh) ((t)->data[((h) * (T) + (i)) * (dh) + (j)])

/* Keys (or values) of request r at its position p < len + n[r]: the cache
 * below len, the fresh [H, N, Dh] tensor from len on. */
static double kv_at(const fwd *f, int r, const double *cached, const nv_tensor *fresh, int64_t h,
                    int64_t p, int64_t j)
{
    const sv_cache *c = f->cache[r];
    int64_t dh = f->m->hd;
    if (p < c->len)
        return cached[(h * c->cap + p) * dh + j];
    return AT(fresh, f->N, h, f->off[r] + p - c->len, j, dh);
}

/* Attention of requests [r0, r1) in one call: q [B*H, nq, Dh], keys and values
 * [B*H, nk, Dh] (zero padded), the causal mask and the padding masked with
 * -inf (a padded query row attends to position 0 only, and is dropped).
 * The context rows go into ctx [H, N, Dh]. */
static int attend(fwd *f, int l, int r0, int r1, const nv_tensor *q, const nv_tensor *k,
                  const nv_tensor *v, nv_tensor *ctx)
{
    const sv_model *m = f->m;
    int64_t H = m->s->heads, dh = m->hd, B = r1 - r0, nq = 0, nk = 0;
    for (int r = r0; r < r1; r++) {
        nq = f->n[r] > nq ? f->n[r] : nq;
        int64_t L = f->cache[r]->len + f->n[r];
        nk = L > nk ? L : nk;
    }
    nv_tensor *qb = tnew(m->dt, 3, B * H, nq, dh), *kb = tnew(m->dt, 3, B * H, nk, dh);
    nv_tensor *vb = tnew(m->dt, 3, B * H, nk, dh), *sc = tnew(m->dt, 3, B * H, nq, nk);
    nv_tensor *mask = tnew(m->dt, 3, B * H, nq, nk);
    int rc = qb && kb && vb && sc && mask ? 0 : -1;
    if (rc < 0)
        f->x->rc = -ENOMEM;
    double scale = nv_dtype_round(m->dt, 1 / sqrt((double)dh), &NV_ROUND_DEFAULT, 0);
    for (int r = r0; rc == 0 && r < r1; r++) {
        const sv_cache *c = f->cache[r];
        int64_t L = c->len + f->n[r];
        for (int64_t h = 0; h < H; h++) {
            int64_t b = (r - r0) * H + h;
            for (int64_t i = 0; i < f->n[r]; i++)
                for (int64_t j = 0; j < dh; j++)
                    AT(qb, nq, b, i, j, dh) = AT(q, f->N, h, f->off[r] + i, j, dh);
            for (int64_t p = 0; p < L; p++)
                for (int64_t j = 0; j < dh; j++) {
                    AT(kb, nk, b, p, j, dh) = kv_at(f, r, c->k[l], k, h, p, j);
                    AT(vb, nk, b, p, j, dh) = kv_at(f, r, c->v[l], v, h, p, j);
                }
            for (int64_t i = 0; i < nq; i++)
                for (int64_t p = 0; p < nk; p++) {
                    bool open = i < f->n[r] ? p <= c->len + i : p == 0;
                    AT(mask, nq, b, i, p, nk) = open ? 0 : -INFINITY;
                    AT(sc, nq, b, i, p, nk) = scale;
                }
        }
    }
    f->att_r0 = r0;
    f->att_nq = nq;
    f->att_nk = nk;
    f->att_traced = f->x->trace && f->x->trace->target >= r0 && f->x->trace->target < r1;
    nv_tensor *kt = rc ? NULL : op1(f, "k_t", "TK", "transpose", NULL, kb);
    nv_tensor *s = kt ? op(f, "scores", "SQT", "bmm", NULL, qb, kt) : NULL;
    nv_tensor *s2 = s ? op(f, "scaled", "SSS", "mul", NULL, s, sc) : NULL;
    nv_tensor *s3 = s2 ? op(f, "masked", "SSS", "add", NULL, s2, mask) : NULL;
    nv_tensor *p = s3 ? op1(f, "p", "SS", "softmax", NULL, s3) : NULL;
    nv_tensor *o = p ? op(f, "ctx", "QSK", "bmm", NULL, p, vb) : NULL;
    f->att_traced = false;
    for (int r = r0; o && r < r1; r++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < f->n[r]; i++)
                for (int64_t j = 0; j < dh; j++)
                    AT(ctx, f->N, h, f->off[r] + i, j, dh) = AT(o, nq, (r - r0) * H + h, i, j, dh);
    rc = o ? 0 : -1;
    nv_tensor *all[] = {qb, kb, vb, sc, mask, kt, s, s2, s3, p, o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nv_tensor_free(all[i]);
    return rc;
}

/* The device's cache_write of the fresh keys and values into each request's
 * cache, at its positions len.. (len itself moves after the step). */
static int store(fwd *f, int l, nv_tensor *k, nv_tensor *v)
{
    nv_tensor *kc = op1(f, "k_cache", "HH", "cache_write", NULL, k);
    nv_tensor *vc = kc ? op1(f, "v_cache", "HH", "cache_write", NULL, v) : NULL;
    int64_t H = f->m->s->heads, dh = f->m->hd;
    for (int r = 0; vc && r < f->nb; r++) {
        sv_cache *c = f->cache[r];
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < f->n[r]; i++)
                for (int64_t j = 0; j < dh; j++) {
                    int64_t at = (h * c->cap + c->len + i) * dh + j;
                    c->k[l][at] = AT(kc, f->N, h, f->off[r] + i, j, dh);
                    c->v[l][at] = AT(vc, f->N, h, f->off[r] + i, j, dh);
                }
    }
    int rc = vc ? 0 : -1;
    nv_tensor_free(kc);
    nv_tensor_free(vc);
    return rc;
}

static nv_tensor *block(fwd *f, int l, nv_tensor *x, nv_tensor *cs, nv_tensor *sn, sv_layout layout)
{
    const sv_layer *y = &f->m->layer[l];
    const char *ha = f->m->heads_attrs;
    f->layer = l;
    nv_tensor *n1 = op(f, "n1", "RRP", "rms_norm", NULL, x, y->g_attn);
    nv_tensor *q = op(f, "q", "RRP", "matmul", NULL, n1, y->wq);
    nv_tensor *k = op(f, "k", "RRP", "matmul", NULL, n1, y->wk);
    nv_tensor *v = op(f, "v", "RRP", "matmul", NULL, n1, y->wv);
    nv_tensor *qr = q && k && v ? rope(f, "q", q, cs, sn) : NULL;
    nv_tensor *kr = qr ? rope(f, "k", k, cs, sn) : NULL;
    nv_tensor *qh = kr ? op1(f, "q_h", "HR", "split_heads", ha, qr) : NULL;
    nv_tensor *kh = qh ? op1(f, "k_h", "HR", "split_heads", ha, kr) : NULL;
    nv_tensor *vh = kh ? op1(f, "v_h", "HR", "split_heads", ha, v) : NULL;
    nv_tensor *ctx = vh ? tnew(f->m->dt, 3, f->m->s->heads, f->N, f->m->hd) : NULL;
    int rc = ctx ? 0 : -1;
    if (vh && !ctx)
        f->x->rc = -ENOMEM;
    if (rc == 0 && layout == SV_PADDED)
        rc = attend(f, l, 0, f->nb, qh, kh, vh, ctx);
    for (int r = 0; rc == 0 && layout == SV_PACKED && r < f->nb; r++)
        rc = attend(f, l, r, r + 1, qh, kh, vh, ctx);
    rc = rc ? rc : store(f, l, kh, vh);
    nv_tensor *mg = rc ? NULL : op1(f, "merged", "RH", "merge_heads", NULL, ctx);
    nv_tensor *at = mg ? op(f, "attn", "RRP", "matmul", NULL, mg, y->wo) : NULL;
    nv_tensor *h = at ? op(f, "h", "RRR", "add", NULL, x, at) : NULL;
    nv_tensor *n2 = h ? op(f, "n2", "RRP", "rms_norm", NULL, h, y->g_mlp) : NULL;
    nv_tensor *gate = n2 ? op(f, "gate", "RRP", "matmul", NULL, n2, y->w_gate) : NULL;
    nv_tensor *act = gate ? op1(f, "act", "RR", "silu", NULL, gate) : NULL;
    nv_tensor *up = act ? op(f, "up", "RRP", "matmul", NULL, n2, y->w_up) : NULL;
    nv_tensor *gated = up ? op(f, "gated", "RRR", "mul", NULL, act, up) : NULL;
    nv_tensor *down = gated ? op(f, "down", "RRP", "matmul", NULL, gated, y->w_down) : NULL;
    nv_tensor *out = down ? op(f, "out", "RRR", "add", NULL, h, down) : NULL;
    f->layer = -1;
    nv_tensor *all[] = {n1, q,  k, v,  qr,   kr,  qh, kh,    vh,  ctx,
                        mg, at, h, n2, gate, act, up, gated, down};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nv_tensor_free(all[i]);
    return out;
}

int sv_forward(sv_exec *x, const sv_model *m, int nb, const int64_t *n, const int64_t *const *ids,
               sv_cache *const *cache, sv_layout layout, nv_tensor **logits)
{
    int64_t off[64];
    fwd f = {.x = x, .m = m, .nb = nb, .n = n, .cache = cache, .off = off, .layer = -1};
    x->rc = 0;
    if (nb > 64)
        return x->rc = NV_E_INVALID, -1;
    for (int r = 0; r < nb; r++) {
        off[r] = f.N;
        f.N += n[r];
        if (cache[r]->len + n[r] > cache[r]->cap || cache[r]->len + n[r] > m->max_pos) {
            snprintf(x->err, sizeof x->err, "request %d: the KV cache holds %lld positions", r,
                     (long long)cache[r]->cap);
            return x->rc = NV_E_INVALID, -1;
        }
    }
    if (x->steps)
        return sv_steps_forward(x, m, nb, n, ids, cache, layout, logits);
    nv_tensor *idt = tnew(NV_DT_INT32, 1, f.N, 1, 1);
    for (int r = 0; idt && r < nb; r++)
        for (int64_t i = 0; i < n[r]; i++)
            idt->data[off[r] + i] = (double)ids[r][i];
    nv_tensor *cs = table_rows(&f, m->cos), *sn = table_rows(&f, m->sin);
    nv_tensor *h =
        idt && cs && sn ? op(&f, "embed.x", "RPR", "embedding", NULL, m->wte, idt) : NULL;
    if (!idt || !cs || !sn)
        x->rc = -ENOMEM;
    for (int l = 0; h && l < m->s->layers; l++) {
        nv_tensor *nx = block(&f, l, h, cs, sn, layout);
        nv_tensor_free(h);
        h = nx;
    }
    nv_tensor *fn = h ? op(&f, "final.n", "RRP", "rms_norm", NULL, h, m->g_final) : NULL;
    nv_tensor *lg = fn ? op(&f, "final.logits", "RRP", "matmul", NULL, fn, m->w_unembed) : NULL;
    int64_t V = m->s->vocab;
    int rc = lg ? 0 : -1;
    for (int r = 0; r < nb; r++)
        logits[r] = NULL;
    for (int r = 0; rc == 0 && r < nb; r++) {
        if (!(logits[r] = tnew(lg->dtype, 2, n[r], V, 1))) {
            x->rc = -ENOMEM;
            rc = -1;
            break;
        }
        memcpy(logits[r]->data, lg->data + off[r] * V, (size_t)(n[r] * V) * sizeof(double));
    }
    for (int r = 0; rc == 0 && r < nb; r++)
        cache[r]->len += n[r];
    for (int r = 0; rc < 0 && r < nb; r++) {
        nv_tensor_free(logits[r]);
        logits[r] = NULL;
    }
    nv_tensor *all[] = {idt, cs, sn, h, fn, lg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nv_tensor_free(all[i]);
    return rc;
}
