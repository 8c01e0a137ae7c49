/* References of the composed reductions, evaluated in MPFR at 128 bits from the
 * exact inputs, the exponentials by a double-double exp (dd_exp, 2^-96) (accuracy and abs_sum: see
 * the comment at the top of ref_reduce.c): logsumexp, softmax, log_softmax, cross_entropy,
 * layer_norm, rms_norm.
 *
 * Special values follow the formulas under IEEE 754 arithmetic, as PyTorch does:
 * a NaN in a line makes logsumexp NaN and the softmax / log_softmax line NaN; a
 * +Inf makes logsumexp +Inf and the softmax line NaN (Inf - Inf); an all -Inf line
 * gives logsumexp -Inf and a NaN softmax line; a -Inf element among finite ones
 * contributes exp(-Inf) = 0. layer_norm / rms_norm of a line with a non-finite x
 * are NaN. */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#include "numval/backend.h"
#include "ref_internal.h"

#define P 128

typedef struct ctx {
    int id;
    const nv_op_attrs *a;
    const nvo_lines *L;
    const nv_tensor *const *in;
    const nv_ref_out *o;
    nv_tensor *oh, *ol;
    nv_mag peak; /* the accumulator demand of the current line (nv_ref_out) */
    double *x;   /* the current line */
    double *abs; /* per element abs_sum of the current line */
    double *e;   /* per element e_j = exp(x_j - m) as (hi, lo) pairs */
    mpfr_t s, t, u, acc, acc_abs, acc_peak;
    double ln2[3]; /* ln 2 = ln2[0] + ln2[1] + ln2[2] to 159 bits */
} ctx;

static void store(ctx *c, int64_t l, int64_t k, bool removes, mpfr_srcptr v, nv_mag abs)
{
    double hi, lo;
    nvo_mp_split(v, c->u, &hi, &lo);
    c->oh->data[nvo_line_out_off(c->L, c->oh, removes, l, k)] = hi;
    if (c->ol)
        c->ol->data[nvo_line_out_off(c->L, c->ol, removes, l, k)] = lo;
    nvo_line_put_mags(c->o, c->L, removes, l, k, abs, c->peak);
}

static void store_d(ctx *c, int64_t l, int64_t k, bool removes, double v)
{
    mpfr_set_d(c->t, v, MPFR_RNDN);
    store(c, l, k, removes, c->t, nv_mag_from_d(v));
}

/* v += a (a magnitude), exactly at v's precision when it is wide enough. */
static void mp_add_mag(mpfr_ptr v, nv_mag a, mpfr_ptr tmp)
{
    mpfr_set_d(tmp, a.m, MPFR_RNDN);
    if (a.m != 0 && isfinite(a.m))
        mpfr_mul_2si(tmp, tmp, a.e, MPFR_RNDN);
    mpfr_add(v, v, tmp, MPFR_RNDN);
}

/* Line scan for the softmax family: 0 all finite (m = max, -Inf elements
 * allowed), else the special result: 1 NaN, 2 +Inf present, 3 all -Inf. */
static int scan(const double *x, int64_t n, double *ret_m)
{
    double m = -INFINITY;
    int special = 3;
    bool pinf = false;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return 1;
        if (x[i] == INFINITY)
            pinf = true;
        else if (x[i] != -INFINITY)
            special = 0;
        if (x[i] > m)
            m = x[i];
    }
    *ret_m = m;
    return pinf ? 2 : special;
}

static void dd_mul(double ah, double al, double bh, double bl, double *rh, double *rl)
{
    double p, e;
    two_prod(ah, bh, &p, &e);
    e += ah * bl + al * bh;
    fast_two_sum(p, e, rh, rl);
}

/* (sh, sl) += x, renormalised; absolute error below 2^-53 |sl| per step. */
static void acc_add(double *sh, double *sl, double x)
{
    double s, e;
    two_sum(*sh, x, &s, &e);
    *sl += e;
    fast_two_sum(s, *sl, sh, sl);
}

