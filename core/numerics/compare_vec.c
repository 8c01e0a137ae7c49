/* The vector kernel of compare.c's per-element rules (compare_range), for
 * chunks in which every element is an ordinary passing pair: four lanes of
 * fp64 at a time, each lane doing exactly the scalar rule's operations (TwoSum,
 * the ulp from the exact value's bits, one IEEE division each for ue, rel and
 * headroom), so every element's values are the scalar path's bit for bit.
 * Pairs the scalar rules pass as specials (both NaN, the same infinity: the
 * overflow and NaN results of exhaustive and sweep cases) are skipped lanes:
 * marked in fin, counted in n_skip, in no statistic. A chunk holding
 * anything else (another NaN or Inf on either side, a device zero of the
 * other sign than the exact value, an exact zero with a low part, an exact
 * value whose ulp leaves fp64's normal range or lies beyond the format's
 * max_finite, a mismatch) is refused whole and compare.c redoes it with the
 * scalar rules, which alone handle special mismatches, first mismatches, the
 * overflow rule and the sign of zero.
 *
 * Why the merge is exact: the maxima are of values >= +0 that are never NaN
 * (err and ue are |.| or their quotients by positive numbers; rel's divisor is
 * nonzero, headroom's allowance positive or err = 0), so the largest does not
 * depend on the order it is taken in; counts and histograms add; the ulp errors
 * are handed back in index order for the mean's sum, which compare.c keeps
 * sequential. gcc contracts no a*b+c into an fma here (-std=c11 sets
 * -ffp-contract=off, and neither clone enables FMA). */
#include <float.h>
#include <string.h>

#include "compare_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define NV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NV_CLONES
#endif

typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

#define SELD(m, a, b) ((v4d)(((v4l)(a) & (m)) | ((v4l)(b) & ~(m))))
#define SELL(m, a, b) (((a) & (m)) | ((b) & ~(m)))
#define ABSD(a) ((v4d)((v4l)(a)&INT64_C(0x7fffffffffffffff)))
#define MAXD(acc, x) SELD((x) > (acc), x, acc)

_Static_assert(NVC_VEC_CHUNK % 4 == 0, "whole vectors");

