/* The exact reference of rotary_embedding (core/ops/rotary.c has the
 * definition) and its backward.
 *
 * Forward: y_a = x_a cos phi - x_b sin phi (y_b = x_b cos phi + x_a sin phi),
 * phi = p theta^(-2k/hd), evaluated in MPFR at a working precision P with
 * every operation rounded to nearest: the exponent -2k/hd, theta^e (mpfr_pow),
 * phi = p theta^e, cos phi and sin phi (mpfr_sin_cos, correctly rounded for
 * every argument: MPFR reduces the argument modulo 2 pi with pi computed to
 * P + EXP(phi) bits, so no precision is lost to a large angle; MPFR manual §5.6
 * and "The MPFR library: algorithms and proofs", "The sine function"), the two
 * products and the difference. To first order (twice that for margin) the
 * result is within
 *     E = 2 (|x_a| + |x_b|) (phi (ln theta + 3) + 4) 2^-P
 * of the exact value: the rounded exponent moves theta^e by ln theta |e| 2^-P
 * relatively, pow, the product and the exponent add 3 2^-P, cos and sin are
 * 1-Lipschitz plus their own rounding, the products and the difference 2^-P
 * each. The value is accepted when E <= 2^-110 |result| (hi + lo then carries
 * it to about 2^-106, refmath.h's contract) and recomputed at twice the
 * precision otherwise (Ziv's strategy), up to REF_ROPE_PREC_MAX bits, where E
 * is far below fp64's smallest subnormal. A non-zero (x_a, x_b) at p > 0 never
 * rotates to exactly 0: phi is a non-zero algebraic number, so tan phi is
 * transcendental (Lindemann) and cannot equal the rational x_a / x_b; at
 * p = 0 the rotation is the identity and y = x exactly. Non-finite inputs take
 * the IEEE 754 evaluation of the formula with the correctly rounded cos and sin
 * (an infinite x_b at p = 0 gives Inf * 0 = NaN, as a framework's rope does).
 *
 * abs_sum is the weight of the default tolerance's error model
 * (core/ops/tolerances.c, docs/TOLERANCES.md "Rotary embedding"): with u_t the
 * unit roundoff of the output dtype and u_a that of the angle's dtype (fp32;
 * fp64 for fp64 outputs),
 *     abs_sum = 2 (|x_a c| + |x_b s|) + (|x_a| + |x_b|) (1 + (phi (ln theta + 4) + 2) u_a / u_t)
 * so that u_t abs_sum is the first-order error of a device that computes phi
 * in fp32 from an fp32 inverse frequency (relative (ln theta + 4) u_a: the
 * exponent 2k/hd, pow, the reciprocal and the product), cos and sin faithfully
 * (2 u_a each), holds the tables in the output dtype (u_t) and rounds the two
 * products and the difference there (gamma_2); plus 2 min_normal(dt) for the
 * gradual underflow of those three roundings. */
#include <math.h>
#include <stdlib.h>

#include <mpfr.h>

#include "backward_internal.h"
#include "numval/backend.h"
#include "ref_internal.h"

#define REF_ROPE_PREC 192
#define REF_ROPE_PREC_MAX 16384

/* The angle p theta^(-2k/hd), cos and sin at precision prec into c, s (phi:
 * scratch, and the angle on return). */
static void angle_cs(const nv_rope_geom *g, double p, int64_t k, mpfr_prec_t prec, mpfr_ptr phi,
                     mpfr_ptr c, mpfr_ptr s)
{
    mpfr_set_prec(phi, prec);
    mpfr_set_prec(c, prec);
    mpfr_set_prec(s, prec);
    mpfr_t e;
    mpfr_init2(e, prec);
    mpfr_set_si(e, -2 * (long)k, MPFR_RNDN);
    mpfr_div_si(e, e, (long)g->hd, MPFR_RNDN);
    mpfr_set_d(phi, g->theta, MPFR_RNDN);
    mpfr_pow(phi, phi, e, MPFR_RNDN);
    mpfr_mul_d(phi, phi, p, MPFR_RNDN);
    mpfr_sin_cos(s, c, phi, MPFR_RNDN);
    mpfr_clear(e);
}