/* e^d for d = dh + dl <= 0 (dl below half an ulp of dh), as a double-double with
 * relative error below 2^-96, some 20 times faster than mpfr_exp at 128 bits:
 * k = round(d / ln 2); r = d - k ln 2 with ln 2 to 159 bits (ln2[3]; TwoProduct
 * makes k ln2[0] and k ln2[1] exact, and every remaining term is below 2^-43, so r
 * has an absolute error below 2^-104, which is a relative error of e^r); then
 * r' = r / 2^8, expm1(r') by its Taylor series to degree 10 in double-double
 * (|r'| < 2^-9: truncation below 2^-116), eight squarings expm1(2y) = p (p + 2),
 * which keep the relative error of expm1 within a factor 1.2 per step, and
 * finally (1 + p) 2^k (Muller et al., Handbook of Floating-Point Arithmetic,
 * §11 argument reduction). dd_exp_scaled returns 1 + p and k separately, so that
 * a subnormal softmax output is rounded once, from the quotient (1 + p) / s. e^d
 * below 2^-1074 gives 0: next to the max term 1 of a softmax line such terms are
 * far below any ulp of the sum. */
static void dd_exp_scaled(const double ln2[3], double dh, double dl, double *rh, double *rl,
                          int *ret_k)
{
    *rh = *rl = 0;
    *ret_k = 0;
    if (dh < -746)
        return;
    double k = nearbyint(dh / ln2[0]), p1, e1, p2, e2;
    two_prod(k, ln2[0], &p1, &e1);
    two_prod(k, ln2[1], &p2, &e2);
    double r = dh - p1, rlo = 0; /* exact: Sterbenz, or k = 0 */
    acc_add(&r, &rlo, dl);
    acc_add(&r, &rlo, -e1);
    acc_add(&r, &rlo, -p2);
    acc_add(&r, &rlo, -e2 - k * ln2[2]);
    r = ldexp(r, -8);
    rlo = ldexp(rlo, -8);
    double qh = 1, ql = 0;
    for (int i = 10; i >= 2; i--) { /* q = 1 + r q / i */
        dd_mul(r, rlo, qh, ql, &qh, &ql);
        dd_div_d(qh, ql, i, &qh, &ql);
        dd_add(1, 0, qh, ql, &qh, &ql);
    }
    double ph, pl;
    dd_mul(r, rlo, qh, ql, &ph, &pl); /* expm1(r') */
    for (int i = 0; i < 8; i++) {
        double th, tl;
        dd_add(ph, pl, 2, 0, &th, &tl);
        dd_mul(ph, pl, th, tl, &ph, &pl);
    }
    dd_add(1, 0, ph, pl, rh, rl);
    *ret_k = (int)k;
}

/* e^d = dd_exp_scaled's pair times 2^k. */
static void dd_exp(const double ln2[3], double dh, double dl, double *rh, double *rl)
{
    int k;
    dd_exp_scaled(ln2, dh, dl, rh, rl, &k);
    *rh = ldexp(*rh, k);
    *rl = ldexp(*rl, k);
}

static void store_dd(ctx *c, int64_t l, int64_t k, bool removes, double hi, double lo, nv_mag abs)
{
    c->oh->data[nvo_line_out_off(c->L, c->oh, removes, l, k)] = hi;
    if (c->ol)
        c->ol->data[nvo_line_out_off(c->L, c->ol, removes, l, k)] = isfinite(hi) ? lo : 0;
    nvo_line_put_mags(c->o, c->L, removes, l, k, abs, c->peak);
}

/* dd_add, or the plain IEEE sum when that overflows (the exact value then
 * overflows fp64 too; lo = 0). */
static void add_dd(double ah, double al, double bh, double bl, double *rh, double *rl)
{
    double plain = ah + bh;
    if (!isfinite(plain) || !isfinite(al) || !isfinite(bl)) {
        *rh = plain;
        *rl = 0;
        return;
    }
    dd_add(ah, al, bh, bl, rh, rl);
    if (!isfinite(*rh)) {
        *rh = plain;
        *rl = 0;
    }
}

/* e_j = exp(x_j - m) into c->e (hi, lo interleaved), s = sum e_j exactly (of the
 * pairs) into (*sh, *sl); returns W = sum p_j |x_j - m|. */
