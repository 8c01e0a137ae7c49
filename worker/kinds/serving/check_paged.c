/* Cache pressure (docs/SERVING.md "Paged KV cache"): requests decoded
 * together under a budget of KV-cache pages (`page` positions each, `pages`
 * in all). Before each step every request that has not finished asks for
 * the pages its next step fills, in a rotating order; when none are free,
 * the resident request holding the most pages (not yet in the step) is
 * evicted: its cache is dropped, and when it runs again it recomputes it, a
 * prefill of its prompt and the tokens it generated so far, whose last row
 * gives its next token. Every request's logits, token by token, are judged
 * against the same requests run with pages for all (no eviction).
 *
 * The rule is the batch check's for padding. A recomputation is a prefill:
 * its last row is a causal row padded with -inf, whose exact zeros
 * (exp(-inf) = 0, 0 v = 0) leave a sequential sum's bits alone and may be
 * regrouped by any other order. So where the device declares a sequential
 * reduction order for the case dtype (and no nondeterministic op), every
 * token is judged bit for bit. Otherwise a token computed by or after a
 * recomputation of its request's cache is judged as prefill_decode judges a
 * cached decode against a prefill: both runs are the device's, each allowed
 * the model kind's band from the fp64 reference of the request's sequence, so
 * d(t) = ||paged_t - uninterrupted_t|| / ||R64_t|| <= 2 band(t) (the triangle
 * inequality), t the token's position; the tokens no recomputation fed meet
 * the same ops on the same rows whatever the batch (packed, the batch check's
 * rule) and are judged bit for bit where the device is deterministic, within
 * the band where it is not. Pages are the kind's accounting of its cache (the
 * device sees each request's cache as a tensor; the catalog has no
 * paged-attention op). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

#define MAXR (1 + NV_SERVING_MAX_OTHERS)

/* How the run under the budget computed one token. */
typedef struct ptok {
    bool recomputed;      /* by a recomputation of the request's evicted cache */
    int64_t step;         /* the schedule step */
    int64_t evicted_at;   /* the step of the request's last eviction before it, or -1 */
    int64_t evicted_held; /* the pages that eviction freed */
} ptok;

typedef struct preq {
    int64_t plen;
    int64_t *seq;      /* prompt, then the generated tokens */
    double *ref, *got; /* steps x V */
    double *r64, *rdt; /* the references of seq, (plen + steps - 1) x V; NULL when not needed */
    ptok *tok;         /* per token, under the budget */
    int64_t evictions, first_diff, differ, evict_step, evict_pages;
    int64_t n_bits, n_band; /* tokens judged bit for bit, within the band */
    double worst_ratio;     /* max d / allowed over the banded tokens */
} preq;

typedef struct pstate {
    scase *c;
    sv_model m;
    int nr;
    preq q[MAXR];
} pstate;

/* The first judged token out of its rule, by schedule step. */
typedef struct pfail {
    int req;
    int64_t token, values;
    bool band;
    double d, allowed;
} pfail;

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
                q->tok[k[i]] = (ptok){.recomputed = !resident[i] && k[i] > 0,
                                      .step = step,
                                      .evicted_at = q->evictions ? q->evict_step : -1,
                                      .evicted_held = q->evictions ? q->evict_pages : 0};
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

/* Every token bit for bit: a sequential order and a deterministic device. */
static bool bits_rule(const scase *c)
{
    return c->sequential && c->deterministic;
}

/* The first token of q a recomputation fed (its own recomputation), or steps. */
static int64_t first_recomputed(const preq *q, int64_t steps)
{
    for (int64_t t = 0; t < steps; t++)
        if (q->tok[t].recomputed)
            return t;
    return steps;
}

/* Whether q's token t is judged within the band (else bit for bit). */
static bool banded(const scase *c, const preq *q, int64_t t)
{
    if (bits_rule(c))
        return false;
    return !c->deterministic || t >= first_recomputed(q, c->j->s->steps);
}

/* Judge request i's tokens; the first out of its rule into *f when it comes
 * at an earlier schedule step than f's. */
static void judge(pstate *st, int i, pfail *f)
{
    const scase *c = st->c;
    int64_t V = c->j->s->vocab, S = c->j->s->steps;
    preq *q = &st->q[i];
    q->first_diff = -1;
    for (int64_t t = 0; t < S; t++) {
        const double *a = q->ref + t * V, *b = q->got + t * V;
        int64_t d = 0;
        for (int64_t v = 0; v < V; v++)
            d += !(a[v] == b[v] || (isnan(a[v]) && isnan(b[v])));
        q->differ += d;
        if (d && q->first_diff < 0)
            q->first_diff = t;
        bool band = banded(c, q, t), bad = d > 0;
        double dist = 0, allowed = 0;
        if (band) {
            int64_t pos = q->plen - 1 + t;
            const double *r = q->r64 + pos * V;
            dist = sv_dist(b, a, r, V);
            allowed = 2 * sv_band_at(c, sv_rel_err(q->rdt + pos * V, r, V), pos);
            bad = !(dist <= allowed);
            if (q->n_band == 0 || dist / allowed > q->worst_ratio || isnan(dist))
                q->worst_ratio = dist / allowed;
            q->n_band++;
        } else {
            q->n_bits++;
        }
        if (bad && (f->req < 0 || q->tok[t].step < st->q[f->req].tok[f->token].step))
            *f = (pfail){
                .req = i, .token = t, .values = d, .band = band, .d = dist, .allowed = allowed};
    }
}

