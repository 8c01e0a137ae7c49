/* nv_ref_round_n with its fp64 values from glibc's vector math library
 * (refmath_mvec.c) for every function that has them (exp, exp2, expm1, log,
 * log2, log1p, sin, cos, tanh, erf), into fp32, bf16 and fp16:
 * - the results bit for bit against the scalar fast path (the library off),
 *   against nv_ref_round one element at a time, and against MPFR alone on a
 *   sample, on inputs over many binades of both signs and at each function's
 *   edges (overflow and underflow thresholds, saturation, near 0 (tanh's
 *   x (1 - 2^-50) rule at and below 2^-27, into the subnormals), 1 and -1,
 *   huge arguments of sin and cos), specials among them;
 * - the vector values' relative error against MPFR (nv_ref_eval into fp64: a
 *   pair within 2^-100) on every input the decision reads, which must stay
 *   inside the eps refmath_mvec.c assumes (2^-44); the largest is printed in
 *   units of 2^-52 (one fp64 ulp of [1, 2)) beside the 4 ulps glibc states;
 * - under a directed rounding mode, the results again MPFR's (the vector
 *   values are not used there: libmvec is tested in round to nearest only). */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/ref/refmath.h"
#include "core/ref/refmath_internal.h"

#define N 8192

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static bool same(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static double x[N], out[N], scal[N], v[N];

/* Around each function's edges: values c (1 + t), t small, both signs. */
static double edge(nv_fn f)
{
    static const double exp_e[] = {88.72283935546875, -87.33654022216797, -103.97, 0x1p-25, 20};
    static const double exp2_e[] = {128, -126, -149, 0x1p-25, 64};
    static const double expm1_e[] = {0x1p-30, 1e-10, -17, -88, 88.7};
    static const double log_e[] = {1, 0x1p-126, 0x1p-149, 3.4e38, 2.718281828};
    static const double log1p_e[] = {-0.99999994, 0x1p-30, 1e-8, -0.5, 1e30};
    static const double trig_e[] = {3.14159265, 1.5707963, 1e6, 1e22, 3.4e38};
    static const double tanh_e[] = {0x1p-30, 1e-4, 9.01, 0.55, 19};
    static const double erf_e[] = {0x1p-30, 1e-4, 3.92, 0.48, 5.9};
    const double *e;
    switch (f) {
    case NV_FN_EXP:
        e = exp_e;
        break;
    case NV_FN_EXP2:
        e = exp2_e;
        break;
    case NV_FN_EXPM1:
        e = expm1_e;
        break;
    case NV_FN_LOG:
    case NV_FN_LOG2:
        e = log_e;
        break;
    case NV_FN_LOG1P:
        e = log1p_e;
        break;
    case NV_FN_SIN:
    case NV_FN_COS:
        e = trig_e;
        break;
    case NV_FN_TANH:
        e = tanh_e;
        break;
    default:
        e = erf_e;
        break;
    }
    /* The batch's saturated tails and stand-ins (refmath_internal.h): at
     * and around their thresholds, and far past them. */
    static const double far_e[] = {0x1p-36, 13,   4.5,  -25,       710,      -746,     -745.5,
                                   1e4,     1025, -1077, 0x1p-27, 0x1p-60, 0x1p-126, 0x1p-140};
    if (next() % 4 == 0) {
        double c = far_e[next() % (sizeof far_e / sizeof far_e[0])];
        double y = (double)(float)(c * (1 + ldexp((double)(next() % 64) - 32, -24)));
        return f == NV_FN_LOG1P || f == NV_FN_LOG || f == NV_FN_LOG2 || next() % 2 ? fabs(y) : -fabs(y);
    }
    double c = e[next() % 5], t = ldexp((double)(next() % 4096) - 2048, -(int)(next() % 40) - 12);
    double y = (double)(float)(c * (1 + t));
    return f == NV_FN_LOG1P || f == NV_FN_LOG || f == NV_FN_LOG2 || next() % 2 ? y : -y;
}

static void fill(nv_fn f)
{
    static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1.0, 1.0, 0x1p-149, -0x1p-149};
    for (int i = 0; i < N; i++) {
        uint64_t r = next();
        if (r % 3 == 0) {
            x[i] = edge(f);
        } else {
            double m = 1 + (double)(next() % (1u << 23)) / (1u << 23);
            double y = (double)(float)ldexp(m, (int)(next() % 48) - 40);
            x[i] = next() % 2 ? -y : y;
        }
        if (next() % 64 == 0)
            x[i] = sp[next() % (sizeof sp / sizeof sp[0])];
    }
    /* A double input where glibc's vector exp errs by 3.008 ulps (measured
     * here with glibc 2.36 as well): the largest error reported so far. */
    if (f == NV_FN_EXP)
        x[0] = -0x1.31000000000d0p-6;
}

