/* Reference math: correctly rounded elementary functions with an fp64 fast path
 * (Ziv's strategy). See refmath.h for the contract and refmath_mpfr.c for the
 * MPFR side.
 *
 * Fast path. f(x) is evaluated in fp64 (glibc libm plus a few roundings) to v
 * with a relative error bound eps(f, x). If the interval [v - eps|v|, v + eps|v|]
 * holds no multiple of half the target's quantum at v's binade (a superset of the
 * target's rounding boundaries: its representable values and the midpoints
 * between them, subnormal range and overflow thresholds included), every real in
 * the interval, the exact f(x) among them, rounds like v in every rounding
 * mode: v is rounded directly. Otherwise, and whenever v is not comfortably in
 * fp64's normal range (|v| outside [2^-960, 2^1000]: libm's relative bounds do
 * not hold for subnormal fp64 results), or the target is fp64 (fp64 evaluation
 * cannot decide fp64 rounding), MPFR decides.
 *
 * Rounding environment: the bounds hold in all four IEEE rounding modes, so the
 * fast path does not read the FP environment (reading MXCSR per call cost a
 * third of the fast path): glibc's libm-test-ulps tabulate each function in
 * every mode (exp_downward, tanh_upward, ...) within the few ulps above, and our
 * own operations err by at most 2u instead of u in a directed mode, inside the
 * 8x margin of the assumed bounds.
 *
 * Error bounds (relative, eps). glibc's manual (§19.7 "Known Maximum Errors in
 * Math Functions") and its x86_64 libm-test-ulps list at most 1-3 ulps for exp,
 * exp2, expm1, log, log2, log1p, sin, cos, tanh, erf, erfc in double; the
 * accuracy survey by Zimmermann ("Accuracy of Mathematical Functions", 2021)
 * measured at most 2.2 ulps (tanh). We assume 16 ulps, eps = 2^-48 (1 ulp is at
 * most 2^-52 relative). sqrt and division are correctly rounded (IEEE 754 §5.4.1):
 * 0.5 ulp, assumed 2^-52; rsqrt = 1/sqrt, two roundings, assumed 2^-51.
 * Compositions add their own roundings (u = 2^-53 each, Higham §2.2) and the
 * condition number of the outer function where it amplifies (see fast_eval).
 * Widening a bound only sends more inputs to MPFR: for fp32 targets a 2^-48
 * interval meets a boundary with probability about 2^-23. */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "ddsum.h"
#include "refmath_internal.h"

#include "refmath_tail.h"

static atomic_uint_fast64_t n_fast, n_mpfr;

/* Fast-path hits are counted per thread and added to n_fast in batches (an
 * atomic add per call would cost as much as the evaluation). */
#define FAST_BATCH 4096
#if defined(__GNUC__)
/* initial-exec: the core library is linked statically (built -fPIC), and the
 * default TLS model would call __tls_get_addr on every hit. */
static _Thread_local unsigned fast_pending __attribute__((tls_model("initial-exec")));
#else
static _Thread_local unsigned fast_pending;
#endif

static inline void count_fast(void)
{
    if (++fast_pending == FAST_BATCH) {
        atomic_fetch_add_explicit(&n_fast, FAST_BATCH, memory_order_relaxed);
        fast_pending = 0;
    }
}

static inline void count_fast_n(int n)
{
    fast_pending += (unsigned)n;
    while (fast_pending >= FAST_BATCH) {
        atomic_fetch_add_explicit(&n_fast, FAST_BATCH, memory_order_relaxed);
        fast_pending -= FAST_BATCH;
    }
}

/* n_fast lags by fewer than FAST_BATCH hits per thread. */
void nv_ref_stats(uint64_t *ret_fast, uint64_t *ret_mpfr)
{
    if (ret_fast)
        *ret_fast = atomic_load_explicit(&n_fast, memory_order_relaxed);
    if (ret_mpfr)
        *ret_mpfr = atomic_load_explicit(&n_mpfr, memory_order_relaxed);
}

