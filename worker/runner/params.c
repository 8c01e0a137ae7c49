/* Deterministic parameters and inputs (params.h; docs/MODEL.md "Deterministic
 * init"). */
#include "params.h"

#include <math.h>

#include "core/numerics/rng.h"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The value at flat index k of a fixed table (docs/MODEL.md "Transformer"):
 * rotary tables in fp64 libm (cos, sin; the tables are parameters, rounded
 * to the dtype like any other, so both references read the same values). */
static double table_value(const nv_model_input *mi, const nv_tensor *t, int64_t k)
{
    int64_t cols = t->shape[t->ndim - 1], row = k / cols, col = k % cols;
    int64_t hd = mi->hd ? mi->hd : cols, half = hd / 2, j = col % hd, base = col - j;
    switch (mi->init) {
    case NV_MINIT_CAUSAL_MASK:
        return col > row % t->shape[t->ndim - 2] ? -INFINITY : 0;
    case NV_MINIT_ROPE_COS:
    case NV_MINIT_ROPE_SIN: {
        double ang = (double)row * pow(mi->a, -2.0 * (double)(j % half) / (double)hd);
        return mi->init == NV_MINIT_ROPE_COS ? cos(ang) : sin(ang);
    }
    default: /* rotate_half in each head: (x R)[j] = -x[j + hd/2] for j < hd/2, x[j - hd/2] above */
        if (j < half)
            return row == base + j + half ? -1 : 0;
        return row == base + j - half ? 1 : 0;
    }
}

void nvw_param_fill(nv_tensor *t, const nv_model_input *mi, const char *name, uint64_t seed,
                    int sample)
{
    nv_rng r;
    nv_rng_init(&r, seed ^ (fnv1a(name) * 0x9E3779B97F4A7C15ull), (uint32_t)sample, 0);
    for (int64_t k = 0; k < t->numel; k++) {
        double v;
        switch (mi->init) {
        case NV_MINIT_NORMAL:
            v = mi->a * nv_rng_normal(&r);
            break;
        case NV_MINIT_UNIFORM:
            v = mi->a * (2 * nv_rng_uniform(&r) - 1);
            break;
        case NV_MINIT_VALUE:
            v = mi->a;
            break;
        case NV_MINIT_TOKENS:
            v = floor(nv_rng_uniform(&r) * mi->a);
            break;
        case NV_MINIT_CAUSAL_MASK:
        case NV_MINIT_ROPE_COS:
        case NV_MINIT_ROPE_SIN:
        case NV_MINIT_ROTATE_HALF:
            v = table_value(mi, t, k);
            break;
        default:
            v = nv_rng_normal(&r);
            break;
        }
        t->data[k] =
            mi->init == NV_MINIT_TOKENS ? v : nv_dtype_round(t->dtype, v, &NV_ROUND_DEFAULT, 0);
    }
}