/* cos phi and sin phi as the nearest doubles (to within a few 2^-(P-40)
 * of the exact values' rounding): the fp64 forward and the reference VJP. */
static void angle_cs_d(const nv_rope_geom *g, double p, int64_t k, double *c, double *s)
{
    if (p == 0) {
        *c = 1, *s = 0;
        return;
    }
    mpfr_t phi, mc, ms;
    mpfr_inits2(REF_ROPE_PREC, phi, mc, ms, (mpfr_ptr)0);
    angle_cs(g, p, k, REF_ROPE_PREC, phi, mc, ms);
    *c = mpfr_get_d(mc, MPFR_RNDN);
    *s = mpfr_get_d(ms, MPFR_RNDN);
    mpfr_clears(phi, mc, ms, (mpfr_ptr)0);
}

/* The angle in fp64 for the error weights (its own error is irrelevant there). */
static double angle_d(const nv_rope_geom *g, double p, int64_t k)
{
    return p * pow(g->theta, -2.0 * (double)k / (double)g->hd);
}

/* xf cos phi + xs sin phi (y_a: xf = x_a, xs = -x_b; y_b: x_b, x_a) as hi + lo,
 * from c0, s0 at REF_ROPE_PREC and recomputed wider where the header's
 * acceptance test asks (Ziv's loop); phi_d the angle in fp64 for the bound. */
