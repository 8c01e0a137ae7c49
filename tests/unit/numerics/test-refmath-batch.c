/* The batched fast path of nv_ref_round_n and nv_ref_eval_n (refmath_batch.c
 * decides chunks four elements at a time) against one element at a time
 * (nv_ref_round and nv_ref_eval: a single element never reaches the batch), bit
 * for bit, for every batched function (exp, exp2, sin, cos, reciprocal, log,
 * log2, sqrt, rsqrt, log1p) into fp32, bf16 and fp16: inputs over many binades
 * of both signs, near the overflow and underflow of exp, specials and domain
 * edges, past fp64's overflow and underflow, near 0; and against MPFR alone
 * (nv_ref_round_mpfr) on a sample. With libmvec present, the rounded
 * results are taken once with its values and once without. Also tanh's and
 * erf's vector pairs (test_tail_pairs). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/ref/refmath.h"

#define N 6000

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint64_t next(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static bool same(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static double x[N], out[N], hi[N], lo[N];

static void fill(nv_fn f)
{
    static const double sp[] = {NAN,     INFINITY, -INFINITY, 0.0,        -0.0,       -1.0,
                                1.0,     88.72283935546875,   -103.97,    -87.33654022216797,
                                0x1p-149, 1e30,    710,       -746,       -745.5,     -700,
                                1025,    -1077,    -1070,     0x1p-36,    -0x1.fffffep-37};
    for (int i = 0; i < N; i++) {
        double m = 1 + (double)(next() % (1u << 23)) / (1u << 23);
        int e = (int)(next() % 40) - 20;
        if (f == NV_FN_EXP || f == NV_FN_EXP2) /* up to 2^10: past fp32's and fp64's */
            e = next() % 4 ? (int)(next() % 14) - 3 : (int)(next() % 30) - 44; /* and near 0 */
        double v = (double)(float)ldexp(m, e);
        x[i] = next() % 2 ? -v : v;
        if (next() % 50 == 0)
            x[i] = sp[next() % (sizeof sp / sizeof sp[0])];
    }
}

/* tanh's and erf's pairs (refmath_tail_pairs.c, four at a time in their
 * tails) against eval_one's, bit for bit: random fp32 encodings (half below
 * 2^-20, half past 13), both sides of every edge of the vector path's ranges
 * (2^-300, 2^-20, 2^-27, 13, 1024, DBL_MAX; erf's 4.5, 6.5, 28, and 26.5
 * where glibc's erfc is subnormal), doubles near the edges of tanh_small's
 * interval test, specials; into every fast target. */
static void test_tail_pairs(nv_fn fn)
{
    static const double edge[] = {0x1p-300, 0x1p-20, 0x1p-27, 13, 1024, 0x1.fffffffffffffp1023,
                                  0x1p-1074, 0x1p-1022, 21, 512, 0x1.8p-21, 0x1.fffffep-21,
                                  4.5, 6.5, 28, 26.5, 27.3};
    int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)next();
        float f;
        memcpy(&f, &u, sizeof f);
        x[i] = f;
        if (i < 16 * ne) { /* each edge, its neighbours and their negations */
            double e = edge[i / 16];
            int k = i % 16;
            double v = k % 4 == 0 ? e : k % 4 == 1 ? nextafter(e, 0) : k % 4 == 2 ? nextafter(e, INFINITY)
                                                                           : e * (1 + 0x1p-30);
            x[i] = k >= 8 ? -v : v;
        } else if (next() % 8 == 0) { /* doubles, not fp32 values: tanh_small's fp64 range */
            x[i] = ldexp(1 + (double)(next() >> 11) * 0x1p-53, -(int)(next() % 300) - 20);
        } else if (next() % 64 == 0) {
            static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -NAN};
            x[i] = sp[next() % 6];
        }
    }
    static const nv_dtype dts[] = {NV_DT_FP32,     NV_DT_BF16,     NV_DT_FP16,
                                   NV_DT_FP8_E4M3, NV_DT_FP8_E5M2, NV_DT_FP6_E2M3,
                                   NV_DT_FP6_E3M2, NV_DT_FP4_E2M1, NV_DT_TF32,
                                   NV_DT_FP64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (int i = 0; i < N; i++)
            hi[i] = lo[i] = -1.5; /* what an undecided lane must not leave */
        nv_ref_eval_n(fn, x, N, dts[d], hi, lo);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            double h, l;
            nv_ref_eval(fn, x[i], dts[d], &h, &l);
            if ((!same(hi[i], h) || !same(lo[i], l)) && bad++ == 0)
                tap_diag("first pair differing: x = %a: batch (%a, %a), one (%a, %a)", x[i], hi[i],
                         lo[i], h, l);
        }
        tap_ok(bad == 0, "%s into %s: pairs of the batch = one by one (%d of %d differ)",
               nv_fn_name(fn), nv_dtype_name(dts[d]), bad, N);
    }
}

