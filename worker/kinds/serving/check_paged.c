/* Cache pressure (docs/SERVING.md "Paged KV cache"): requests decoded
 * together under a budget of KV-cache pages (`page` positions each, `pages`
 * in all). Before each step every request that has not finished asks for
 * the pages its next step fills, in a rotating order; when none are free,
 * the resident request holding the most pages (not yet in the step) is
 * evicted: its cache is dropped, and when it runs again it recomputes it, a
 * prefill of its prompt and the tokens it generated so far, whose last row
 * gives its next token. Every request's logits, token by token, must equal
 * the same requests run with pages for all (no eviction), bit for bit where
 * the device declares itself deterministic (describe()'s nondeterministic_ops
 * is empty): the recomputation meets the same weights in the same ops, and a
 * row's matmul does not depend on how many rows share the call. Pages are the
 * kind's accounting of its cache (the device sees each request's cache as a
 * tensor; the catalog has no paged-attention op). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

#define MAXR (1 + NV_SERVING_MAX_OTHERS)

typedef struct preq {
    int64_t plen;
    int64_t *seq;      /* prompt, then the generated tokens */
    double *ref, *got; /* steps x V */
    bool *recomputed;  /* per token: its logits came from a recomputation */
    int64_t evictions, first_diff, differ, evict_step, evict_pages;
} preq;

typedef struct pstate {
    scase *c;
    sv_model m;
    int nr;
    preq q[MAXR];
} pstate;

static int64_t pages_for(int64_t len, int64_t page)
{
    return (len + page - 1) / page;
}

/* Run every request to `steps` tokens under budget pages; logits into out
 * (ref or got). Evictions are recorded when record. */
static int run(pstate *st, int64_t budget, bool record, sv_exec *x)
{
    const nv_servingspec *s = st->c->j->s;
    int64_t V = s->vocab, S = s->steps, P = s->page;
    int nr = st->nr, rc = 0;
    sv_cache cache[MAXR];
    int64_t k[MAXR] = {0}, n[MAXR], free_pages = budget;
    bool resident[MAXR] = {false};
    const int64_t *ids[MAXR];
    sv_cache *cp[MAXR];
    nv_tensor *lg[MAXR];
    int who[MAXR];
    memset(cache, 0, sizeof cache);
    for (int i = 0; rc == 0 && i < nr; i++)
        if (sv_cache_init(&cache[i], &st->m, st->q[i].plen + S) < 0)
            rc = -1, x->rc = -ENOMEM;
    int left = nr;
    for (int64_t step = 0; rc == 0 && left > 0; step++) {
        int nb = 0;
        bool in_step[MAXR] = {false};
        for (int o = 0; o < nr; o++) {
            int i = (int)((step + o) % nr);
            preq *q = &st->q[i];
            if (k[i] == S)
                continue;
            int64_t len = resident[i] ? cache[i].len + 1 : q->plen + k[i];
            int64_t extra = pages_for(len, P) - (resident[i] ? pages_for(cache[i].len, P) : 0);
            while (free_pages < extra) {
                int v = -1;
                for (int j = 0; j < nr; j++)
                    if (j != i && resident[j] && !in_step[j] &&
                        (v < 0 || pages_for(cache[j].len, P) > pages_for(cache[v].len, P)))
                        v = j;
                if (v < 0)
                    break;
                int64_t held = pages_for(cache[v].len, P);
                free_pages += held;
                if (record) {
                    st->q[v].evictions++;
                    st->q[v].evict_step = step;
                    st->q[v].evict_pages = held;
                }
                cache[v].len = 0;
                resident[v] = false;
            }
            if (free_pages < extra)
                continue;
            free_pages -= extra;
            if (!resident[i])
                cache[i].len = 0;
            n[nb] = resident[i] ? 1 : q->plen + k[i];
            ids[nb] = resident[i] ? q->seq + q->plen + k[i] - 1 : q->seq;
            cp[nb] = &cache[i];
            who[nb++] = i;
            in_step[i] = true;
        }
        if (nb == 0)
            continue;
        if ((rc = sv_forward(x, &st->m, nb, n, ids, cp, SV_PACKED, lg)) < 0)
            break;
        for (int b = 0; b < nb; b++) {
            int i = who[b];
            preq *q = &st->q[i];
            const double *row = lg[b]->data + (n[b] - 1) * V;
            double *dst = (record ? q->got : q->ref) + k[i] * V;
            memcpy(dst, row, (size_t)V * sizeof(double));
            if (record)
                q->recomputed[k[i]] = !resident[i] && k[i] > 0;
            int64_t tok = sv_argmax(row, V, NULL, NULL);
            if (!record)
                q->seq[q->plen + k[i]] = tok;
            resident[i] = true;
            if (++k[i] == S) {
                free_pages += pages_for(cache[i].len, P);
                resident[i] = false;
                left--;
            }
            nv_tensor_free(lg[b]);
        }
    }
    for (int i = 0; i < nr; i++)
        sv_cache_done(&cache[i], &st->m);
    return rc;
}