static void exact_pair_out(const nv_rope_geom *g, double p, int64_t k, double xf, double xs,
                           mpfr_srcptr c0, mpfr_srcptr s0, double phi_d, double *hi, double *lo)
{
    mpfr_t c, s, phi, y, t;
    mpfr_inits2(REF_ROPE_PREC, c, s, phi, y, t, (mpfr_ptr)0);
    mpfr_set(c, c0, MPFR_RNDN);
    mpfr_set(s, s0, MPFR_RNDN);
    double w = (fabs(xf) / 2 + fabs(xs) / 2) * (phi_d * (log(g->theta) + 3) + 4) * 4;
    for (mpfr_prec_t prec = REF_ROPE_PREC;; prec *= 2) {
        if (prec > REF_ROPE_PREC) {
            mpfr_set_prec(y, prec);
            mpfr_set_prec(t, prec);
            angle_cs(g, p, k, prec, phi, c, s);
        }
        mpfr_mul_d(y, c, xf, MPFR_RNDN);
        mpfr_mul_d(t, s, xs, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
        if (w == 0 || prec >= REF_ROPE_PREC_MAX)
            break;
        /* accept when w 2^-prec <= 2^-110 |y| */
        if (!mpfr_zero_p(y) && (double)mpfr_get_exp(y) - 110 >= log2(w) - (double)prec + 1)
            break;
    }
    nvo_mp_split(y, t, hi, lo);
    mpfr_clears(c, s, phi, y, t, (mpfr_ptr)0);
}

static double unit_roundoff(nv_dtype dt)
{
    return ldexp(1.0, -nv_dtype_get(dt)->mant_bits - 1);
}

int nvo_ref_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o)
{
    const nv_tensor *x = in[0];
    nv_rope_geom g;
    if (nv_rope_geom_of(a, x, &g) < 0)
        return NV_E_SHAPE;
    nv_dtype dt = o->hi->dtype;
    double ut = unit_roundoff(dt), ua = unit_roundoff(dt == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32);
    double lnb = log(g.theta);
    /* gradual underflow (Higham §2.1, model (2.8)): each of the three roundings
     * in the output dtype may err by min_subnormal / 2 = u_t min_normal beyond
     * the relative model; 2 min_normal in abs_sum covers them under c = 2 */
    nv_mag uf = nv_mag_from_d(2 * nv_dtype_get(dt)->min_normal);
    mpfr_t c, s, phi;
    mpfr_inits2(REF_ROPE_PREC, c, s, phi, (mpfr_ptr)0);
    int64_t half = g.hd / 2, blocks = g.rows / g.t; /* rows of one position: blocks x heads */
    for (int64_t tt = 0; tt < g.t; tt++) {
        double p = (double)(g.offset + (uint64_t)tt);
        for (int64_t k = 0; k < half; k++) {
            angle_cs(&g, p, k, REF_ROPE_PREC, phi, c, s);
            double cd = mpfr_get_d(c, MPFR_RNDN), sd = mpfr_get_d(s, MPFR_RNDN);
            double ph = angle_d(&g, p, k);
            double wa = 1 + (ph * (lnb + 4) + 2) * ua / ut;
            for (int64_t bl = 0; bl < blocks; bl++)
                for (int64_t h = 0; h < g.heads; h++) {
                    int64_t ia, ib, row = bl * g.t + tt;
                    nv_rope_pair(&g, k, &ia, &ib);
                    ia += row * g.d + h * g.hd, ib += row * g.d + h * g.hd;
                    double xa = x->data[nv_tensor_offset_linear(x, ia)];
                    double xb = x->data[nv_tensor_offset_linear(x, ib)];
                    double ya_hi, ya_lo, yb_hi, yb_lo;
                    if (p == 0 && isfinite(xa) && isfinite(xb)) {
                        ya_hi = xa, yb_hi = xb, ya_lo = yb_lo = 0;
                    } else if (!isfinite(xa) || !isfinite(xb)) {
                        ya_hi = xa * cd - xb * sd, yb_hi = xb * cd + xa * sd;
                        ya_lo = yb_lo = 0;
                    } else {
                        exact_pair_out(&g, p, k, xa, -xb, c, s, ph, &ya_hi, &ya_lo);
                        exact_pair_out(&g, p, k, xb, xa, c, s, ph, &yb_hi, &yb_lo);
                    }
                    nv_mag both = nv_mag_mul(nv_mag_from_d(fabs(xa) / 2 + fabs(xb) / 2),
                                             nv_mag_from_d(2 * wa));
                    nv_mag pa = nv_mag_from_d(4 * (fabs(xa * cd) / 2 + fabs(xb * sd) / 2));
                    nv_mag pb = nv_mag_from_d(4 * (fabs(xb * cd) / 2 + fabs(xa * sd) / 2));
                    int64_t idx[2] = {ia, ib};
                    double hs[2] = {ya_hi, yb_hi}, ls[2] = {ya_lo, yb_lo};
                    nv_mag ms[2] = {nv_mag_add(nv_mag_add(both, pa), uf),
                                    nv_mag_add(nv_mag_add(both, pb), uf)};
                    for (int q = 0; q < 2; q++) {
                        o->hi->data[nv_tensor_offset_linear(o->hi, idx[q])] = hs[q];
                        if (o->lo)
                            o->lo->data[nv_tensor_offset_linear(o->lo, idx[q])] = ls[q];
                        nvo_put_abs(o, o->abs_sum ? nv_tensor_offset_linear(o->abs_sum, idx[q]) : 0,
                                    o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, idx[q]) : 0,
                                    ms[q]);
                        if (o->peak)
                            o->peak->data[nv_tensor_offset_linear(o->peak, idx[q])] = 0;
                    }
                }
        }
    }
    mpfr_clears(c, s, phi, (mpfr_ptr)0);
    return 0;
}

/* ---- backward: the op is linear in x, y = R(phi) x per pair, so the VJP is
 * the rotation by -phi, R^T gy: gx_a = gy_a c + gy_b s, gx_b = gy_b c - gy_a s,
 * and the second-order VJP is 0. ---- */

typedef void (*pair_fn)(void *ctx, int64_t ia, int64_t ib, double c, double s, double phi);

