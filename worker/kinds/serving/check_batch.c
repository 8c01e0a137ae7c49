/* Batch invariance (docs/SERVING.md "Batch invariance"): one request decoded
 * greedily alone and inside batches of other requests of other prompt
 * lengths, the rows of all requests through the matmuls together and the
 * attention packed (each request over its own cache) or padded (one call over
 * every request, caches zero padded to the longest and masked). Each request
 * is prefilled alone, so what differs is the decode steps' batch.
 *
 * Judged bit for bit: a request's rows meet the same weights in the same ops
 * whatever else is in the batch, so a device whose results depend on the
 * batch (a reduction split chosen by the batch size) is what this check is
 * for. The padded layout adds exact zeros to the attention's sums (exp(-inf)
 * = 0, 0 v = 0), which leaves a sequential sum's bits alone but regroups any
 * other order: it is judged bit for bit where the device declares a
 * sequential reduction order for the case dtype, and reported otherwise. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

#define MAXR (1 + NV_SERVING_MAX_OTHERS)

typedef struct brun {
    double *logits; /* the target's rows, steps x V */
    int64_t *tokens;
} brun;

typedef struct bstate {
    scase *c;
    sv_model m;
    int nreq;
    int64_t len[MAXR];
    int64_t *prompt[MAXR];
    /* the first failing composition, and the trace of a re-run's decode step */
    int fail_nb;
    sv_layout fail_layout;
    int64_t fail_step;
    sv_trace *tr;
} bstate;

/* Requests [0, nb) decoded together in layout; the target is request 0. */
static int run(bstate *b, int nb, sv_layout layout, brun *out, sv_exec *x)
{
    const nv_servingspec *s = b->c->j->s;
    int64_t V = s->vocab, S = s->steps;
    sv_cache cache[MAXR];
    sv_cache *cp[MAXR];
    int64_t tok[MAXR], one[MAXR];
    const int64_t *tp[MAXR];
    nv_tensor *lg[MAXR] = {0};
    memset(cache, 0, sizeof cache);
    int r = 0;
    for (int q = 0; r == 0 && q < nb; q++) {
        cp[q] = &cache[q];
        one[q] = 1;
        tp[q] = &tok[q];
        if (sv_cache_init(&cache[q], &b->m, b->len[q] + S) < 0) {
            x->rc = -ENOMEM;
            r = -1;
            break;
        }
        const int64_t *pp = b->prompt[q];
        r = sv_forward(x, &b->m, 1, &b->len[q], &pp, &cp[q], SV_PACKED, &lg[0]);
        if (r == 0)
            r = sv_greedy(x, lg[0]->data + (b->len[q] - 1) * V, V, &tok[q]);
        nv_tensor_free(lg[0]);
        lg[0] = NULL;
    }
    for (int64_t st = 0; r == 0 && st < S; st++) {
        x->trace = b->tr && st == b->fail_step ? b->tr : NULL;
        r = sv_forward(x, &b->m, nb, one, tp, cp, layout, lg);
        x->trace = NULL;
        for (int q = 0; r == 0 && q < nb; q++) {
            if (q == 0) {
                memcpy(out->logits + st * V, lg[0]->data, (size_t)V * sizeof(double));
                out->tokens[st] = tok[0];
            }
            r = sv_greedy(x, lg[q]->data, V, &tok[q]);
        }
        for (int q = 0; q < nb; q++) {
            nv_tensor_free(lg[q]);
            lg[q] = NULL;
        }
    }
    for (int q = 0; q < nb; q++)
        sv_cache_done(&cache[q], &b->m);
    return r;
}

