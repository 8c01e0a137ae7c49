/* nv_ref_eval_n's pairs for tanh and erf where their fast path is a tail
 * (refmath_tail.h), four elements at a time: tanh_small for 2^-300 <= |x| <
 * 2^-20, and the limit +-1 where L underflows (tanh past 1024, erf past 28).
 * The fp32 encodings in those ranges are 99% of all for tanh, 48% for erf, and
 * one at a time their pair and its cell decision (fast_decides_pair) cost
 * about 300 instructions each: most of an exhaustive case.
 *
 * Each lane does the scalar steps' own IEEE operations in the same order
 * (products, fma, divisions by 3 and by powers of two, TwoSums, the same
 * integer bit arithmetic; no contraction: -ffp-contract is off in ISO C mode,
 * and the explicit fma is the scalar fma's single rounding), so a decided
 * lane holds eval_one's pair bit for bit; any other lane (tanh_small or the
 * cell decision undecided, |x| between the ranges, special, NaN) is left to
 * eval_one. Past the far bound the scalar tail's L is 0, which fast_tail
 * replaces by the tiny -+2^-1074: tanh's L = -2 sigmoid(-2|x|) holds exp(-2|x|)
 * = exp(<= -2048) (exact value below 2^-2954), erf's L = -erfc(|x|) with
 * erfc(28) < 2^-1135 (A&S 7.1.13: erfc x < e^-x^2 / (x sqrt pi)); both far
 * under half the least subnormal, so any libm within a few ulps returns 0
 * (glibc's erfc returns tiny*tiny = 0 from 28 on). Between (13 <= |x| < 1024,
 * 4.5 <= |x| < 28) the scalar path stays: its L needs glibc's bits. The far
 * pair (s, -s 2^-1074), s = +-1, is set from its bits, and fast_decides_pair
 * decides it into every target: |y| = 1 - 2^-1074 rounds to 1 in fp64, so its
 * binade is the one below 1 (or emin's, clamped, when emin = 0), where 1 = ka h
 * exactly, t = L, and (t -+ err) / h is a tiny negative number: cell ka - 1,
 * inside the binade, off its edges. Computing it would be arithmetic on
 * subnormals (L, its error bound), a microcode assist each on the Intel CPUs
 * measured (56% of the time past 1024 went there).
 * tests/unit/numerics/test-refmath-batch.c checks the pairs against
 * eval_one's on every range edge, into every target of the fast path. */
#include <stdbool.h>
#include <stdint.h>

#include "refmath_internal.h"
#include "refmath_vec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define TAIL_VEC 1
#include <immintrin.h>
#endif

#ifdef TAIL_VEC
#define TGT __attribute__((target("avx2,fma")))


TGT static inline v4d vfma(v4d a, v4d b, v4d c)
{
    return (v4d)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
}

TGT static inline void two_sum4(v4d a, v4d b, v4d *s, v4d *e)
{
    v4d x = a + b, z = x - a;
    *e = (a - (x - z)) + (b - z);
    *s = x;
}

/* exp_of and pow2i of refmath_tail.h, lane by lane (the same wrap-around for
 * an exponent outside the normal range). */
TGT static inline v4l exp_of4(v4d x)
{
    return (v4l)(((v4u)x >> 52) & 0x7ff) - 1023;
}

TGT static inline v4d pow2i4(v4l k)
{
    return (v4d)((v4u)(k + 1023) << 52);
}

TGT static inline v4d half_spacing4(v4d s)
{
    v4l es = exp_of4(s);
    return pow2i4(es - 53 + (ABSD(s) == pow2i4(es)));
}

/* floor for |v| < 2^30 (the caller's guard): truncation, one down below it. */
TGT static inline v4d floor4(v4d v)
{
    v4d t = __builtin_convertvector(__builtin_convertvector(v, v4i), v4d);
    return SELD(v < t, t - 1, t);
}

