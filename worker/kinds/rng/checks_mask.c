/* The dropout and recomputation checks of an RNG job (docs/JOBS.md "RNG
 * jobs"): a dropout mask is a function of the generator's position (seed and
 * offset, or a saved state), keeps each element with probability 1 - p, and
 * scales what it keeps by 1/(1-p); a forward under activation checkpointing
 * is recomputed in the backward with the same random numbers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rng_internal.h"

static int bitwise(rcase *c, const char *name, const char *cls, const char *why, const float *a,
                   const float *b, int64_t n, const char *what)
{
    int64_t first, d = rg_diff(a, b, n, &first);
    json_t *det = json_pack("{s:I, s:I}", "differing", (json_int_t)d, "first", (json_int_t)first);
    return rg_test(c, name, d == 0, cls, why, det,
                   d == 0 ? "%s: all %lld elements bit-identical"
                          : "%s: %lld of %lld elements differ, the first at %lld",
                   what, (long long)(d ? d : n), (long long)n, (long long)first);
}

/* The two ways a framework computes dropout's scale: 1/(1-p) rounded once to
 * fp32, or 1 divided by fp32(1-p) in fp32 (torch's fp32 mask .div_(1 - p)). */
static bool scale_ok(float v, double p)
{
    float once = (float)(1.0 / (1.0 - p)), f32 = 1.0f / (float)(1.0 - p);
    return v == once || v == f32;
}

/* Values 0 or the scale, one scale for the mask; keep rate by a two-sided
 * binomial test at alpha (normal approximation with continuity correction:
 * n p (1-p) >= 100, core/spec/jobspec_rng.c). */
static int judge_mask(rcase *c, const float *m, int64_t n, double p)
{
    int64_t kept = 0, bad = -1;
    float scale = 0;
    for (int64_t i = 0; i < n; i++) {
        if (m[i] == 0.0f && !signbit(m[i]))
            continue;
        if (!scale_ok(m[i], p) || (kept > 0 && m[i] != scale)) {
            bad = i;
            break;
        }
        scale = m[i];
        kept++;
    }
    static const char why[] = "a dropout of ones gives 0 or the scale 1/(1-p) in fp32 (rounded "
                              "once, or 1 / fp32(1-p)), and one scale for the whole mask";
    int r = bad < 0
                ? rg_test(c, "mask_values", true, "dropout_values", why,
                          json_pack("{s:f}", "scale", (double)scale), "every element is 0 or %.9g",
                          (double)scale)
                : rg_test(c, "mask_values", false, "dropout_values", why,
                          json_pack("{s:I, s:f}", "at", (json_int_t)bad, "value", (double)m[bad]),
                          "element %lld is %.9g, neither 0 nor the scale", (long long)bad,
                          (double)m[bad]);
    if (r < 0 || bad >= 0)
        return r;
    double q = 1 - p, mean = (double)n * q, sd = sqrt((double)n * q * p);
    double dev = fabs((double)kept - mean);
    double z = fmax(0.0, dev - 0.5) / sd;
    double pval = erfc(z / sqrt(2.0));
    double alpha = c->s->alpha;
    json_t *det = json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)n, "kept",
                            (json_int_t)kept, "expected", mean, "keep_rate", (double)kept / n, "z",
                            z, "p_value", pval, "alpha", alpha);
    return rg_test(c, "keep_rate", pval >= alpha, "keep_rate",
                   "each element is kept with probability 1 - p: the kept count is Binomial(n, "
                   "1 - p), tested two-sided at significance alpha (a correct generator fails "
                   "with probability alpha)",
                   det, "%lld of %lld kept (expected %.1f, z = %.2f, p-value %.3g, alpha %.3g)",
                   (long long)kept, (long long)n, mean, z, pval, alpha);
}

