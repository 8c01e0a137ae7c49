/* Repeated sampling (docs/SERVING.md "Repeated sampling"): the device's own
 * next-token logits after a seeded prompt, sampled `draws` times through its
 * catalog op `sample` (batches of up to SV_CHUNK rows, each row its own
 * Philox counter), and a sampled generation of `steps` tokens through the KV
 * cache. Judged:
 * - reproducible: the same draws again, and the same generation again, give
 *   the same tokens bit for bit (the generation where the device declares
 *   itself deterministic: its logits feed the next step);
 * - support: no draw lands on a token whose reference probability is 0 (cut by
 *   top-k or top-p);
 * - law: the G-test of the draws' frequencies against the reference
 *   distribution (the exact softmax of the temperature-scaled, truncated
 *   logits, core/ref/ref_select.c) at level SV_ALPHA, with a power of at least
 *   SV_POWER against every alternative at total-variation distance SV_TV
 *   (core/numerics/stats.h); fewer draws than that power needs is an error,
 *   not a pass. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/stats.h"
#include "core/ref/reference.h"
#include "sampling_internal.h"

/* Chosen before measuring. alpha: the suite runs 20 sampling cases (2 dtypes x
 * 10 seeds), so a correct device fails one with probability <= 2e-4. TV 0.05
 * and power 0.99: a bias that moves 5% of the mass is missed at most once in
 * a hundred runs. Cochran's 5: the chi-square approximation of G holds for
 * categories expecting at least 5 (Sokal & Rohlf 2012 §17.2). */
#define SV_ALPHA 1e-5
#define SV_TV 0.05
#define SV_POWER 0.99
#define SV_MIN_EXPECTED 5.0
#define SV_CHUNK 1000

static void attrs_of(const sstate *st, uint64_t offset, char *buf, size_t len)
{
    const nv_servingspec *s = st->c->j->s;
    snprintf(buf, len,
             "{\"temperature\": %.17g, \"top_k\": %d, \"top_p\": %.17g, \"seed\": %llu, "
             "\"offset\": %llu}",
             s->temperature, s->top_k, s->top_p, (unsigned long long)s->seed,
             (unsigned long long)offset);
}

/* Tokens of n rows of the same logits (one row per draw) from offset on. */
static int sample_rows(sstate *st, sv_exec *x, const double *logits, int64_t n, uint64_t offset,
                       int64_t *out)
{
    int64_t V = st->c->j->s->vocab;
    int64_t shape[2] = {n, V};
    nv_tensor *t = nv_tensor_new(st->c->dt, 2, shape), *tok = NULL;
    if (!t)
        return x->rc = -ENOMEM, -1;
    for (int64_t r = 0; r < n; r++)
        memcpy(t->data + r * V, logits, (size_t)V * sizeof(double));
    char attrs[256];
    attrs_of(st, offset, attrs, sizeof attrs);
    const nv_tensor *in[1] = {t};
    int rc = sv_op(x, "sample", attrs, 1, in, &tok);
    for (int64_t r = 0; rc == 0 && r < n; r++)
        out[r] = (int64_t)tok->data[r];
    nv_tensor_free(t);
    nv_tensor_free(tok);
    return rc;
}

static int draw_all(sstate *st, sv_exec *x, int64_t *out)
{
    int64_t N = st->c->j->s->draws;
    for (int64_t k = 0; k < N; k += SV_CHUNK) {
        int64_t n = N - k < SV_CHUNK ? N - k : SV_CHUNK;
        if (sample_rows(st, x, st->logits, n, st->base_draws + (uint64_t)k, out + k) < 0)
            return -1;
    }
    return 0;
}

/* The prompt's prefill, then steps sampled tokens, each fed back through the
 * cache; a row without a distribution (-1) ends the generation. */
static int generate(sstate *st, sv_exec *x, int64_t *toks)
{
    const nv_servingspec *s = st->c->j->s;
    int64_t V = s->vocab, P = s->prompt, S = s->steps;
    sv_cache cache;
    int rc = sv_cache_init(&cache, &st->m, P + S);
    sv_cache *cp = &cache;
    nv_tensor *lg = NULL;
    const int64_t *ids = st->prompt;
    int64_t n = P, one = 1, tok = 0;
    if (rc < 0)
        x->rc = -ENOMEM, rc = -1;
    for (int64_t i = 0; i < S; i++)
        toks[i] = -1;
    for (int64_t step = 0; rc == 0 && step < S; step++) {
        rc = sv_forward(x, &st->m, 1, &n, &ids, &cp, SV_PACKED, &lg);
        if (rc == 0)
            rc = sample_rows(st, x, lg->data + (n - 1) * V, 1, st->base_gen + (uint64_t)step,
                             &toks[step]);
        nv_tensor_free(lg);
        lg = NULL;
        if (rc < 0 || toks[step] < 0)
            break;
        tok = toks[step];
        ids = &tok;
        n = one;
    }
    sv_cache_done(&cache, &st->m);
    return rc;
}

