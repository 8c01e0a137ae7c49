/* Vector values for nv_ref_round_n's decision: glibc's libmvec (the AVX2
 * variants _ZGVdN4v_f, four fp64 lanes per call) evaluates f where refmath.c
 * would call the scalar libm function one element at a time.
 *
 * Only the rounding uses these values. A decided element's result is the
 * correctly rounded f(x), which does not depend on how v was obtained; an
 * element the interval test cannot decide takes refmath.c's whole scalar path
 * (glibc, then MPFR), so results are the scalar path's bit for bit whenever the
 * bound below holds. nv_ref_eval_n keeps the scalar values: its hi is in every
 * reported error figure.
 *
 * Bound: glibc's libmvec page (sourceware.org/glibc/wiki/libmvec, "Libmvec
 * on x86_64") says the functions "were tested (via reasonable random
 * sampling) to pass 4-ulp maximum relative error criterion on their domains
 * in round-to-nearest computation mode"; glibc's manual table of known errors
 * does not cover vector versions. A sampled 4 ulps is not a proof (3.008 ulps
 * were reported for glibc 2.39's vector exp at -0x1.31000000000d0p-6 by the
 * pocl project's OpenCL conformance runs, and measured here with glibc 2.36; scalar
 * exp errs by 0.008 there), so we assume
 * eps = 2^-44: 256 ulps (1 ulp is at most 2^-52 relative), 64 times the
 * tested figure. A wider eps only sends more inputs to the scalar path: for fp32
 * targets a 2^-44 interval meets a rounding boundary with probability about
 * 2^-19. The bound is also checked by measurement, not only by citation:
 * tests/unit/numerics/test-refmath-mvec.c compares every value against MPFR and
 * fails past 2^-44, and the exhaustive fp32 jobs of bench/RESULTS.md compare the
 * rounded results of all 2^32 inputs with the reference (scalar glibc + MPFR).
 *
 * The range test of rm_decide_n (|v| in [2^-960, 2^1000], x finite, nonzero,
 * in the function's domain) sends every lane where a vector function's
 * special-case handling could differ to the scalar path. */
#include <fenv.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "refmath_internal.h"

#if defined(NV_HAVE_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__)
#define MVEC 1
#include <xmmintrin.h>

typedef double v4d __attribute__((vector_size(32)));

/* The x86_64 vector ABI names (glibc's math-vector.h, "d" = AVX2, N4 = four
 * lanes, v = one vector argument); called only when the CPU has AVX2. */
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_exp(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_exp2(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_expm1(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_log(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_log2(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_log1p(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_sin(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_cos(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_tanh(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_erf(v4d);

typedef v4d (*vfn)(v4d);
#endif

#ifdef MVEC
static vfn vector_fn(nv_fn f)
{
    switch (f) {
    case NV_FN_EXP:
        return _ZGVdN4v_exp;
    case NV_FN_EXP2:
        return _ZGVdN4v_exp2;
    case NV_FN_EXPM1:
        return _ZGVdN4v_expm1;
    case NV_FN_LOG:
        return _ZGVdN4v_log;
    case NV_FN_LOG2:
        return _ZGVdN4v_log2;
    case NV_FN_LOG1P:
        return _ZGVdN4v_log1p;
    case NV_FN_SIN:
        return _ZGVdN4v_sin;
    case NV_FN_COS:
        return _ZGVdN4v_cos;
    case NV_FN_TANH:
        return _ZGVdN4v_tanh;
    case NV_FN_ERF:
        return _ZGVdN4v_erf;
    default:
        return NULL;
    }
}

#endif

static int mvec_enabled = 1;

void nv_ref_vector_math(bool on)
{
    mvec_enabled = on;
}

bool rm_mvec_setup(nv_fn f, const nv_dtype_info *in, rm_batch *b)
{
#ifdef MVEC
    /* libmvec is tested in round to nearest only, and its range reductions
     * may rely on it (the wiki above); FTZ or DAZ left set by a plugin would
     * change its internals too. Both are read once per call, not per element. */
    if (!mvec_enabled || !in || in->mant_bits > 28 || !__builtin_cpu_supports("avx2") ||
        fegetround() != FE_TONEAREST || (_mm_getcsr() & 0x8040) != 0)
        return false;
    if (!vector_fn(f))
        return false;
    *b = rm_batch_for(in, 0x1p-44, true);
    b->domain = f == NV_FN_LOG || f == NV_FN_LOG2 ? RM_DOMAIN_POSITIVE
                : f == NV_FN_LOG1P                ? RM_DOMAIN_ABOVE_M1
                                                  : RM_DOMAIN_ALL;
    return true;
#else
    (void)f;
    (void)in;
    (void)b;
    return false;
#endif
}

#ifdef MVEC
typedef int64_t v4l __attribute__((vector_size(32)));

__attribute__((target("avx2,fma"))) static inline v4d clamp(v4d a, v4d lo, v4d hi)
{
    v4l above = a > hi, below = a < lo;
    a = (v4d)(((v4l)hi & above) | ((v4l)a & ~above));
    return (v4d)(((v4l)lo & below) | ((v4l)a & ~below));
}

/* The vector type crosses only this function's calls (AVX2 code, entered
 * after rm_mvec_setup's CPU check). */
__attribute__((target("avx2,fma"))) void rm_mvec_values(nv_fn f, const double *x, int len,
                                                         double *v)
{
    vfn fn = vector_fn(f);
    /* Past these the decision reads only that |v| > 2^1000 or < 2^-960
     * (e^700 > 2^1009, e^-700 < 2^-1009, 2^+-1010): such x are clamped
     * there, short of libmvec's special-case lanes, which call the scalar
     * function with errno (half of all fp32 encodings are such arguments of
     * exp). NaN compares false and stays. */
    double hi = f == NV_FN_EXP || f == NV_FN_EXPM1 ? 700 : f == NV_FN_EXP2 ? 1010 : INFINITY;
    double lo = f == NV_FN_EXP ? -700 : f == NV_FN_EXP2 ? -1010 : -INFINITY;
    const v4d vhi = {hi, hi, hi, hi}, vlo = {lo, lo, lo, lo};
    int k = 0;
    for (; k + 4 <= len; k += 4) {
        v4d a;
        memcpy(&a, x + k, sizeof a);
        a = fn(clamp(a, vlo, vhi));
        memcpy(v + k, &a, sizeof a);
    }
    if (k < len) {
        v4d a = {1, 1, 1, 1}; /* lanes past len: any value in every domain */
        memcpy(&a, x + k, sizeof(double) * (size_t)(len - k));
        a = fn(clamp(a, vlo, vhi));
        memcpy(v + k, &a, sizeof(double) * (size_t)(len - k));
    }
}
#else
void rm_mvec_values(nv_fn f, const double *x, int len, double *v)
{
    (void)f;
    (void)x;
    (void)len;
    (void)v;
}
#endif
