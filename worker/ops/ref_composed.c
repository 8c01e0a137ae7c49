/* References of the composed reductions, evaluated in MPFR at 128 bits from the
 * exact inputs (accuracy and abs_sum: see the comment at the top of ref_reduce.c):
 * logsumexp, softmax, log_softmax, cross_entropy, layer_norm, rms_norm.
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
#include "ops_internal.h"

#define P 128

typedef struct ctx {
    int id;
    const nv_op_attrs *a;
    const nvo_lines *L;
    const nv_tensor *const *in;
    nv_tensor *oh, *ol, *oa;
    double *x;   /* the current line */
    double *abs; /* per element abs_sum of the current line */
    mpfr_t *e;   /* per element scratch at P bits */
    mpfr_t s, t, u, acc, acc_abs;
} ctx;

static void store(ctx *c, int64_t l, int64_t k, bool removes, mpfr_srcptr v, double abs)
{
    double hi, lo;
    nvo_mp_split(v, c->u, &hi, &lo);
    c->oh->data[nvo_line_out_off(c->L, c->oh, removes, l, k)] = hi;
    if (c->ol)
        c->ol->data[nvo_line_out_off(c->L, c->ol, removes, l, k)] = lo;
    if (c->oa)
        c->oa->data[nvo_line_out_off(c->L, c->oa, removes, l, k)] = abs;
}

