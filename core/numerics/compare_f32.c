/* The fp32 kernel of compare.h (nv_compare_f32): fp32 device values against
 * fp32 references, 8 lanes at a time, under the ulp or allclose metric; blocks
 * with a special value or a mismatch go through the scalar rules of compare.c. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "compare_internal.h"

/* ---- the fp32 kernel ----
 * Blocks of BLK pairs. The vector loop computes every metric branch-free (gcc
 * vectorises it; the target_clones attribute adds an AVX2 build picked at load
 * time) and flags whether the block holds any NaN/Inf; such a block, and any
 * block with mismatches while first[] still has room, is redone by the scalar
 * path. ref values are exact fp32, so got - ref is exact in double. */
#define BLK 2048
/* Elements the kernel asks for ahead of its loads, one cache line of each
 * array per 16 elements. Between two blocks the merge issues no loads of the
 * arrays, and the hardware prefetcher, left idle, no longer runs ahead: on the
 * Intel VM measured, 5e7 pairs took 145 ms without this and 63-68 ms with it
 * (256 to 2048 ahead alike; a plain read loop of the same arrays: 27 ms). */
#define NV_PF_AHEAD 1024
#define LANES 8
/* Bins counted in the kernel: those of ulp errors 0, 1/2, 1 and 2, what a
 * correct fp32 device mostly shows against fp32 references (its errors are
 * multiples of half an ulp). A vector whose eight errors all fall in them is
 * counted there; any other vector's bins are stored for the merge, so one
 * scattered increment per element is left only where the errors are spread. */
#define HOT_BINS 4
static const float hot_ulp[HOT_BINS] = {0.0f, 0.5f, 1.0f, 2.0f};

typedef struct blk_out {
    double max_ulp[LANES], sum_ulp[LANES], max_abs[LANES], max_rel[LANES], max_head[LANES],
        max_ref[LANES];
    int64_t bad[LANES];
    uint32_t special[LANES];
    int64_t hot[HOT_BINS]; /* elements counted in hot_bin[k] by the kernel */
    int n_bins;            /* the others' bins, stored in order */
} blk_out;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define NV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NV_CLONES
#endif

/* The block kernel, written with GCC vector extensions (8 fp32 lanes, the AVX2
 * clone uses whole ymm registers, SSE2 splits them), branch-free: selects are
 * bit masks, so no trapping operation sits in a branch.
 *   d   = |got - ref| in fp32: exact when got and ref are within a factor 2
 *         (Sterbenz); beyond that the error exceeds 2^23 ulps and is rounded
 *         to fp32 precision;
 *   ue  = d * 2^(150 - e), e = ref's exponent field: exact (a power of two);
 *         refs below 2^-103 (e < 24, where 2^(150 - e) leaves fp32) and NaN/Inf
 *         anywhere send the block to the scalar path;
 *   rel = d / |ref|: its max is tracked as the pair (num, den) with the larger
 *         ratio, compared by cross-multiplication in fp32 (a division per
 *         element would cost more than the rest); one division per lane and
 *         block; fp32-accurate (compare.h);
 *   ue > max_ulp is tested in fp32 against the largest fp32 <= max_ulp, which
 *         is exact because ue is an fp32 number;
 *   sum of ue in fp32 lanes within a block (256 terms a lane; exact while the
 *         partial sums are multiples of ue's quanta below 2^24, as for errors of
 *         a few ulps; else within gamma_255 < 2^-16 relative, Higham §4.2),
 *         then in fp64 across blocks; the allclose allowance in fp64. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

#define VSELI(m, a, b) (((a) & (m)) | ((b) & ~(m)))
#define VSELF(m, a, b) ((v8f)VSELI(m, (v8i)(a), (v8i)(b)))
/* acc = max(acc, x); a NaN x leaves acc. */
#define VMAXF(acc, x) VSELF((x) > (acc), x, acc)
#define VMAXD(acc, x) ((v4d)VSELI((x) > (acc), (v4l)(x), (v4l)(acc)))
#define VABSF(a) ((v8f)((v8i)(a)&0x7fffffff))
#define LO4(v) __builtin_convertvector((v4f){(v)[0], (v)[1], (v)[2], (v)[3]}, v4d)
#define HI4(v) __builtin_convertvector((v4f){(v)[4], (v)[5], (v)[6], (v)[7]}, v4d)