static double exp_sum(ctx *c, int64_t n, double m, double *sh, double *sl)
{
    for (int64_t j = 0; j < n; j++) {
        double dh, dl;
        two_sum(c->x[j], -m, &dh, &dl); /* exact unless x_j = -Inf (then e_j = 0) */
        if (isinf(dh))
            c->e[2 * j] = c->e[2 * j + 1] = 0;
        else
            dd_exp(c->ln2, dh, dl, &c->e[2 * j], &c->e[2 * j + 1]);
    }
    nvo_sum_exact(c->e, 2 * n, sh, sl, NULL);
    c->peak = nv_mag_from_d(*sh); /* the sum of exponentials, at most n */
    double w = 0;
    for (int64_t j = 0; j < n; j++) {
        double p = c->e[2 * j] / *sh;
        if (p > 0) /* 0 * Inf (an underflowed term far below m) contributes 0 */
            w += p * fabs(c->x[j] - m);
    }
    return w;
}

/* ln s for s = sh + sl in [1, n], through MPFR at P bits, as a pair. */
static void log_dd(ctx *c, double sh, double sl, double *lh, double *ll)
{
    mpfr_set_d(c->t, sh, MPFR_RNDN);
    mpfr_add_d(c->t, c->t, sl, MPFR_RNDN); /* exact at P bits */
    mpfr_log(c->t, c->t, MPFR_RNDN);
    nvo_mp_split(c->t, c->u, lh, ll);
}

static void softmax_line(ctx *c, int64_t l)
{
    int64_t n = c->L->len;
    double m, sh, sl, lh, ll;
    c->peak = (nv_mag){0, 0};
    if (scan(c->x, n, &m)) {
        for (int64_t k = 0; k < n; k++)
            store_dd(c, l, k, false, NAN, 0, (nv_mag){NAN, 0});
        return;
    }
    double w = exp_sum(c, n, m, &sh, &sl);
    bool logsm = c->id == NVO_LOG_SOFTMAX;
    if (logsm)
        log_dd(c, sh, sl, &lh, &ll);
    for (int64_t k = 0; k < n; k++) {
        double dh, dl, yh, yl;
        two_sum(c->x[k], -m, &dh, &dl);
        if (logsm) {
            add_dd(dh, dl, -lh, -ll, &yh, &yl);
            store_dd(c, l, k, false, yh, yl, nv_mag_from_d(fabs(dh) + fabs(lh) + 1 + w));
        } else {
            if (c->e[2 * k] < 0x1p-960 && !isinf(dh)) { /* subnormal-bound: round once */
                int ek;
                dd_exp_scaled(c->ln2, dh, dl, &yh, &yl, &ek);
                dd_div(yh, yl, sh, sl, &yh, &yl);
                yh = ldexp(yh, ek);
                yl = ldexp(yl, ek);
            } else
                dd_div(c->e[2 * k], c->e[2 * k + 1], sh, sl, &yh, &yl);
            store_dd(c, l, k, false, yh, yl, nv_mag_from_d(yh > 0 ? yh * (1 + fabs(dh) + w) : 0));
        }
    }
}

/* logsumexp of the line as (*rh, *rl); returns its abs_sum (without |x_target|). */
static double lse(ctx *c, double *rh, double *rl)
{
    int64_t n = c->L->len;
    double m, sh, sl, lh, ll;
    int sp = scan(c->x, n, &m);
    *rl = 0;
    c->peak = (nv_mag){0, 0};
    if (sp) {
        *rh = sp == 1 ? NAN : sp == 2 ? INFINITY : -INFINITY;
        return fabs(*rh);
    }
    double w = exp_sum(c, n, m, &sh, &sl);
    log_dd(c, sh, sl, &lh, &ll);
    add_dd(m, 0, lh, ll, rh, rl);
    return fabs(m) + fabs(lh) + 1 + w;
}