/* Limits of functions at NaN, infinities, zeros and domain edges (IEEE 754-2019
 * §9.2 and ISO C Annex F for exp..erf, sqrt; rSqrt(-0) = -inf per §9.2.1).
 * Compositions take their limits: sigmoid(-inf) = +0, silu(-inf) = gelu(-inf) =
 * -0 (x sigmoid(x) -> 0 from below), sigmoid(0) = 1/2, silu/gelu(+-0) = +-0. */
RM_INLINE bool special_inl(nv_fn f, double x, double *ret)
{
    if (isnan(x)) {
        *ret = x;
        return true;
    }
    bool inf = isinf(x), zero = x == 0;
    if (!inf && !zero && x > 0)
        return false;
    double s = copysign(1.0, x);
    switch (f) {
    case NV_FN_EXP:
    case NV_FN_EXP2:
        if (inf || zero)
            *ret = inf ? (x > 0 ? x : 0.0) : 1.0;
        return inf || zero;
    case NV_FN_EXPM1:
        if (inf || zero)
            *ret = inf ? (x > 0 ? x : -1.0) : x;
        return inf || zero;
    case NV_FN_LOG:
    case NV_FN_LOG2:
    case NV_FN_SQRT:
    case NV_FN_RSQRT:
        if (zero)
            *ret = f == NV_FN_SQRT ? x : f == NV_FN_RSQRT ? s * INFINITY : -INFINITY;
        else if (x > 0) /* +inf */
            *ret = f == NV_FN_RSQRT ? 0.0 : x;
        else
            *ret = NAN; /* negative: outside the domain */
        return true;
    case NV_FN_LOG1P:
        if (zero || x == INFINITY)
            *ret = x;
        else if (x == -1)
            *ret = -INFINITY;
        else if (x < -1)
            *ret = NAN;
        else
            return false;
        return true;
    case NV_FN_SIN:
    case NV_FN_COS:
        if (inf)
            *ret = NAN;
        else if (zero)
            *ret = f == NV_FN_SIN ? x : 1.0;
        return inf || zero;
    case NV_FN_TANH:
    case NV_FN_ERF:
        if (inf || zero)
            *ret = inf ? s : x;
        return inf || zero;
    case NV_FN_SIGMOID:
        if (inf || zero)
            *ret = inf ? (x > 0 ? 1.0 : 0.0) : 0.5;
        return inf || zero;
    case NV_FN_SILU:
    case NV_FN_GELU_ERF:
    case NV_FN_GELU_TANH:
        if (inf || zero)
            *ret = inf && x > 0 ? x : inf ? -0.0 : x;
        return inf || zero;
    case NV_FN_RECIP:
        if (inf || zero)
            *ret = inf ? s * 0.0 : s * INFINITY;
        return inf || zero;
    default:
        return false;
    }
}

bool rm_special(nv_fn f, double x, double *ret)
{
    return special_inl(f, x, ret);
}

