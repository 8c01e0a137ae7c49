/* The generator checks of an RNG job (docs/JOBS.md "RNG jobs"): seeding,
 * state save and restore, parallel streams. Every comparison is bitwise: a
 * generator promises the same bits for the same state, nothing less. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng_internal.h"

/* Random bits in one fp32 uniform of [0, 1): 24 (the significand's bits plus
 * the implicit one), what torch.rand and emu give; the window test's false
 * alarm bound assumes it. */
#define UNIFORM_BITS 24

static json_t *diff_json(int64_t count, int64_t first)
{
    return json_pack("{s:I, s:I}", "differing", (json_int_t)count, "first", (json_int_t)first);
}

/* a == b bitwise, as test `name`. */
static int same(rcase *c, const char *name, const char *cls, const char *why, const float *a,
                const float *b, int64_t n, const char *what)
{
    int64_t first, d = rg_diff(a, b, n, &first);
    return rg_test(c, name, d == 0, cls, why, diff_json(d, first),
                   d == 0 ? "%s: all %lld values bit-identical"
                          : "%s: %lld of %lld values differ, the first at %lld",
                   what, (long long)(d ? d : n), (long long)n, (long long)first);
}

/* No window of w values shared between the segments, as test `name`. */
static int apart(rcase *c, const char *name, const char *cls, const char *why,
                 const float *const *segs, int nseg, const char *const *names)
{
    rg_overlap o;
    int64_t n = c->s->n;
    if (rg_windows(segs, nseg, n, c->s->window, &o) < 0)
        return -ENOMEM;
    json_t *d = rg_overlap_json(&o, names);
    if (d)
        json_object_set_new(d, "false_alarm_bound",
                            json_real(rg_false_alarm(nseg, n, c->s->window, UNIFORM_BITS)));
    if (o.shared == 0)
        return rg_test(c, name, true, cls, why, d,
                       "no window of %d values is shared by %d draws of %lld", c->s->window, nseg,
                       (long long)n);
    return rg_test(c, name, false, cls, why, d,
                   "%lld windows of %d values are shared; the first: %s at %lld equals %s at "
                   "%lld (shift %lld)",
                   (long long)o.shared, c->s->window, names[o.seg_a], (long long)o.pos_a,
                   names[o.seg_b], (long long)o.pos_b, (long long)(o.pos_b - o.pos_a));
}

int rg_check_seeding(rcase *c)
{
    const nv_rngspec *s = c->s;
    float *a = NULL, *b = NULL, *g1 = NULL, *d = NULL;
    int r = rg_seed(c, 0, s->seed);
    r = r ? r : rg_uniform(c, 0, s->n, &a);
    r = r ? r : rg_seed(c, 0, s->seed);
    r = r ? r : rg_uniform(c, 0, s->n, &b);
    r = r ? r : rg_seed(c, 1, s->seed);
    r = r ? r : rg_uniform(c, 1, s->n, &g1);
    r = r ? r : rg_seed(c, 0, s->seed + 1);
    r = r ? r : rg_uniform(c, 0, s->n, &d);
    if (r == 0)
        r = same(c, "same_seed", "seed_not_reproducible",
                 "seeding the generator again with the same seed must give the same stream "
                 "(a run is reproducible from its seed)",
                 a, b, s->n, "seed S twice on generator 0");
    if (r == 0)
        r = same(c, "same_seed_other_generator", "seed_not_reproducible",
                 "a stream must be a function of the seed alone, not of which generator holds "
                 "it or what it drew before",
                 a, g1, s->n, "seed S on generator 1 against generator 0");
    if (r == 0) {
        const float *segs[] = {a, d};
        const char *names[] = {"seed S", "seed S+1"};
        r = apart(c, "different_seeds", "seeds_collide",
                  "different seeds must give different streams, not one stream shifted (a "
                  "seed used as an offset into one sequence)",
                  segs, 2, names);
    }
    free(a), free(b), free(g1), free(d);
    return r < 0 ? r : 0;
}