static json_t *request_row(const pstate *st, int i)
{
    const preq *q = &st->q[i];
    int64_t rec = 0, S = st->c->j->s->steps;
    for (int64_t t = 0; t < S; t++)
        rec += q->tok[t].recomputed;
    json_t *o = json_pack(
        "{s:i, s:I, s:I, s:I, s:I, s:o, s:I, s:I}", "request", i, "prompt", (json_int_t)q->plen,
        "evictions", (json_int_t)q->evictions, "recomputations", (json_int_t)rec,
        "values_differing", (json_int_t)q->differ, "first_differing_token",
        q->first_diff < 0 ? json_null() : json_integer(q->first_diff), "tokens_bitwise",
        (json_int_t)q->n_bits, "tokens_band", (json_int_t)q->n_band);
    if (o && (q->n_band ? sv_set_num(o, "worst_ratio", q->worst_ratio)
                        : json_object_set_new(o, "worst_ratio", json_null()))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Where the failure lies: schedule step, position and page (fields and message). */
static json_t *failure_json(const pstate *st, const pfail *f)
{
    const preq *q = &st->q[f->req];
    int64_t pos = q->plen - 1 + f->token, P = st->c->j->s->page;
    json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:b, s:s, s:I}", "request", f->req, "token",
                          (json_int_t)f->token, "schedule_step", (json_int_t)q->tok[f->token].step,
                          "position", (json_int_t)pos, "page", (json_int_t)(pos / P), "recomputed",
                          q->tok[f->token].recomputed, "rule", f->band ? "band" : "bits",
                          "values_differing", (json_int_t)f->values);
    if (o && f->band && (sv_set_num(o, "d", f->d) || sv_set_num(o, "allowed", f->allowed))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *const TOL_BITS =
    "bit for bit against the run with pages for all (the device declares a sequential "
    "reduction order for the case dtype and no nondeterministic op)";
static const char *const WHY_BITS =
    "a recomputed cache is the same ops on the same tokens and weights; its prefill's masked "
    "rows add exact zeros, which a sequential sum is blind to (the batch check's rule for "
    "padding)";
static const char *const TOL_BAND =
    "tokens computed by or after a recomputation of the request's cache (every token where the "
    "device declares nondeterministic ops): d(t) = ||paged_t - uninterrupted_t|| / ||R64_t|| <= "
    "2 band(t), band(t) = 4 (e_dtype_ref(t) + K(t) u_acc) + u, K(t) = max(width, ffn, t + 1), t "
    "the token's position; the other tokens bit for bit";
static const char *const WHY_BAND =
    "a recomputation is a prefill: its rows meet other shapes than the decode steps (a causal "
    "row padded with -inf), which a reduction order other than sequential may regroup; both "
    "runs are the device's, each allowed the model kind's band from the fp64 reference, so they "
    "may differ by twice it (as prefill_decode); tokens no recomputation fed meet the same ops on "
    "the same rows whatever the batch (the batch check's packed rule)";

static int report(pstate *st)
{
    scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    int64_t evictions = 0;
    double worst = 0;
    bool any_band = false;
    pfail f = {.req = -1};
    json_t *rows = json_array();
    for (int i = 0; rows && i < st->nr; i++) {
        judge(st, i, &f);
        evictions += st->q[i].evictions;
        if (st->q[i].n_band &&
            (!any_band || st->q[i].worst_ratio > worst || isnan(st->q[i].worst_ratio)))
            worst = st->q[i].worst_ratio, any_band = true;
        json_t *o = request_row(st, i);
        if (!o || json_array_append_new(rows, o)) {
            json_decref(rows);
            return -ENOMEM;
        }
    }
    bool bits = bits_rule(c);
    json_t *fj = f.req < 0 ? json_null() : failure_json(st, &f);
    if (!fj) {
        json_decref(rows);
        return -ENOMEM;
    }
    json_t *crit =
        rows ? json_pack("{s:b, s:b, s:s, s:i, s:i, s:I, s:o, s:o, s:s, s:s}", "passed", f.req < 0,
                         "judged", true, "rule", bits ? "bits" : "band", "page", s->page, "pages",
                         s->pages, "evictions", (json_int_t)evictions, "per_request", rows,
                         "first_failure", fj, "tolerance", bits ? TOL_BITS : TOL_BAND, "reason",
                         bits ? WHY_BITS : WHY_BAND)
             : NULL;
    if (crit && (any_band ? sv_set_num(crit, "worst_ratio", worst)
                          : json_object_set_new(crit, "worst_ratio", json_null()))) {
        json_decref(crit);
        return -ENOMEM;
    }
    if (!crit || json_object_set_new(c->cj, "criteria", json_pack("{s:o}", "paged", crit)))
        return -ENOMEM;
    if (evictions == 0)
        return sv_verdict(c, "error", "inputs",
                          "the page budget (%d pages of %d positions) evicted nothing: the check "
                          "would test no recomputation; lower \"pages\"",
                          s->pages, s->page);
    if (f.req < 0)
        return sv_verdict(c, "passed", NULL, NULL);
    const preq *q = &st->q[f.req];
    const ptok *k = &q->tok[f.token];
    int64_t pos = q->plen - 1 + f.token;
    const char *how = k->recomputed ? "computed by the recomputation of its evicted cache"
                      : f.token > first_recomputed(q, s->steps)
                          ? "a decode step reading its recomputed cache"
                          : "a decode step in another batch, before any recomputation";
    char what[96], ev[128] = "never evicted before it";
    if (f.band)
        snprintf(what, sizeof what, "by %.3g, more than 2 band = %.3g", f.d, f.allowed);
    else
        snprintf(what, sizeof what, "in %lld values, judged bit for bit", (long long)f.values);
    if (k->evicted_at >= 0)
        snprintf(ev, sizeof ev, "its cache last evicted at step %lld, holding %lld pages",
                 (long long)k->evicted_at, (long long)k->evicted_held);
    return sv_verdict(c, "failed", "paged_recompute_mismatch",
                      "request %d, token %lld (schedule step %lld; position %lld, in page %lld of "
                      "%d positions): its logits differ from the run without eviction %s (%s; %s; "
                      "%lld evictions in all)",
                      f.req, (long long)f.token, (long long)k->step, (long long)pos,
                      (long long)(pos / s->page), s->page, what, how, ev, (long long)q->evictions);
}

/* The fp64 and model-dtype references of every request a banded token needs:
 * its prompt and generated tokens but the last, in one prefill. 0, 1 (a
 * verdict set) or -ENOMEM. */
static int references(pstate *st)
{
    scase *c = st->c;
    int64_t V = c->j->s->vocab, S = c->j->s->steps;
    for (int i = 0; i < st->nr; i++) {
        preq *q = &st->q[i];
        bool need = false;
        for (int64_t t = 0; t < S; t++)
            need = need || banded(c, q, t);
        if (!need)
            continue;
        int64_t n = q->plen + S - 1;
        q->r64 = malloc((size_t)(n * V) * sizeof(double));
        q->rdt = malloc((size_t)(n * V) * sizeof(double));
        if (!q->r64 || !q->rdt)
            return -ENOMEM;
        sv_exec x64 = sv_exec_of(c, SV_R64), xdt = sv_exec_of(c, SV_RDT);
        char where[48];
        snprintf(where, sizeof where, "request %d's sequence", i);
        if (sv_sequence(&x64, &st->m, q->seq, n, 0, q->r64) < 0) {
            int r = sv_exec_verdict(c, &x64, where);
            return r < 0 ? r : 1;
        }
        if (sv_sequence(&xdt, &st->m, q->seq, n, 0, q->rdt) < 0) {
            int r = sv_exec_verdict(c, &xdt, where);
            return r < 0 ? r : 1;
        }
    }
    return 0;
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
        q->tok = calloc((size_t)S, sizeof *q->tok);
        char name[32];
        snprintf(name, sizeof name, "request.%d", i);
        if (!q->seq || !q->ref || !q->got || !q->tok || sv_tokens(c, name, q->plen, q->seq) < 0)
            r = -ENOMEM;
    }
    sv_exec x = sv_exec_of(c, SV_DEV);
    /* The run with pages for all fixes every request's tokens; the run under
     * the budget and the references feed the same tokens, so their logits
     * compare position by position even where an argmax would differ. */
    int64_t all = 0;
    for (int i = 0; i < st.nr; i++)
        all += pages_for(st.q[i].plen + S, s->page);
    if (r == 0 && run(&st, all, false, &x) < 0)
        r = sv_exec_verdict(c, &x, "pages for all"), r = r < 0 ? r : 1;
    if (r == 0 && run(&st, s->pages, true, &x) < 0)
        r = sv_exec_verdict(c, &x, "under the page budget"), r = r < 0 ? r : 1;
    if (r == 0)
        r = references(&st);
    if (r == 0)
        r = report(&st);
    for (int i = 0; i < st.nr; i++) {
        preq *q = &st.q[i];
        free(q->seq);
        free(q->ref);
        free(q->got);
        free(q->r64);
        free(q->rdt);
        free(q->tok);
    }
    sv_model_done(&st.m);
    return r < 0 ? r : 0;
}
