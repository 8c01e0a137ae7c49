/* MPFR side of the reference math: evaluate f(x) to >= 128 bits together with the
 * side of the exact value, then round that to a dtype or split it into a pair.
 *
 * The exact value y is described by (b, dir): b an MPFR number and dir the sign
 * of y - b, where dir == 0 means either y == b or b is known to lie strictly on
 * the same side as y of every number of 54 significant bits. Every rounding
 * boundary of every format here (representable values and midpoints, also in
 * the subnormal ranges) has at most 54 significant bits, so rounding (b, dir)
 * gives the rounding of y:
 *   - MPFR's own functions are correctly rounded to nearest at 128 bits; their
 *     ternary value gives dir, and no 54-bit number lies strictly between b and
 *     y (it would be a 128-bit number nearer to y than b);
 *   - compositions (sigmoid, silu, gelu) are evaluated with a running error
 *     bound and accepted once mpfr_can_round says that no 54-bit number lies in
 *     the error interval (Ziv's loop), raising the precision otherwise.
 * Where y lies far outside fp64's range (MPFR overflow or underflow, or a
 * composition that saturates) b is a stand-in that rounds like y in every
 * format: 2^(+-2^29), 2^-1200, or the saturation value with dir.
 *
 * MPFR variables live in one context per thread (freed by a pthread key
 * destructor when the thread exits). The exponent range is left alone unless a
 * caller narrowed it on this thread, in which case it is widened for the call and
 * restored. */
#include <errno.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdlib.h>

#include "refmath_internal.h"

typedef struct mctx {
    mpfr_t b, t, u, v, k, s;
} mctx;

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static _Thread_local mctx *tl_ctx;

