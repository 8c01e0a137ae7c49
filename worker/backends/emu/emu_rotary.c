/* emu rotary_embedding, forward and backward (the definition is
 * core/ops/rotary.c), computed as a framework's rope is (Hugging Face
 * transformers' LlamaRotaryEmbedding, GPT-NeoX): the inverse frequency
 * theta^(-2k/hd) and the position rounded to the compute dtype, their product
 * the angle in the compute dtype, cos and sin of it by the mode's
 * transcendental quality (emu_fn), the tables rounded to the storage dtype
 * (HF casts cos and sin to x's dtype), then x_a cos - x_b sin and x_b cos +
 * x_a sin with products and sums in the compute dtype. The backward is the
 * rotation by minus the angle, gx_a = gy_a cos + gy_b sin, gx_b = gy_b cos -
 * gy_a sin, from the same tables; nothing is saved (the op is linear). */
#include <math.h>
#include <stdio.h>

#include "emu_backward.h"

static void tables(emu_call *c, const nv_rope_geom *g, int64_t tt, int64_t k, double *cs,
                   double *sn)
{
    nv_dtype cd = c->compute;
    double inv = emu_round(c, cd, pow(g->theta, -2.0 * (double)k / (double)g->hd));
    double p = emu_round(c, cd, (double)(g->offset + (uint64_t)tt));
    double phi = emu_mul(c, cd, p, inv);
    *cs = emu_round(c, c->storage, emu_fn(c, NV_FN_COS, phi, cd));
    *sn = emu_round(c, c->storage, emu_fn(c, NV_FN_SIN, phi, cd));
}

/* out_a = u_a cos - sg u_b sin, out_b = u_b cos + sg u_a sin over every pair:
 * the forward (sg = 1) and the backward (sg = -1). */
static int rotate(emu_call *c, const nv_op_attrs *a, const nv_tensor *shape, const double *u,
                  double sg, double *out, char *err, size_t errlen)
{
    nv_rope_geom g;
    if (nv_rope_geom_of(a, shape, &g) < 0) {
        snprintf(err, errlen, "op 'rotary_embedding': the input does not infer");
        return NV_E_SHAPE;
    }
    nv_dtype cd = c->compute;
    int64_t blocks = g.rows / g.t;
    for (int64_t tt = 0; tt < g.t; tt++)
        for (int64_t k = 0; k < g.hd / 2; k++) {
            double cs, sn;
            tables(c, &g, tt, k, &cs, &sn);
            for (int64_t bl = 0; bl < blocks; bl++)
                for (int64_t h = 0; h < g.heads; h++) {
                    int64_t ia, ib, base = (bl * g.t + tt) * g.d + h * g.hd;
                    nv_rope_pair(&g, k, &ia, &ib);
                    double xa = emu_round(c, cd, u[base + ia]);
                    double xb = emu_round(c, cd, u[base + ib]);
                    out[base + ia] =
                        emu_add(c, cd, emu_mul(c, cd, xa, cs), -sg * emu_mul(c, cd, xb, sn));
                    out[base + ib] =
                        emu_add(c, cd, emu_mul(c, cd, xb, cs), sg * emu_mul(c, cd, xa, sn));
                }
        }
    return NV_OK;
}

int emu_rotary(emu_call *c, const nv_op_attrs *a, const nv_tensor *const *in, double *out,
               char *err, size_t errlen)
{
    return rotate(c, a, in[0], in[0]->data, 1, out, err, errlen);
}

int emu_bwd_rotary(emu_call *c, const nv_op_attrs *a, const emu_bwd_io *io, char *err,
                   size_t errlen)
{
    return rotate(c, a, io->shape0, io->gy->data, -1, io->gx[0], err, errlen);
}
