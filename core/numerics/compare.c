/* Comparison of device values against exact references (see compare.h).
 *
 * Per element: NaN against NaN passes and non-NaN against NaN is a NaN mismatch;
 * an infinity passes only against the same infinity (got = inf against a huge
 * finite exact value is an inf mismatch); finite pairs get
 *   err      = |got - exact|, with exact = hi + lo evaluated as ((got - hi) - lo)
 *              through TwoSum, so err is correct to an ulp of itself;
 *   ulp_err  = err / ulp(exact) in the output dtype (nv_dtype_ulp: glibc libm-test);
 *   rel      = err / |exact|;
 *   allowed  = atol + rtol |exact|            (allclose)
 *              max_ulp ulp(exact)             (ulp)
 *              c g(n) u abs_sum + ulp(exact)/2 (bound: Higham, Accuracy and
 *              Stability of Numerical Algorithms, 2nd ed., §4.2 recursive
 *              summation |error| <= gamma_{n-1} sum|x_i|, gamma_k ~ k u, and §4.3
 *              pairwise summation with ceil(log2 n); the ulp/2 is the final
 *              rounding of the result to the output dtype, u = 2^-p of u_dtype);
 *              growth "probabilistic": min(c gamma~_n(lambda), 2 (n - 1) u)
 *              abs_sum + ulp(exact)/2 (bound_setup below);
 *   the bound's abs_sum is abs_sum 2^abs_exp where the scale exceeds fp64's range,
 *              multiplied by the constant first so that the allowance itself
 *              stays finite when it fits.
 * An output the device gets wrong whose accumulator demand exceeds the declared
 * accumulator's range (compare.h) is counted apart, not as a mismatch.
 * p99 comes from a histogram binned on the float encoding of ulp_err: 8 bins per
 * octave (bin edges 2^(k/8)-spaced within each power of two, so p99 is reported
 * as the upper edge of its bin: at most 12.5% above the true percentile, never
 * below it, and never above max_ulp). */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "compare_internal.h"
#include "eft.h"

static const char *const class_names[] = {
    [NV_FAIL_NONE] = "none",
    [NV_FAIL_NAN_MISMATCH] = "nan_mismatch",
    [NV_FAIL_INF_MISMATCH] = "inf_mismatch",
    [NV_FAIL_ULP_EXCEEDED] = "ulp_exceeded",
    [NV_FAIL_BOUND_EXCEEDED] = "bound_exceeded",
    [NV_FAIL_SIGNED_ZERO] = "signed_zero_mismatch",
    [NV_FAIL_INTERMEDIATE_OVERFLOW] = "intermediate_overflow",
};

const char *nv_failure_class_name(nv_failure_class c)
{
    return (unsigned)c < sizeof class_names / sizeof class_names[0] ? class_names[c] : NULL;
}

/* Upper edge of the bin holding the 99th percentile of count values. */
double nvc_hist_p99(const hist *h, uint64_t count, double max_ulp)
{
    if (count == 0)
        return 0;
    uint64_t need = count - count / 100; /* ceil(0.99 count) for the usual sizes */
    uint64_t cum = 0;
    for (unsigned b = 0; b < HIST_BINS; b++) {
        cum += h->n[b];
        if (cum >= need) {
            if (b == 0) /* errors below 2^-30 ulp: report 0 */
                return 0;
            if (b == HIST_BINS - 1)
                return max_ulp;
            uint32_t e = (b + 1 + HIST_BASE) << 20;
            float up;
            memcpy(&up, &e, sizeof(up));
            return fmin((double)up, max_ulp);
        }
    }
    return max_ulp;
}

/* ---- the fixed-edge histogram of the result (compare.h) ---- */

double nv_ulp_hist_edge(int k)
{
    return k <= 0 ? 0 : ldexp(1, k - 4); /* 0, 2^-3, 2^-2, ..., 2^24 */
}

/* The bucket of ue >= 0: from its double encoding, ceil(log2 ue) is the
 * exponent, plus one unless ue is a power of two (upper edges inclusive). */