static void ctx_destroy(void *p)
{
    mctx *c = p;
    mpfr_clears(c->b, c->t, c->u, c->v, c->k, c->s, (mpfr_ptr)0);
    free(c);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

void nv_ref_thread_done(void)
{
    if (tl_ctx) {
        (void)pthread_setspecific(ctx_key, NULL);
        mctx *c = tl_ctx;
        tl_ctx = NULL;
        ctx_destroy(c);
        return;
    }
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

static void ctx_key_make(void)
{
    (void)pthread_key_create(&ctx_key, ctx_destroy);
}

/* The thread's context, or c_stack initialised for this call (fallback when the
 * allocation fails; *ret_stack tells the caller to clear it). */
static mctx *ctx_get(mctx *c_stack, bool *ret_stack)
{
    *ret_stack = false;
    if (tl_ctx)
        return tl_ctx;
    pthread_once(&ctx_once, ctx_key_make);
    mctx *c = malloc(sizeof(*c));
    if (!c) {
        *ret_stack = true;
        c = c_stack;
    }
    mpfr_inits2(128, c->b, c->t, c->u, c->v, c->k, c->s, (mpfr_ptr)0);
    if (*ret_stack)
        return c;
    if (pthread_setspecific(ctx_key, c) != 0) {
        /* Cannot register the destructor: use it for this call only. */
        *c_stack = *c;
        free(c);
        *ret_stack = true;
        return c_stack;
    }
    tl_ctx = c;
    return c;
}

static void ctx_put(mctx *c, bool stack)
{
    if (stack)
        mpfr_clears(c->b, c->t, c->u, c->v, c->k, c->s, (mpfr_ptr)0);
}

/* MPFR's default exponent range (1 - 2^30 .. 2^30 - 1) is what the stand-ins and
 * thresholds below assume. */
#define RM_EMIN (1 - (1L << 30))
#define RM_EMAX ((1L << 30) - 1)

typedef struct erange {
    mpfr_exp_t emin, emax;
    bool changed;
} erange;

static void erange_enter(erange *e)
{
    e->emin = mpfr_get_emin();
    e->emax = mpfr_get_emax();
    e->changed = e->emin > RM_EMIN || e->emax < RM_EMAX;
    if (e->changed) {
        mpfr_set_emin(RM_EMIN);
        mpfr_set_emax(RM_EMAX);
    }
}

static void erange_leave(const erange *e)
{
    if (e->changed) {
        mpfr_set_emin(e->emin);
        mpfr_set_emax(e->emax);
    }
}

static int sgn(int t)
{
    return (t > 0) - (t < 0);
}

/* ---- MPFR's own functions: correctly rounded at 128 bits, dir from the ternary. */

static int eval_libm(nv_fn f, double x, double y, mpfr_ptr b, mctx *c)
{
    mpfr_set_prec(b, 128);
    mpfr_set_prec(c->t, 64);
    mpfr_set_d(c->t, x, MPFR_RNDN); /* exact: 64 >= 53 bits */
    int t;
    switch ((int)f) {
    case NV_FN_EXP:
        t = mpfr_exp(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_EXP2:
        t = mpfr_exp2(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_EXPM1:
        t = mpfr_expm1(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_LOG:
        t = mpfr_log(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_LOG2:
        t = mpfr_log2(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_LOG1P:
        t = mpfr_log1p(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_SIN:
        t = mpfr_sin(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_COS:
        t = mpfr_cos(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_TANH:
        t = mpfr_tanh(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_ERF:
        t = mpfr_erf(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_SQRT:
        t = mpfr_sqrt(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_RSQRT:
        t = mpfr_rec_sqrt(b, c->t, MPFR_RNDN);
        break;
    case NV_FN_RECIP:
        t = mpfr_ui_div(b, 1, c->t, MPFR_RNDN);
        break;
    default: /* RM_FN_POW */
        mpfr_set_prec(c->u, 64);
        mpfr_set_d(c->u, y, MPFR_RNDN);
        t = mpfr_pow(b, c->t, c->u, MPFR_RNDN);
        break;
    }
    int dir = -sgn(t);
    /* Overflow or underflow inside MPFR's range: keep a finite stand-in. */
    if (dir != 0 && mpfr_inf_p(b))
        mpfr_set_si_2exp(b, mpfr_signbit(b) ? -1 : 1, 1L << 29, MPFR_RNDN);
    else if (dir != 0 && mpfr_zero_p(b))
        mpfr_set_si_2exp(b, mpfr_signbit(b) ? -1 : 1, -(1L << 29), MPFR_RNDN);
    return dir;
}

/* ---- compositions ----
 * u = 2^-w below. Each helper leaves its result in r and returns E, a bound on
 * its relative error in units of u (every MPFR operation rounds to nearest, error
 * <= u relative; Higham §2.2 model). */

/* r = sigmoid(s) for s <= 0, as e/(1 + e), e = exp(s): exp u, 1 + e adds at most
 * u e/(1+e) + u <= 1.5u, the division u: E = 4 (Higham §3.1 running sums). */
static int sig_neg(mpfr_ptr r, mpfr_srcptr s, mctx *c)
{
    mpfr_set_prec(c->v, mpfr_get_prec(r));
    mpfr_exp(c->v, s, MPFR_RNDN);
    mpfr_add_ui(r, c->v, 1, MPFR_RNDN);
    mpfr_div(r, c->v, r, MPFR_RNDN);
    return 4;
}

/* s = 2 sqrt(2/pi) (x + 0.044715 x^3) for gelu_tanh. The constant 0.044715 is the
 * decimal number itself. k = sqrt(2/pi): pi u, 2/pi u, sqrt u/2 + u: 2u (rounded
 * up). x^3 2u, c x^3 4u, x + c x^3 (same signs) 5u, k (...) 8u; times 2 exact. */
static int gelu_tanh_arg(mpfr_ptr s, double x, mctx *c)
{
    mpfr_prec_t w = mpfr_get_prec(s);
    mpfr_set_prec(c->k, w);
    mpfr_set_prec(c->u, w);
    mpfr_const_pi(c->k, MPFR_RNDN);
    mpfr_ui_div(c->k, 2, c->k, MPFR_RNDN);
    mpfr_sqrt(c->k, c->k, MPFR_RNDN);
    mpfr_set_str(c->u, "0.044715", 10, MPFR_RNDN);
    mpfr_set_d(s, x, MPFR_RNDN);
    mpfr_mul_d(s, s, x, MPFR_RNDN);
    mpfr_mul_d(s, s, x, MPFR_RNDN);
    mpfr_mul(s, s, c->u, MPFR_RNDN);
    mpfr_add_d(s, s, x, MPFR_RNDN);
    mpfr_mul(s, s, c->k, MPFR_RNDN);
    mpfr_mul_2ui(s, s, 1, MPFR_RNDN);
    return 8;
}

/* Each composite is either computed directly (d = f(x) with error E u) or, where
 * f(x) = A - T with A exact and 0 <= T <= A/2, as T (error E u): then the
 * subtraction keeps the error below (E + 1) u of the result. */
typedef struct comp {
    bool tform; /* true: result is A - T */
    double a;
} comp;

static int eval_comp_once(nv_fn f, double x, mpfr_ptr r, comp *cp, mctx *c)
{
    mpfr_prec_t w = mpfr_get_prec(r);
    mpfr_set_prec(c->s, w);
    cp->tform = x > 0;
    cp->a = f == NV_FN_SIGMOID ? 1.0 : x;
    switch ((int)f) {
    case NV_FN_SIGMOID:
        /* x > 0: 1 - sigmoid(-x). */
        mpfr_set_d(c->s, -fabs(x), MPFR_RNDN);
        return sig_neg(r, c->s, c);
    case NV_FN_SILU: /* x > 0: x - x sigmoid(-x) */
        mpfr_set_d(c->s, -fabs(x), MPFR_RNDN);
        sig_neg(r, c->s, c);
        mpfr_mul_d(r, r, x, MPFR_RNDN);
        return 5;
    case NV_FN_GELU_ERF: {
        /* x/2 erfc(|x|/sqrt 2) is the tail for x > 0 and the value for x < 0.
         * sqrt 2 u, z 2u; erfc's condition number |z erfc'(z)/erfc(z)| is below
         * 2z^2 + 2z + 1 (A&S 7.1.13 lower bound on erfc), erfc itself u, times x
         * u: E = 2 kappa + 2. */
        mpfr_sqrt_ui(c->s, 2, MPFR_RNDN);
        mpfr_set_d(r, fabs(x), MPFR_RNDN);
        mpfr_div(c->s, r, c->s, MPFR_RNDN);
        double z = fabs(x) * 0.7071067811865476;
        mpfr_erfc(r, c->s, MPFR_RNDN);
        mpfr_mul_d(r, r, x, MPFR_RNDN);
        mpfr_div_2ui(r, r, 1, MPFR_RNDN);
        mpfr_abs(r, r, MPFR_RNDN);
        if (x < 0)
            mpfr_neg(r, r, MPFR_RNDN);
        return (int)fmin(2 * (2 * z * z + 2 * z + 1) + 2 + 1, 1e9);
    }
    default: { /* NV_FN_GELU_TANH: x sigmoid(s), s = 2a; x > 0: x - x sigmoid(-s) */
        int ea = gelu_tanh_arg(c->s, x, c);
        double s = fabs(mpfr_get_d(c->s, MPFR_RNDN));
        mpfr_abs(c->s, c->s, MPFR_RNDN);
        mpfr_neg(c->s, c->s, MPFR_RNDN);
        sig_neg(r, c->s, c);
        mpfr_mul_d(r, r, x, MPFR_RNDN);
        /* sigmoid(t) has condition number |t| (1 - sigmoid(t)) <= |t| + 1. */
        return (int)fmin((s + 1) * ea + 4 + 1 + 1, 1e9);
    }
    }
}

/* Stand-ins for saturated compositions (see the file comment). Returns true and
 * sets (b, *dir) when x is beyond the thresholds: there |f(x)| < 2^-1100 or
 * f(x) = A (1 - delta) with delta < 2^-1100. */
static bool comp_saturated(nv_fn f, double x, mpfr_ptr b, int *dir)
{
    double lo_cut = f == NV_FN_GELU_ERF ? -40 : f == NV_FN_GELU_TANH ? -30 : -1e8;
    mpfr_set_prec(b, 128);
    if (x < lo_cut) {
        /* sigmoid tiny positive; silu and gelu tiny negative. */
        mpfr_set_si_2exp(b, f == NV_FN_SIGMOID ? 1 : -1, -1200, MPFR_RNDN);
        *dir = 0;
        return true;
    }
    if (x > 1e8) {
        mpfr_set_d(b, f == NV_FN_SIGMOID ? 1.0 : x, MPFR_RNDN);
        *dir = -1;
        return true;
    }
    return false;
}

/* sigmoid and silu near 0, where Ziv's loop would climb to some 1100 bits to
 * resolve 1/2 + x/4 against 1/2: their Taylor series, sigmoid(x) = 1/2 + x/4 -
 * x^3/48 + O(x^5) and silu(x) = x/2 + x^2/4 - x^4/48 + O(x^6) (alternating, so
 * the first omitted term gives the side), with b = the first two terms held
 * exactly. For |x| < 2^-60 the omitted part is below 2^-120 |x| relative to b's
 * last term, so no number of prec(b) bits lies between b and y: (b, dir) is
 * exact in the sense of the file comment. */
static bool comp_tiny(nv_fn f, double x, mpfr_ptr b, int *dir, mctx *c)
{
    if ((f != NV_FN_SIGMOID && f != NV_FN_SILU) || x == 0 || !(fabs(x) < 0x1p-60))
        return false;
    mpfr_prec_t w = 64 + 2 * (mpfr_prec_t)(-ilogb(x));
    mpfr_set_prec(b, w);
    mpfr_set_prec(c->s, w);
    mpfr_set_d(c->s, x, MPFR_RNDN);
    if (f == NV_FN_SIGMOID) { /* 1/2 + x/4, below y iff x < 0 */
        mpfr_div_2ui(c->s, c->s, 2, MPFR_RNDN);
        mpfr_set_d(b, 0.5, MPFR_RNDN);
        mpfr_add(b, b, c->s, MPFR_RNDN); /* exact at w bits */
        *dir = x > 0 ? -1 : 1;
    } else { /* x/2 + x^2/4, above y */
        mpfr_sqr(b, c->s, MPFR_RNDN);
        mpfr_div_2ui(b, b, 2, MPFR_RNDN);
        mpfr_div_2ui(c->s, c->s, 1, MPFR_RNDN);
        mpfr_add(b, b, c->s, MPFR_RNDN); /* exact at w bits */
        *dir = -1;
    }
    return true;
}

static int eval_comp(nv_fn f, double x, mpfr_ptr b, mctx *c)
{
    int dir;
    if (comp_saturated(f, x, b, &dir) || comp_tiny(f, x, b, &dir, c))
        return dir;
    for (mpfr_prec_t w = 160;; w += w / 2) {
        mpfr_set_prec(b, w);
        comp cp;
        int e = eval_comp_once(f, x, b, &cp, c);
        if (cp.tform) {
            /* b holds T; A - T == A at this precision means T < 2^-(w+1) A:
             * y is then just below A, nearer than any 54-bit neighbour. */
            if (mpfr_zero_p(b) || mpfr_get_exp(b) < (mpfr_exp_t)ilogb(cp.a) - w - 2) {
                mpfr_set_d(b, cp.a, MPFR_RNDN);
                return -1;
            }
            mpfr_d_sub(b, cp.a, b, MPFR_RNDN);
            e += 1;
        }
        int lg = 1;
        while ((1L << lg) <= e)
            lg++;
        mpfr_prec_t err = w - lg - 1;
        if (err >= 110 && mpfr_can_round(b, err, MPFR_RNDN, MPFR_RNDZ, 54))
            return 0;
        if (w > 40000) /* unreachable for irrational f(x); never loop forever */
            return 0;
        if (err < 110)
            w += 110 - err;
    }
}

static bool is_comp(nv_fn f)
{
    return f == NV_FN_SIGMOID || f == NV_FN_SILU || f == NV_FN_GELU_ERF || f == NV_FN_GELU_TANH;
}

/* (b, dir) for f(x); x is not special (rm_special handled it). */
static int eval_exact(nv_fn f, double x, double y, mpfr_ptr b, mctx *c)
{
    if (is_comp(f))
        return eval_comp(f, x, b, c);
    return eval_libm(f, x, y, b, c);
}

/* t = b moved a quarter of its last place toward y: strictly on y's side of
 * every number of prec(b) bits, so of every rounding boundary. */
static void nudge(mpfr_ptr t, mpfr_srcptr b, int dir)
{
    mpfr_set_prec(t, mpfr_get_prec(b) + 2);
    mpfr_set(t, b, MPFR_RNDN);
    if (dir > 0)
        mpfr_nextabove(t);
    else if (dir < 0)
        mpfr_nextbelow(t);
}

/* The pair of refmath.h. Outside fp64's normal range the pair keeps what rounding
 * needs: past the overflow threshold (IEEE 754 §7.4) it is (+-DBL_MAX, +-2^970),
 * exactly the threshold, which every format rounds like y; below 2^-968 lo is
 * only the side of y, +-2^-1074 or 0. */
static void pair_from(mpfr_srcptr b, int dir, double *ret_hi, double *ret_lo, mctx *c)
{
    nudge(c->t, b, dir);
    double hi = mpfr_get_d(c->t, MPFR_RNDN), lo = 0;
    if (mpfr_number_p(c->t) && isinf(hi)) {
        lo = copysign(0x1p970, hi);
        hi = copysign(0x1.fffffffffffffp1023, hi);
    } else if (mpfr_number_p(c->t) && fabs(hi) < 0x1p-968) {
        int cmp = mpfr_cmp_d(c->t, hi);
        lo = cmp > 0 ? 0x1p-1074 : cmp < 0 ? -0x1p-1074 : 0;
    } else if (mpfr_number_p(c->t)) {
        mpfr_set_prec(c->u, mpfr_get_prec(c->t));
        mpfr_sub_d(c->u, c->t, hi, MPFR_RNDN); /* exact: same binade, fewer bits */
        lo = mpfr_get_d(c->u, MPFR_RNDN);
        /* hi + lo must not sit on a 54-bit number (a possible rounding boundary)
         * unless t is that number: if it does, move lo one place toward t. */
        int e = ilogb(hi);
        double h1 = ldexp(1, e - 53), h2 = ldexp(1, e - 54);
        bool pow2 = hi == ldexp(copysign(1, hi), e);
        bool on =
            lo == 0 || fabs(lo) == h1 || (pow2 && signbit(lo) != signbit(hi) && fabs(lo) == h2);
        int cmp = mpfr_cmp_d(c->u, lo);
        if (on && cmp != 0)
            lo = nextafter(lo, cmp > 0 ? INFINITY : -INFINITY);
    }
    *ret_hi = hi;
    *ret_lo = lo;
}

void rm_mpfr_pair(nv_fn f, double x, double y, double *ret_hi, double *ret_lo)
{
    mctx cs;
    bool stack;
    erange er;
    erange_enter(&er);
    mctx *c = ctx_get(&cs, &stack);
    int dir = eval_exact(f, x, y, c->b, c);
    pair_from(c->b, dir, ret_hi, ret_lo, c);
    ctx_put(c, stack);
    erange_leave(&er);
}

static mpfr_rnd_t to_mpfr_rnd(nv_rounding r)
{
    switch (r) {
    case NV_ROUND_TOWARD_ZERO:
        return MPFR_RNDZ;
    case NV_ROUND_UP:
        return MPFR_RNDU;
    case NV_ROUND_DOWN:
        return MPFR_RNDD;
    default:
        return MPFR_RNDN;
    }
}

/* Rounds the nudged value t (never exactly on a boundary unless exact) to dt.
 * Formats with a binary significand: round to the bits the binade holds (fewer
 * in the subnormal range), then let nv_dtype_round apply overflow (IEEE 754
 * §7.4: overflow is judged on the result rounded with unbounded exponent). */
static double round_binary(mpfr_ptr t, const nv_dtype_info *in, nv_dtype dt, nv_rounding r)
{
    nv_round_mode m = {r, false, false};
    mpfr_rnd_t rnd = to_mpfr_rnd(r);
    int neg = mpfr_signbit(t);
    long e = (long)mpfr_get_exp(t) - 1; /* floor(log2 |t|) */
    if (e > in->emax + 1)
        return nv_dtype_round(dt, ldexp(neg ? -1 : 1, in->emax + 2), &m, 0);
    long eq = e > in->emin ? e : in->emin;
    long q = e - eq + in->mant_bits + 1;
    if (q >= 1) {
        mpfr_prec_round(t, q, rnd);
        return nv_dtype_round(dt, mpfr_get_d(t, MPFR_RNDN), &m, 0);
    }
    /* Below the smallest subnormal: 0 or the smallest subnormal. */
    double ms = in->min_subnormal;
    bool away;
    if (r == NV_ROUND_NEAREST_EVEN) {
        mpfr_abs(t, t, MPFR_RNDN);
        away = mpfr_cmp_d(t, ms / 2) > 0; /* a tie goes to the even 0 */
    } else {
        away = (r == NV_ROUND_UP && !neg) || (r == NV_ROUND_DOWN && neg);
    }
    return nv_dtype_round(dt, neg ? -(away ? ms : 0.0) : (away ? ms : 0.0), &m, 0);
}

static double round_from(mpfr_srcptr b, int dir, nv_dtype dt, nv_rounding r, mctx *c)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    nv_round_mode m = {r, false, false};
    if (!mpfr_number_p(b) || (mpfr_zero_p(b) && dir == 0))
        return nv_dtype_round(dt, mpfr_get_d(b, MPFR_RNDN), &m, 0);
    if (dt == NV_DT_FP64) {
        nudge(c->t, b, dir);
        return mpfr_get_d(c->t, to_mpfr_rnd(r)); /* subnormals and overflow per rnd */
    }
    if (!in || !in->is_float || !in->has_subnormals) {
        double hi, lo;
        pair_from(b, dir, &hi, &lo, c);
        return nv_ref_round_pair(hi, lo, dt, r);
    }
    nudge(c->t, b, dir);
    return round_binary(c->t, in, dt, r);
}

double rm_mpfr_round(nv_fn f, double x, double y, nv_dtype dt, nv_rounding r)
{
    mctx cs;
    bool stack;
    erange er;
    erange_enter(&er);
    mctx *c = ctx_get(&cs, &stack);
    int dir = eval_exact(f, x, y, c->b, c);
    double v = round_from(c->b, dir, dt, r, c);
    ctx_put(c, stack);
    erange_leave(&er);
    return v;
}

/* MPFR straight at the target precision (its own Ziv loop inside), for MPFR's
 * functions in the normal range of binary formats; the rest via rm_mpfr_round. */
double rm_mpfr_direct(nv_fn f, double x, nv_dtype dt, nv_rounding r)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    if (is_comp(f) || !in || !in->is_float || !in->has_subnormals)
        return rm_mpfr_round(f, x, 0, dt, r);
    mctx cs;
    bool stack;
    erange er;
    erange_enter(&er);
    mctx *c = ctx_get(&cs, &stack);
    mpfr_rnd_t rnd = to_mpfr_rnd(r);
    mpfr_set_prec(c->b, in->mant_bits + 1);
    mpfr_set_prec(c->t, 64);
    mpfr_set_d(c->t, x, MPFR_RNDN);
    switch (f) {
    case NV_FN_EXP:
        mpfr_exp(c->b, c->t, rnd);
        break;
    case NV_FN_EXP2:
        mpfr_exp2(c->b, c->t, rnd);
        break;
    case NV_FN_EXPM1:
        mpfr_expm1(c->b, c->t, rnd);
        break;
    case NV_FN_LOG:
        mpfr_log(c->b, c->t, rnd);
        break;
    case NV_FN_LOG2:
        mpfr_log2(c->b, c->t, rnd);
        break;
    case NV_FN_LOG1P:
        mpfr_log1p(c->b, c->t, rnd);
        break;
    case NV_FN_SIN:
        mpfr_sin(c->b, c->t, rnd);
        break;
    case NV_FN_COS:
        mpfr_cos(c->b, c->t, rnd);
        break;
    case NV_FN_TANH:
        mpfr_tanh(c->b, c->t, rnd);
        break;
    case NV_FN_ERF:
        mpfr_erf(c->b, c->t, rnd);
        break;
    case NV_FN_SQRT:
        mpfr_sqrt(c->b, c->t, rnd);
        break;
    case NV_FN_RSQRT:
        mpfr_rec_sqrt(c->b, c->t, rnd);
        break;
    default:
        mpfr_ui_div(c->b, 1, c->t, rnd);
        break;
    }
    double v = NAN;
    bool done = false;
    /* Normal range only: at or above the smallest normal, the result rounded
     * with the format's precision is the format's rounding (IEEE 754 §4.3). */
    if (mpfr_number_p(c->b) && !mpfr_zero_p(c->b) && mpfr_get_exp(c->b) - 1 >= in->emin &&
        mpfr_get_exp(c->b) - 1 <= in->emax + 1) {
        nv_round_mode m = {r, false, false};
        v = nv_dtype_round(dt, mpfr_get_d(c->b, MPFR_RNDN), &m, 0);
        done = dt != NV_DT_FP64 || isfinite(v);
    }
    ctx_put(c, stack);
    erange_leave(&er);
    return done ? v : rm_mpfr_round(f, x, 0, dt, r);
}