/* v = f(x) in fp64 and *ret_eps its relative error bound (see the file comment). */
RM_INLINE double fast_eval(nv_fn f, double x, double *ret_eps)
{
    const double eps_libm = 0x1p-48;
    *ret_eps = eps_libm;
    switch (f) {
    case NV_FN_EXP:
        return exp(x);
    case NV_FN_EXP2:
        return exp2(x);
    case NV_FN_EXPM1:
        return expm1(x);
    case NV_FN_LOG:
        return log(x);
    case NV_FN_LOG2:
        return log2(x);
    case NV_FN_LOG1P:
        return log1p(x);
    case NV_FN_SIN:
        return sin(x);
    case NV_FN_COS:
        return cos(x);
    case NV_FN_TANH:
        return tanh(x);
    case NV_FN_ERF:
        return erf(x);
    case NV_FN_SQRT:
        *ret_eps = 0x1p-52;
        return sqrt(x);
    case NV_FN_RSQRT:
        *ret_eps = 0x1p-51;
        return 1.0 / sqrt(x);
    case NV_FN_RECIP:
        *ret_eps = 0x1p-52;
        return 1.0 / x;
    case NV_FN_SIGMOID:
        *ret_eps = 0x1p-47;
        return sigmoid64(x);
    case NV_FN_SILU:
        *ret_eps = 0x1p-46;
        return x * sigmoid64(x);
    case NV_FN_GELU_ERF: {
        /* z = x/sqrt 2: 2u. x >= 0: 1 + erf(z), erf's condition number <= 1:
         * eps 2^-46. x < 0: erfc(|z|), condition number < 2z^2 + 2z + 1
         * (A&S 7.1.13), times z's 2u, plus erfc's own 2^-48. */
        double z = x * 0.7071067811865476;
        if (x >= 0) {
            *ret_eps = 0x1p-46;
            return 0.5 * x * (1.0 + erf(z));
        }
        *ret_eps = (2 * z * z - 2 * z + 1) * 0x1p-52 + 0x1p-46;
        return 0.5 * x * erfc(-z);
    }
    case NV_FN_GELU_TANH: {
        /* t = 2 sqrt(2/pi) (x + 0.044715 x^3): constants 1u each, x^3 2u, the
         * rest 3u (same signs): 8u. sigmoid's condition number <= |t| + 1. */
        double t = 2 * 0.7978845608028654 * (x + 0.044715 * (x * x * x));
        *ret_eps = (fabs(t) + 1) * 8 * 0x1p-53 + 0x1p-46;
        return x * sigmoid64(t);
    }
    default:
        *ret_eps = 1;
        return NAN;
    }
}

bool rm_on_half_quantum(double x, const nv_dtype_info *in)
{
    if (!in->is_float)
        return x * 2 == floor(x * 2);
    double a = fabs(x);
    if (a == 0)
        return true;
    int e = a >= 0x1p-1022 ? exp_of(a) : ilogb(a);
    if (e < in->emin)
        e = in->emin;
    int k = in->mant_bits + 1 - e;
    double s = k >= -1022 && k <= 1023 ? a * pow2i(k) : ldexp(a, k); /* a / (quantum/2) */
    return s == floor(s);
}

/* Whether v with relative error eps decides the rounding to in (see above).
 * Scaling by 2/quantum is exact (a power of two); the scaled values are below
 * 2^(p+2), so truncation to int64 is floor. */
static inline bool fast_decides(double v, double eps, const nv_dtype_info *in, int64_t *ret_c,
                                double *ret_h)
{
    double a = fabs(v);
    if (!(a >= 0x1p-960 && a <= 0x1p1000))
        return false;
    int e = exp_of(a);
    if (e < in->emin)
        e = in->emin;
    /* err gets 2^-40 of slack for the roundings of a*eps and a -+ err. */
    double err = a * eps * (1 + 0x1p-40);
    double sc = pow2i(in->mant_bits + 1 - e);
    double lo = (a - err) * sc, hi = (a + err) * sc;
    int64_t fl = (int64_t)lo;
    *ret_c = fl;
    *ret_h = pow2i(e - in->mant_bits - 1);
    return fl == (int64_t)hi && lo != (double)fl;
}

/* The rounding of a decided value from its half-quantum cell: |v| lies in
 * (c h, (c + 1) h), h = quantum/2, so the multiples of the quantum (even
 * multiples of h) around it are (c & ~1) h and ((c | 1) + 1) h; nearest takes
 * the one in whose half v lies, (c + 1) & ~1 (a tie cannot occur: v is not on
 * a boundary). Beyond max_finite nv_dtype_round applies the format's overflow. */
static inline double round_cell(double v, int64_t c, double h, nv_dtype dt, const nv_dtype_info *in,
                                const nv_round_mode *m)
{
    bool neg = signbit(v);
    int64_t k;
    switch (m->rounding) {
    case NV_ROUND_TOWARD_ZERO:
        k = c & ~(int64_t)1;
        break;
    case NV_ROUND_UP:
        k = neg ? c & ~(int64_t)1 : (c | 1) + 1;
        break;
    case NV_ROUND_DOWN:
        k = neg ? (c | 1) + 1 : c & ~(int64_t)1;
        break;
    default:
        k = (c + 1) & ~(int64_t)1;
        break;
    }
    double r = (double)k * h;
    if (r > in->max_finite)
        return nv_dtype_round(dt, v, m, 0);
    return neg ? -r : r;
}