/* Where rm_decide_n reads the value: x finite, nonzero, in the domain, and
 * |v| within [2^-960, 2^1000]. */
static bool read_by_decision(nv_fn f, double xi, double vi)
{
    if (!isfinite(xi) || xi == 0)
        return false;
    if ((f == NV_FN_LOG || f == NV_FN_LOG2) && !(xi > 0))
        return false;
    if (f == NV_FN_LOG1P && !(xi > -1))
        return false;
    return fabs(vi) >= 0x1p-960 && fabs(vi) <= 0x1p1000;
}

int main(void)
{
    static const nv_fn fns[] = {NV_FN_EXP, NV_FN_EXP2, NV_FN_EXPM1, NV_FN_LOG, NV_FN_LOG2,
                                NV_FN_LOG1P, NV_FN_SIN, NV_FN_COS, NV_FN_TANH, NV_FN_ERF};
    static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16};
    rm_batch probe;
    if (!rm_mvec_setup(NV_FN_EXP, nv_dtype_get(NV_DT_FP32), &probe)) {
        /* No libmvec or no AVX2: nv_ref_round_n is the scalar path; the
         * comparisons below still hold, the bound is not measured. */
        tap_diag("glibc's vector math library is not used on this machine");
    }
    bool have = rm_mvec_setup(NV_FN_EXP, nv_dtype_get(NV_DT_FP32), &probe);
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        nv_fn f = fns[k];
        fill(f);
        for (int d = 0; d < 3; d++) {
            nv_ref_vector_math(false);
            nv_ref_round_n(f, x, N, dts[d], NV_ROUND_NEAREST_EVEN, scal);
            nv_ref_vector_math(true);
            nv_ref_round_n(f, x, N, dts[d], NV_ROUND_NEAREST_EVEN, out);
            int bad_sc = 0, bad_one = 0, bad_mpfr = 0;
            for (int i = 0; i < N; i++) {
                bad_sc += !same(out[i], scal[i]);
                bad_one += !same(out[i], nv_ref_round(f, x[i], dts[d], NV_ROUND_NEAREST_EVEN));
                if (i % 16 == 0)
                    bad_mpfr +=
                        !same(out[i], nv_ref_round_mpfr(f, x[i], dts[d], NV_ROUND_NEAREST_EVEN));
            }
            tap_ok(bad_sc == 0 && bad_one == 0 && bad_mpfr == 0,
                   "%s into %s: vector values = scalar path (%d differ), = one by one (%d), = "
                   "MPFR on %d (%d differ)",
                   nv_fn_name(f), nv_dtype_name(dts[d]), bad_sc, bad_one, N / 16, bad_mpfr);
        }
        if (have) {
            rm_mvec_values(f, x, N, v);
            double worst = 0, worst_x = 0;
            int read = 0;
            for (int i = 0; i < N; i++) {
                if (!read_by_decision(f, x[i], v[i]))
                    continue;
                double h, l;
                nv_ref_eval(f, x[i], NV_DT_FP64, &h, &l);
                double rel = fabs((v[i] - h) - l) / fabs(h);
                read++;
                if (!(rel <= worst)) {
                    worst = rel;
                    worst_x = x[i];
                }
            }
            tap_ok(worst <= 0x1p-44 && read > N / 2,
                   "%s: libmvec's value within 2^-44 relative of MPFR's on %d inputs (largest "
                   "%.3g = %.2f x 2^-52 at x = %a; glibc states 4 ulps)",
                   nv_fn_name(f), read, worst, worst * 0x1p52, worst_x);
        }
        /* Directed mode: the vector values are not taken. */
        fesetround(FE_UPWARD);
        nv_ref_round_n(f, x, N, NV_DT_FP32, NV_ROUND_NEAREST_EVEN, out);
        fesetround(FE_TONEAREST);
        int bad_up = 0;
        for (int i = 0; i < N; i += 16)
            bad_up += !same(out[i], nv_ref_round_mpfr(f, x[i], NV_DT_FP32, NV_ROUND_NEAREST_EVEN));
        tap_ok(bad_up == 0, "%s into fp32 with the FP environment rounding upward: = MPFR on %d "
               "(%d differ)", nv_fn_name(f), N / 16, bad_up);
    }
    rm_batch b;
    fesetround(FE_DOWNWARD);
    bool directed = rm_mvec_setup(NV_FN_EXP, nv_dtype_get(NV_DT_FP32), &b);
    fesetround(FE_TONEAREST);
    tap_ok(!directed, "no vector values while the FP environment rounds downward");
    return tap_done();
}
