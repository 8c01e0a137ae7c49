/* Sustained (continuous) batching (docs/SERVING.md "Sustained batching"): a
 * seeded schedule of requests arriving (gaps of 0..2 steps), each with its
 * own prompt (1..prompt tokens) and generation length (1..steps tokens). At
 * every step the batch is every request present: one that arrives feeds its
 * whole prompt (its prefill), the others their last token (a decode step),
 * all rows through the matmuls together, attention per request; a request
 * leaves when it has generated its tokens. Every request's logits, token by
 * token, must equal its solo run (prefill alone, then decode alone) bit for
 * bit, for the reason of check_batch.c: a request's rows meet the same weights
 * in the same ops whatever else is in the batch. A difference is reported
 * with the schedule step and the batch it happened in. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

typedef struct sreq {
    int64_t arrive, plen, gen;
    int64_t *prompt;
    double *solo, *got; /* gen x V logits rows: row 0 the prompt's last, then one per decode */
    int64_t *solo_tok, *got_tok;
    int64_t first_diff, diff_step, diff_batch, diff_rows, differ;
} sreq;

typedef struct sstate {
    scase *c;
    sv_model m;
    int nr;
    sreq *q;
    /* a traced re-run: request tr_req's token tr_token alone, or schedule
     * step tr_step */
    sv_trace *tr;
    int tr_req;
    int64_t tr_token, tr_step;
} sstate;

/* Request i alone: its prefill, then its decode steps. */
static int solo(sstate *st, sreq *q, sv_exec *x)
{
    int64_t V = st->c->j->s->vocab, tok = 0, one = 1;
    sv_cache cache;
    sv_cache *cp = &cache;
    if (sv_cache_init(&cache, &st->m, q->plen + q->gen) < 0) {
        sv_cache_done(&cache, &st->m);
        x->rc = -ENOMEM;
        return -1;
    }
    int r = 0;
    for (int64_t k = 0; r == 0 && k < q->gen; k++) {
        const int64_t *ids = k ? &tok : q->prompt;
        nv_tensor *lg = NULL;
        x->trace = st->tr && q == &st->q[st->tr_req] && k == st->tr_token ? st->tr : NULL;
        r = sv_forward(x, &st->m, 1, k ? &one : &q->plen, &ids, &cp, SV_PACKED, &lg);
        x->trace = NULL;
        if (r == 0) {
            const double *row = lg->data + (lg->shape[0] - 1) * V;
            memcpy(q->solo + k * V, row, (size_t)V * sizeof(double));
            r = sv_greedy(x, row, V, &tok);
            q->solo_tok[k] = tok;
        }
        nv_tensor_free(lg);
    }
    sv_cache_done(&cache, &st->m);
    return r;
}

/* The schedule: every step, the requests present, until all have left. */
static int sustained(sstate *st, sv_exec *x)
{
    int64_t V = st->c->j->s->vocab;
    int nr = st->nr;
    sv_cache *cache = calloc((size_t)nr, sizeof *cache);
    int64_t *done = calloc((size_t)nr, sizeof *done), *tok = calloc((size_t)nr, sizeof *tok);
    int64_t n[NV_SERVING_MAX_REQUESTS];
    const int64_t *ids[NV_SERVING_MAX_REQUESTS];
    sv_cache *cp[NV_SERVING_MAX_REQUESTS];
    nv_tensor *lg[NV_SERVING_MAX_REQUESTS];
    int who[NV_SERVING_MAX_REQUESTS], r = cache && done && tok ? 0 : -1, left = nr;
    if (r < 0)
        x->rc = -ENOMEM;
    for (int i = 0; r == 0 && i < nr; i++)
        if (sv_cache_init(&cache[i], &st->m, st->q[i].plen + st->q[i].gen) < 0) {
            x->rc = -ENOMEM;
            r = -1;
        }
    for (int64_t step = 0; r == 0 && left > 0; step++) {
        int nb = 0;
        int64_t rows = 0;
        for (int i = 0; i < nr; i++) {
            sreq *q = &st->q[i];
            if (q->arrive > step || done[i] == q->gen)
                continue;
            who[nb] = i;
            n[nb] = done[i] ? 1 : q->plen;
            ids[nb] = done[i] ? &tok[i] : q->prompt;
            cp[nb] = &cache[i];
            rows += n[nb];
            nb++;
        }
        if (nb == 0)
            continue;
        x->trace = NULL;
        for (int b = 0; st->tr && step == st->tr_step && b < nb; b++)
            if (who[b] == st->tr_req) {
                st->tr->target = b;
                x->trace = st->tr;
            }
        int fr = r = sv_forward(x, &st->m, nb, n, ids, cp, SV_PACKED, lg);
        x->trace = NULL;
        for (int b = 0; r == 0 && b < nb; b++) {
            sreq *q = &st->q[who[b]];
            int64_t k = done[who[b]]++;
            const double *row = lg[b]->data + (n[b] - 1) * V;
            memcpy(q->got + k * V, row, (size_t)V * sizeof(double));
            r = sv_greedy(x, row, V, &tok[who[b]]);
            q->got_tok[k] = tok[who[b]];
            int64_t d = 0;
            for (int64_t v = 0; v < V; v++)
                d +=
                    !(row[v] == q->solo[k * V + v] || (isnan(row[v]) && isnan(q->solo[k * V + v])));
            q->differ += d;
            if (d && q->first_diff < 0) {
                q->first_diff = k;
                q->diff_step = step;
                q->diff_batch = nb;
                q->diff_rows = rows;
            }
            left -= done[who[b]] == q->gen;
        }
        for (int b = 0; b < nb; b++)
            nv_tensor_free(fr == 0 ? lg[b] : NULL);
    }
    for (int i = 0; cache && i < nr; i++)
        sv_cache_done(&cache[i], &st->m);
    free(cache);
    free(done);
    free(tok);
    return r;
}