int rg_check_dropout(rcase *c)
{
    const nv_rngspec *s = c->s;
    double p = s->p[c->pi];
    int64_t n = s->dropout_n;
    float *m1 = NULL, *m2 = NULL, *m3 = NULL, *next = NULL;
    int8_t *st = NULL;
    int64_t len = 0;
    int r = rg_seek(c, 0, s->seed, s->offset);
    r = r ? r : rg_dropout(c, n, p, &m1);
    r = r ? r : rg_dropout(c, n, p, &next);
    r = r ? r : rg_seek(c, 0, s->seed, s->offset);
    r = r ? r : rg_get_state(c, 0, &st, &len);
    r = r ? r : rg_dropout(c, n, p, &m2);
    r = r ? r : rg_set_state(c, 0, st, len);
    r = r ? r : rg_dropout(c, n, p, &m3);
    if (r == 0)
        r = bitwise(c, "mask_from_seed_offset", "dropout_not_reproducible",
                    "the mask is a function of the generator's position: seeding with S and "
                    "drawing `offset` values first gives the same mask every time",
                    m1, m2, n, "two masks at (S, offset)");
    if (r == 0)
        r = bitwise(c, "mask_from_state", "dropout_not_reproducible",
                    "a mask drawn after set_state of the state saved before it equals the "
                    "mask drawn then (what a resumed or recomputed layer needs)",
                    m2, m3, n, "the mask after set_state against the mask after get_state");
    if (r == 0) {
        int64_t first, d = rg_diff(m1, next, n, &first);
        r = rg_test(c, "mask_advances", d > 0, "dropout_not_advancing",
                    "the next mask from the same generator is a new draw, not the same mask",
                    json_pack("{s:I}", "differing", (json_int_t)d),
                    "the next mask differs from the first in %lld of %lld elements", (long long)d,
                    (long long)n);
    }
    if (r == 0)
        r = judge_mask(c, m1, n, p);
    free(m1), free(m2), free(m3), free(next), free(st);
    return r < 0 ? r : 0;
}

int rg_check_recompute(rcase *c)
{
    const nv_rngspec *s = c->s;
    double p = s->p[c->pi];
    int64_t n = s->dropout_n;
    float *out[3] = {NULL}, *after = NULL, *plain = NULL, *u = NULL, *plain_after = NULL;
    int r = rg_seek(c, 0, s->seed, s->offset);
    r = r ? r : rg_recompute(c, n, p, out);
    r = r ? r : rg_uniform(c, 0, n, &after);
    /* the same positions without checkpointing: plain dropout, the layers
     * after it, the next draw */
    r = r ? r : rg_seek(c, 0, s->seed, s->offset);
    r = r ? r : rg_dropout(c, n, p, &plain);
    r = r ? r : rg_uniform(c, 0, n, &u);
    r = r ? r : rg_uniform(c, 0, n, &plain_after);
    if (r == 0)
        r = bitwise(c, "recompute_replays", "recompute_mismatch",
                    "the backward of a checkpointed dropout recomputes the forward; its mask "
                    "(the gradient of sum(y) is mask x 1/(1-p)) must be the forward's, or the "
                    "gradient belongs to another network than the loss",
                    out[1], out[0], n, "the recomputed mask against the forward's");
    if (r == 0)
        r = bitwise(c, "checkpoint_forward", "recompute_mismatch",
                    "under checkpointing the forward draws what a plain forward draws: "
                    "checkpointing must not change the model's randomness",
                    out[0], plain, n, "the checkpointed forward against a plain dropout");
    if (r == 0)
        r = bitwise(c, "layers_after", "recompute_mismatch",
                    "the layers after the checkpointed one draw what they draw without it", out[2],
                    u, n, "the uniforms after the checkpointed forward");
    if (r == 0)
        r = bitwise(c, "generator_after_backward", "recompute_consumes",
                    "the recomputation replays numbers, it does not consume the stream: after "
                    "the backward the generator is where the forward pass left it",
                    after, plain_after, n, "the draw after the backward");
    if (r == 0)
        r = judge_mask(c, out[0], n, p);
    for (int i = 0; i < 3; i++)
        free(out[i]);
    free(after), free(plain), free(u), free(plain_after);
    return r < 0 ? r : 0;
}