NV_CLONES
bool nvc_chunk_vec(const nvc_vec_args *a, int64_t k0, int n, nvc_vec_out *o)
{
    const double *got = a->got + k0, *hi = a->hi + k0, *lop = a->lo ? a->lo + k0 : NULL;
    const v4d z = {0, 0, 0, 0};
    const v4d dmax = z + DBL_MAX, fmaxv = z + a->max_finite, inf = z + __builtin_inf();
    const v4d atol = z + a->atol, rtol = z + a->rtol, mulp = z + a->max_ulp;
    const v4l emin = {a->emin, a->emin, a->emin, a->emin};
    const v4l zl = {0, 0, 0, 0};
    v4d mu = z, ma = z, mr = z, mal = z, mh = z;
    v4l bad = zl, nsk = zl;
    for (int k = 0; k + 4 <= n; k += 4) {
        v4d g, e, lo = z;
        memcpy(&g, got + k, sizeof g);
        memcpy(&e, hi + k, sizeof e);
        if (lop)
            memcpy(&lo, lop + k, sizeof lo);
        v4d ag = ABSD(g);
        /* special_kind's passing pairs: both NaN, or the same infinity. */
        v4l skip = ((g != g) & (e != e)) | ((ag == inf) & (g == e));
        /* Otherwise nothing NaN or Inf; a device zero only with the exact
         * value's sign (no zero's sign to judge); an exact zero only without
         * a low part and where its ulp is the formula's (ulp_in(0) is
         * nv_dtype_ulp's min_subnormal). */
        v4l lnz = lo != z;
        v4l lb = ~(ag <= dmax) | ~(ABSD(e) <= dmax) | ~(ABSD(lo) <= dmax) |
                 ((g == z) & (((v4l)g ^ (v4l)e) < 0)) |
                 ((e == z) & (a->zero_exact ? lnz : zl - 1));
        /* nv_two_sum(g, -e): s + t == g - e exactly. */
        v4d b = -e, x = g + b, zz = x - g;
        v4d t = (g - (x - zz)) + (b - zz);
        v4d err = ABSD(x + (t - lo));
        v4d ex = SELD(lnz, e + lo, e);
        /* exact_ulp: ulp of nextafter(hi, 0) when lo pulls hi + lo below |hi|
         * (its magnitude's bits less one, hi being finite and nonzero), then
         * ulp_in's steps: 2^(max(exponent, emin) - mant_bits). */
        v4l down = lnz & (((v4l)lo ^ (v4l)e) < 0);
        v4l ab = (v4l)ABSD(e) + down; /* down is -1 where it applies */
        lb |= ~((v4d)ab <= fmaxv) | ((ab == 0) & (e != z));
        v4l ef = ab >> 52;
        v4l ee = SELL(ef != 0, ef - 1023, zl - 1023);
        ee = SELL(ee < emin, emin, ee);
        v4l kk = ee - a->mant_bits;
        lb |= kk < -1022;
        v4d ulp = (v4d)((kk + 1023) << 52);
        /* err / ulp as err * 2^-kk: the same real number, so the same
         * rounding (IEEE 754 §4.3), where -kk + 1023 is in [1, 2046] (kk in
         * [-1022, 1022]: lanes below are refused above); no division. */
        v4d ue = err * (v4d)((1023 - kk) << 52);
        v4d rel = SELD(ex == z, SELD(err == z, z, inf), err / ABSD(ex));
        v4d allowed = a->allclose ? atol + rtol * ABSD(ex) : mulp * ulp;
        lb |= ~(a->allclose ? err <= allowed : ue <= mulp);
        v4d head = SELD(allowed > z, err / allowed, SELD(err == z, z, inf));
        bad |= lb & ~skip;
        /* A skipped pair adds to no statistic: +0 leaves every maximum (of
         * values >= +0) as it is. */
        ue = SELD(skip, z, ue);
        mu = MAXD(mu, ue);
        ma = MAXD(ma, SELD(skip, z, err));
        mr = MAXD(mr, SELD(skip, z, rel));
        mal = MAXD(mal, SELD(skip, z, allowed));
        mh = MAXD(mh, SELD(skip, z, head));
        nsk -= skip;
        memcpy(o->ue + k, &ue, sizeof ue);
        /* hist_bin((float)ue) and compare.c's ulp_bucket(ue). */
        v4f uf = __builtin_convertvector(ue, v4f);
        v4i bin = (((v4i)uf & 0x7fffffff) >> 20) - HIST_BASE;
        bin &= ~(bin < 0);
        memcpy(o->bin + k, &bin, sizeof bin);
        v4l ub = (v4l)ue;
        v4l ke = ((ub >> 52) & 0x7ff) - 1023 + 4 + SELL((ub & INT64_C(0xfffffffffffff)) != 0,
                                                         zl + 1, zl);
        ke = SELL(ke < 1, zl + 1, ke);
        ke = SELL(ke >= NV_ULP_HIST_EDGES, zl + NV_ULP_HIST_EDGES, ke);
        ke = SELL(ue == z, zl, ke);
        for (int j = 0; j < 4; j++) {
            o->bkt[k + j] = (uint8_t)ke[j];
            o->fin[k + j] = (uint8_t)(1 + skip[j]);
        }
        /* A refused chunk is redone whole: stop reading it. */
        if ((k & 28) == 28 && (bad[0] | bad[1] | bad[2] | bad[3]))
            return false;
    }
    int64_t any = 0, skipped = 0;
    for (int j = 0; j < 4; j++) {
        any |= bad[j];
        skipped += nsk[j];
    }
    if (any)
        return false;
    double m[5] = {0, 0, 0, 0, 0};
    for (int j = 0; j < 4; j++) {
        m[0] = mu[j] > m[0] ? mu[j] : m[0];
        m[1] = ma[j] > m[1] ? ma[j] : m[1];
        m[2] = mr[j] > m[2] ? mr[j] : m[2];
        m[3] = mal[j] > m[3] ? mal[j] : m[3];
        m[4] = mh[j] > m[4] ? mh[j] : m[4];
    }
    memcpy(o->max, m, sizeof m);
    o->n_skip = (int)skipped;
    return true;
}