#define F32_BLOCK_BODY(IS_ULP)                                                                     \
    for (int i = 0; i + 8 <= n; i += 8) {                                                          \
        if ((i & 15) == 0) {                                                                       \
            __builtin_prefetch(got + i + NV_PF_AHEAD);                                             \
            __builtin_prefetch(ref + i + NV_PF_AHEAD);                                             \
        }                                                                                          \
        v8f gf, rf;                                                                                \
        memcpy(&gf, got + i, sizeof(gf));                                                          \
        memcpy(&rf, ref + i, sizeof(rf));                                                          \
        v8f d = VABSF(gf - rf), ar = VABSF(rf);                                                    \
        v8i re = (v8i)ar >> 23;                                                                    \
        sp |= ~(d <= fmax_v) | (re < 24);                                                          \
        v8f ue = d * (v8f)((277 - re) << 23);                                                      \
        v8i up = d * rden > rnum * ar;                                                             \
        rnum = VSELF(up, d, rnum);                                                                 \
        rden = VSELF(up, ar, rden);                                                                \
        mu = VMAXF(mu, ue);                                                                        \
        ma = VMAXF(ma, d);                                                                         \
        mar = VMAXF(mar, ar);                                                                      \
        su += ue;                                                                                  \
        if (IS_ULP) {                                                                              \
            bad -= ue > tol_f;                                                                     \
        } else {                                                                                   \
            v4d d0 = LO4(d), d1 = HI4(d);                                                          \
            v4d al0 = atol_v + rtol_v * LO4(ar), al1 = atol_v + rtol_v * HI4(ar);                  \
            mh = VMAXD(mh, d0 / al0);                                                              \
            mh = VMAXD(mh, d1 / al1);                                                              \
            badd -= (d0 > al0) + (d1 > al1);                                                       \
        }                                                                                          \
        v8i bin = ((v8i)ue >> 20) - HIST_BASE;                                                     \
        bin = VSELI(bin < 0, zero_i, bin);                                                         \
        v8i h0 = bin == hb0, h1 = bin == hb1, h2 = bin == hb2, h3 = bin == hb3;                    \
        v4l hl = (v4l)(h0 | h1 | h2 | h3);                                                         \
        int64_t all = hl[0] & hl[1] & hl[2] & hl[3]; /* -1 or 0, branch-free */                   \
        hc0 -= h0 & (int32_t)all;                                                                  \
        hc1 -= h1 & (int32_t)all;                                                                  \
        hc2 -= h2 & (int32_t)all;                                                                  \
        hc3 -= h3 & (int32_t)all;                                                                  \
        memcpy(bins + nb, &bin, sizeof(bin));                                                      \
        nb += 8 & ~(int)all;                                                                       \
    }

/* Per lane: max ulp error, max abs, max rel, max |ref| (the allowance grows with
 * it, so max allowed follows from it), sum of ulp errors, mismatches; headroom
 * per element only for allclose (under ulp it is max ulp error / max_ulp). */
