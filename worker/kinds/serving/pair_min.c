/* Minimizing a serving pair (pair_min.h, docs/ARTIFACTS.md "Serving pairs"):
 * the gate (the stored pair, N probes), then, with the signature fixed (a
 * candidate counts only when its two calls still differ with the stored
 * class), three phases: the other requests' rows (for ops whose every
 * non-parameter tensor holds the batch's rows in dim 0: drop rows of the
 * batched call not the request's, in halving chunks), the extents of a
 * matmul (the output columns N and the reduction K, each bisected to the
 * half that still fails) and zeros (elements set to 0 in halving chunks,
 * the request's inputs zeroed in both calls alike so that they keep
 * agreeing); then the result is re-verified (every run fails). */
#include "pair_min.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct mstate {
    const nvw_backend *b;
    const sv_pmin_opts *o;
    sv_pmin_result *m;
    double start;
    const char *cls;
} mstate;

/* Whether the search may go on; sets the stop reason when not. */
static bool go_on(mstate *s)
{
    if (s->o->cancel && atomic_load(s->o->cancel))
        s->m->stop = "cancelled";
    else if (s->m->probes >= s->o->budget)
        s->m->stop = "budget";
    else if (now_s() - s->start > s->o->deadline_s)
        s->m->stop = "deadline";
    else
        return true;
    return false;
}

/* A candidate still fails with the stored class (takes q; on failure frees
 * it and returns false, else it becomes *best). */
static bool keep(mstate *s, sv_pair **best, sv_pair *q)
{
    if (!q)
        return false;
    sv_pprobe p;
    s->m->probes++;
    if (sv_pair_probe(q, s->b, s->o->timeout_ms, &p, NULL) == 0 && !strcmp(p.cls, s->cls)) {
        sv_pair_free(*best);
        *best = q;
        return true;
    }
    sv_pair_free(q);
    return false;
}

/* ---- rows ---- */

static bool full_but(const sv_box *b, const nv_tensor *t, int dim)
{
    for (int d = 0; d < b->nd; d++)
        if (d != dim && (b->off[d] != 0 || b->ext[d] != t->shape[d]))
            return false;
    return true;
}

/* Call w holds the batch's rows in dim 0 of every non-parameter tensor, the
 * request's rows the same window in each. */
static bool row_batched(const sv_pair *p, int w)
{
    const sv_box *ob = &p->out_box[w];
    if (ob->nd < 1 || !full_but(ob, p->out[w], 0))
        return false;
    for (int i = 0; i < p->n_in; i++) {
        const sv_box *ib = &p->in_box[w][i];
        if (ib->param)
            continue;
        if (ib->nd < 1 || p->in[w][i]->shape[0] != p->out[w]->shape[0] ||
            ib->off[0] != ob->off[0] || ib->ext[0] != ob->ext[0] || !full_but(ib, p->in[w][i], 0))
            return false;
    }
    return true;
}

static nv_tensor *rows_of(const nv_tensor *t, const bool *kept, int64_t n)
{
    int64_t shape[NV_MAX_DIMS], row = t->numel / t->shape[0];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = n;
    nv_tensor *c = nv_tensor_new(t->dtype, t->ndim, shape);
    for (int64_t r = 0, at = 0; c && r < t->shape[0]; r++)
        if (kept[r])
            memcpy(c->data + (at++) * row, t->data + r * row, (size_t)row * sizeof(double));
    return c;
}

/* p with call 1's rows where kept (the request's all kept). */
static sv_pair *with_rows(const sv_pair *p, const bool *kept)
{
    int64_t n = 0, before = 0, M = p->out[1]->shape[0];
    for (int64_t r = 0; r < M; r++) {
        n += kept[r];
        before += kept[r] && r < p->out_box[1].off[0];
    }
    sv_pair *q = sv_pair_clone(p);
    bool ok = q != NULL;
    for (int i = 0; ok && i < p->n_in; i++)
        if (!p->in_box[1][i].param) {
            nv_tensor_free(q->in[1][i]);
            ok = (q->in[1][i] = rows_of(p->in[1][i], kept, n)) != NULL;
            q->in_box[1][i].off[0] = before;
        }
    if (ok) {
        nv_tensor_free(q->out[1]);
        ok = (q->out[1] = rows_of(p->out[1], kept, n)) != NULL;
        q->out_box[1].off[0] = before;
    }
    if (!ok) {
        sv_pair_free(q);
        return NULL;
    }
    return q;
}

static void drop_rows(mstate *s, sv_pair **best)
{
    if (!row_batched(*best, 1))
        return;
    int64_t M = (*best)->out[1]->shape[0];
    s->m->rows_before = M;
    bool *kept = malloc((size_t)M * sizeof *kept);
    if (!kept)
        return;
    for (int64_t chunk = M / 2; chunk >= 1 && go_on(s); chunk /= 2) {
        for (int64_t lo = 0; lo < (*best)->out[1]->shape[0] && go_on(s); lo += chunk) {
            const sv_box *ob = &(*best)->out_box[1];
            int64_t m = (*best)->out[1]->shape[0], dropped = 0;
            for (int64_t r = 0; r < m; r++) {
                bool mine = r >= ob->off[0] && r < ob->off[0] + ob->ext[0];
                kept[r] = mine || r < lo || r >= lo + chunk;
                dropped += !kept[r];
            }
            if (dropped && dropped < m - ob->ext[0] && keep(s, best, with_rows(*best, kept)))
                lo -= chunk; /* the rows moved down: try the same place again */
        }
    }
    free(kept);
    s->m->rows_after = (*best)->out[1]->shape[0];
}