/* The fast path applies to binary formats narrow enough that fp64 carries guard
 * bits (p <= 51), with subnormals (e8m0 and ints go to MPFR). */
static inline const nv_dtype_info *fast_target(nv_dtype dt)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    if (!in || !in->is_float || !in->has_subnormals || in->mant_bits > 50)
        return NULL;
    return in;
}

/* Functions whose fp64 value may underflow to 0 away from x = 0, with the sign
 * of their exact value there (exp, exp2, sigmoid positive; silu, gelu for x < 0
 * negative); 0 for the others. */
RM_INLINE int tiny_sign(nv_fn f)
{
    switch (f) {
    case NV_FN_EXP:
    case NV_FN_EXP2:
    case NV_FN_SIGMOID:
        return 1;
    case NV_FN_SILU:
    case NV_FN_GELU_ERF:
    case NV_FN_GELU_TANH:
        return -1;
    default:
        return 0;
    }
}

typedef enum fast_kind { FAST_NO, FAST_VALUE, FAST_PAIR, FAST_STANDIN } fast_kind;

/* The fast path: FAST_VALUE (v decides), FAST_PAIR (tail pair v + l decides),
 * FAST_STANDIN (v is a stand-in that rounds like f(x) in every format but fp64:
 * +-DBL_MAX past 2^1000, +-2^-1000 below 2^-960; the exact value overflows or
 * underflows all of them), or FAST_NO (MPFR decides). */
RM_INLINE fast_kind fast_try(nv_fn f, double x, const nv_dtype_info *in, bool need_l, double *ret_v,
                             double *ret_l, int64_t *ret_c, double *ret_h)
{
    if (!in)
        return FAST_NO;
    double eps, ta, tl;
    if (fast_tail(f, x, need_l, &ta, &tl, &eps)) {
        if (!fast_decides_pair(ta, tl, eps, in, ret_c, ret_h))
            return FAST_NO;
        *ret_v = ta;
        *ret_l = tl;
        return FAST_PAIR;
    }
    double v = fast_eval(f, x, &eps);
    double a = fabs(v);
    if (a > 0x1p1000 && !isnan(v)) {
        *ret_v = copysign(0x1.fffffffffffffp1023, v);
        return FAST_STANDIN;
    }
    if (a < 0x1p-960) {
        int sg = v != 0 ? (v > 0 ? 1 : -1) : tiny_sign(f);
        if (sg == 0 || (sg < 0 && x > 0))
            return FAST_NO;
        *ret_v = sg * 0x1p-1000;
        return FAST_STANDIN;
    }
    if (!fast_decides(v, eps, in, ret_c, ret_h))
        return FAST_NO;
    *ret_v = v;
    *ret_l = 0;
    return FAST_VALUE;
}

/* Where the exact value is past fp64's overflow threshold or below half its
 * smallest subnormal, the pair of refmath.h is fixed (+-DBL_MAX, +-2^970) or
 * (0, +2^-1074), so MPFR need not compute e^(2.5e8) to say so: e^710 > 2^1024,
 * e^-746 < 2^-1076, and the same for 2^x and e^x - 1 (whose other tail is
 * fast_tail's). Half the fp32 encodings are such arguments of exp. */
RM_INLINE void far_bounds(nv_fn f, double *over, double *under)
{
    *over = f == NV_FN_EXP || f == NV_FN_EXPM1 ? 710 : f == NV_FN_EXP2 ? 1025 : INFINITY;
    *under = f == NV_FN_EXP ? -746 : f == NV_FN_EXP2 ? -1077 : -INFINITY;
}

RM_INLINE bool far_pair(nv_fn f, double x, double *ret_hi, double *ret_lo)
{
    double over, under;
    far_bounds(f, &over, &under);
    if (x >= over) {
        *ret_hi = 0x1.fffffffffffffp1023;
        *ret_lo = 0x1p970;
        return true;
    }
    if (x <= under) {
        *ret_hi = 0;
        *ret_lo = 0x1p-1074;
        return true;
    }
    return false;
}