NV_CLONES
static void f32_block(const float *restrict got, const float *restrict ref, int n, float tol_fp32,
                      double atol, double rtol, int is_ulp, uint32_t *restrict bins,
                      blk_out *restrict o)
{
    const v4d zd = {0, 0, 0, 0};
    const v4d atol_v = zd + atol, rtol_v = zd + rtol;
    const v8f zf = {0, 0, 0, 0, 0, 0, 0, 0};
    const v8f fmax_v = zf + 0x1.fffffep127f, tol_f = zf + tol_fp32;
    const v8i zero_i = {0, 0, 0, 0, 0, 0, 0, 0};
    v8f mu = zf, ma = zf, mar = zf, su = zf, rnum = zf, rden = zf + 1;
    v4d mh = zd;
    v8i bad = zero_i, sp = zero_i;
    v4l badd = {0, 0, 0, 0};
    const v8i hb0 = zero_i + (int32_t)hist_bin(hot_ulp[0]),
              hb1 = zero_i + (int32_t)hist_bin(hot_ulp[1]),
              hb2 = zero_i + (int32_t)hist_bin(hot_ulp[2]),
              hb3 = zero_i + (int32_t)hist_bin(hot_ulp[3]);
    v8i hc0 = zero_i, hc1 = zero_i, hc2 = zero_i, hc3 = zero_i;
    int nb = 0;
    if (is_ulp) {
        F32_BLOCK_BODY(1)
    } else {
        F32_BLOCK_BODY(0)
    }
    memset(o, 0, sizeof(*o));
    for (int k = 0; k < 8; k++) {
        o->max_ulp[k] = mu[k];
        o->max_abs[k] = ma[k];
        o->max_rel[k] = (double)rnum[k] / rden[k];
        o->max_ref[k] = mar[k];
        o->sum_ulp[k] = su[k];
        o->bad[k] = bad[k] + (k < 4 ? badd[k] : 0);
        o->special[k] = sp[k] != 0;
    }
    for (int k = 0; k < 4; k++)
        o->max_head[k] = mh[k];
    for (int k = 0; k < LANES; k++) {
        o->hot[0] += hc0[k];
        o->hot[1] += hc1[k];
        o->hot[2] += hc2[k];
        o->hot[3] += hc3[k];
    }
    o->n_bins = nb;
}

/* Scalar path for one block (specials, the tail, first mismatches). */
static void f32_block_scalar(const float *got, const float *ref, int64_t base, int n,
                             const nv_tolerance *tol, nv_compare_result *r, acc *a)
{
    for (int k = 0; k < n; k++) {
        double g_out = got[k], e = ref[k];
        double g = nvc_ulp_overflow_value(tol, NV_DT_FP32, g_out, e, 0);
        if (nvc_special_pair(r, base + k, g, e))
            continue;
        double d = fabs(g - e), ar = fabs(e);
        double ulp = nv_dtype_ulp(NV_DT_FP32, e);
        double ue = d / ulp;
        double allowed =
            tol->metric == NV_TOL_ULP ? tol->max_ulp * ulp : tol->atol + tol->rtol * ar;
        bool pass = tol->metric == NV_TOL_ULP ? ue <= tol->max_ulp : d <= allowed;
        r->max_ulp = fmax(r->max_ulp, ue);
        r->max_abs = fmax(r->max_abs, d);
        r->max_rel = fmax(r->max_rel, ar > 0 ? d / ar : (d == 0 ? 0 : INFINITY));
        r->max_allowed = fmax(r->max_allowed, allowed);
        r->headroom = fmax(r->headroom, allowed > 0 ? d / allowed : (d == 0 ? 0 : INFINITY));
        a->sum_ulp += ue;
        a->finite++;
        a->h.n[hist_bin((float)ue)]++;
        if (!pass) {
            r->mismatches++;
            nvc_add_first(r, base + k, g_out, e, ue, d, allowed, NV_FAIL_ULP_EXCEEDED);
        }
    }
}

/* Merges a vector block's lanes; bins its ulp errors in four interleaved
 * histograms (independent increments, no store-to-load chain). */
