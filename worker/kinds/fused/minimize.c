/* The minimizer of fused failures (repro_fused.h nvw_fminimize): the gate on the
 * stored graph, delta debugging over the nodes kept (Zeller and Hildebrandt,
 * IEEE TSE 28(2), 2002: complements of n chunks, n doubling), extent shrinking,
 * re-verification; every probe in a forked child, the signature fixed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repro_fused.h"

typedef struct fmin {
    nvw_frepro *fr;
    const nvw_backend *b;
    const nvw_fmin_opts *o;
    nvw_fmin_result *res;
    double t0;
    int budget;
    double deadline_s;
} fmin;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool cancelled(fmin *m)
{
    bool c = m->o->cancel && atomic_load(m->o->cancel);
    if (c)
        m->res->stop = "cancelled";
    return c;

}

static bool past_deadline(fmin *m)
{
    if (now_s() - m->t0 > m->deadline_s) {
        m->res->stop = "deadline";
        return true;
    }
    return false;
}

static bool out_of_time(fmin *m)
{
    if (cancelled(m))
        return true;
    if (m->res->probes >= m->budget) {
        m->res->stop = "budget";
        return true;
    }
    return past_deadline(m);
}

/* Probe subgraph sub: 1 still fails with the signature, 0 not (or the subgraph
 * is not a valid graph: no probe spent), negative errno. */
static int test(fmin *m, const nvw_fsub *sub, nvw_fprobe *ret_p)
{
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int n = 0;
    int r = nvw_fsub_build(m->fr, sub, &spec, &in, &n);
    if (r == -EINVAL)
        return 0;
    if (r < 0)
        return r;
    nvw_fprobe p;
    r = nvw_fprobe_run(m->fr, m->b, spec, in, n, m->o->timeout_ms, false, NULL, NULL, &p);
    m->res->probes++;
    for (int i = 0; i < n; i++)
        nv_tensor_free(in[i]);
    free(in);
    json_decref(spec);
    if (r < 0)
        return r;
    if (ret_p)
        *ret_p = p;
    return nvw_fprobe_same(m->fr, &p) ? 1 : 0;
}

static int count_kept(const nvw_fsub *s, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += s->keep[i];
    return k;
}

/* ddmin over the kept nodes: try removing each of n chunks (keeping its
 * complement); on success restart with n - 1 chunks, else double n. */
static int ddmin_nodes(fmin *m)
{
    nvw_fsub *cur = &m->res->sub;
    int total = m->fr->g->n_nodes, chunks = 2;
    for (;;) {
        int idx[NV_GRAPH_MAX_NODES], len = 0;
        for (int k = 0; k < total; k++)
            if (cur->keep[k])
                idx[len++] = k;
        if (len <= 1)
            return 0;
        if (chunks > len)
            chunks = len;
        bool reduced = false;
        for (int c = 0; c < chunks && !reduced; c++) {
            if (out_of_time(m))
                return 0;
            nvw_fsub t = *cur;
            int lo = c * len / chunks, hi = (c + 1) * len / chunks;
            for (int i = lo; i < hi; i++)
                t.keep[idx[i]] = false;
            int r = test(m, &t, NULL);
            if (r < 0)
                return r;
            if (r == 1) {
                *cur = t;
                reduced = true;
                if (m->o->progress)
                    fprintf(m->o->progress, "minimize: %d nodes still fail (probe %d)\n",
                            count_kept(cur, total), m->res->probes);
            }
        }
        if (reduced)
            chunks = chunks > 2 ? chunks - 1 : 2;
        else if (chunks >= len)
            return 0;
        else
            chunks *= 2;
    }
}

/* Extents of the subgraph's inputs (distinct, descending). */
static int extents(fmin *m, int64_t *ext)
{
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int n = 0, ne = 0;
    nvw_fsub base = m->res->sub;
    base.n_map = 0;
    if (nvw_fsub_build(m->fr, &base, &spec, &in, &n) < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < in[i]->ndim; d++) {
            int64_t e = in[i]->shape[d];
            bool seen = e <= 1;
            for (int j = 0; j < ne && !seen; j++)
                seen = ext[j] == e;
            if (!seen)
                ext[ne++] = e;
        }
        nv_tensor_free(in[i]);
    }
    free(in);
    json_decref(spec);
    for (int i = 0; i < ne; i++)
        for (int j = i + 1; j < ne; j++)
            if (ext[j] > ext[i]) {
                int64_t t = ext[i];
                ext[i] = ext[j];
                ext[j] = t;
            }
    return ne;
}

/* Halve window w of the current subgraph while one half still fails: the
 * first half, else the second (a fault at one position is found in about
 * 2 log2(length) probes; prefixes alone cannot drop the elements before it).
 * Every input dim of that extent takes the same window, as with prefixes. */
static int bisect(fmin *m, int w)
{
    nvw_fsub *cur = &m->res->sub;
    while (cur->to[w] > 1) {
        int64_t len = cur->to[w], half = len / 2;
        int64_t offs[2] = {cur->off[w], cur->off[w] + half}, lens[2] = {half, len - half};
        bool took = false;
        for (int h = 0; h < 2 && !took; h++) {
            if (out_of_time(m))
                return 0;
            nvw_fsub t = *cur;
            t.off[w] = offs[h];
            t.to[w] = lens[h];
            int r = test(m, &t, NULL);
            if (r < 0)
                return r;
            if (r == 1) {
                *cur = t;
                took = true;
                if (m->o->progress)
                    fprintf(m->o->progress,
                            "minimize: extent %lld -> [%lld, %lld) still fails (probe %d)\n",
                            (long long)cur->from[w], (long long)cur->off[w],
                            (long long)(cur->off[w] + cur->to[w]), m->res->probes);
            }
        }
        if (!took)
            break;
    }
    return 0;
}

