/* The device's generator actions through nv_backend.rng (rng_internal.h):
 * every output is checked (dtype, shape, finite values in range) and copied
 * out of the backend's buffer before it is released. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng_internal.h"

#define ERRLEN 512

static const char *const action_names[] = {"seed",      "uniform",   "dropout",
                                           "get_state", "set_state", "recompute"};

static void release(rcase *c, nv_tensor_view *outs, int n)
{
    for (int i = 0; i < n; i++)
        if (outs[i].data)
            c->j->b.table->release_tensor(c->ctx, &outs[i]);
}

/* The call; 0, 1 with the case's error verdict, -ENOMEM. */
static int call(rcase *c, nv_rng_call *k)
{
    char err[ERRLEN] = "";
    int r = c->j->b.table->rng(c->ctx, k, err, sizeof err);
    if (r == NV_OK)
        return 0;
    if (r == NV_E_NOMEM)
        return -ENOMEM;
    bool not_offered = r == NV_E_UNSUPPORTED && !strncmp(err, "not offered", 11);
    return rg_verdict(c, "error", not_offered ? "not_offered" : "backend_error",
                      "rng %s (generator %d): %s", action_names[k->action], k->gen,
                      err[0] ? err : "the device failed without a message") < 0
               ? -ENOMEM
               : 1;
}

/* outs[i] as n fp32 values into a malloc'd array; uniform: each in [0, 1). */
static int take_f32(rcase *c, const nv_rng_call *k, const nv_tensor_view *t, int64_t n,
                    bool uniform, float **ret)
{
    if (t->dtype != NV_DT_FP32 || t->ndim != 1 || t->shape[0] != n || (!t->data && n > 0))
        return rg_verdict(c, "failed", "bad_output",
                          "rng %s: expected an fp32 [%lld] tensor, got dtype code %d with %d "
                          "dims (first extent %lld)",
                          action_names[k->action], (long long)n, t->dtype, t->ndim,
                          (long long)(t->ndim > 0 ? t->shape[0] : -1)) < 0
                   ? -ENOMEM
                   : 1;
    float *o = malloc(n ? (size_t)n * sizeof *o : 1);
    if (!o)
        return -ENOMEM;
    const float *src = t->data;
    for (int64_t i = 0; i < n; i++) {
        o[i] = src[i * t->strides[0]];
        if (uniform && !(o[i] >= 0.0f && o[i] < 1.0f)) {
            int r = rg_verdict(c, "failed", "bad_output",
                               "rng uniform: element %lld is %.9g, outside [0, 1)", (long long)i,
                               (double)o[i]);
            free(o);
            return r < 0 ? -ENOMEM : 1;
        }
    }
    *ret = o;
    return 0;
}

int rg_seed(rcase *c, int gen, uint64_t seed)
{
    nv_rng_call k = {.action = NV_RNG_SEED, .gen = gen, .seed = seed};
    return call(c, &k);
}

static int draw(rcase *c, int action, int gen, int64_t n, double p, float **ret)
{
    nv_tensor_view out = {0};
    nv_rng_call k = {.action = action, .gen = gen, .n = n, .p = p, .n_outputs = 1, .outputs = &out};
    int r = call(c, &k);
    if (r == 0)
        r = take_f32(c, &k, &out, n, action == NV_RNG_UNIFORM, ret);
    release(c, &out, 1);
    return r;
}

int rg_uniform(rcase *c, int gen, int64_t n, float **ret)
{
    return draw(c, NV_RNG_UNIFORM, gen, n, 0, ret);
}

int rg_dropout(rcase *c, int64_t n, double p, float **ret)
{
    return draw(c, NV_RNG_DROPOUT, 0, n, p, ret);
}

int rg_seek(rcase *c, int gen, uint64_t seed, int64_t skip)
{
    int r = rg_seed(c, gen, seed);
    float *u = NULL;
    if (r == 0 && skip > 0)
        r = rg_uniform(c, gen, skip, &u);
    free(u);
    return r;
}

/* A state is opaque bytes in the device's format: 1 byte to 16 MiB. */
#define STATE_MAX (1 << 24)

int rg_get_state(rcase *c, int gen, int8_t **ret, int64_t *ret_len)
{
    nv_tensor_view out = {0};
    nv_rng_call k = {.action = NV_RNG_GET_STATE, .gen = gen, .n_outputs = 1, .outputs = &out};
    int r = call(c, &k);
    if (r == 0 && (out.dtype != NV_DT_INT8 || out.ndim != 1 || out.shape[0] < 1 ||
                   out.shape[0] > STATE_MAX || !out.data))
        r = rg_verdict(c, "failed", "bad_output",
                       "rng get_state: expected an int8 tensor of 1 to %d bytes, got dtype code "
                       "%d with %d dims",
                       STATE_MAX, out.dtype, out.ndim) < 0
                ? -ENOMEM
                : 1;
    if (r == 0) {
        int8_t *s = malloc((size_t)out.shape[0]);
        if (!s)
            r = -ENOMEM;
        for (int64_t i = 0; s && i < out.shape[0]; i++)
            s[i] = ((const int8_t *)out.data)[i * out.strides[0]];
        *ret = s;
        *ret_len = out.shape[0];
    }
    release(c, &out, 1);
    return r;
}

int rg_set_state(rcase *c, int gen, const int8_t *state, int64_t len)
{
    nv_tensor_view in = {
        .dtype = NV_DT_INT8, .ndim = 1, .shape = {len}, .strides = {1}, .data = (void *)state};
    nv_rng_call k = {.action = NV_RNG_SET_STATE, .gen = gen, .n_inputs = 1, .inputs = &in};
    return call(c, &k);
}

int rg_recompute(rcase *c, int64_t n, double p, float *out[3])
{
    nv_tensor_view o[3] = {{0}};
    nv_rng_call k = {.action = NV_RNG_RECOMPUTE, .n = n, .p = p, .n_outputs = 3, .outputs = o};
    int r = call(c, &k);
    out[0] = out[1] = out[2] = NULL;
    for (int i = 0; r == 0 && i < 3; i++)
        r = take_f32(c, &k, &o[i], n, i == 2, &out[i]);
    release(c, o, 3);
    if (r != 0)
        for (int i = 0; i < 3; i++)
            free(out[i]), out[i] = NULL;
    return r;
}