static int compare(bstate *b, int nb, sv_layout layout, const brun *alone, const brun *got,
                   json_t *rows, bool *ret_failed, char *what, size_t wlen)
{
    const nv_servingspec *s = b->c->j->s;
    int64_t V = s->vocab, S = s->steps, differ = 0, first = -1, tokens_equal = 0;
    double max_rel = 0;
    for (int64_t st = 0; st < S; st++) {
        const double *a = alone->logits + st * V, *g = got->logits + st * V;
        int64_t d = 0;
        for (int64_t i = 0; i < V; i++)
            d += !(a[i] == g[i] || (isnan(a[i]) && isnan(g[i])));
        if (d && first < 0)
            first = st;
        differ += d;
        double rel = sv_rel_err(g, a, V);
        max_rel = rel > max_rel || isnan(rel) ? rel : max_rel;
        tokens_equal += alone->tokens[st] == got->tokens[st];
    }
    bool judged = layout == SV_PACKED || b->c->sequential;
    bool ok = differ == 0 || !judged;
    json_t *lens = json_array();
    for (int q = 0; lens && q < nb; q++)
        json_array_append_new(lens, json_integer(b->len[q]));
    json_t *o = json_pack(
        "{s:i, s:o, s:s, s:b, s:b, s:I, s:I, s:o}", "requests", nb, "prompt_lengths", lens,
        "layout", layout == SV_PACKED ? "packed" : "padded", "judged", judged, "passed", ok,
        "values_differing", (json_int_t)differ, "tokens_equal", (json_int_t)tokens_equal,
        "first_differing_step", first < 0 ? json_null() : json_integer(first));
    if (!o || sv_set_num(o, "max_rel_diff", max_rel) || json_array_append_new(rows, o))
        return -ENOMEM;
    if (!ok && !*ret_failed) {
        *ret_failed = true;
        b->fail_nb = nb;
        b->fail_layout = layout;
        b->fail_step = first;
        char l[128] = "";
        for (int q = 0; q < nb; q++)
            snprintf(l + strlen(l), sizeof l - strlen(l), "%s%lld", q ? ", " : "",
                     (long long)b->len[q]);
        snprintf(what, wlen,
                 "batch of %d requests (prompt lengths %s), layout %s: the request's logits "
                 "differ from its solo run from decode step %lld (%lld values differ, max "
                 "relative difference %.3g; %lld of %lld greedy tokens equal)",
                 nb, l, layout == SV_PACKED ? "packed" : "padded", (long long)first,
                 (long long)differ, max_rel, (long long)tokens_equal, (long long)S);
    }
    return 0;
}

/* The failing composition's decode step re-run, alone and in its batch, both
 * traced, and localized to the first divergent node (localize.c). */
static int localize(bstate *b, brun *got, sv_exec *x)
{
    scase *c = b->c;
    if (!sv_keeps_failures(c))
        return 0;
    sv_trace ta = {.target = 0}, tb = {.target = 0};
    b->tr = &ta;
    int r = run(b, 1, SV_PACKED, got, x);
    b->tr = &tb;
    if (r == 0)
        r = run(b, b->fail_nb, b->fail_layout, got, x);
    b->tr = NULL;
    const char *lay = b->fail_layout == SV_PACKED ? "packed" : "padded";
    char l[128] = "", wa[160], wb[256];
    json_t *lens = json_array();
    for (int q = 0; q < b->fail_nb; q++) {
        snprintf(l + strlen(l), sizeof l - strlen(l), "%s%lld", q ? ", " : "",
                 (long long)b->len[q]);
        json_array_append_new(lens, json_integer(b->len[q]));
    }
    snprintf(wa, sizeof wa, "the request alone (prompt %lld), decode step %lld",
             (long long)b->len[0], (long long)b->fail_step);
    snprintf(wb, sizeof wb,
             "the request in a batch of %d requests (prompt lengths %s), layout %s, decode step "
             "%lld",
             b->fail_nb, l, lay, (long long)b->fail_step);
    json_t *comp = lens
                       ? json_pack("{s:i, s:o, s:s, s:I}", "requests", b->fail_nb, "prompt_lengths",
                                   lens, "layout", lay, "decode_step", (json_int_t)b->fail_step)
                       : NULL;
    if (!comp)
        r = -1, x->rc = -ENOMEM;
    if (r == 0)
        r = sv_localize_pair(c, &ta, &tb, wa, wb, comp, "batch_variance");
    else if (x->rc != -ENOMEM) {
        json_decref(comp);
        char why[SV_ERRLEN + 64];
        snprintf(why, sizeof why, "the traced re-run of the step failed: %s", x->err);
        r = sv_localized(c, "none", why);
    } else {
        json_decref(comp);
        r = -ENOMEM;
    }
    sv_trace_done(&ta);
    sv_trace_done(&tb);
    return r;
}