static int ce_line(ctx *c, int64_t l)
{
    const nv_tensor *tg = c->in[1];
    double tv = tg->data[tg->offset + l * tg->strides[0]];
    if (!(tv >= 0 && tv < (double)c->L->len))
        return NV_E_INVALID;
    double xt = c->x[(int64_t)tv], h, lo;
    /* lse's scale and |x_target| may together exceed fp64's range (both near
     * its max) where the loss does not: added as magnitudes. */
    nv_mag abs = nv_mag_add(nv_mag_from_d(lse(c, &h, &lo)), nv_mag_from_d(xt));
    add_dd(h, lo, -xt, 0, &h, &lo);
    if (!c->a->reduction_mean) {
        store_dd(c, l, 0, true, h, lo, abs);
        return 0;
    }
    abs = nv_mag_add(abs, nv_mag_from_d(h));
    mpfr_add_d(c->acc, c->acc, h, MPFR_RNDN);
    if (isfinite(h))
        mpfr_add_d(c->acc, c->acc, lo, MPFR_RNDN);
    mp_add_mag(c->acc_abs, abs, c->t);
    mp_add_mag(c->acc_peak, nv_mag_from_d(h), c->t); /* the mean's sum of losses */
    return 0;
}

static double param(const nv_tensor *w, int64_t k)
{
    return w->data[w->offset + k * w->strides[0]];
}

/* layer_norm: y = (x - mean) / sqrt(var + eps) w + b, population variance;
 * rms_norm: y = x / sqrt(mean(x^2) + eps) w. */
static void norm_line(ctx *c, int64_t l)
{
    int64_t n = c->L->len;
    bool ln = c->id == NVO_LAYER_NORM;
    bool bad = false;
    for (int64_t k = 0; k < n; k++)
        bad |= !isfinite(c->x[k]);
    c->peak = (nv_mag){0, 0};
    if (bad) {
        for (int64_t k = 0; k < n; k++)
            store_d(c, l, k, false, NAN);
        return;
    }
    mpfr_t S, Q, N, sq, ms;
    mpfr_inits2(64, S, Q, N, sq, (mpfr_ptr)0);
    mpfr_init2(ms, P);
    nvo_mp_moments(c->x, n, S, Q);
    /* c->s = mean (0 for rms_norm); c->acc = var (layer_norm) or mean(x^2). MPFR
     * all the way: sum x^2 of values near fp64's max exceeds fp64's range. */
    mpfr_div_si(c->acc, Q, (long)n, MPFR_RNDN);
    mpfr_set(ms, c->acc, MPFR_RNDN);
    mpfr_set_zero(c->s, 1);
    if (ln) {
        mpfr_prec_t pn = 2 * mpfr_get_prec(S) + 8;
        mpfr_set_prec(N, pn);
        mpfr_set_prec(sq, pn);
        mpfr_mul_si(N, Q, (long)n, MPFR_RNDN); /* exact */
        mpfr_sqr(sq, S, MPFR_RNDN);            /* exact */
        mpfr_sub(N, N, sq, MPFR_RNDN);         /* exact: n^2 var */
        mpfr_div_si(c->acc, N, (long)n, MPFR_RNDN);
        /* the accumulations: sum x and sum (x - mean)^2 = n var */
        double sh, sl;
        nv_mag sabs, s2 = nv_mag_from_mpfr(c->acc);
        nvo_sum_exact(c->x, n, &sh, &sl, &sabs);
        c->peak = nv_mag_cmp(sabs, s2) >= 0 ? sabs : s2;
        mpfr_div_si(c->acc, c->acc, (long)n, MPFR_RNDN);
        mpfr_div_si(c->s, S, (long)n, MPFR_RNDN);
    } else {
        c->peak = nv_mag_from_mpfr(Q); /* sum x^2 */
    }
    mpfr_clears(S, Q, N, sq, (mpfr_ptr)0);
    mpfr_add_d(c->acc, c->acc, c->a->eps, MPFR_RNDN);
    mpfr_rec_sqrt(c->acc, c->acc, MPFR_RNDN);
    /* kappa = max(1, rms(x) / sqrt(var + eps)), in MPFR for the same reason */
    mpfr_sqrt(ms, ms, MPFR_RNDN);
    mpfr_mul(ms, ms, c->acc, MPFR_RNDN);
    nv_mag kappa = nv_mag_from_mpfr(ms);
    if (nv_mag_cmp(kappa, nv_mag_from_d(1)) < 0)
        kappa = nv_mag_from_d(1);
    mpfr_clear(ms);
    for (int64_t k = 0; k < n; k++) {
        double w = param(c->in[1], k), b = ln ? param(c->in[2], k) : 0;
        mpfr_set_d(c->t, c->x[k], MPFR_RNDN);
        mpfr_sub(c->t, c->t, c->s, MPFR_RNDN);
        mpfr_mul(c->t, c->t, c->acc, MPFR_RNDN);
        double xhat = mpfr_get_d(c->t, MPFR_RNDN);
        mpfr_mul_d(c->t, c->t, w, MPFR_RNDN);
        if (ln)
            mpfr_add_d(c->t, c->t, b, MPFR_RNDN);
        /* layer_norm: |w| kappa (|xhat| + 1) + |b|, which may exceed fp64's range
         * where y does not (w and b near its max) */
        nv_mag abs = ln ? nv_mag_add(nv_mag_mul(nv_mag_mul(nv_mag_from_d(w), kappa),
                                                nv_mag_from_d(fabs(xhat) + 1)),
                                     nv_mag_from_d(b))
                        : nv_mag_from_mpfr(c->t);
        store(c, l, k, false, c->t, abs);
    }
}

