/* The sampling check's verdict (sampling_internal.h): the draws' histogram
 * against the reference distribution, the G-test with its pooled categories
 * and power, the support and the reproducibility, into the case's
 * criteria.sampling object. The first failing part names what changed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/stats.h"
#include "sampling_internal.h"

typedef struct tally {
    int64_t *obs;          /* [V] draws of each token */
    int64_t bad, bad_draw; /* draws outside [0, V), the first of them */
    int64_t bad_token;
    int64_t outside, outside_token; /* draws of p = 0 tokens; the most drawn of them */
    int distinct;
    double expected_distinct; /* sum 1 - (1 - p)^N */
    int64_t worst_token;      /* the largest standardized residual (O - E) / sqrt(E) */
    double worst_resid;
    int64_t repeats;          /* draws equal to the one before (independence) */
    double expected_repeats;  /* (N - 1) sum p^2 for independent draws */
} tally;

static void count(const sstate *st, tally *t)
{
    const nv_servingspec *s = st->c->j->s;
    int64_t V = s->vocab, N = s->draws;
    t->bad_draw = -1;
    for (int64_t k = 0; k < N; k++) {
        int64_t tok = st->draws[k];
        if (tok < 0 || tok >= V) {
            if (t->bad++ == 0)
                t->bad_draw = k, t->bad_token = tok;
            continue;
        }
        t->obs[tok]++;
        t->repeats += k > 0 && st->draws[k - 1] == tok;
    }
    t->outside_token = -1;
    for (int64_t i = 0; i < V; i++) {
        t->distinct += t->obs[i] > 0;
        t->expected_distinct += 1 - pow(1 - st->p[i], (double)N);
        if (st->p[i] == 0 && t->obs[i] > 0) {
            t->outside += t->obs[i];
            if (t->outside_token < 0 || t->obs[i] > t->obs[t->outside_token])
                t->outside_token = i;
        }
        t->expected_repeats += (double)(N - 1) * st->p[i] * st->p[i];
        double e = (double)N * st->p[i];
        double z = e > 0 ? ((double)t->obs[i] - e) / sqrt(e) : 0;
        if (e > 0 && fabs(z) > fabs(t->worst_resid))
            t->worst_resid = z, t->worst_token = i;
    }
}

static json_t *histogram(const sstate *st, const tally *t)
{
    const nv_servingspec *s = st->c->j->s;
    json_t *h = json_array();
    for (int64_t i = 0; h && i < s->vocab; i++) {
        if (st->p[i] == 0 && t->obs[i] == 0)
            continue;
        json_t *o = json_pack("{s:I, s:I}", "token", (json_int_t)i, "observed",
                              (json_int_t)t->obs[i]);
        if (!o || sv_set_num(o, "expected", (double)s->draws * st->p[i]) ||
            json_array_append_new(h, o)) {
            json_decref(o);
            json_decref(h);
            return NULL;
        }
    }
    return h;
}