/* ---- matmul extents ---- */

typedef struct cut {
    int w, i; /* call, input (i = -1: the output) */
    int dim;
} cut;

/* p with dim cuts[].dim of each named tensor to [lo, lo + len) (each box
 * full along it). */
static sv_pair *window(const sv_pair *p, const cut *cuts, int n, int64_t lo, int64_t len)
{
    sv_pair *q = sv_pair_clone(p);
    for (int c = 0; q && c < n; c++) {
        nv_tensor **tp = cuts[c].i < 0 ? &q->out[cuts[c].w] : &q->in[cuts[c].w][cuts[c].i];
        sv_box *bx = cuts[c].i < 0 ? &q->out_box[cuts[c].w] : &q->in_box[cuts[c].w][cuts[c].i];
        const nv_tensor *t = *tp;
        int d = cuts[c].dim;
        int64_t shape[NV_MAX_DIMS], inner = 1, outer = 1;
        memcpy(shape, t->shape, sizeof shape);
        shape[d] = len;
        for (int k = d + 1; k < t->ndim; k++)
            inner *= t->shape[k];
        for (int k = 0; k < d; k++)
            outer *= t->shape[k];
        nv_tensor *u = nv_tensor_new(t->dtype, t->ndim, shape);
        if (!u || bx->off[d] != 0 || bx->ext[d] != t->shape[d]) {
            nv_tensor_free(u);
            sv_pair_free(q);
            return NULL;
        }
        for (int64_t o = 0; o < outer; o++)
            memcpy(u->data + o * len * inner, t->data + (o * t->shape[d] + lo) * inner,
                   (size_t)(len * inner) * sizeof(double));
        nv_tensor_free(*tp);
        *tp = u;
        bx->ext[d] = len;
    }
    return q;
}

static void bisect(mstate *s, sv_pair **best, const cut *cuts, int n, int64_t extent)
{
    int64_t len = extent;
    while (len > 1 && go_on(s)) {
        int64_t half = len / 2;
        if (!keep(s, best, window(*best, cuts, n, 0, half)) &&
            !keep(s, best, window(*best, cuts, n, half, len - half)))
            break;
        const nv_tensor *t =
            cuts[0].i < 0 ? (*best)->out[cuts[0].w] : (*best)->in[cuts[0].w][cuts[0].i];
        len = t->shape[cuts[0].dim];
    }
}

static void matmul_extents(mstate *s, sv_pair **best)
{
    const sv_pair *p = *best;
    if (strcmp(p->op->name, "matmul") || p->n_in != 2)
        return;
    for (int w = 0; w < 2; w++)
        if (p->in[w][0]->ndim != 2 || p->in[w][1]->ndim != 2 || !p->in_box[w][1].param)
            return;
    /* N: the weight's and the outputs' columns; K: the reduction */
    cut ncut[4] = {{0, 1, 1}, {1, 1, 1}, {0, -1, 1}, {1, -1, 1}};
    cut kcut[4] = {{0, 0, 1}, {1, 0, 1}, {0, 1, 0}, {1, 1, 0}};
    bisect(s, best, ncut, 4, (*best)->in[0][1]->shape[1]);
    bisect(s, best, kcut, 4, (*best)->in[0][1]->shape[0]);
}

/* ---- zeros ---- */

typedef struct slot {
    int w[2], i[2];
    int64_t e[2];
    int n; /* positions zeroed together: 1 or 2 */
} slot;

static int64_t box_at(const nv_tensor *t, const sv_box *b, int64_t e)
{
    int64_t at = 0, stride = 1;
    for (int d = b->nd - 1; d >= 0; d--) {
        at += (b->off[d] + e % b->ext[d]) * stride;
        e /= b->ext[d];
        stride *= t->shape[d];
    }
    return at;
}

static bool in_box(const nv_tensor *t, const sv_box *b, int64_t idx)
{
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t k = idx % t->shape[d];
        idx /= t->shape[d];
        if (k < b->off[d] || k >= b->off[d] + b->ext[d])
            return false;
    }
    return true;
}

static int64_t box_numel(const sv_box *b)
{
    int64_t n = 1;
    for (int d = 0; d < b->nd; d++)
        n *= b->ext[d];
    return n;
}

/* The zeroable positions of p's inputs: a parameter's element in both
 * calls, the request's element in both calls' boxes, any other alone. */
