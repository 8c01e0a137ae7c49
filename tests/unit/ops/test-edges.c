/* Domain edges lie at the dtype's real thresholds: for each regime change the
 * edge list holds two adjacent dtype values on either side of it, decided here by
 * MPFR at 200 bits against the threshold of IEEE 754-2019 round-to-nearest-even
 * (§4.3.1) and overflow (§7.4) in the dtype:
 *   overflow at 2^emax (2 - 2^-p), rounds to 1 from below at 1 - 2^-(p+1),
 *   rounds to 0 at min_subnormal / 2. */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "tests/unit/tap.h"
#include "core/ops/catalog.h"

typedef int (*mp_fn)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);

static int mp_sigmoid(mpfr_ptr r, mpfr_srcptr x, mpfr_rnd_t rnd)
{
    mpfr_neg(r, x, rnd);
    mpfr_exp(r, r, rnd);
    mpfr_add_ui(r, r, 1, rnd);
    return mpfr_ui_div(r, 1, r, rnd);
}

static int mp_recip(mpfr_ptr r, mpfr_srcptr x, mpfr_rnd_t rnd)
{
    return mpfr_ui_div(r, 1, x, rnd);
}

/* gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2; silu(x) = x sigmoid(x).
 * Negated: for x < 0 they are -x Phi(x) > 0, compared with min_subnormal / 2. */
static int mp_neg_gelu(mpfr_ptr r, mpfr_srcptr x, mpfr_rnd_t rnd)
{
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(r));
    mpfr_set_ui(t, 2, rnd);
    mpfr_sqrt(t, t, rnd);
    mpfr_div(t, x, t, rnd);
    mpfr_neg(t, t, rnd);
    mpfr_erfc(t, t, rnd);
    mpfr_div_2ui(t, t, 1, rnd);
    mpfr_mul(r, x, t, rnd);
    mpfr_clear(t);
    return mpfr_neg(r, r, rnd);
}

static int mp_neg_silu(mpfr_ptr r, mpfr_srcptr x, mpfr_rnd_t rnd)
{
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(r));
    mp_sigmoid(t, x, rnd);
    mpfr_mul(r, x, t, rnd);
    mpfr_clear(t);
    return mpfr_neg(r, r, rnd);
}

/* Compare f(x) with the threshold t: -1 below, 0 equal, +1 above. */
static int side(mp_fn f, double x, mpfr_srcptr t)
{
    mpfr_t v;
    mpfr_init2(v, 200);
    mpfr_set_d(v, x, MPFR_RNDN);
    f(v, v, MPFR_RNDN);
    int c = mpfr_cmp(v, t);
    mpfr_clear(v);
    return c > 0 ? 1 : c < 0 ? -1 : 0;
}

static double step(nv_dtype dt, double x, int dir)
{
    nv_round_mode m = {dir > 0 ? NV_ROUND_UP : NV_ROUND_DOWN, false, false};
    return nv_dtype_round(dt, nextafter(x, dir > 0 ? INFINITY : -INFINITY), &m, 0);
}

/* Some edge a has its dtype successor b in the list too, with f(a) on one side of
 * t and f(b) on the other (or at it, for ties). */
static bool brackets(const double *e, int n, nv_dtype dt, mp_fn f, mpfr_srcptr t)
{
    for (int i = 0; i < n; i++) {
        double b = step(dt, e[i], 1);
        bool has_b = false;
        for (int j = 0; j < n; j++)
            has_b |= e[j] == b;
        if (!has_b)
            continue;
        int sa = side(f, e[i], t), sb = side(f, b, t);
        if (sa != sb)
            return true;
    }
    return false;
}

static int get(const char *op, nv_dtype dt, double *e)
{
    return nv_op_find(op)->edges(dt, e, 64);
}

static void threshold_overflow(nv_dtype dt, mpfr_ptr t)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    mpfr_set_ui_2exp(t, 2, di->emax, MPFR_RNDN);
    mpfr_t u;
    mpfr_init2(u, 200);
    mpfr_set_ui_2exp(u, 1, di->emax - di->mant_bits - 1, MPFR_RNDN);
    mpfr_sub(t, t, u, MPFR_RNDN);
    mpfr_clear(u);
}

static void threshold_one(nv_dtype dt, mpfr_ptr t)
{
    mpfr_set_ui(t, 1, MPFR_RNDN);
    mpfr_t u;
    mpfr_init2(u, 200);
    mpfr_set_ui_2exp(u, 1, -(nv_dtype_get(dt)->mant_bits + 2), MPFR_RNDN);
    mpfr_sub(t, t, u, MPFR_RNDN);
    mpfr_clear(u);
}

/* tanh: every binade of the result below 1 (1 - tanh x = 2^-k, k = 2 .. p) is
 * bracketed, and a tanh that returns exactly +-1 for |x| > 4 is more than 1 ulp
 * off at some edge (by MPFR: |1 - tanh x| / ulp(tanh x), ulp = 2^-p below 1). */
static void tanh_regimes(nv_dtype dt)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    static double e[512];
    int n = nv_op_find("tanh")->edges(dt, e, 512);
    mpfr_t t, v;
    mpfr_inits2(200, t, v, (mpfr_ptr)0);
    bool all = true;
    for (int k = 2; k <= di->mant_bits + 1; k++) {
        mpfr_set_ui(t, 1, MPFR_RNDN);
        mpfr_set_ui_2exp(v, 1, -k, MPFR_RNDN);
        mpfr_sub(t, t, v, MPFR_RNDN);
        all = all && brackets(e, n, dt, mpfr_tanh, t);
    }
    tap_ok(all, "%s tanh: each crossing 1 - tanh x = 2^-k bracketed (%d edges)", nv_dtype_name(dt),
           n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        if (!(fabs(e[i]) > 4))
            continue;
        mpfr_set_d(v, fabs(e[i]), MPFR_RNDN);
        mpfr_tanh(v, v, MPFR_RNDN);
        mpfr_ui_sub(v, 1, v, MPFR_RNDN);
        mpfr_mul_2si(v, v, di->mant_bits + 1, MPFR_RNDN);
        worst = fmax(worst, mpfr_get_d(v, MPFR_RNDN));
    }
    tap_ok(worst > 1, "%s tanh: returning +-1 for |x| > 4 is %.4g ulps off at an edge",
           nv_dtype_name(dt), worst);
    mpfr_clears(t, v, (mpfr_ptr)0);
}

