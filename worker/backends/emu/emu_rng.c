/* emu's random number generators (nv_backend.rng, docs/BACKEND_ABI.md "Random
 * number generators"): Philox4x32-10 (Salmon et al., SC11), as the counter-based
 * generators of accelerator runtimes are. Generator k holds a seed (the Philox
 * key) and an offset (the 32-bit words it has given); word i of seed s is word
 * i mod 4 of the block at counter (i / 4, tag), so a state is the pair (seed,
 * offset) and a stream can be entered anywhere. A uniform is the word's high
 * 24 bits times 2^-24 (an fp32 in [0, 1) with every bit random); dropout keeps
 * an element when its uniform is below 1 - p and scales it by 1/(1-p) rounded
 * once to fp32. The mode's rng_* faults (emu_internal.h) are what an RNG job
 * must catch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "emu_internal.h"

#define RNG_TAG 0x524e4721u     /* counter word 2: these streams, apart from inputs' */
#define STATE_MAGIC 0x31676e72u /* "rng1": the first word of a state */
#define STATE_BYTES 20
#define OVERLAP_STRIDE 256 /* rng_streams=overlap: words between adjacent seeds */
#define MAX_N (1 << 24)

typedef struct emu_gen {
    uint64_t seed, off;
} emu_gen;

struct emu_rng {
    emu_gen g[NV_RNG_MAX_GENS];
};

static uint32_t word(const emu_mode *m, const emu_gen *g, uint64_t i)
{
    uint64_t key = g->seed;
    if (m->rng_streams_overlap) { /* one stream, the seed an offset into it */
        i += g->seed * OVERLAP_STRIDE;
        key = 0;
    }
    uint64_t blk = i / 4;
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), RNG_TAG, 0};
    uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)}, out[4];
    nv_philox4x32_10(ctr, k, out);
    return out[i % 4];
}

static float uniform(const emu_mode *m, emu_gen *g)
{
    return (float)(word(m, g, g->off++) >> 8) * 0x1p-24f;
}

static int out_f32(nv_tensor_view *t, int64_t n, float **ret, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->dtype = NV_DT_FP32;
    t->ndim = 1;
    t->shape[0] = n;
    t->strides[0] = 1;
    t->data = malloc(n ? (size_t)n * sizeof(float) : 1);
    if (!t->data)
        return snprintf(err, errlen, "out of memory"), NV_E_NOMEM;
    *ret = t->data;
    return NV_OK;
}

/* dropout(ones(n), p) from g into o. */
static void dropout(const emu_mode *m, emu_gen *g, int64_t n, double p, float *o)
{
    float keep = (float)(1.0 / (1.0 - p));
    double q = m->rng_threshold_set
                   ? nv_dtype_round(m->rng_threshold, 1.0 - p, &NV_ROUND_DEFAULT, 0)
                   : 1.0 - p;
    for (int64_t i = 0; i < n; i++)
        o[i] = (double)uniform(m, g) < q ? keep : 0.0f;
}

static void put_u64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> 8 * i);
}

static uint64_t get_u64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << 8 * i;
    return v;
}

static int get_state(const emu_gen *g, nv_rng_call *call, char *err, size_t errlen)
{
    nv_tensor_view *t = &call->outputs[0];
    memset(t, 0, sizeof *t);
    t->dtype = NV_DT_INT8;
    t->ndim = 1;
    t->shape[0] = STATE_BYTES;
    t->strides[0] = 1;
    unsigned char *b = t->data = malloc(STATE_BYTES);
    if (!b)
        return snprintf(err, errlen, "out of memory"), NV_E_NOMEM;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(STATE_MAGIC >> 8 * i);
    put_u64(b + 4, g->seed);
    put_u64(b + 12, g->off);
    return NV_OK;
}