static int report(pstate *st)
{
    scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    int64_t V = s->vocab, S = s->steps, evictions = 0;
    int bad = -1;
    json_t *rows = json_array();
    for (int i = 0; rows && i < st->nr; i++) {
        preq *q = &st->q[i];
        q->first_diff = -1;
        for (int64_t t = 0; t < S; t++) {
            int64_t d = 0;
            for (int64_t v = 0; v < V; v++) {
                double a = q->ref[t * V + v], b = q->got[t * V + v];
                d += !(a == b || (isnan(a) && isnan(b)));
            }
            q->differ += d;
            if (d && q->first_diff < 0)
                q->first_diff = t;
        }
        evictions += q->evictions;
        if (q->differ && bad < 0 && c->deterministic)
            bad = i;
        int64_t rec = 0;
        for (int64_t t = 0; t < S; t++)
            rec += q->recomputed[t];
        json_t *o =
            json_pack("{s:i, s:I, s:I, s:I, s:I, s:o}", "request", i, "prompt", (json_int_t)q->plen,
                      "evictions", (json_int_t)q->evictions, "recomputations", (json_int_t)rec,
                      "values_differing", (json_int_t)q->differ, "first_differing_token",
                      q->first_diff < 0 ? json_null() : json_integer(q->first_diff));
        if (!o || json_array_append_new(rows, o)) {
            json_decref(rows);
            return -ENOMEM;
        }
    }
    json_t *crit =
        rows ? json_pack("{s:b, s:b, s:i, s:i, s:I, s:o, s:s, s:s}", "passed", bad < 0, "judged",
                         c->deterministic, "page", s->page, "pages", s->pages, "evictions",
                         (json_int_t)evictions, "per_request", rows, "tolerance",
                         "bit for bit against the run with pages for all, where the device "
                         "declares no nondeterministic op; reported otherwise",
                         "reason",
                         "a recomputed cache is the same ops on the same tokens and weights; a "
                         "deterministic device gives the same bits")
             : NULL;
    if (!crit || json_object_set_new(c->cj, "criteria", json_pack("{s:o}", "paged", crit)))
        return -ENOMEM;
    if (evictions == 0)
        return sv_verdict(c, "error", "inputs",
                          "the page budget (%d pages of %d positions) evicted nothing: the check "
                          "would test no recomputation; lower \"pages\"",
                          s->pages, s->page);
    if (bad < 0)
        return sv_verdict(c, "passed", NULL, NULL);
    const preq *q = &st->q[bad];
    bool rec = q->recomputed[q->first_diff];
    return sv_verdict(
        c, "failed", "paged_recompute_mismatch",
        "request %d: token %lld's logits differ from the run without eviction (%s; it was "
        "evicted %lld times, last at step %lld holding %lld pages of %d positions)",
        bad, (long long)q->first_diff,
        rec ? "computed by the recomputation of its evicted cache"
            : "a decode step, after its cache was recomputed or in another batch",
        (long long)q->evictions, (long long)q->evict_step, (long long)q->evict_pages, s->page);
}

int sv_check_paged(scase *c)
{
    const nv_servingspec *s = c->j->s;
    pstate st = {.c = c, .nr = 1 + s->n_others};
    int64_t longest = s->prompt, V = s->vocab, S = s->steps;
    for (int i = 0; i < s->n_others; i++)
        longest = s->others[i] > longest ? s->others[i] : longest;
    int r = sv_model_init(&st.m, s, c->dt, c->sample, longest + S);
    for (int i = 0; r == 0 && i < st.nr; i++) {
        preq *q = &st.q[i];
        q->plen = i ? s->others[i - 1] : s->prompt;
        q->seq = malloc((size_t)(q->plen + S) * sizeof *q->seq);
        q->ref = malloc((size_t)(S * V) * sizeof(double));
        q->got = malloc((size_t)(S * V) * sizeof(double));
        q->recomputed = calloc((size_t)S, sizeof(bool));
        char name[32];
        snprintf(name, sizeof name, "request.%d", i);
        if (!q->seq || !q->ref || !q->got || !q->recomputed ||
            sv_tokens(c, name, q->plen, q->seq) < 0)
            r = -ENOMEM;
    }
    sv_exec x = sv_exec_of(c, SV_DEV);
    /* The run with pages for all fixes every request's tokens; the run under
     * the budget feeds the same tokens, so its logits compare position by
     * position even where an argmax would differ. */
    int64_t all = 0;
    for (int i = 0; i < st.nr; i++)
        all += pages_for(st.q[i].plen + S, s->page);
    if (r == 0 && run(&st, all, false, &x) < 0)
        r = sv_exec_verdict(c, &x, "pages for all"), r = r < 0 ? r : 1;
    if (r == 0 && run(&st, s->pages, true, &x) < 0)
        r = sv_exec_verdict(c, &x, "under the page budget"), r = r < 0 ? r : 1;
    if (r == 0)
        r = report(&st);
    for (int i = 0; i < st.nr; i++) {
        free(st.q[i].seq);
        free(st.q[i].ref);
        free(st.q[i].got);
        free(st.q[i].recomputed);
    }
    sv_model_done(&st.m);
    return r < 0 ? r : 0;
}