static inline unsigned ulp_bucket(double ue)
{
    if (ue == 0)
        return 0;
    uint64_t b;
    memcpy(&b, &ue, sizeof(b));
    int e = (int)((b >> 52) & 0x7ff) - 1023; /* subnormal ue: far below 2^-3 anyway */
    int k = e + ((b & 0xfffffffffffffull) != 0) + 4;  /* ue <= 2^(k-4) */
    if (k < 1)
        return 1;
    return k >= NV_ULP_HIST_EDGES ? NV_ULP_HIST_EDGES : (unsigned)k;
}

/* ---- tolerance helpers ---- */

static double growth(const nv_tolerance *t, int64_t n)
{
    if (n < 1)
        n = 1;
    switch (t->growth) {
    case NV_GROWTH_N:
        return (double)(n - 1);
    case NV_GROWTH_LOG2N:
        return ceil(log2((double)n));
    default:
        return sqrt((double)n);
    }
}

void nvc_result_init(nv_compare_result *r)
{
    memset(r, 0, sizeof(*r));
}

void nvc_add_first(nv_compare_result *r, int64_t i, double got, double exact, double ulp_err,
                      double abs_err, double allowed, nv_failure_class kind)
{
    if (r->failure == NV_FAIL_NONE)
        r->failure = kind;
    if (r->n_first >= NV_COMPARE_FIRST)
        return;
    nv_mismatch *m = &r->first[r->n_first++];
    m->index = i;
    m->got = got;
    m->exact = exact;
    m->ulp_err = ulp_err;
    m->abs_err = abs_err;
    m->allowed = allowed;
    m->kind = kind;
}

/* Whether (g, e) is a NaN/Inf pair; *cls: NONE when it matches, else the
 * mismatch class. */
static bool special_kind(double g, double e, nv_failure_class *cls)
{
    bool gn = isnan(g), en = isnan(e);
    *cls = NV_FAIL_NONE;
    if (gn || en) {
        if (gn != en)
            *cls = NV_FAIL_NAN_MISMATCH;
        return true;
    }
    if (isinf(g) || isinf(e)) {
        if (g != e)
            *cls = NV_FAIL_INF_MISMATCH;
        return true;
    }
    return false;
}

static void count_special(nv_compare_result *r, int64_t i, double g, double e, nv_failure_class cls)
{
    r->mismatches++;
    if (cls == NV_FAIL_NAN_MISMATCH)
        r->nan_mismatches++;
    else
        r->inf_mismatches++;
    nvc_add_first(r, i, g, e, INFINITY, INFINITY, 0, cls);
}

/* Handles NaN/Inf pairs; returns true when the pair is special (done). */
bool nvc_special_pair(nv_compare_result *r, int64_t i, double g, double e)
{
    nv_failure_class cls;
    if (!special_kind(g, e, &cls))
        return false;
    if (cls != NV_FAIL_NONE)
        count_special(r, i, g, e, cls);
    return true;
}

/* ---- the bound metric's constant ----
 * growth "probabilistic" (Higham & Mary, "A New Approach to Probabilistic
 * Rounding Error Analysis", SIAM J. Sci. Comput. 41(5), 2019): under their model
 * of rounding errors as independent random variables of mean zero (Connolly,
 * Higham & Mary, SISC 43(1), 2021, weaken it to mean independence), a product of n factors (1 + delta_k)^(+-1) is 1 + theta with
 * |theta| <= gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1 with
 * probability at least 1 - 2 exp(-lambda^2 (1 - u)^2 / 2) (Thm. 2.4), so an inner
 * product or sum of n terms, whatever the order, is within gamma~_n(lambda)
 * sum |x_i y_i| of the exact value unless one of its n terms' theta exceeds that
 * (Thm. 3.1, a union bound over the terms). Over the M outputs of a comparison
 * the same union bound gives a false-failure probability at most
 * 2 M n exp(-lambda^2 (1 - u)^2 / 2); lambda is chosen to make that
 * NV_TOL_PROB_FAIL. The deterministic bound (Higham §4.2, the default before:
 * 2 (n - 1) u) holds with certainty, so the allowance never exceeds it; its
 * headroom is reported beside the probabilistic one. */