int main(void)
{
    test_tail_pairs(NV_FN_TANH);
    test_tail_pairs(NV_FN_ERF);
    static const nv_fn fns[] = {NV_FN_EXP, NV_FN_EXP2, NV_FN_SIN,  NV_FN_COS,  NV_FN_RECIP,
                                NV_FN_LOG, NV_FN_LOG2, NV_FN_SQRT, NV_FN_RSQRT, NV_FN_LOG1P};
    static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        fill(fns[f]);
        for (int d = 0; d < 6; d++) {
            /* The second three: glibc's scalar values, where libmvec would
             * give nv_ref_round_n its values. */
            nv_ref_vector_math(d < 3);
            nv_ref_round_n(fns[f], x, N, dts[d % 3], NV_ROUND_NEAREST_EVEN, out);
            nv_ref_eval_n(fns[f], x, N, dts[d % 3], hi, lo);
            int bad_round = 0, bad_eval = 0, bad_mpfr = 0;
            for (int i = 0; i < N; i++) {
                double h, l;
                nv_ref_eval(fns[f], x[i], dts[d % 3], &h, &l);
                bad_round += !same(out[i], nv_ref_round(fns[f], x[i], dts[d % 3], NV_ROUND_NEAREST_EVEN));
                if ((!same(hi[i], h) || !same(lo[i], l)) && bad_eval++ == 0)
                    tap_diag("first pair differing: x = %a: batch (%a, %a), one (%a, %a)", x[i],
                             hi[i], lo[i], h, l);
                if (i % 20 == 0)
                    bad_mpfr +=
                        !same(out[i], nv_ref_round_mpfr(fns[f], x[i], dts[d % 3], NV_ROUND_NEAREST_EVEN)) &&
                        !(isnan(out[i]) && isnan(nv_ref_round_mpfr(fns[f], x[i], dts[d % 3],
                                                                    NV_ROUND_NEAREST_EVEN)));
            }
            tap_ok(bad_round == 0 && bad_eval == 0 && bad_mpfr == 0,
                   "%s into %s%s: batch = one by one (%d rounded, %d pairs differ), = MPFR on %d "
                   "(%d differ)",
                   nv_fn_name(fns[f]), nv_dtype_name(dts[d % 3]), d < 3 ? "" : " (no libmvec)",
                   bad_round, bad_eval, N / 20, bad_mpfr);
            /* in place: out aliasing x */
            static double xi[N];
            memcpy(xi, x, sizeof xi);
            nv_ref_round_n(fns[f], xi, N, dts[d % 3], NV_ROUND_NEAREST_EVEN, xi);
            tap_ok(memcmp(xi, out, sizeof xi) == 0, "%s into %s: in place as out of place",
                   nv_fn_name(fns[f]), nv_dtype_name(dts[d % 3]));
        }
    }
    nv_ref_vector_math(true);
    return tap_done();
}