static int set_state(const emu_mode *m, emu_gen *g, const nv_rng_call *call, char *err,
                     size_t errlen)
{
    const nv_tensor_view *t = call->n_inputs == 1 ? &call->inputs[0] : NULL;
    if (!t || t->dtype != NV_DT_INT8 || t->ndim != 1 || t->shape[0] != STATE_BYTES ||
        (t->strides[0] != 1 && t->shape[0] > 1))
        return snprintf(err, errlen, "rng set_state: expected one int8 [%d] state from get_state",
                        STATE_BYTES),
               NV_E_INVALID;
    const unsigned char *b = t->data;
    uint32_t magic =
        (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (magic != STATE_MAGIC)
        return snprintf(err, errlen, "rng set_state: not an emu generator state (bad magic)"),
               NV_E_INVALID;
    g->seed = get_u64(b + 4);
    /* rng_restore=reuse: the offset is dropped, the stream restarts at its
     * first word (a restore that keeps only the seed). */
    g->off = m->rng_restore_reuse ? 0 : get_u64(b + 12);
    return NV_OK;
}

/* NV_RNG_RECOMPUTE on generator 0: the checkpointed forward's mask (the
 * forward keeps the generator's offset, as torch.utils.checkpoint keeps the
 * RNG state), n uniforms of the layers after it, then the backward's
 * recomputation from the kept offset; the generator ends where the layers
 * after left it. rng_recompute=fresh recomputes from the current offset. */
static int recompute(const emu_mode *m, emu_gen *g, nv_rng_call *call, char *err, size_t errlen)
{
    float *y, *gx, *u;
    int r = out_f32(&call->outputs[0], call->n, &y, err, errlen);
    r = r ? r : out_f32(&call->outputs[1], call->n, &gx, err, errlen);
    r = r ? r : out_f32(&call->outputs[2], call->n, &u, err, errlen);
    if (r)
        return r;
    uint64_t kept = g->off;
    dropout(m, g, call->n, call->p, y);
    for (int64_t i = 0; i < call->n; i++)
        u[i] = uniform(m, g);
    uint64_t after = g->off;
    if (!m->rng_recompute_fresh)
        g->off = kept;
    dropout(m, g, call->n, call->p, gx); /* d sum(x * mask * s) / dx = mask * s */
    if (!m->rng_recompute_fresh)
        g->off = after;
    return NV_OK;
}

int emu_rng_call(void *ctx, nv_rng_call *call, char *err, size_t errlen)
{
    emu_ctx *c = ctx;
    static const int32_t n_out[] = {0, 1, 1, 1, 0, 3};
    if (call->action < NV_RNG_SEED || call->action > NV_RNG_RECOMPUTE)
        return snprintf(err, errlen, "rng: unknown action %d", call->action), NV_E_INVALID;
    if (call->gen < 0 || call->gen >= NV_RNG_MAX_GENS)
        return snprintf(err, errlen, "rng: generator %d outside 0..%d", call->gen,
                        NV_RNG_MAX_GENS - 1),
               NV_E_INVALID;
    if (call->n_outputs != n_out[call->action])
        return snprintf(err, errlen, "rng: action %d has %d outputs, the call gave room for %d",
                        call->action, n_out[call->action], call->n_outputs),
               NV_E_INVALID;
    if (call->n < 0 || call->n > MAX_N)
        return snprintf(err, errlen, "rng: n = %lld outside 0..%d", (long long)call->n, MAX_N),
               NV_E_INVALID;
    if (!(call->p >= 0 && call->p < 1))
        return snprintf(err, errlen, "rng: p = %g outside [0, 1)", call->p), NV_E_INVALID;
    if (!c->rng && !(c->rng = calloc(1, sizeof *c->rng)))
        return snprintf(err, errlen, "out of memory"), NV_E_NOMEM;
    const emu_mode *m = &c->mode;
    emu_gen *g =
        &c->rng->g[call->action == NV_RNG_DROPOUT || call->action == NV_RNG_RECOMPUTE ? 0
                                                                                      : call->gen];
    float *o;
    int r;
    switch (call->action) {
    case NV_RNG_SEED:
        g->seed = call->seed;
        g->off = 0;
        return NV_OK;
    case NV_RNG_UNIFORM:
        if ((r = out_f32(&call->outputs[0], call->n, &o, err, errlen)))
            return r;
        for (int64_t i = 0; i < call->n; i++)
            o[i] = uniform(m, g);
        return NV_OK;
    case NV_RNG_DROPOUT:
        if ((r = out_f32(&call->outputs[0], call->n, &o, err, errlen)))
            return r;
        dropout(m, g, call->n, call->p, o);
        return NV_OK;
    case NV_RNG_GET_STATE:
        return get_state(g, call, err, errlen);
    case NV_RNG_SET_STATE:
        return set_state(m, g, call, err, errlen);
    default:
        return recompute(m, g, call, err, errlen);
    }
}