static int for_pairs(const nv_op_attrs *a, const nv_tensor *x, pair_fn fn, void *ctx)
{
    nv_rope_geom g;
    if (nv_rope_geom_of(a, x, &g) < 0)
        return NV_E_SHAPE;
    int64_t half = g.hd / 2, blocks = g.rows / g.t;
    for (int64_t tt = 0; tt < g.t; tt++) {
        double p = (double)(g.offset + (uint64_t)tt);
        for (int64_t k = 0; k < half; k++) {
            double c, s, ph = angle_d(&g, p, k);
            angle_cs_d(&g, p, k, &c, &s);
            for (int64_t bl = 0; bl < blocks; bl++)
                for (int64_t h = 0; h < g.heads; h++) {
                    int64_t ia, ib, base = (bl * g.t + tt) * g.d + h * g.hd;
                    nv_rope_pair(&g, k, &ia, &ib);
                    fn(ctx, base + ia, base + ib, c, s, ph * (1 + log(g.theta)));
                }
        }
    }
    return 0;
}

typedef struct fwd_ctx {
    const double *x;
    double *out;
} fwd_ctx;

static void fwd_pair(void *vc, int64_t ia, int64_t ib, double c, double s, double phi)
{
    (void)phi;
    fwd_ctx *f = vc;
    f->out[ia] = f->x[ia] * c - f->x[ib] * s;
    f->out[ib] = f->x[ib] * c + f->x[ia] * s;
}

int nvb_forward_rotary(const nv_op_attrs *a, const nv_tensor *const *in, double *out)
{
    fwd_ctx f = {.x = in[0]->data, .out = out};
    return for_pairs(a, in[0], fwd_pair, &f);
}

typedef struct vjp_ctx {
    const double *gy;
    double *gx, *mag;
} vjp_ctx;

/* mag: the VJP with |.| on every factor, plus the angle's own sensitivity
 * phi (1 + ln theta) (its relative rounding moves cos and sin by phi |sin|,
 * phi |cos|; ln theta weighs the rounding of the exponent 2k/hd): a device's
 * backward recomputes its tables from an angle rounded in its compute dtype,
 * an error that grows with the position (docs/JOBS.md "gradient"). */
static void vjp_pair(void *vc, int64_t ia, int64_t ib, double c, double s, double phi)
{
    vjp_ctx *v = vc;
    double ga = v->gy[ia], gb = v->gy[ib];
    if (v->gx) {
        v->gx[ia] = ga * c + gb * s;
        v->gx[ib] = gb * c - ga * s;
    }
    if (v->mag) {
        double w = phi * (fabs(ga) + fabs(gb));
        v->mag[ia] = fabs(ga * c) + fabs(gb * s) + w;
        v->mag[ib] = fabs(gb * c) + fabs(ga * s) + w;
    }
}

int nvb_vjp_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                   double *const *gx, double *const *mag)
{
    vjp_ctx v = {.gy = gy, .gx = gx ? gx[0] : NULL, .mag = mag ? mag[0] : NULL};
    return for_pairs(a, in[0], vjp_pair, &v);
}

/* The backward of a framework's rope composed of elementwise ops (autograd
 * through x cos + rotate(x) sin) rounds in the storage dtype three times per
 * term: the table, the product with gy and the rotation's sum of two
 * products, the last of which the check's half ulp covers; hence 3 times the
 * weight |gy_a c| + |gy_b s|, the forward's model (tables and products in the
 * output dtype) applied to the backward. */
typedef struct sens_ctx {
    const double *gy;
    double *sens;
} sens_ctx;

static void sens_pair(void *vc, int64_t ia, int64_t ib, double c, double s, double phi)
{
    (void)phi;
    sens_ctx *v = vc;
    double ga = v->gy[ia], gb = v->gy[ib];
    v->sens[ia] = 3 * (fabs(ga * c) + fabs(gb * s));
    v->sens[ib] = 3 * (fabs(gb * c) + fabs(ga * s));
}

int nvb_sens_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const double *gy,
                    double *sens)
{
    sens_ctx v = {.gy = gy, .sens = sens};
    return for_pairs(a, in[0], sens_pair, &v);
}

int nvb_vjp2_rotary(const nv_tensor *const *in, double *const *hx, double *const *mag)
{
    for (int64_t e = 0; e < in[0]->numel; e++) {
        if (hx && hx[0])
            hx[0][e] = 0;
        if (mag && mag[0])
            mag[0][e] = 0;
    }
    return 0;
}
