/* Reference math: the exact value of each elementary function, and its correctly
 * rounded value in any dtype, through MPFR with an fp64 fast path (Ziv's strategy:
 * evaluate in fp64 with a known error bound; call MPFR only when that interval
 * straddles a rounding boundary of the target dtype). */
#ifndef NUMVAL_REFMATH_H
#define NUMVAL_REFMATH_H

#include <stdint.h>

#include "core/numerics/dtype.h"

typedef enum nv_fn {
    NV_FN_EXP, NV_FN_EXP2, NV_FN_EXPM1, NV_FN_LOG, NV_FN_LOG2, NV_FN_LOG1P,
    NV_FN_SIN, NV_FN_COS, NV_FN_TANH, NV_FN_SIGMOID, NV_FN_ERF,
    NV_FN_GELU_ERF,  /* x/2 (1 + erf(x/sqrt 2)) */
    NV_FN_GELU_TANH, /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    NV_FN_SILU,      /* x sigmoid(x) */
    NV_FN_SQRT, NV_FN_RSQRT, NV_FN_RECIP,
    NV_FN_COUNT
} nv_fn;

const char *nv_fn_name(nv_fn f);

/* f(x) as hi + lo. The pair is close enough to the exact value that rounding it
 * to dt under any rounding mode gives the correctly rounded result, and its
 * relative error is below 2^-100 whenever MPFR was needed, below 2^-50 otherwise.
 * (For dt == NV_DT_FP64 MPFR always decides.) Thread-safe.
 * Precisions (numerics helper): where the fp64 fast path decided, the error is
 * that path's documented bound instead: 2^-48 for libm functions, 2^-45 for the
 * compositions, more for gelu_erf/gelu_tanh of large negative x (refmath.c);
 * rounding remains correct. Outside fp64's normal range the pair keeps only
 * what rounding needs (refmath_mpfr.c): use nv_ref_round_pair to round it. */
void nv_ref_eval(nv_fn f, double x, nv_dtype dt, double *ret_hi, double *ret_lo);

/* nv_ref_eval over an array: (hi[i], lo[i]) as nv_ref_eval(f, x[i], dt) gives
 * them, for i < n (no aliasing of x with hi or lo). One dispatch per call. */
void nv_ref_eval_n(nv_fn f, const double *x, int64_t n, nv_dtype dt, double *hi, double *lo);

/* Rounds a pair from nv_ref_eval / nv_ref_pow to dt under rounding (stochastic
 * reads as nearest-even): the correctly rounded result, except for dt == fp64
 * when |hi| < 2^-968 or hi is infinite (the pair is then fp64's nearest value
 * alone; use nv_ref_round). Added by the numerics helper. */
double nv_ref_round_pair(double hi, double lo, nv_dtype dt, nv_rounding rounding);

/* The correctly rounded f(x) in dt under rounding (never stochastic). */
double nv_ref_round(nv_fn f, double x, nv_dtype dt, nv_rounding rounding);

/* nv_ref_round over an array: out[i] = nv_ref_round(f, x[i], dt, rounding) for
 * i < n (out may alias x). Added by the numerics helper: one dispatch per call. */
void nv_ref_round_n(nv_fn f, const double *x, int64_t n, nv_dtype dt, nv_rounding rounding,
                    double *out);

/* The same through MPFR alone (no fast path): the oracle for tests and benches. */
double nv_ref_round_mpfr(nv_fn f, double x, nv_dtype dt, nv_rounding rounding);

/* x^y exact value as hi + lo (MPFR-backed; same contract as nv_ref_eval). */
void nv_ref_pow(double x, double y, nv_dtype dt, double *ret_hi, double *ret_lo);

/* x^y correctly rounded in dt under rounding (fp64 fast path with glibc pow,
 * MPFR when it cannot decide). Added by the numerics helper. */
double nv_ref_pow_round(double x, double y, nv_dtype dt, nv_rounding rounding);

/* Free the calling thread's MPFR state: refmath's own variables and MPFR's
 * thread-local constant caches (log 2, pi ... that mpfr_log and friends fill in
 * any code of the thread). Call at the end of every thread that computed
 * references; the thread may compute again afterwards. */
void nv_ref_thread_done(void);

/* Whether nv_ref_round_n may take its fp64 values from glibc's vector math
 * library (refmath_mvec.c; on by default where the library and AVX2 are
 * present). Results are the same either way; tests and benches turn it off
 * to compare the two paths. Not thread-safe: set it before threads start. */
void nv_ref_vector_math(bool on);

/* Counters (per process) of fast-path hits and MPFR calls, for benchmarks. */
void nv_ref_stats(uint64_t *ret_fast, uint64_t *ret_mpfr);

#endif