static slot *slots_of(const sv_pair *p, int64_t *ret_n)
{
    int64_t cap = 0, n = 0;
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < p->n_in; i++)
            cap += p->in[w][i]->numel;
    slot *s = malloc((size_t)(cap + 1) * sizeof *s);
    if (!s)
        return NULL;
    for (int i = 0; i < p->n_in; i++) {
        const sv_box *ba = &p->in_box[0][i], *bb = &p->in_box[1][i];
        const nv_tensor *ta = p->in[0][i], *tb = p->in[1][i];
        int64_t shared = ba->param ? (ta->numel == tb->numel ? ta->numel : 0) : box_numel(ba);
        for (int64_t e = 0; e < shared; e++)
            s[n++] = (slot){{0, 1},
                            {i, i},
                            {ba->param ? e : box_at(ta, ba, e), ba->param ? e : box_at(tb, bb, e)},
                            2};
        for (int w = 0; w < 2; w++) {
            const nv_tensor *t = p->in[w][i];
            const sv_box *bx = &p->in_box[w][i];
            for (int64_t e = 0; !bx->param && e < t->numel; e++)
                if (!in_box(t, bx, e))
                    s[n++] = (slot){{w, w}, {i, i}, {e, e}, 1};
        }
    }
    *ret_n = n;
    return s;
}

static sv_pair *zeroed(const sv_pair *p, const slot *s, int64_t lo, int64_t hi, bool *any)
{
    *any = false;
    for (int64_t k = lo; k < hi; k++)
        for (int j = 0; j < s[k].n; j++)
            *any |= p->in[s[k].w[j]][s[k].i[j]]->data[s[k].e[j]] != 0;
    if (!*any)
        return NULL;
    sv_pair *q = sv_pair_clone(p);
    for (int64_t k = lo; q && k < hi; k++)
        for (int j = 0; j < s[k].n; j++)
            q->in[s[k].w[j]][s[k].i[j]]->data[s[k].e[j]] = 0;
    return q;
}

static void zeros(mstate *s, sv_pair **best)
{
    if (!strcmp((*best)->op->name, "embedding"))
        return; /* ids are indices: never zeroed (0 is a token) */
    int64_t n = 0;
    slot *sl = slots_of(*best, &n);
    if (!sl)
        return;
    for (int64_t chunk = n / 2 > 0 ? n / 2 : 1; chunk >= 1 && go_on(s); chunk /= 2)
        for (int64_t lo = 0; lo < n && go_on(s); lo += chunk) {
            bool any;
            sv_pair *q = zeroed(*best, sl, lo, lo + chunk < n ? lo + chunk : n, &any);
            if (any)
                keep(s, best, q);
        }
    free(sl);
}

static void count(const sv_pair *p, int64_t *total, int64_t *nonzero)
{
    *total = *nonzero = 0;
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < p->n_in; i++)
            for (int64_t e = 0; e < p->in[w][i]->numel; e++) {
                (*total)++;
                *nonzero += p->in[w][i]->data[e] != 0;
            }
}

int sv_pair_gate(const sv_pair *p, const nvw_backend *b, int runs, int timeout_ms, int *failed,
                 int *bits)
{
    *failed = *bits = 0;
    for (int k = 0; k < runs; k++) {
        sv_pprobe pr;
        int r = sv_pair_probe(p, b, timeout_ms, &pr, NULL);
        if (r < 0)
            return r;
        *failed += !strcmp(pr.cls, p->cls);
        *bits += pr.bits[0] && pr.bits[1];
    }
    return 0;
}

int sv_pair_minimize(const sv_pair *p, const nvw_backend *b, const sv_pmin_opts *o,
                     sv_pmin_result *m)
{
    memset(m, 0, sizeof *m);
    mstate s = {.b = b, .o = o, .m = m, .start = now_s(), .cls = p->cls};
    m->gate_runs = o->runs;
    m->stop = "done";
    int r = sv_pair_gate(p, b, o->runs, o->timeout_ms, &m->gate_failed, &m->gate_bits);
    if (r < 0)
        return r;
    m->flaky = 2 * m->gate_failed < o->runs;
    count(p, &m->elements_before, &m->nonzero_before);
    m->rows_before = m->rows_after = p->out[1]->ndim ? p->out[1]->shape[0] : 1;
    if (m->flaky)
        return 0;
    sv_pair *best = sv_pair_clone(p);
    if (!best)
        return -ENOMEM;
    drop_rows(&s, &best);
    matmul_extents(&s, &best);
    zeros(&s, &best);
    count(best, &m->elements_after, &m->nonzero_after);
    /* re-verify; the last run's outputs are the minimized case's */
    bool all = true;
    for (int k = 0; k < o->runs && all; k++) {
        sv_pprobe pr;
        nv_tensor *out[2];
        if (sv_pair_probe(best, b, o->timeout_ms, &pr, out) < 0 || strcmp(pr.cls, p->cls) ||
            !out[0] || !out[1]) {
            all = false;
            nv_tensor_free(out[0]);
            nv_tensor_free(out[1]);
            break;
        }
        for (int w = 0; w < 2; w++) {
            nv_tensor_free(best->out[w]);
            best->out[w] = out[w];
        }
        m->differ = pr.differ;
    }
    m->verified = all;
    m->seconds = now_s() - s.start;
    m->best = best;
    return 0;
}