static void f32_merge(const blk_out *o, const uint32_t *bins, int n, const nv_tolerance *tol,
                      nv_compare_result *r, acc *a, uint32_t (*h4)[HIST_BINS])
{
    double mu = 0, mref = 0;
    for (int j = 0; j < LANES; j++) {
        mu = fmax(mu, o->max_ulp[j]);
        mref = fmax(mref, o->max_ref[j]);
        r->max_abs = fmax(r->max_abs, o->max_abs[j]);
        r->max_rel = fmax(r->max_rel, o->max_rel[j]);
        r->headroom = fmax(r->headroom, o->max_head[j]);
        a->sum_ulp += o->sum_ulp[j];
        r->mismatches += o->bad[j];
    }
    r->max_ulp = fmax(r->max_ulp, mu);
    /* The allowance grows with |ref|: its max is the allowance of the max |ref|. */
    if (tol->metric == NV_TOL_ULP) {
        r->max_allowed = fmax(r->max_allowed, tol->max_ulp * nv_dtype_ulp(NV_DT_FP32, mref));
        r->headroom =
            fmax(r->headroom, tol->max_ulp > 0 ? mu / tol->max_ulp : (mu > 0 ? INFINITY : 0));
    } else {
        r->max_allowed = fmax(r->max_allowed, tol->atol + tol->rtol * mref);
    }
    a->finite += (uint64_t)n;
    /* The kernel counted the hot bins and stored the other elements' bins. */
    for (int b = 0; b < HOT_BINS; b++)
        h4[b][hist_bin(hot_ulp[b])] += (uint32_t)o->hot[b];
    const uint32_t *ub = bins;
    int k = 0;
    n = o->n_bins;
    for (; k + 4 <= n; k += 4) {
        h4[0][ub[k]]++;
        h4[1][ub[k + 1]]++;
        h4[2][ub[k + 2]]++;
        h4[3][ub[k + 3]]++;
    }
    for (; k < n; k++)
        h4[0][ub[k]]++;
}

static void hist_flush(acc *a, uint32_t (*h4)[HIST_BINS])
{
    for (int b = 0; b < HIST_BINS; b++) {
        a->h.n[b] += (uint64_t)h4[0][b] + h4[1][b] + h4[2][b] + h4[3][b];
        h4[0][b] = h4[1][b] = h4[2][b] = h4[3][b] = 0;
    }
}

int nv_compare_f32(const float *got, const float *ref, int64_t n, const nv_tolerance *tol,
                   nv_compare_result *ret)
{
    if (!tol || !ret || n < 0 || (n > 0 && (!got || !ref)) ||
        (tol->metric != NV_TOL_ULP && tol->metric != NV_TOL_ALLCLOSE))
        return -EINVAL;
    static _Thread_local acc a;
    static _Thread_local uint32_t h4[4][HIST_BINS]; /* flushed before they can wrap */
    static _Thread_local uint32_t bins[BLK];
    memset(&a, 0, sizeof(a));
    memset(h4, 0, sizeof(h4));
    nv_compare_result r;
    nvc_result_init(&r);
    int is_ulp = tol->metric == NV_TOL_ULP;
    /* The largest fp32 <= max_ulp: ue > it iff ue > max_ulp, for fp32 ue. */
    float tol_fp32 = (float)tol->max_ulp;
    if ((double)tol_fp32 > tol->max_ulp)
        tol_fp32 = nextafterf(tol_fp32, 0);
    for (int64_t base = 0; base < n; base += BLK) {
        int len = n - base < BLK ? (int)(n - base) : BLK;
        int vec = len - len % LANES;
        blk_out o;
        f32_block(got + base, ref + base, vec, tol_fp32, tol->atol, tol->rtol, is_ulp, bins, &o);
        uint32_t special = 0;
        int64_t bad = 0;
        for (int j = 0; j < LANES; j++) {
            special |= o.special[j];
            bad += o.bad[j];
        }
        if (special || (bad && r.n_first < NV_COMPARE_FIRST)) {
            f32_block_scalar(got + base, ref + base, base, len, tol, &r, &a);
            continue;
        }
        if (bad && r.failure == NV_FAIL_NONE)
            r.failure = NV_FAIL_ULP_EXCEEDED;
        f32_merge(&o, bins, vec, tol, &r, &a, h4);
        if (((base / BLK) & 0xfffff) == 0xfffff) /* every 2^31 elements */
            hist_flush(&a, h4);
        if (vec < len)
            f32_block_scalar(got + base + vec, ref + base + vec, base + vec, len - vec, tol, &r,
                             &a);
    }
    hist_flush(&a, h4);
    r.compared = n;
    r.mean_ulp = a.finite ? a.sum_ulp / (double)a.finite : 0;
    r.p99_ulp = nvc_hist_p99(&a.h, a.finite, r.max_ulp);
    *ret = r;
    return 0;
}