static int run_lines(ctx *c)
{
    for (int64_t l = 0; l < c->L->n_lines; l++) {
        nvo_line_gather(c->L, l, c->x);
        switch (c->id) {
        case NVO_SOFTMAX:
        case NVO_LOG_SOFTMAX:
            softmax_line(c, l);
            break;
        case NVO_LOGSUMEXP: {
            double h, lo;
            double abs = lse(c, &h, &lo);
            store_dd(c, l, 0, true, h, lo, nv_mag_from_d(abs));
            break;
        }
        case NVO_CROSS_ENTROPY: {
            int r = ce_line(c, l);
            if (r < 0)
                return r;
            break;
        }
        default:
            norm_line(c, l);
            break;
        }
    }
    if (c->id == NVO_CROSS_ENTROPY && c->a->reduction_mean) {
        double nn = (double)c->L->n_lines;
        mpfr_div_d(c->acc, c->acc, nn, MPFR_RNDN);
        mpfr_div_d(c->acc_abs, c->acc_abs, nn, MPFR_RNDN);
        double hi, lo;
        nvo_mp_split(c->acc, c->u, &hi, &lo);
        c->oh->data[nv_tensor_offset_linear(c->oh, 0)] = hi;
        if (c->ol)
            c->ol->data[nv_tensor_offset_linear(c->ol, 0)] = lo;
        const nv_ref_out *o = c->o;
        if (o->abs_sum)
            nvo_put_abs(o, nv_tensor_offset_linear(o->abs_sum, 0),
                        o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, 0) : 0,
                        nv_mag_from_mpfr(c->acc_abs));
        if (o->peak)
            nvo_put_peak(o, nv_tensor_offset_linear(o->peak, 0), nv_mag_from_mpfr(c->acc_peak));
    }
    return 0;
}

int nvo_ref_composed(int id, const nv_op_attrs *a, const nvo_lines *L, const nv_tensor *const *in,
                     const nv_ref_out *o)
{
    ctx c = {.id = id, .a = a, .L = L, .in = in, .o = o, .oh = o->hi, .ol = o->lo};
    int64_t n = L->len;
    int r = NV_E_NOMEM;
    c.x = malloc(sizeof(double) * (size_t)(n + 1));
    c.e = malloc(sizeof(double) * (size_t)(2 * n + 2));
    if (!c.x || !c.e) {
        free(c.x);
        free(c.e);
        return r;
    }
    mpfr_inits2(P, c.s, c.t, c.u, (mpfr_ptr)0);
    mpfr_inits2(P + 64, c.acc, c.acc_abs, c.acc_peak, (mpfr_ptr)0);
    mpfr_set_zero(c.acc, 1);
    mpfr_set_zero(c.acc_abs, 1);
    mpfr_set_zero(c.acc_peak, 1);
    /* ln 2 to 159 bits (mpfr_const_log2 at 300 bits, split greedily). */
    c.ln2[0] = 0x1.62e42fefa39efp-1;
    c.ln2[1] = 0x1.abc9e3b39803fp-56;
    c.ln2[2] = 0x1.7b57a079a1934p-111;
    r = run_lines(&c);
    mpfr_clears(c.s, c.t, c.u, c.acc, c.acc_abs, c.acc_peak, (mpfr_ptr)0);
    free(c.x);
    free(c.e);
    return r;
}