/* The device's next-token logits after the prompt. */
static int prompt_logits(sstate *st, sv_exec *x)
{
    const nv_servingspec *s = st->c->j->s;
    int64_t V = s->vocab, P = s->prompt;
    double *all = malloc((size_t)(P * V) * sizeof *all);
    if (!all)
        return x->rc = -ENOMEM, -1;
    int rc = sv_sequence(x, &st->m, st->prompt, P, 0, all);
    if (rc == 0)
        memcpy(st->logits, all + (P - 1) * V, (size_t)V * sizeof(double));
    free(all);
    return rc;
}

static int64_t first_diff(const int64_t *a, const int64_t *b, int64_t n, int64_t *ret_count)
{
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            first = first < 0 ? i : first;
            count++;
        }
    *ret_count = count;
    return first;
}

static int run_all(sstate *st)
{
    scase *c = st->c;
    const nv_servingspec *s = c->j->s;
    sv_exec x = sv_exec_of(c, SV_DEV);
    if (prompt_logits(st, &x) < 0)
        return sv_exec_verdict(c, &x, "the prompt's prefill");
    if (draw_all(st, &x, st->draws) < 0)
        return sv_exec_verdict(c, &x, "the draws");
    if (draw_all(st, &x, st->again) < 0)
        return sv_exec_verdict(c, &x, "the draws, again");
    if (generate(st, &x, st->gen[0]) < 0)
        return sv_exec_verdict(c, &x, "the sampled generation");
    if (generate(st, &x, st->gen[1]) < 0)
        return sv_exec_verdict(c, &x, "the sampled generation, again");
    nv_op_attrs a = {.temperature = s->temperature, .top_k = s->top_k, .top_p = s->top_p};
    int r = nv_ref_sample_probs(st->logits, s->vocab, &a, st->p);
    if (r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0)
        return sv_verdict(c, "error", "inputs",
                          "the device's next-token logits hold a NaN or +Inf, or are all -inf: "
                          "no distribution to sample");
    st->draw_diff = first_diff(st->draws, st->again, s->draws, &st->draw_diffs);
    st->gen_diff = first_diff(st->gen[0], st->gen[1], s->steps, &st->gen_diffs);
    return sv_sampling_judge(st, SV_ALPHA, SV_TV, SV_POWER, SV_MIN_EXPECTED);
}

int sv_check_sampling(scase *c)
{
    const nv_servingspec *s = c->j->s;
    int64_t V = s->vocab, N = s->draws, S = s->steps;
    sstate st = {.c = c};
    /* draws and the generation on counters of their own, per sample */
    st.base_draws = (uint64_t)c->sample << 40;
    st.base_gen = st.base_draws + ((uint64_t)1 << 39);
    int r = sv_model_init(&st.m, s, c->dt, c->sample, s->prompt + s->steps);
    st.prompt = malloc((size_t)s->prompt * sizeof(int64_t));
    st.logits = malloc((size_t)V * sizeof(double));
    st.p = malloc((size_t)V * sizeof(double));
    st.draws = malloc((size_t)N * sizeof(int64_t));
    st.again = malloc((size_t)N * sizeof(int64_t));
    st.gen[0] = malloc((size_t)S * sizeof(int64_t));
    st.gen[1] = malloc((size_t)S * sizeof(int64_t));
    if (r < 0 || !st.prompt || !st.logits || !st.p || !st.draws || !st.again || !st.gen[0] ||
        !st.gen[1] || sv_tokens(c, "prompt", s->prompt, st.prompt) < 0)
        r = -ENOMEM;
    else
        r = run_all(&st);
    sv_model_done(&st.m);
    free(st.prompt);
    free(st.logits);
    free(st.p);
    free(st.draws);
    free(st.again);
    free(st.gen[0]);
    free(st.gen[1]);
    return r;
}