/* The failing request's token re-run alone and in its schedule step, both
 * traced, localized to the first divergent node (localize.c). */
static int localize(sstate *st, int bad, sv_exec *x)
{
    scase *c = st->c;
    if (!sv_keeps_failures(c))
        return 0;
    sreq *q = &st->q[bad];
    int64_t token = q->first_diff, step = q->diff_step, batch = q->diff_batch, rows = q->diff_rows;
    sv_trace ta = {.target = 0}, tb = {.target = 0};
    st->tr = &ta;
    st->tr_req = bad;
    st->tr_token = token;
    st->tr_step = -1;
    int r = solo(st, q, x);
    st->tr = &tb;
    st->tr_token = -1;
    st->tr_step = step;
    if (r == 0)
        r = sustained(st, x);
    st->tr = NULL;
    char wa[160], wb[200];
    snprintf(wa, sizeof wa, "request %d alone (prompt %lld), its token %lld", bad,
             (long long)q->plen, (long long)token);
    snprintf(wb, sizeof wb,
             "request %d in schedule step %lld's batch of %lld requests (%lld rows), its token "
             "%lld",
             bad, (long long)step, (long long)batch, (long long)rows, (long long)token);
    json_t *comp = json_pack("{s:i, s:I, s:I, s:I, s:I}", "request", bad, "token",
                             (json_int_t)token, "schedule_step", (json_int_t)step, "requests",
                             (json_int_t)batch, "rows", (json_int_t)rows);
    if (r == 0 && comp)
        r = sv_localize_pair(c, &ta, &tb, wa, wb, comp, "sustained_variance");
    else {
        json_decref(comp);
        char why[SV_ERRLEN + 64];
        snprintf(why, sizeof why, "the traced re-run of the step failed: %s", x->err);
        r = !comp || x->rc == -ENOMEM ? -ENOMEM : sv_localized(c, "none", why);
    }
    sv_trace_done(&ta);
    sv_trace_done(&tb);
    return r;
}