/* Each extent e: the smallest power of two below e (1, 2, 4 ...) whose prefix
 * keeps the failure replaces it everywhere, then its window is bisected. */
static int shrink(fmin *m)
{
    int64_t ext[2 * NV_MAX_DIMS * NV_GRAPH_MAX_INPUTS];
    int ne = extents(m, ext);
    nvw_fsub *cur = &m->res->sub;
    for (int i = 0; i < ne; i++) {
        bool mapped = false;
        for (int64_t x = 1; x < ext[i]; x *= 2) {
            if (out_of_time(m))
                return 0;
            nvw_fsub t = *cur;
            t.from[t.n_map] = ext[i];
            t.off[t.n_map] = 0;
            t.to[t.n_map++] = x;
            int r = test(m, &t, NULL);
            if (r < 0)
                return r;
            if (r == 1) {
                *cur = t;
                mapped = true;
                if (m->o->progress)
                    fprintf(m->o->progress,
                            "minimize: extent %lld -> %lld still fails (probe %d)\n",
                            (long long)ext[i], (long long)x, m->res->probes);
                break;
            }
        }
        if (!mapped) { /* no prefix fails: bisect the whole extent */
            cur->from[cur->n_map] = ext[i];
            cur->off[cur->n_map] = 0;
            cur->to[cur->n_map++] = ext[i];
        }
        int r = bisect(m, cur->n_map - 1);
        if (r < 0)
            return r;
    }
    return 0;
}

static int64_t elements(nvw_frepro *fr, const nvw_fsub *sub)
{
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int n = 0;
    int64_t e = 0;
    if (nvw_fsub_build(fr, sub, &spec, &in, &n) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        e += in[i]->numel;
        nv_tensor_free(in[i]);
    }
    free(in);
    json_decref(spec);
    return e;
}

/* Run the stored graph (stored = true) or the minimized one runs times (fewer
 * when cut short). Returns the count of runs done, or a negative errno. */
static int gate(fmin *m, const nvw_fsub *sub, bool stored, int runs, int *ret_failed, int *ret_bits,
                nvw_fprobe *ret_last)
{
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int n = 0, failed = 0, bits = 0, r = 0, done = 0;
    if (stored) { /* exactly the stored job spec and inputs */
        spec = json_incref(m->fr->spec);
        n = m->fr->g->n_inputs;
        if (!(in = calloc((size_t)n, sizeof *in)))
            r = -ENOMEM;
        for (int i = 0; r == 0 && i < n; i++)
            if (!(in[i] = nv_tensor_contiguous(m->fr->in[i])))
                r = -ENOMEM;
    } else {
        r = nvw_fsub_build(m->fr, sub, &spec, &in, &n);
    }
    for (int i = 0; r == 0 && i < runs; i++) {
        /* The stored graph may be large (each probe runs it three times): its
         * gate honours the deadline; the re-verification of a minimized
         * candidate always completes. */
        if (cancelled(m) || (stored && past_deadline(m)))
            break;
        r = nvw_fprobe_run(m->fr, m->b, spec, in, n, m->o->timeout_ms, stored, NULL, NULL,
                           ret_last);
        failed += r == 0 && nvw_fprobe_same(m->fr, ret_last);
        bits += r == 0 && ret_last->bits == 1;
        done += r == 0;
    }
    for (int i = 0; in && i < n; i++)
        nv_tensor_free(in[i]);
    free(in);
    json_decref(spec);
    *ret_failed = failed;
    *ret_bits = bits;
    return r < 0 ? r : done;
}

int nvw_fminimize(nvw_frepro *fr, const nvw_backend *b, const nvw_fmin_opts *o,
                  nvw_fmin_result *ret)
{
    memset(ret, 0, sizeof *ret);
    fmin m = {.fr = fr, .b = b, .o = o, .res = ret, .t0 = now_s()};
    m.budget = o->budget > 0 ? o->budget : 500;
    m.deadline_s = o->deadline_s > 0 ? o->deadline_s : 300;
    int runs = o->gate_runs > 0 ? o->gate_runs : 5;
    ret->stop = "done";
    ret->nodes_before = fr->g->n_nodes;
    for (int k = 0; k < fr->g->n_nodes; k++)
        ret->sub.keep[k] = true;
    ret->elements_before = elements(fr, &ret->sub);
    int r = gate(&m, &ret->sub, true, runs, &ret->gate_failed, &ret->gate_bits, &ret->last);
    if (r < 0)
        return r;
    ret->gate_runs = r; /* the runs done: fewer when cut short */
    /* A gate cut short (cancelled, deadline) judges nothing: neither flaky nor
     * minimized; a cancelled minimization is not verified. */
    bool cut = strcmp(ret->stop, "done") != 0;
    ret->flaky = !cut && 2 * ret->gate_failed < runs;
    if (o->progress && !cut)
        fprintf(o->progress, "minimize: gate: %d of %d runs fail as '%s' at '%s' (%s)%s\n",
                ret->gate_failed, runs, fr->cls, fr->op, fr->judge,
                ret->flaky ? ": flaky, not minimized" : "");
    if (!ret->flaky && !cut) {
        if ((r = ddmin_nodes(&m)) < 0 || (r = shrink(&m)) < 0)
            return r;
        int failed = 0, bits = 0;
        if (!cancelled(&m) &&
            (r = gate(&m, &ret->sub, false, runs, &failed, &bits, &ret->last)) < 0)
            return r;
        ret->verified = !cancelled(&m) && failed == runs;
    }
    ret->nodes_after = count_kept(&ret->sub, fr->g->n_nodes);
    ret->elements_after = elements(fr, &ret->sub);
    ret->seconds = now_s() - m.t0;
    return 0;
}