int main(void)
{
    static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16, NV_DT_FP64};
    mpfr_t t;
    mpfr_init2(t, 200);
    double e[64];
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        nv_dtype dt = dts[d];
        const nv_dtype_info *di = nv_dtype_get(dt);
        const char *dn = nv_dtype_name(dt);
        int n = get("exp", dt, e);
        threshold_overflow(dt, t);
        tap_ok(brackets(e, n, dt, mpfr_exp, t), "%s exp: edges bracket the overflow threshold", dn);
        mpfr_set_d(t, di->min_subnormal, MPFR_RNDN);
        mpfr_div_2ui(t, t, 1, MPFR_RNDN);
        tap_ok(brackets(e, n, dt, mpfr_exp, t), "%s exp: edges bracket underflow to zero", dn);
        mpfr_set_d(t, di->min_normal, MPFR_RNDN);
        tap_ok(brackets(e, n, dt, mpfr_exp, t), "%s exp: edges bracket the subnormal range", dn);
        n = get("exp2", dt, e);
        threshold_overflow(dt, t);
        tap_ok(brackets(e, n, dt, mpfr_exp2, t), "%s exp2: overflow bracketed", dn);
        n = get("tanh", dt, e);
        threshold_one(dt, t);
        tap_ok(brackets(e, n, dt, mpfr_tanh, t), "%s tanh: saturation to 1 bracketed", dn);
        n = get("erf", dt, e);
        tap_ok(brackets(e, n, dt, mpfr_erf, t), "%s erf: saturation to 1 bracketed", dn);
        n = get("sigmoid", dt, e);
        tap_ok(brackets(e, n, dt, mp_sigmoid, t), "%s sigmoid: saturation to 1 bracketed", dn);
        mpfr_set_d(t, di->min_subnormal, MPFR_RNDN);
        mpfr_div_2ui(t, t, 1, MPFR_RNDN);
        tap_ok(brackets(e, n, dt, mp_sigmoid, t), "%s sigmoid: underflow to 0 bracketed", dn);
        n = get("expm1", dt, e);
        mpfr_set_si(t, -1, MPFR_RNDN);
        mpfr_t h;
        mpfr_init2(h, 200);
        mpfr_set_ui_2exp(h, 1, -(di->mant_bits + 2), MPFR_RNDN);
        mpfr_add(t, t, h, MPFR_RNDN); /* -1 + 2^-(p+1): below it expm1 rounds to -1 */
        tap_ok(brackets(e, n, dt, mpfr_expm1, t), "%s expm1: saturation to -1 bracketed", dn);
        mpfr_set_d(h, di->min_subnormal, MPFR_RNDN);
        mpfr_div_2ui(h, h, 1, MPFR_RNDN); /* |gelu(x)| <= min_subnormal / 2 rounds to -0 */
        n = get("gelu", dt, e);
        tap_ok(brackets(e, n, dt, mp_neg_gelu, h), "%s gelu: underflow to 0 for x < 0 bracketed",
               dn);
        n = get("silu", dt, e);
        tap_ok(brackets(e, n, dt, mp_neg_silu, h), "%s silu: underflow to 0 for x < 0 bracketed",
               dn);
        mpfr_clear(h);
        n = get("reciprocal", dt, e);
        threshold_overflow(dt, t);
        tap_ok(brackets(e, n, dt, mp_recip, t), "%s reciprocal: overflow of 1/x bracketed", dn);
        n = get("log", dt, e);
        bool one = false, sub = false;
        for (int i = 0; i < n; i++) {
            one |= e[i] == step(dt, 1, 1);
            sub |= e[i] == di->min_subnormal;
        }
        tap_ok(one && sub, "%s log: 1 + ulp and the smallest subnormal are edges", dn);
        int bad = 0, total = 0;
        size_t nops;
        const nv_op_def *all = nv_op_all(&nops);
        for (size_t i = 0; i < nops; i++) {
            n = all[i].edges(dt, e, 64);
            total += n;
            for (int k = 0; k < n; k++)
                bad += !isnan(e[k]) && nv_dtype_round(dt, e[k], &NV_ROUND_DEFAULT, 0) != e[k];
        }
        tap_ok(bad == 0 && total > 100, "%s: all %d edges are representable", dn, total);
    }
    /* trig: the fp32 neighbours of pi/2 are edges. */
    int n = get("sin", NV_DT_FP32, e);
    bool pi2 = false;
    for (int i = 0; i < n; i++)
        pi2 |= e[i] == (double)(float)M_PI_2;
    tap_ok(pi2, "sin fp32: RN(pi/2) is an edge");
    tap_ok(get("exp", NV_DT_FP32, e) > 0 && nv_op_find("exp")->edges(NV_DT_FP32, e, 3) == 3,
           "edges respect max");
    mpfr_clear(t);
    tanh_regimes(NV_DT_FP32);
    tanh_regimes(NV_DT_FP16);
    tanh_regimes(NV_DT_FP64);
    return tap_done();
}