static json_t *tokens_json(const int64_t *v, int64_t n)
{
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The logits sampled: with them a reader recomputes the expected counts. */
static json_t *logits_json(const double *v, int64_t n)
{
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, nvw_json_num(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *report(const sstate *st, const tally *t, const nv_gtest *g, double alpha, double tv,
                      double power_target, double min_expected, double power, int64_t needed,
                      bool gen_judged)
{
    const scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    bool gen_same = st->gen_diff < 0, draws_same = st->draw_diff < 0;
    json_t *gen = json_pack("{s:I, s:o, s:o, s:b, s:b, s:o}", "steps", (json_int_t)s->steps,
                            "tokens", tokens_json(st->gen[0], s->steps), "rerun_tokens",
                            tokens_json(st->gen[1], s->steps), "reproducible", gen_same,
                            "judged", gen_judged, "first_differing_step",
                            gen_same ? json_null() : json_integer(st->gen_diff));
    json_t *o = json_pack(
        "{s:o, s:i, s:I, s:b, s:b, s:o, s:o, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, "
        "s:s}",
        "histogram", histogram(st, t), "df", g->df, "samples", (json_int_t)s->draws,
        "reproducible", draws_same && (gen_same || !gen_judged), "draws_reproducible", draws_same,
        "first_differing_draw", draws_same ? json_null() : json_integer(st->draw_diff),
        "generation", gen, "categories", g->categories, "distinct_tokens", t->distinct,
        "samples_needed", (json_int_t)needed, "outside_support", (json_int_t)t->outside,
        "adjacent_repeats", (json_int_t)t->repeats,
        "top_k", (json_int_t)s->top_k, "seed", (json_int_t)s->seed, "offset",
        (json_int_t)st->base_draws, "generation_offset", (json_int_t)st->base_gen, "test",
        "G-test with Williams' correction (Sokal & Rohlf 2012 §17.2), p = chi-square survival "
        "function of G on df = categories - 1 (regularized incomplete gamma Q(df/2, G/2), "
        "DLMF 8.2.4, Numerical Recipes §6.2)",
        "pooling",
        "tokens of reference probability 0 are left out (any draw there fails the support "
        "part); the others by expected count descending, those expecting fewer than "
        "min_expected pooled into one category, which joins the smallest kept one if it still "
        "expects fewer");
    if (!o || sv_set_num(o, "g", g->g_adj) || sv_set_num(o, "g_raw", g->g) ||
        sv_set_num(o, "williams", g->williams) || sv_set_num(o, "p", g->p) ||
        sv_set_num(o, "alpha", alpha) || sv_set_num(o, "power", power) ||
        sv_set_num(o, "power_target", power_target) || sv_set_num(o, "tv_bias", tv) ||
        sv_set_num(o, "min_expected", min_expected) ||
        sv_set_num(o, "expected_distinct", t->expected_distinct) ||
        sv_set_num(o, "expected_adjacent_repeats", t->expected_repeats) ||
        sv_set_num(o, "temperature", s->temperature) || sv_set_num(o, "top_p", s->top_p) ||
        json_object_set_new(o, "logits", logits_json(st->logits, s->vocab))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The verdict: the first part that fails, named. */
static int verdict(const sstate *st, const tally *t, const nv_gtest *g, double alpha, double tv,
                   double power_target, double power, int64_t needed, bool gen_judged)
{
    scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    if (t->bad)
        return sv_verdict(c, "failed", "bad_output",
                          "draw %lld returned token %lld, outside [0, %d) (%lld such draws)",
                          (long long)t->bad_draw, (long long)t->bad_token, s->vocab,
                          (long long)t->bad);
    if (t->outside)
        return sv_verdict(c, "failed", "sampling_support",
                          "token %lld was drawn %lld times but has probability 0 in the reference "
                          "distribution (temperature %g, then top-k %d, then top-p %g): %lld of "
                          "%d draws fell outside the reference's kept tokens, so the device "
                          "truncates differently (the order of temperature, top-k and top-p, or "
                          "the top-p cut, changed)",
                          (long long)t->outside_token, (long long)t->obs[t->outside_token],
                          s->temperature, s->top_k, s->top_p, (long long)t->outside, s->draws);
    if (st->draw_diff >= 0)
        return sv_verdict(c, "failed", "sampling_not_reproducible",
                          "the same seed did not reproduce the draws: draw %lld (seed %llu, "
                          "offset %llu) gave token %lld, then token %lld when rerun on the same "
                          "logits (%lld of %d draws differ): the device's random stream depends "
                          "on more than (seed, offset)",
                          (long long)st->draw_diff, (unsigned long long)s->seed,
                          (unsigned long long)(st->base_draws + (uint64_t)st->draw_diff),
                          (long long)st->draws[st->draw_diff], (long long)st->again[st->draw_diff],
                          (long long)st->draw_diffs, s->draws);
    if (gen_judged && st->gen_diff >= 0)
        return sv_verdict(c, "failed", "sampling_not_reproducible",
                          "the same seed did not reproduce the sampled generation: step %lld "
                          "gave token %lld, then token %lld on the rerun (%lld of %d steps "
                          "differ)",
                          (long long)st->gen_diff, (long long)st->gen[0][st->gen_diff],
                          (long long)st->gen[1][st->gen_diff], (long long)st->gen_diffs,
                          s->steps);
    if (g->df > 0 && power < power_target)
        return sv_verdict(c, "error", "underpowered",
                          "with %d draws the G-test on %d degrees of freedom has power %.4f < "
                          "%g against a total-variation bias of %g at level %g: raise \"draws\" "
                          "to at least %lld",
                          s->draws, g->df, power, power_target, tv, alpha, (long long)needed);
    if (g->df > 0 && g->p < alpha) {
        /* the draws of one batch are adjacent: a shared stream makes them equal */
        char hint[256] = "";
        if ((double)t->repeats > 2 * t->expected_repeats + 10)
            snprintf(hint, sizeof hint,
                     "; adjacent draws are equal %lld times where independent draws would be "
                     "%.1f times: the draws are not independent (as when the requests of a "
                     "batch share one random stream)",
                     (long long)t->repeats, t->expected_repeats);
        return sv_verdict(c, "failed", "sampling_bias",
                          "the token frequencies differ from the reference distribution: G = "
                          "%.4g on %d degrees of freedom, p = %.3g < alpha = %g; the largest "
                          "standardized residual is token %lld (observed %lld, expected %.1f)%s",
                          g->g_adj, g->df, g->p, alpha, (long long)t->worst_token,
                          (long long)t->obs[t->worst_token],
                          (double)s->draws * st->p[t->worst_token], hint);
    }
    return sv_verdict(c, "passed", NULL, NULL);
}

int sv_sampling_judge(sstate *st, double alpha, double tv, double power, double min_expected)
{
    scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    tally t = {.obs = calloc((size_t)s->vocab, sizeof(int64_t))};
    int *group = malloc((size_t)s->vocab * sizeof *group);
    int r = t.obs && group ? 0 : -ENOMEM;
    nv_gtest g;
    if (r == 0) {
        count(st, &t);
        r = nv_gtest_run(t.obs, st->p, s->vocab, min_expected, group, &g);
    }
    if (r == 0) {
        double pw = g.df > 0 ? nv_gtest_power(g.df, s->draws, alpha, tv) : 0;
        int64_t needed = g.df > 0 ? nv_gtest_samples_for(g.df, alpha, tv, power) : 0;
        /* the generation's logits come from the decoder: bit for bit only where
         * the device declares every op deterministic (the paged check's rule) */
        bool gen_judged = c->deterministic;
        json_t *o =
            report(st, &t, &g, alpha, tv, power, min_expected, pw, needed, gen_judged);
        json_t *crit = o ? json_pack("{s:o}", "sampling", o) : NULL;
        r = !crit || json_object_set_new(c->cj, "criteria", crit) ? -ENOMEM : 0;
        if (r == 0)
            r = verdict(st, &t, &g, alpha, tv, power, pw, needed, gen_judged);
    }
    free(t.obs);
    free(group);
    return r < 0 ? -ENOMEM : r;
}