/* One element of nv_ref_eval, the target's info (fast_target) hoisted. */
RM_INLINE void eval_one(nv_fn f, double x, const nv_dtype_info *in, double *ret_hi,
                        double *ret_lo)
{
    double v, l;
    if (special_inl(f, x, &v)) {
        *ret_hi = v;
        *ret_lo = 0;
        return;
    }
    if (far_pair(f, x, ret_hi, ret_lo)) {
        count_fast();
        return;
    }
    int64_t c;
    double h;
    fast_kind k = fast_try(f, x, in, true, &v, &l, &c, &h);
    if (k == FAST_VALUE || k == FAST_PAIR) {
        count_fast();
        nv_two_sum(v, l, ret_hi, ret_lo); /* a tail's a + l, normalised and exact */
        return;
    }
    atomic_fetch_add_explicit(&n_mpfr, 1, memory_order_relaxed);
    rm_mpfr_pair(f, x, 0, ret_hi, ret_lo);
}

void nv_ref_eval(nv_fn f, double x, nv_dtype dt, double *ret_hi, double *ret_lo)
{
    if ((unsigned)f >= NV_FN_COUNT) {
        *ret_hi = NAN;
        *ret_lo = 0;
        return;
    }
    eval_one(f, x, fast_target(dt), ret_hi, ret_lo);
}

RM_INLINE bool batch_special(const rm_batch *b, double x)
{
    if (!isfinite(x) || x == 0)
        return true;
    return b->domain == RM_DOMAIN_POSITIVE ? !(x > 0)
           : b->domain == RM_DOMAIN_ABOVE_M1 ? !(x > -1)
                                             : false;
}

#define BATCH_N 256

/* The scalar path's rules past the cell decision, for the batch
 * (refmath_internal.h says which and why the saturated tails are exact). */
static void rm_batch_far(rm_batch *b, nv_fn f, nv_dtype dt, const nv_round_mode *m)
{
    b->far = true;
    if (!b->round) {
        far_bounds(f, &b->far_over, &b->far_under);
        /* eval_one's pair is the tail's there, not (v, 0): leave it to eval_one. */
        if (f == NV_FN_EXP)
            b->tail_below = EXP_TAIL_BELOW;
        return;
    }
    b->over[0] = nv_dtype_round(dt, 0x1.fffffffffffffp1023, m, 0);
    b->over[1] = nv_dtype_round(dt, -0x1.fffffffffffffp1023, m, 0);
    b->under[0] = nv_dtype_round(dt, 0x1p-1000, m, 0);
    b->under[1] = nv_dtype_round(dt, -0x1p-1000, m, 0);
    b->tiny_sign = tiny_sign(f);
    if (b->mant_bits > 28 || m->rounding != NV_ROUND_NEAREST_EVEN)
        return;
    switch (f) {
    case NV_FN_EXP: /* |e^x - 1| < 2^-35 */
        b->sat = RM_SAT_ABS;
        b->sat_lo = 0;
        b->sat_hi = EXP_TAIL_BELOW;
        b->sat_val = 1;
        break;
    case NV_FN_TANH: /* 1 - tanh 13 = 2 / (e^26 + 1) < 2^-36 */
        b->near_below = 0x1p-27; /* x - tanh x < |x|^3 / 3 < 2^-55 |x| */
        b->sat = RM_SAT_ODD;
        b->sat_lo = 13;
        b->sat_hi = INFINITY;
        b->sat_val = 1;
        break;
    case NV_FN_ERF: /* erfc 4.5 < 2^-32 (A&S 7.1.13) */
        b->sat = RM_SAT_ODD;
        b->sat_lo = 4.5;
        b->sat_hi = INFINITY;
        b->sat_val = 1;
        break;
    case NV_FN_EXPM1: /* e^-25 < 2^-36 */
        b->sat = RM_SAT_SIGNED;
        b->sat_lo = -INFINITY;
        b->sat_hi = -25;
        b->sat_val = -1;
        break;
    default:
        break;
    }
}