static int judge_all(bstate *b, brun *alone, brun *got, sv_exec *x)
{
    scase *c = b->c;
    json_t *rows = json_array();
    bool failed = false;
    char what[512] = "";
    int r = rows ? 0 : -ENOMEM;
    for (int nb = 2; r == 0 && nb <= b->nreq; nb++)
        for (int l = 0; r == 0 && l < 2; l++) {
            sv_layout lay = l ? SV_PADDED : SV_PACKED;
            if (run(b, nb, lay, got, x) < 0) {
                json_decref(rows);
                char where[64];
                snprintf(where, sizeof where, "batch of %d, %s", nb, l ? "padded" : "packed");
                return sv_exec_verdict(c, x, where);
            }
            r = compare(b, nb, lay, alone, got, rows, &failed, what, sizeof what);
        }
    json_t *crit =
        r ? NULL
          : json_pack("{s:b, s:I, s:o, s:s, s:s}", "passed", !failed, "steps",
                      (json_int_t)c->j->s->steps, "compositions", rows, "tolerance",
                      "bit for bit: packed always; padded where the declared reduction order is "
                      "sequential",
                      "reason",
                      "a request's rows meet the same weights in the same ops whatever else is in "
                      "the batch; "
                      "padding adds exact zeros, which only a sequential sum is blind to");
    if (!crit) {
        if (r == 0)
            json_decref(rows);
        return -ENOMEM;
    }
    if (json_object_set_new(c->cj, "criteria", json_pack("{s:o}", "batch", crit)))
        return -ENOMEM;
    if (!failed)
        return sv_verdict(c, "passed", NULL, NULL);
    r = sv_verdict(c, "failed", "batch_variance", "%s", what);
    return r ? r : localize(b, got, x);
}

int sv_check_batch(scase *c)
{
    const nv_servingspec *s = c->j->s;
    bstate b = {.c = c, .nreq = 1 + s->n_others};
    b.len[0] = s->prompt;
    int64_t longest = s->prompt;
    for (int q = 1; q < b.nreq; q++) {
        b.len[q] = s->others[q - 1];
        longest = b.len[q] > longest ? b.len[q] : longest;
    }
    int64_t V = s->vocab, S = s->steps;
    brun alone = {malloc((size_t)(S * V) * sizeof(double)), malloc((size_t)S * sizeof(int64_t))};
    brun got = {malloc((size_t)(S * V) * sizeof(double)), malloc((size_t)S * sizeof(int64_t))};
    int r = sv_model_init(&b.m, s, c->dt, c->sample, longest + S);
    for (int q = 0; r == 0 && q < b.nreq; q++) {
        char name[32];
        snprintf(name, sizeof name, "request.%d", q);
        b.prompt[q] = malloc((size_t)b.len[q] * sizeof(int64_t));
        r = b.prompt[q] ? sv_tokens(c, name, b.len[q], b.prompt[q]) : -ENOMEM;
    }
    if (r < 0 || !alone.logits || !alone.tokens || !got.logits || !got.tokens) {
        r = -ENOMEM;
        goto out;
    }
    sv_exec x = sv_exec_of(c, SV_DEV);
    if (run(&b, 1, SV_PACKED, &alone, &x) < 0)
        r = sv_exec_verdict(c, &x, "the request alone");
    else if ((r = sv_note_argmax(c, &x)) == 0)
        r = judge_all(&b, &alone, &got, &x);
out:
    for (int q = 0; q < b.nreq; q++)
        free(b.prompt[q]);
    sv_model_done(&b.m);
    free(alone.logits);
    free(alone.tokens);
    free(got.logits);
    free(got.tokens);
    return r;
}