static int report(sstate *st, sv_exec *x)
{
    scase *c = st->c;
    json_t *rows = json_array();
    int bad = -1;
    for (int i = 0; rows && i < st->nr; i++) {
        sreq *q = &st->q[i];
        int64_t same = 0;
        for (int64_t k = 0; k < q->gen; k++)
            same += q->solo_tok[k] == q->got_tok[k];
        if (q->differ && bad < 0)
            bad = i;
        json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "request", i, "arrives",
                              (json_int_t)q->arrive, "prompt", (json_int_t)q->plen, "generates",
                              (json_int_t)q->gen, "values_differing", (json_int_t)q->differ,
                              "tokens_equal", (json_int_t)same, "first_differing_token",
                              q->first_diff < 0 ? json_null() : json_integer(q->first_diff));
        if (!o || json_array_append_new(rows, o)) {
            json_decref(rows);
            return -ENOMEM;
        }
    }
    json_t *crit =
        rows ? json_pack("{s:b, s:i, s:o, s:s, s:s}", "passed", bad < 0, "requests", st->nr,
                         "per_request", rows, "tolerance",
                         "bit for bit: every request's logits, token by token, equal its solo run",
                         "reason",
                         "a request's rows meet the same weights in the same ops whatever else "
                         "is in the batch, whether the others prefill or decode")
             : NULL;
    if (!crit || json_object_set_new(c->cj, "criteria", json_pack("{s:o}", "sustained", crit)))
        return -ENOMEM;
    if (bad < 0)
        return sv_verdict(c, "passed", NULL, NULL);
    const sreq *q = &st->q[bad];
    int r = sv_verdict(c, "failed", "sustained_variance",
                       "request %d (arrives at step %lld, prompt %lld): token %lld's logits differ "
                       "from its solo run, in schedule step %lld's batch of %lld requests (%lld "
                       "rows)",
                       bad, (long long)q->arrive, (long long)q->plen, (long long)q->first_diff,
                       (long long)q->diff_step, (long long)q->diff_batch, (long long)q->diff_rows);
    return r ? r : localize(st, bad, x);
}

/* The seeded schedule and every request's prompt. */
static int schedule(sstate *st)
{
    const nv_servingspec *s = st->c->j->s;
    int nr = st->nr;
    int64_t *gap = malloc((size_t)nr * sizeof *gap), *pl = malloc((size_t)nr * sizeof *pl),
            *gn = malloc((size_t)nr * sizeof *gn);
    int r = gap && pl && gn ? 0 : -ENOMEM;
    r = r ? r : sv_draw(st->c, "sustained.gap", nr, 3, gap);
    r = r ? r : sv_draw(st->c, "sustained.prompt", nr, s->prompt, pl);
    r = r ? r : sv_draw(st->c, "sustained.generate", nr, s->steps, gn);
    int64_t at = 0, V = s->vocab;
    for (int i = 0; r == 0 && i < nr; i++) {
        sreq *q = &st->q[i];
        at += i ? gap[i] : 0;
        q->arrive = at;
        q->plen = 1 + pl[i];
        q->gen = 1 + gn[i];
        q->first_diff = -1;
        q->prompt = malloc((size_t)q->plen * sizeof *q->prompt);
        q->solo = malloc((size_t)(q->gen * V) * sizeof(double));
        q->got = malloc((size_t)(q->gen * V) * sizeof(double));
        q->solo_tok = malloc((size_t)q->gen * sizeof(int64_t));
        q->got_tok = malloc((size_t)q->gen * sizeof(int64_t));
        char name[48];
        snprintf(name, sizeof name, "sustained.request.%d", i);
        if (!q->prompt || !q->solo || !q->got || !q->solo_tok || !q->got_tok ||
            sv_tokens(st->c, name, q->plen, q->prompt) < 0)
            r = -ENOMEM;
    }
    free(gap);
    free(pl);
    free(gn);
    return r;
}

int sv_check_sustained(scase *c)
{
    const nv_servingspec *s = c->j->s;
    sstate st = {.c = c, .nr = s->requests};
    st.q = calloc((size_t)st.nr, sizeof *st.q);
    int r = sv_model_init(&st.m, s, c->dt, c->sample, s->prompt + s->steps);
    if (r == 0 && st.q)
        r = schedule(&st);
    else
        r = -ENOMEM;
    sv_exec x = sv_exec_of(c, SV_DEV);
    for (int i = 0; r == 0 && i < st.nr; i++)
        if (solo(&st, &st.q[i], &x) < 0)
            r = sv_exec_verdict(c, &x, "a request alone"), r = r < 0 ? r : 1;
    if (r == 0 && sustained(&st, &x) < 0)
        r = sv_exec_verdict(c, &x, "the schedule"), r = r < 0 ? r : 1;
    if (r == 0 && (r = sv_note_argmax(c, &x)) == 0)
        r = report(&st, &x);
    for (int i = 0; st.q && i < st.nr; i++) {
        free(st.q[i].prompt);
        free(st.q[i].solo);
        free(st.q[i].got);
        free(st.q[i].solo_tok);
        free(st.q[i].got_tok);
    }
    free(st.q);
    sv_model_done(&st.m);
    return r < 0 ? r : 0;
}