/* v = fast_eval(f, x) over a chunk (none where its value is unused: a
 * special x, and in the pair's far rules x past far_over or far_under, which
 * decide it, or below tail_below, which leaves it to the tail). */
RM_INLINE void batch_values(nv_fn f, const rm_batch *b, const double *x, int len, double *v)
{
    double eps;
    bool far = b->far && !b->round;
    for (int j = 0; j < len; j++)
        v[j] = batch_special(b, x[j]) || (far && (x[j] >= b->far_over || x[j] <= b->far_under ||
                                                  fabs(x[j]) < b->tail_below))
                   ? 0
                   : fast_eval(f, x[j], &eps);
}

/* eval_one's pair for e^x with 0 < |x| < EXP_TAIL_BELOW into a target of at
 * most 28 fraction bits: fast_tail's a = 1, l = expm1(x), which
 * fast_decides_pair always decides there (1 is a cell boundary, |l| < 2^-36 is
 * far inside the half quantum 2^-30 on either side and its error bound below
 * |l|), so the pair is two_sum(1, l) without the decision's steps: the
 * 1.5 x 10^9 fp32 encodings of that range in an exhaustive case. */
RM_INLINE bool exp_tail_pair(nv_fn f, const rm_batch *b, double x, double *ret_hi, double *ret_lo)
{
    double a, l, eps;
    /* An undecided lane may be special (NaN fails the range test): eval_one
     * tests those before fast_tail. */
    if (f != NV_FN_EXP || b->tail_below == 0 || b->mant_bits > 28 || !(fabs(x) < b->tail_below) ||
        !fast_tail(NV_FN_EXP, x, true, &a, &l, &eps))
        return false;
    count_fast();
    nv_two_sum(a, l, ret_hi, ret_lo);
    return true;
}