int rg_check_state(rcase *c)
{
    const nv_rngspec *s = c->s;
    float *a = NULL, *b = NULL, *again = NULL, *other = NULL;
    int8_t *st = NULL;
    int64_t len = 0;
    int r = rg_seed(c, 0, s->seed);
    r = r ? r : rg_uniform(c, 0, s->n, &a);
    r = r ? r : rg_get_state(c, 0, &st, &len);
    r = r ? r : rg_uniform(c, 0, s->n, &b);
    r = r ? r : rg_set_state(c, 0, st, len);
    r = r ? r : rg_uniform(c, 0, s->n, &again);
    /* the state into another generator seeded otherwise: what a checkpoint
     * restored in a fresh process does */
    r = r ? r : rg_seed(c, 1, s->seed + 7);
    r = r ? r : rg_set_state(c, 1, st, len);
    r = r ? r : rg_uniform(c, 1, s->n, &other);
    if (r == 0 && json_object_set_new(c->cj, "state_bytes", json_integer(len)))
        r = -ENOMEM;
    if (r == 0) {
        const float *segs[] = {a, b};
        const char *names[] = {"the draw before get_state", "the draw after it"};
        r = apart(c, "stream_advances", "stream_not_advancing",
                  "a draw must continue the stream: the next draw shares no window with the "
                  "last",
                  segs, 2, names);
    }
    if (r == 0) {
        int64_t first, first_a, d = rg_diff(again, b, s->n, &first);
        int64_t dr = d ? rg_diff(again, a, s->n, &first_a) : 1;
        r = rg_test(c, "restore_continues", d == 0,
                    dr == 0 ? "restore_reuses_stream" : "restore_not_reproducible",
                    "after set_state(get_state()) the generator must give exactly the numbers "
                    "it gave after get_state: a resumed run replays the continuation, never "
                    "numbers already consumed",
                    diff_json(d, first),
                    d == 0    ? "the draw after set_state equals the continuation bitwise"
                    : dr == 0 ? "the draw after set_state repeats the stream's first draw "
                                "(numbers already consumed: the restore reused the stream)"
                              : "the draw after set_state differs from the continuation in "
                                "%lld of %lld values",
                    (long long)d, (long long)s->n);
    }
    if (r == 0)
        r = same(c, "restore_other_generator", "restore_not_reproducible",
                 "a state restored into another generator (a checkpoint loaded in a fresh "
                 "process) must continue the same stream",
                 other, b, s->n, "generator 1 after set_state against the continuation");
    free(a), free(b), free(again), free(other), free(st);
    return r < 0 ? r : 0;
}

int rg_check_streams(rcase *c)
{
    const nv_rngspec *s = c->s;
    int k = s->streams, nseg = 2 * k, r = 0;
    float **segs = calloc((size_t)nseg, sizeof *segs);
    char(*nm)[64] = calloc((size_t)nseg, sizeof *nm);
    const char **names = calloc((size_t)nseg, sizeof *names);
    float *solo = NULL;
    if (!segs || !nm || !names)
        r = -ENOMEM;
    /* generator 0 alone first: the reference its stream must keep when the
     * others are seeded and drawn between its draws */
    r = r ? r : rg_seed(c, 0, s->seed);
    r = r ? r : rg_uniform(c, 0, s->n, &solo);
    for (int g = 0; r == 0 && g < k; g++)
        r = rg_seed(c, g, s->seed + (uint64_t)g);
    /* round robin: each generator's first draw, then each one's second */
    for (int d = 0; r == 0 && d < 2; d++)
        for (int g = 0; r == 0 && g < k; g++) {
            snprintf(nm[d * k + g], sizeof nm[0], "stream %d (seed S+%d) draw %d", g, g, d);
            names[d * k + g] = nm[d * k + g];
            r = rg_uniform(c, g, s->n, &segs[d * k + g]);
        }
    if (r == 0)
        r = same(c, "generators_independent", "streams_shared",
                 "a generator's stream must not change when other generators are seeded and "
                 "drawn from (parallel streams hold separate state)",
                 solo, segs[0], s->n, "generator 0 among the others against generator 0 alone");
    if (r == 0)
        r = apart(c, "no_overlap", "streams_overlap",
                  "parallel streams, and successive draws of one stream, must consume disjoint "
                  "parts of the generator's sequence: no window of values shared at any shift",
                  (const float *const *)segs, nseg, names);
    for (int i = 0; segs && i < nseg; i++)
        free(segs[i]);
    free(segs), free(nm), free(names), free(solo);
    return r < 0 ? r : 0;
}