TGT static int tail_pairs_vec(bool tanh, double far_from, int64_t emin, int64_t mb, const double *x,
                              int n, double *hi, double *lo, uint8_t *undecided)
{
    const v4d z = {0, 0, 0, 0};
    const v4l zl = {0, 0, 0, 0};
    const v4d one = z + 1;
    const v4l cells = zl + ((int64_t)1 << (mb + 1));
    int decided = 0, k = 0;
    v4l nd = zl;
    for (; k + 4 <= n; k += 4) {
        v4d xv, hv, lv;
        __builtin_memcpy(&xv, x + k, sizeof xv);
        __builtin_memcpy(&hv, hi + k, sizeof hv);
        __builtin_memcpy(&lv, lo + k, sizeof lv);
        v4d ax = ABSD(xv);
        v4l small = (ax < 0x1p-20) & (ax >= 0x1p-300) & (zl - (int64_t)tanh);
        v4l far = (ax >= far_from) & (ax <= 0x1.fffffffffffffp1023);
        /* tanh_small: D = -x^3/3 + 2x^5/15 in double-double, T = x + D. */
        v4d x2h = xv * xv, x2l = vfma(xv, xv, -x2h);
        v4d x3h = x2h * xv, x3l = vfma(x2h, xv, -x3h) + x2l * xv;
        v4d qh = x3h / 3, ql = (vfma(-qh, z + 3, x3h) + x3l) / 3;
        v4d t5 = 0x1.1111111111111p-3 * (x3h * x2h);
        v4d dh = -qh, dl = t5 - ql;
        v4d h1, l1, l2, l3, th, lo0, tl, e;
        two_sum4(xv, dh, &h1, &l1);
        two_sum4(l1, dl, &l2, &l3);
        two_sum4(h1, l2, &th, &lo0);
        v4d err = ABSD(dh) * 0x1p-80;
        small &= ABSD(lo0) + ABSD(l3) + err < half_spacing4(th);
        two_sum4(lo0, l3, &tl, &e);
        small &= (tl != z) & (ABSD(e) + err < half_spacing4(tl));
        /* fast_tail's pair (th, tl), to 2^-52, through fast_decides_pair. */
        v4d a = th, l = tl, eps = z + 0x1p-52;
        v4d aa = ABSD(a);
        v4l ok = small & (aa >= 0x1p-900) & (aa <= 0x1p1000);
        v4d L = SELD((v4l)a < 0, -l, l);
        v4d sum = aa + L;
        v4l ee = exp_of4(sum);
        ee += (L < z) & (sum == pow2i4(ee)); /* a true mask is -1: one binade down */
        v4l sub = ee <= emin;
        ee = SELL(sub, zl + emin, ee);
        v4d h = pow2i4(ee - mb - 1);
        v4d kaf = aa * pow2i4(mb + 1 - ee);
        ok &= kaf < 0x1p31;
        v4l ka = __builtin_convertvector(__builtin_convertvector(kaf, v4i), v4l);
        v4d t = (aa - __builtin_convertvector(ka, v4d) * h) + L;
        v4d er = (ABSD(L) * eps + ABSD(t) * 0x1p-52) * (1 + 0x1p-40);
        v4d clo = (t - er) / h, chi = (t + er) / h;
        ok &= (ABSD(clo) < 0x1p30) & (ABSD(chi) < 0x1p30);
        v4d fl = floor4(clo);
        v4l c = ka + __builtin_convertvector(__builtin_convertvector(fl, v4i), v4l);
        ok &= (fl == floor4(chi)) & (clo != fl) & (c < 2 * cells) & (sub | (c >= cells));
        /* eval_one's pair: two_sum(a, l); past 1024 (s, -s 2^-1074) from the
         * bits (see above). */
        v4d ph, pl;
        two_sum4(a, l, &ph, &pl);
        v4l sgn = (v4l)xv & INT64_MIN;
        ph = SELD(far, (v4d)(sgn | (v4l)one), ph);
        pl = SELD(far, (v4d)((sgn ^ INT64_MIN) | 1), pl);
        ok |= far;
        hv = SELD(ok, ph, hv);
        lv = SELD(ok, pl, lv);
        __builtin_memcpy(hi + k, &hv, sizeof hv);
        __builtin_memcpy(lo + k, &lv, sizeof lv);
        nd -= ok;
        for (int j = 0; j < 4; j++)
            undecided[k + j] = (uint8_t)(1 + ok[j]);
    }
    for (int j = 0; j < 4; j++)
        decided += (int)nd[j];
    for (; k < n; k++)
        undecided[k] = 1;
    return decided;
}
#endif

bool rm_tail_pairs_setup(nv_fn f, const nv_dtype_info *in)
{
#ifdef TAIL_VEC
    return (f == NV_FN_TANH || f == NV_FN_ERF) && in && in->mant_bits <= 28 &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    (void)f, (void)in;
    return false;
#endif
}

int rm_tail_pairs_n(nv_fn f, const nv_dtype_info *in, const double *x, int n, double *hi,
                    double *lo, uint8_t *undecided)
{
#ifdef TAIL_VEC
    bool tanh = f == NV_FN_TANH;
    return tail_pairs_vec(tanh, tanh ? 1024 : 28, in->emin, in->mant_bits, x, n, hi, lo, undecided);
#else
    (void)f, (void)in, (void)x, (void)hi, (void)lo;
    for (int k = 0; k < n; k++)
        undecided[k] = 1;
    return 0;
#endif
}