typedef struct bound_k {
    double k, k_worst, lambda, p_fail;
} bound_k;

static void bound_setup(const nv_tolerance *t, double u, int64_t n_out, int64_t len, bound_k *b)
{
    memset(b, 0, sizeof(*b));
    if (len < 1)
        len = 1;
    if (t->growth != NV_GROWTH_PROBABILISTIC) {
        b->k = b->k_worst = t->c * growth(t, len) * u;
        return;
    }
    double terms = (double)(n_out > 1 ? n_out : 1) * (double)len;
    double n = (double)len;
    b->p_fail = NV_TOL_PROB_FAIL;
    b->lambda = sqrt(2 * log(2 * terms / b->p_fail)) / (1 - u);
    double gt = expm1(b->lambda * sqrt(n) * u + n * u * u / (1 - u));
    b->k_worst = 2 * (n - 1) * u;
    b->k = fmin(t->c * gt, b->k_worst);
}

/* k abs_sum[i] (2^abs_exp[i]): the product first, so that a scale beyond fp64's
 * range still gives the finite allowance it implies. */
static double scaled(const nv_compare_input *in, int64_t i, double k)
{
    double v = k * in->abs_sum[i];
    if (in->abs_exp && in->abs_exp[i] != 0)
        v = ldexp(v, (int)fmax(fmin(in->abs_exp[i], 1e6), -1e6));
    return v;
}

/* ---- the intermediate-overflow rule (compare.h) ---- */
typedef struct ovf_rule {
    bool on;
    double threshold, slack;
} ovf_rule;

static int ovf_setup(const nv_compare_input *in, ovf_rule *o)
{
    memset(o, 0, sizeof(*o));
    if (!in->peak)
        return 0;
    const nv_dtype_info *ad = nv_dtype_get(in->acc_dtype), *rd = nv_dtype_get(in->acc_range);
    if (!ad || !rd || !ad->is_float || !rd->is_float)
        return -EINVAL;
    double u = ldexp(1, -(ad->mant_bits + 1));
    o->on = true;
    /* IEEE 754-2019 §7.4: round to nearest overflows from max + ulp(max)/2 on. */
    o->threshold = rd->max_finite + nv_dtype_ulp(in->acc_range, rd->max_finite) / 2;
    /* A rounded partial result is at most (1 + u)^n above the exact bound, but
     * that is vacuous for a low-precision accumulator over a long reduction
     * ((1 + 2^-8)^4096 > 2^23): the slack stops at 2, so an accumulator that
     * overflows where the exact demand is below half its range is not excused. */
    int64_t len = in->reduction_len > 1 ? in->reduction_len : 1;
    o->slack = fmin(exp((double)len * log1p(u)), 2);
    return 0;
}

static bool ovf_excused(const ovf_rule *o, const nv_compare_input *in, int64_t i)
{
    return o->on && in->peak[i] * o->slack >= o->threshold; /* false for a NaN peak */
}

static void add_overflow(nv_compare_result *r, const nv_compare_input *in, int64_t k, int64_t i,
                         double got, double exact, double ulp_err, double abs_err, double allowed)
{
    if (r->intermediate_overflows++)
        return;
    r->first_overflow = (nv_mismatch){.index = i,
                                      .got = got,
                                      .exact = exact,
                                      .ulp_err = ulp_err,
                                      .abs_err = abs_err,
                                      .allowed = allowed,
                                      .kind = NV_FAIL_INTERMEDIATE_OVERFLOW};
    r->first_overflow_peak = in->peak[k];
}

/* ulp of the exact value hi + lo: one binade lower when hi is a power of two
 * and lo pulls below it. */