#define EVAL_N_CASE(F)                                                                             \
    case F:                                                                                        \
        if (batch) {                                                                               \
            for (int64_t i0 = 0; i0 < n; i0 += BATCH_N) {                                          \
                int len = n - i0 < BATCH_N ? (int)(n - i0) : BATCH_N;                              \
                batch_values(F, &bt, x + i0, len, v);                                              \
                count_fast_n(rm_decide_n(&bt, x + i0, v, len, hi + i0, lo + i0, und));             \
                for (int j = 0; j < len; j++)                                                      \
                    if (und[j] && !exp_tail_pair(F, &bt, x[i0 + j], &hi[i0 + j], &lo[i0 + j]))      \
                        eval_one(F, x[i0 + j], in, &hi[i0 + j], &lo[i0 + j]);                      \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                            \
            eval_one(F, x[i], in, &hi[i], &lo[i]);                                                 \
        break;

/* refmath_tail_pairs.c's chunks, eval_one where they leave an element. */
#define TAIL_PAIRS_N(F)                                                                            \
    for (int64_t i0 = 0; i0 < n; i0 += BATCH_N) {                                                  \
        int len = n - i0 < BATCH_N ? (int)(n - i0) : BATCH_N;                                      \
        count_fast_n(rm_tail_pairs_n(F, in, x + i0, len, hi + i0, lo + i0, und));                  \
        for (int j = 0; j < len; j++)                                                              \
            if (und[j])                                                                            \
                eval_one(F, x[i0 + j], in, &hi[i0 + j], &lo[i0 + j]);                              \
    }

void nv_ref_eval_n(nv_fn f, const double *x, int64_t n, nv_dtype dt, double *hi, double *lo)
{
    assert(n >= 0 && ((x && hi && lo) || n == 0));
    const nv_dtype_info *in = fast_target(dt);
    rm_batch bt;
    bool batch = rm_batch_setup(f, in, false, &bt);
    if (batch)
        rm_batch_far(&bt, f, dt, NULL);
    double v[BATCH_N];
    uint8_t und[BATCH_N];
    if (rm_tail_pairs_setup(f, in)) {
        if (f == NV_FN_TANH) {
            TAIL_PAIRS_N(NV_FN_TANH)
        } else {
            TAIL_PAIRS_N(NV_FN_ERF)
        }
        return;
    }
    /* One loop per function, so that each inlines its own fast path. */
    switch (f) {
        EVAL_N_CASE(NV_FN_EXP)
        EVAL_N_CASE(NV_FN_EXP2)
        EVAL_N_CASE(NV_FN_EXPM1)
        EVAL_N_CASE(NV_FN_LOG)
        EVAL_N_CASE(NV_FN_LOG2)
        EVAL_N_CASE(NV_FN_LOG1P)
        EVAL_N_CASE(NV_FN_SIN)
        EVAL_N_CASE(NV_FN_COS)
        EVAL_N_CASE(NV_FN_TANH)
        EVAL_N_CASE(NV_FN_SIGMOID)
        EVAL_N_CASE(NV_FN_ERF)
        EVAL_N_CASE(NV_FN_GELU_ERF)
        EVAL_N_CASE(NV_FN_GELU_TANH)
        EVAL_N_CASE(NV_FN_SILU)
        EVAL_N_CASE(NV_FN_SQRT)
        EVAL_N_CASE(NV_FN_RSQRT)
        EVAL_N_CASE(NV_FN_RECIP)
    default:
        for (int64_t i = 0; i < n; i++) {
            hi[i] = NAN;
            lo[i] = 0;
        }
        break;
    }
}

double nv_ref_round(nv_fn f, double x, nv_dtype dt, nv_rounding rounding)
{
    if ((unsigned)f >= NV_FN_COUNT)
        return NAN;
    double out;
    nv_ref_round_n(f, &x, 1, dt, rounding, &out);
    return out;
}

/* One element of nv_ref_round with the target's info and mode hoisted. */
RM_INLINE double round_one(nv_fn f, double x, nv_dtype dt, const nv_dtype_info *in,
                           const nv_round_mode *m)
{
    double v, l, h;
    int64_t c;
    if (special_inl(f, x, &v))
        return nv_dtype_round(dt, v, m, 0);
    fast_kind k = fast_try(f, x, in, false, &v, &l, &c, &h);
    if (k != FAST_NO) {
        count_fast();
        if (k == FAST_VALUE || k == FAST_PAIR) /* a tail's v is a: it has y's sign */
            return round_cell(v, c, h, dt, in, m);
        return nv_dtype_round(dt, v, m, 0);
    }
    atomic_fetch_add_explicit(&n_mpfr, 1, memory_order_relaxed);
    return rm_mpfr_round(f, x, 0, dt, m->rounding);
}

/* round_one with f not known at compile time: the elements the vector
 * values leave undecided (a few in 2^19 for fp32 targets). */
static double round_one_any(nv_fn f, double x, nv_dtype dt, const nv_dtype_info *in,
                            const nv_round_mode *m)
{
    return round_one(f, x, dt, in, m);
}

#define ROUND_N_CASE(F)                                                                            \
    case F:                                                                                        \
        if (batch) {                                                                               \
            for (int64_t i0 = 0; i0 < n; i0 += BATCH_N) {                                          \
                int len = n - i0 < BATCH_N ? (int)(n - i0) : BATCH_N;                              \
                batch_values(F, &bt, x + i0, len, v);                                              \
                count_fast_n(rm_decide_n(&bt, x + i0, v, len, out + i0, NULL, und));               \
                for (int j = 0; j < len; j++)                                                      \
                    if (und[j])                                                                    \
                        out[i0 + j] = round_one(F, x[i0 + j], dt, in, &m);                         \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                            \
            out[i] = round_one(F, x[i], dt, in, &m);                                               \
        break;

void nv_ref_round_n(nv_fn f, const double *x, int64_t n, nv_dtype dt, nv_rounding rounding,
                    double *out)
{
    assert(n >= 0 && ((x && out) || n == 0));
    assert((unsigned)dt < NV_DT_COUNT);
    nv_round_mode m = {rounding == NV_ROUND_STOCHASTIC ? NV_ROUND_NEAREST_EVEN : rounding, false,
                       false};
    const nv_dtype_info *in = fast_target(dt);
    rm_batch bt;
    double v[BATCH_N];
    uint8_t und[BATCH_N];
    /* Fewer than a vector's four lanes take the scalar path: nv_ref_round,
     * one element, stays the independent path the batch is tested against. */
    if (n >= 4 && m.rounding == NV_ROUND_NEAREST_EVEN && rm_mvec_setup(f, in, &bt)) {
        rm_batch_far(&bt, f, dt, &m);
        for (int64_t i0 = 0; i0 < n; i0 += BATCH_N) {
            int len = n - i0 < BATCH_N ? (int)(n - i0) : BATCH_N;
            rm_mvec_values(f, x + i0, len, v);
            count_fast_n(rm_decide_n(&bt, x + i0, v, len, out + i0, NULL, und));
            for (int j = 0; j < len; j++)
                if (und[j])
                    out[i0 + j] = round_one_any(f, x[i0 + j], dt, in, &m);
        }
        return;
    }
    bool batch = m.rounding == NV_ROUND_NEAREST_EVEN && rm_batch_setup(f, in, true, &bt);
    if (batch)
        rm_batch_far(&bt, f, dt, &m);
    /* One loop per function, so that each inlines its own fast path. */
    switch (f) {
        ROUND_N_CASE(NV_FN_EXP)
        ROUND_N_CASE(NV_FN_EXP2)
        ROUND_N_CASE(NV_FN_EXPM1)
        ROUND_N_CASE(NV_FN_LOG)
        ROUND_N_CASE(NV_FN_LOG2)
        ROUND_N_CASE(NV_FN_LOG1P)
        ROUND_N_CASE(NV_FN_SIN)
        ROUND_N_CASE(NV_FN_COS)
        ROUND_N_CASE(NV_FN_TANH)
        ROUND_N_CASE(NV_FN_SIGMOID)
        ROUND_N_CASE(NV_FN_ERF)
        ROUND_N_CASE(NV_FN_GELU_ERF)
        ROUND_N_CASE(NV_FN_GELU_TANH)
        ROUND_N_CASE(NV_FN_SILU)
        ROUND_N_CASE(NV_FN_SQRT)
        ROUND_N_CASE(NV_FN_RSQRT)
        ROUND_N_CASE(NV_FN_RECIP)
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = NAN;
        break;
    }
}

void nv_ref_pow(double x, double y, nv_dtype dt, double *ret_hi, double *ret_lo)
{
    (void)dt; /* MPFR decides every case; the pair suits any dt */
    double v = pow(x, y);
    /* pow's special cases (ISO C F.10.4.4) are exact: NaN, inf or zero results,
     * and x or y in {0, +-1, +-inf}. */
    if (isnan(v) || isinf(x) || isinf(y) || x == 0 || y == 0 || x == 1) {
        *ret_hi = v;
        *ret_lo = 0;
        return;
    }
    atomic_fetch_add_explicit(&n_mpfr, 1, memory_order_relaxed);
    rm_mpfr_pair(RM_FN_POW, x, y, ret_hi, ret_lo);
}

double nv_ref_pow_round(double x, double y, nv_dtype dt, nv_rounding rounding)
{
    nv_round_mode m = {rounding == NV_ROUND_STOCHASTIC ? NV_ROUND_NEAREST_EVEN : rounding, false,
                       false};
    double v = pow(x, y);
    if (isnan(v) || isinf(x) || isinf(y) || x == 0 || y == 0 || x == 1)
        return nv_dtype_round(dt, v, &m, 0);
    const nv_dtype_info *in = fast_target(dt);
    /* glibc pow is documented to 1 ulp (manual §19.7); assume 16. */
    int64_t c;
    double h;
    if (in && fast_decides(v, 0x1p-48, in, &c, &h)) {
        count_fast();
        return round_cell(v, c, h, dt, in, &m);
    }
    atomic_fetch_add_explicit(&n_mpfr, 1, memory_order_relaxed);
    return rm_mpfr_round(RM_FN_POW, x, y, dt, m.rounding);
}