static void store_d(ctx *c, int64_t l, int64_t k, bool removes, double v)
{
    mpfr_set_d(c->t, v, MPFR_RNDN);
    store(c, l, k, removes, c->t, fabs(v));
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

/* s = sum exp(x_j - m) into c->s, e_j = exp(x_j - m); W = sum p_j |x_j - m|. */
static double exp_sum(ctx *c, int64_t n, double m)
{
    mpfr_set_zero(c->s, 1);
    for (int64_t j = 0; j < n; j++) {
        mpfr_set_d(c->e[j], c->x[j], MPFR_RNDN);
        mpfr_sub_d(c->e[j], c->e[j], m, MPFR_RNDN);
        mpfr_exp(c->e[j], c->e[j], MPFR_RNDN);
        mpfr_add(c->s, c->s, c->e[j], MPFR_RNDN);
    }
    double sd = mpfr_get_d(c->s, MPFR_RNDN), w = 0;
    for (int64_t j = 0; j < n; j++) {
        double p = mpfr_get_d(c->e[j], MPFR_RNDN) / sd;
        if (p > 0) /* 0 * Inf (an underflowed term far below m) contributes 0 */
            w += p * fabs(c->x[j] - m);
    }
    return w;
}

static void softmax_line(ctx *c, int64_t l)
{
    int64_t n = c->L->len;
    double m;
    int sp = scan(c->x, n, &m);
    bool logsm = c->id == NVO_LOG_SOFTMAX;
    if (sp) {
        for (int64_t k = 0; k < n; k++)
            store_d(c, l, k, false, NAN);
        return;
    }
    double w = exp_sum(c, n, m);
    mpfr_log(c->acc, c->s, MPFR_RNDN);
    double logs = mpfr_get_d(c->acc, MPFR_RNDN), sd = mpfr_get_d(c->s, MPFR_RNDN);
    for (int64_t k = 0; k < n; k++) {
        double dk = fabs(c->x[k] - m);
        if (logsm) {
            mpfr_set_d(c->t, c->x[k], MPFR_RNDN);
            mpfr_sub_d(c->t, c->t, m, MPFR_RNDN);
            mpfr_sub(c->t, c->t, c->acc, MPFR_RNDN);
            store(c, l, k, false, c->t, dk + fabs(logs) + 1 + w);
        } else {
            mpfr_div(c->t, c->e[k], c->s, MPFR_RNDN);
            double y = mpfr_get_d(c->e[k], MPFR_RNDN) / sd;
            store(c, l, k, false, c->t, y > 0 ? y * (1 + dk + w) : 0);
        }
    }
}

/* logsumexp of the line into c->t; returns its abs_sum (without |x_target|). */
static double lse(ctx *c, double *ret_special)
{
    int64_t n = c->L->len;
    double m;
    int sp = scan(c->x, n, &m);
    *ret_special = 0;
    if (sp) {
        *ret_special = sp == 1 ? NAN : sp == 2 ? INFINITY : -INFINITY;
        return fabs(*ret_special);
    }
    double w = exp_sum(c, n, m);
    mpfr_log(c->t, c->s, MPFR_RNDN);
    double logs = mpfr_get_d(c->t, MPFR_RNDN);
    mpfr_add_d(c->t, c->t, m, MPFR_RNDN);
    return fabs(m) + fabs(logs) + 1 + w;
}

static int ce_line(ctx *c, int64_t l)
{
    const nv_tensor *tg = c->in[1];
    double tv = tg->data[tg->offset + l * tg->strides[0]];
    if (!(tv >= 0 && tv < (double)c->L->len))
        return NV_E_INVALID;
    double xt = c->x[(int64_t)tv], special;
    double abs = lse(c, &special) + fabs(xt);
    if (special != 0 || !isfinite(xt)) {
        double v = (special != 0 ? special : mpfr_get_d(c->t, MPFR_RNDN)) - xt;
        mpfr_set_d(c->t, v, MPFR_RNDN);
    } else
        mpfr_sub_d(c->t, c->t, xt, MPFR_RNDN);
    if (!c->a->reduction_mean) {
        store(c, l, 0, true, c->t, abs);
        return 0;
    }
    abs += fabs(mpfr_get_d(c->t, MPFR_RNDN));
    mpfr_add(c->acc, c->acc, c->t, MPFR_RNDN);
    mpfr_add_d(c->acc_abs, c->acc_abs, abs, MPFR_RNDN);
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
    if (bad) {
        for (int64_t k = 0; k < n; k++)
            store_d(c, l, k, false, NAN);
        return;
    }
    mpfr_t S, Q, N, sq;
    mpfr_inits2(64, S, Q, N, sq, (mpfr_ptr)0);
    nvo_mp_moments(c->x, n, S, Q);
    /* c->s = mean (0 for rms_norm); c->acc = var (layer_norm) or mean(x^2). */
    mpfr_div_si(c->acc, Q, (long)n, MPFR_RNDN);
    double rms = sqrt(mpfr_get_d(c->acc, MPFR_RNDN));
    mpfr_set_zero(c->s, 1);
    if (ln) {
        mpfr_prec_t pn = 2 * mpfr_get_prec(S) + 8;
        mpfr_set_prec(N, pn);
        mpfr_set_prec(sq, pn);
        mpfr_mul_si(N, Q, (long)n, MPFR_RNDN); /* exact */
        mpfr_sqr(sq, S, MPFR_RNDN);            /* exact */
        mpfr_sub(N, N, sq, MPFR_RNDN);         /* exact: n^2 var */
        mpfr_div_si(c->acc, N, (long)n, MPFR_RNDN);
        mpfr_div_si(c->acc, c->acc, (long)n, MPFR_RNDN);
        mpfr_div_si(c->s, S, (long)n, MPFR_RNDN);
    }
    mpfr_clears(S, Q, N, sq, (mpfr_ptr)0);
    mpfr_add_d(c->acc, c->acc, c->a->eps, MPFR_RNDN);
    mpfr_rec_sqrt(c->acc, c->acc, MPFR_RNDN);
    double rstd = mpfr_get_d(c->acc, MPFR_RNDN);
    double kappa = fmax(1, rms * rstd);
    for (int64_t k = 0; k < n; k++) {
        double w = param(c->in[1], k), b = ln ? param(c->in[2], k) : 0;
        mpfr_set_d(c->t, c->x[k], MPFR_RNDN);
        mpfr_sub(c->t, c->t, c->s, MPFR_RNDN);
        mpfr_mul(c->t, c->t, c->acc, MPFR_RNDN);
        double xhat = mpfr_get_d(c->t, MPFR_RNDN);
        mpfr_mul_d(c->t, c->t, w, MPFR_RNDN);
        if (ln)
            mpfr_add_d(c->t, c->t, b, MPFR_RNDN);
        double y = mpfr_get_d(c->t, MPFR_RNDN);
        double abs = ln ? fabs(w) * kappa * (fabs(xhat) + 1) + fabs(b) : fabs(y);
        store(c, l, k, false, c->t, abs);
    }
}

static int run_lines(ctx *c)
{
    for (int64_t l = 0; l < c->L->n_lines; l++) {
        nvo_line_gather(c->L, l, c->x);
        double special;
        switch (c->id) {
        case NVO_SOFTMAX:
        case NVO_LOG_SOFTMAX:
            softmax_line(c, l);
            break;
        case NVO_LOGSUMEXP: {
            double abs = lse(c, &special);
            if (special != 0)
                mpfr_set_d(c->t, special, MPFR_RNDN);
            store(c, l, 0, true, c->t, abs);
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
        if (c->oa)
            c->oa->data[nv_tensor_offset_linear(c->oa, 0)] = mpfr_get_d(c->acc_abs, MPFR_RNDN);
    }
    return 0;
}

int nvo_ref_composed(int id, const nv_op_attrs *a, const nvo_lines *L, const nv_tensor *const *in,
                     nv_tensor *out_hi, nv_tensor *out_lo, nv_tensor *abs_sum)
{
    ctx c = {.id = id, .a = a, .L = L, .in = in, .oh = out_hi, .ol = out_lo, .oa = abs_sum};
    int64_t n = L->len;
    int r = NV_E_NOMEM;
    c.x = malloc(sizeof(double) * (size_t)(n + 1));
    c.e = malloc(sizeof(mpfr_t) * (size_t)(n + 1));
    if (!c.x || !c.e) {
        free(c.x);
        free(c.e);
        return r;
    }
    for (int64_t j = 0; j < n; j++)
        mpfr_init2(c.e[j], P);
    mpfr_inits2(P, c.s, c.t, c.u, (mpfr_ptr)0);
    mpfr_inits2(P + 64, c.acc, c.acc_abs, (mpfr_ptr)0);
    mpfr_set_zero(c.acc, 1);
    mpfr_set_zero(c.acc_abs, 1);
    r = run_lines(&c);
    for (int64_t j = 0; j < n; j++)
        mpfr_clear(c.e[j]);
    mpfr_clears(c.s, c.t, c.u, c.acc, c.acc_abs, (mpfr_ptr)0);
    free(c.x);
    free(c.e);
    return r;
}