static inline double ulp_in(nv_dtype dt, const nv_dtype_info *di, double x)
{
    /* nv_dtype_ulp's own steps (dtype.c) with di hoisted out of the loop: the
     * floats whose ulp is a normal double; the rest through nv_dtype_ulp. */
    double a = fabs(x);
    if (!di->is_float || isnan(x) || a == 0 || a > di->max_finite)
        return nv_dtype_ulp(dt, x);
    uint64_t u;
    memcpy(&u, &a, sizeof u);
    int ef = (int)(u >> 52);
    int e = ef ? ef - 1023 : -1023;
    if (e < di->emin)
        e = di->emin;
    int k = e - di->mant_bits;
    if (k < -1022)
        return nv_dtype_ulp(dt, x);
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

static double exact_ulp(nv_dtype dt, const nv_dtype_info *di, double hi, double lo)
{
    if (lo != 0 && signbit(lo) != signbit(hi))
        return ulp_in(dt, di, nextafter(hi, 0));
    return ulp_in(dt, di, hi);
}

/* fmax as glibc's x86_64 fmax computes it (maxsd: the second operand when the
 * two compare equal; the other operand when one is a NaN), inlined: the same
 * bits, without a libm call per element and statistic. */
static inline double max_of(double a, double b)
{
    if (isnan(b))
        return a;
    if (isnan(a))
        return b;
    return a > b ? a : b;
}

/* Under the ulp metric an Inf for a finite exact value of the same sign is the
 * overflow of the neighbour one ulp above max_finite (IEEE 754-2019 §7.4: a
 * result is rounded as if the exponent range were unbounded, and one beyond
 * max_finite is delivered as Inf). So a faithful (1 ulp) device may return Inf
 * where |exact| lies between max_finite and that neighbour, as rounding twice
 * through a wider format does at the tie max_finite + ulp/2; a correctly
 * rounded one may not (its error is then above 0.5 ulp). Returns the finite
 * stand-in for g, or g itself when the rule does not apply (any other metric,
 * a format without Inf, fp64 whose neighbour is beyond double). */
double nvc_ulp_overflow_value(const nv_tolerance *tol, nv_dtype dt, double g, double e,
                                 double lo)
{
    if (tol->metric != NV_TOL_ULP || !isinf(g) || !isfinite(e) || signbit(g) != signbit(e))
        return g;
    const nv_dtype_info *di = nv_dtype_get(dt);
    if (!di || !di->is_float || !di->has_inf || dt == NV_DT_FP64)
        return g;
    double v = copysign(di->max_finite + nv_dtype_ulp(dt, di->max_finite), g);
    double s, t;
    nv_two_sum(v, -e, &s, &t);
    /* Beyond the tolerance it stays an inf_mismatch: the class names the symptom. */
    return fabs(s + (t - lo)) / exact_ulp(dt, di, e, lo) <= tol->max_ulp ? v : g;
}

/* What one comparison needs besides the arrays: the bound's constants (over the
 * n_total outputs of the whole comparison), the overflow rule, the sign rule. */
typedef struct setup {
    bound_k bk;
    ovf_rule ovf;
    bool judge_sign;
} setup;

static int compare_setup(const nv_compare_input *in, int64_t n_total, const nv_tolerance *tol,
                         setup *su)
{
    if (!in || !tol || in->n < 0 || (in->n > 0 && (!in->got || !in->exact)) ||
        !nv_dtype_get(in->dtype))
        return -EINVAL;
    if (tol->metric == NV_TOL_BOUND && (!in->abs_sum || in->reduction_len < 1))
        return -EINVAL;
    nv_dtype udt = tol->has_u_dtype ? tol->u_dtype : in->dtype;
    const nv_dtype_info *ui = nv_dtype_get(udt);
    if (!ui)
        return -EINVAL;
    double u = ldexp(1, -(ui->is_float ? ui->mant_bits + 1 : 0));
    bound_setup(tol, u, n_total, in->reduction_len, &su->bk);
    if (ovf_setup(in, &su->ovf) < 0)
        return -EINVAL;
    /* Only formats with a signed zero (not the ints, not e8m0) have a sign to judge. */
    const nv_dtype_info *oi = nv_dtype_get(in->dtype);
    su->judge_sign = in->zero_sign && oi->is_float && oi->is_signed;
    return 0;
}

/* Element k of in, element base + k of the comparison, into p. */
static inline void compare_one(const nv_compare_input *in, int64_t base, int64_t k,
                               const nv_tolerance *tol, const setup *su, const nv_dtype_info *di,
                               nv_compare_part *p)
{
    nv_compare_result *r = &p->r;
    const bound_k *bk = &su->bk;
    {
        int64_t i = base + k;
        double g_out = in->got[k], e = in->exact[k], lo = in->exact_lo ? in->exact_lo[k] : 0;
        double g = nvc_ulp_overflow_value(tol, in->dtype, g_out, e, lo);
        nv_failure_class sc;
        if (special_kind(g, e, &sc)) {
            if (p->elems)
                p->elems[k] = (nv_compare_elem_out){.mismatch = sc != NV_FAIL_NONE,
                                                    .ulp_err = sc == NV_FAIL_NONE ? 0 : INFINITY,
                                                    .exact = e,
                                                    .exact_lo = lo};
            r->nonfinite++;
            if (sc != NV_FAIL_NONE && ovf_excused(&su->ovf, in, k))
                add_overflow(r, in, k, i, g, e, INFINITY, INFINITY, 0);
            else if (sc != NV_FAIL_NONE)
                count_special(r, i, g, e, sc);
            return;
        }
        double s, t;
        nv_two_sum(g, -e, &s, &t); /* s + t == got - hi exactly */
        double err = fabs(s + (t - lo));
        double ex = lo != 0 ? e + lo : e; /* e + 0 would turn an exact -0 into +0 */
        double ulp = exact_ulp(in->dtype, di, e, lo);
        double ue = err / ulp;
        double rel = ex != 0 ? err / fabs(ex) : (err == 0 ? 0 : INFINITY);
        double allowed, allowed_worst = 0;
        switch (tol->metric) {
        case NV_TOL_ALLCLOSE:
            allowed = tol->atol + tol->rtol * fabs(ex);
            break;
        case NV_TOL_ULP:
            allowed = tol->max_ulp * ulp;
            break;
        default:
            allowed = scaled(in, k, bk->k) + ulp / 2;
            allowed_worst = scaled(in, k, bk->k_worst) + ulp / 2;
            break;
        }
        bool pass = tol->metric == NV_TOL_ULP ? ue <= tol->max_ulp : err <= allowed;
        if (p->elems) /* part_run took no peak: ovf_excused is false */
            p->elems[k] = (nv_compare_elem_out){
                .finite = true,
                .mismatch = !pass || (su->judge_sign && g == 0 && signbit(g) != signbit(e)),
                .ulp_err = ue,
                .exact = e,
                .exact_lo = lo};
        if (!pass && ovf_excused(&su->ovf, in, k)) {
            add_overflow(r, in, k, i, g_out, ex, ue, err, allowed);
            return;
        }
        double head = allowed > 0 ? err / allowed : (err == 0 ? 0 : INFINITY);
        if (tol->metric == NV_TOL_BOUND)
            r->headroom_worst_case =
                max_of(r->headroom_worst_case,
                     allowed_worst > 0 ? err / allowed_worst : (err == 0 ? 0 : INFINITY));
        r->max_ulp = max_of(r->max_ulp, ue);
        r->max_abs = max_of(r->max_abs, err);
        r->max_rel = max_of(r->max_rel, rel);
        r->max_allowed = max_of(r->max_allowed, allowed);
        r->headroom = max_of(r->headroom, head);
        if (p->ue)
            p->ue[p->n_ue++] = ue;
        else
            p->sum_ulp += ue;
        p->finite++;
        p->p99_hist[hist_bin((float)ue)]++;
        r->ulp_hist[ulp_bucket(ue)]++;
        if (!pass) {
            r->mismatches++;
            nvc_add_first(r, i, g_out, ex, ue, err, allowed,
                      tol->metric == NV_TOL_BOUND ? NV_FAIL_BOUND_EXCEEDED : NV_FAIL_ULP_EXCEEDED);
        } else if (su->judge_sign && g == 0 && signbit(g) != signbit(e)) {
            /* The value is right, its zero's sign is not: -0 for +0 or the reverse. */
            r->mismatches++;
            r->zero_sign_mismatches++;
            nvc_add_first(r, i, g, ex, ue, err, allowed, NV_FAIL_SIGNED_ZERO);
        }
    }
}

/* The vector kernel's arguments for in under tol (a float output of at most
 * 23 fraction bits, metric ulp or allclose). */
static nvc_vec_args vec_args(const nv_compare_input *in, const nv_tolerance *tol,
                             const nv_dtype_info *di)
{
    return (nvc_vec_args){.got = in->got,
                          .hi = in->exact,
                          .lo = in->exact_lo,
                          .max_finite = di->max_finite,
                          .atol = tol->atol,
                          .rtol = tol->rtol,
                          .max_ulp = tol->max_ulp,
                          .emin = di->emin,
                          .mant_bits = di->mant_bits,
                          .allclose = tol->metric == NV_TOL_ALLCLOSE,
                          .zero_exact = nv_dtype_ulp(in->dtype, 0) ==
                                        ldexp(1, (int)(di->emin - di->mant_bits))};
}

/* nv_compare_elem's outputs of the chunk at k0 that the vector kernel took
 * (every pair passing: no mismatch), into out[0 .. NVC_VEC_CHUNK). */
static void vec_elems(const nv_compare_input *in, int64_t k0, const nvc_vec_out *vo,
                      nv_compare_elem_out *out)
{
    for (int j = 0; j < NVC_VEC_CHUNK; j++)
        out[j] = (nv_compare_elem_out){.finite = vo->fin[j] != 0,
                                       .ulp_err = vo->ue[j],
                                       .exact = in->exact[k0 + j],
                                       .exact_lo = in->exact_lo ? in->exact_lo[k0 + j] : 0};
}

/* Elements [0, in->n) of in, which are elements base.. of the comparison, into
 * p: in index order, exactly as one pass over the whole comparison would.
 * Chunks of ordinary passing pairs of a float format up to fp32 go through
 * the vector kernel (compare_vec.c: the same values per element), the rest
 * element by element. */
static void compare_range(const nv_compare_input *in, int64_t base, const nv_tolerance *tol,
                          const setup *su, nv_compare_part *p)
{
    nv_compare_result *r = &p->r;
    if (tol->metric == NV_TOL_BOUND) { /* of the whole comparison's size: every part's */
        r->lambda = su->bk.lambda;
        r->p_fail = su->bk.p_fail;
    }
    const nv_dtype_info *di = nv_dtype_get(in->dtype); /* compare_setup checked it */
    int64_t k = 0;
    if ((tol->metric == NV_TOL_ULP || tol->metric == NV_TOL_ALLCLOSE) && di->is_float &&
        di->mant_bits <= 23) {
        nvc_vec_args va = vec_args(in, tol, di);
        static _Thread_local nvc_vec_out vo;
        for (; k + NVC_VEC_CHUNK <= in->n; k += NVC_VEC_CHUNK) {
            if (!nvc_chunk_vec(&va, k, NVC_VEC_CHUNK, &vo)) {
                for (int j = 0; j < NVC_VEC_CHUNK; j++)
                    compare_one(in, base, k + j, tol, su, di, p);
                continue;
            }
            if (p->elems)
                vec_elems(in, k, &vo, p->elems + k);
            r->max_ulp = max_of(r->max_ulp, vo.max[0]);
            r->max_abs = max_of(r->max_abs, vo.max[1]);
            r->max_rel = max_of(r->max_rel, vo.max[2]);
            r->max_allowed = max_of(r->max_allowed, vo.max[3]);
            r->headroom = max_of(r->headroom, vo.max[4]);
            if (vo.n_skip) { /* compare_one's special pairs: nonfinite, nothing else */
                r->nonfinite += vo.n_skip;
                for (int j = 0; j < NVC_VEC_CHUNK; j++) {
                    if (!vo.fin[j])
                        continue;
                    if (p->ue)
                        p->ue[p->n_ue++] = vo.ue[j];
                    else
                        p->sum_ulp += vo.ue[j];
                    p->p99_hist[vo.bin[j]]++;
                    r->ulp_hist[vo.bkt[j]]++;
                }
                p->finite += NVC_VEC_CHUNK - vo.n_skip;
                continue;
            }
            if (p->ue) {
                memcpy(p->ue + p->n_ue, vo.ue, sizeof vo.ue);
                p->n_ue += NVC_VEC_CHUNK;
            } else {
                for (int j = 0; j < NVC_VEC_CHUNK; j++)
                    p->sum_ulp += vo.ue[j];
            }
            p->finite += NVC_VEC_CHUNK;
            for (int j = 0; j < NVC_VEC_CHUNK; j++) {
                p->p99_hist[vo.bin[j]]++;
                r->ulp_hist[vo.bkt[j]]++;
            }
        }
    }
    for (; k < in->n; k++)
        compare_one(in, base, k, tol, su, di, p);
}

void nv_compare_part_init(nv_compare_part *p, double *ue)
{
    memset(p, 0, sizeof(*p));
    p->ue = ue;
}

int nv_compare_part_run(const nv_compare_input *in, int64_t base, int64_t n_total,
                        const nv_tolerance *tol, nv_compare_part *p)
{
    setup su;
    if (!p || base < 0 || n_total < 0 || compare_setup(in, n_total, tol, &su) < 0 ||
        (p->elems && (tol->metric == NV_TOL_BOUND || in->peak)))
        return -EINVAL;
    compare_range(in, base, tol, &su, p);
    return 0;
}

void nv_compare_part_merge(nv_compare_part *acc, const nv_compare_part *p)
{
    nv_compare_result *a = &acc->r;
    const nv_compare_result *r = &p->r;
    a->mismatches += r->mismatches;
    a->nan_mismatches += r->nan_mismatches;
    a->inf_mismatches += r->inf_mismatches;
    a->zero_sign_mismatches += r->zero_sign_mismatches;
    a->nonfinite += r->nonfinite;
    /* fmax is exact, so the maxima of the parts are the maxima of the whole. */
    a->max_ulp = fmax(a->max_ulp, r->max_ulp);
    a->max_abs = fmax(a->max_abs, r->max_abs);
    a->max_rel = fmax(a->max_rel, r->max_rel);
    a->max_allowed = fmax(a->max_allowed, r->max_allowed);
    a->headroom = fmax(a->headroom, r->headroom);
    a->headroom_worst_case = fmax(a->headroom_worst_case, r->headroom_worst_case);
    a->lambda = r->lambda;
    a->p_fail = r->p_fail;
    /* The parts come in index order: the first class and mismatches are the
     * whole comparison's lowest. */
    if (a->failure == NV_FAIL_NONE)
        a->failure = r->failure;
    for (int k = 0; k < r->n_first && a->n_first < NV_COMPARE_FIRST; k++)
        a->first[a->n_first++] = r->first[k];
    if (r->intermediate_overflows > 0 && a->intermediate_overflows == 0) {
        a->first_overflow = r->first_overflow;
        a->first_overflow_peak = r->first_overflow_peak;
    }
    a->intermediate_overflows += r->intermediate_overflows;
    for (int k = 0; k < NV_ULP_HIST_BUCKETS; k++)
        a->ulp_hist[k] += r->ulp_hist[k];
    for (int b = 0; b < HIST_BINS; b++)
        acc->p99_hist[b] += p->p99_hist[b];
    /* The sum in the order of one pass (floating-point addition does not
     * associate): the part's errors one by one. */
    if (p->ue)
        for (int64_t k = 0; k < p->n_ue; k++)
            acc->sum_ulp += p->ue[k];
    else
        acc->sum_ulp += p->sum_ulp;
    acc->finite += p->finite;
}

void nv_compare_part_finish(const nv_compare_part *p, int64_t n_total, const nv_tolerance *tol,
                            nv_compare_result *ret)
{
    nv_compare_result r = p->r;
    r.compared = n_total;
    r.has_ulp_hist = true;
    r.mean_ulp = p->finite ? p->sum_ulp / (double)p->finite : 0;
    hist h;
    memcpy(h.n, p->p99_hist, sizeof(h.n));
    r.p99_ulp = nvc_hist_p99(&h, p->finite, r.max_ulp);
    if (tol->metric != NV_TOL_BOUND)
        r.headroom_worst_case = r.headroom;
    *ret = r;
}

int nv_compare(const nv_compare_input *in, const nv_tolerance *tol, nv_compare_result *ret)
{
    static _Thread_local nv_compare_part p; /* 10 KiB of bins: kept off the stack */
    setup su;
    if (!ret || compare_setup(in, in ? in->n : 0, tol, &su) < 0)
        return -EINVAL;
    nv_compare_part_init(&p, NULL);
    compare_range(in, 0, tol, &su, &p);
    nv_compare_part_finish(&p, in->n, tol, ret);
    return 0;
}


/* compare_one's rules for one element, without its statistics: the same
 * arithmetic, so that a caller's per-element figures agree with the result's
 * (the overflow rule aside: callers pass no peak). */
int nv_compare_elem(const nv_compare_input *in, int64_t k, const nv_tolerance *tol,
                    nv_compare_elem_out *ret)
{
    const nv_dtype_info *di = in && tol ? nv_dtype_get(in->dtype) : NULL;
    if (!di || k < 0 || k >= in->n || tol->metric == NV_TOL_BOUND || in->peak)
        return -EINVAL;
    double g_out = in->got[k], e = in->exact[k], lo = in->exact_lo ? in->exact_lo[k] : 0;
    double g = nvc_ulp_overflow_value(tol, in->dtype, g_out, e, lo);
    nv_failure_class sc;
    *ret = (nv_compare_elem_out){.exact = e, .exact_lo = lo};
    if (special_kind(g, e, &sc)) {
        ret->ulp_err = sc == NV_FAIL_NONE ? 0 : INFINITY;
        ret->mismatch = sc != NV_FAIL_NONE;
        return 0;
    }
    double s, t;
    nv_two_sum(g, -e, &s, &t);
    double err = fabs(s + (t - lo));
    double ex = lo != 0 ? e + lo : e;
    double ulp = exact_ulp(in->dtype, di, e, lo);
    double ue = err / ulp;
    bool pass = tol->metric == NV_TOL_ULP ? ue <= tol->max_ulp
                                          : err <= tol->atol + tol->rtol * fabs(ex);
    bool sign = in->zero_sign && di->is_float && di->is_signed && g == 0 &&
                signbit(g) != signbit(e);
    ret->finite = true;
    ret->ulp_err = ue;
    ret->mismatch = !pass || sign;
    return 0;
}

/* nv_compare_elem for elements [k0, k0 + n): chunks of ordinary passing pairs
 * through the vector kernel (its per-element errors are the scalar rule's bit
 * for bit: compare_vec.c), every other element through nv_compare_elem. In
 * such a chunk every pair is finite and passing, a zero only of the exact
 * value's sign, or a passing special pair (not finite, error 0), so the
 * overflow stand-in leaves got as it is, no zero's sign is a mismatch and no
 * element is a mismatch: nv_compare_elem's outputs exactly. */
int nv_compare_elems(const nv_compare_input *in, int64_t k0, int64_t n, const nv_tolerance *tol,
                     nv_compare_elem_out *ret)
{
    const nv_dtype_info *di = in && tol ? nv_dtype_get(in->dtype) : NULL;
    if (!di || k0 < 0 || n < 0 || n > in->n - k0 || tol->metric == NV_TOL_BOUND || in->peak)
        return -EINVAL;
    int64_t k = 0;
    if (di->is_float && di->mant_bits <= 23) {
        nvc_vec_args va = vec_args(in, tol, di);
        static _Thread_local nvc_vec_out vo;
        for (; k + NVC_VEC_CHUNK <= n; k += NVC_VEC_CHUNK) {
            if (!nvc_chunk_vec(&va, k0 + k, NVC_VEC_CHUNK, &vo)) {
                for (int j = 0; j < NVC_VEC_CHUNK; j++)
                    if (nv_compare_elem(in, k0 + k + j, tol, &ret[k + j]) < 0)
                        return -EINVAL;
                continue;
            }
            vec_elems(in, k0 + k, &vo, ret + k);
        }
    }
    for (; k < n; k++)
        if (nv_compare_elem(in, k0 + k, tol, &ret[k]) < 0)
            return -EINVAL;
    return 0;
}
