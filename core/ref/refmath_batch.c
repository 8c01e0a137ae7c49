/* The fast path's decision (refmath.c: fast_decides, then round_cell under
 * round to nearest even, or the pair (v, 0) of eval_one) for four elements at
 * a time, on fp64 values v = f(x) that refmath.c has already evaluated one by
 * one with glibc. Each lane does the scalar steps' own IEEE operations (the
 * same products, the same truncations: the scaled interval ends lie below
 * 2^(p+2) <= 2^30, so the 32-bit truncation cvttpd2dq is the int64 one), so a
 * decided element gets the scalar path's bits; everything else (a special x,
 * |v| outside [2^-960, 2^1000], an interval that meets a boundary, a rounded
 * value beyond max_finite) is marked undecided and refmath.c runs the whole
 * scalar path on it, MPFR included. This only batches the bookkeeping; the
 * error bound eps is the scalar path's (refmath.c's file comment), so which
 * inputs MPFR decides does not change. */
#include <float.h>
#include <string.h>

#include "refmath_internal.h"
#include "refmath_vec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define NV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NV_CLONES
#endif


/* Batching (refmath_batch.c): the functions whose fast path is fast_eval
 * alone (no tail), with its eps, and the domain where special_inl passes. */
bool rm_batch_setup(nv_fn f, const nv_dtype_info *in, bool round, rm_batch *b)
{
    if (!in || in->mant_bits > 28) /* the cell index must fit 32 bits */
        return false;
    *b = rm_batch_for(in, 0x1p-48, round);
    switch (f) {
    case NV_FN_EXP:
    case NV_FN_EXP2:
    case NV_FN_SIN:
    case NV_FN_COS:
        return true;
    case NV_FN_RECIP:
        b->eps = 0x1p-52;
        return true;
    case NV_FN_LOG:
    case NV_FN_LOG2:
        b->domain = RM_DOMAIN_POSITIVE;
        return true;
    case NV_FN_SQRT:
        b->eps = 0x1p-52;
        b->domain = RM_DOMAIN_POSITIVE;
        return true;
    case NV_FN_RSQRT:
        b->eps = 0x1p-51;
        b->domain = RM_DOMAIN_POSITIVE;
        return true;
    case NV_FN_LOG1P:
        b->domain = RM_DOMAIN_ABOVE_M1;
        return true;
    default:
        return false;
    }
}

NV_CLONES
int rm_decide_n(const rm_batch *bp, const double *x, const double *v, int n, double *out,
                double *lo_out, uint8_t *undecided)
{
    /* A copy, and every constant broadcast here: the stores to out could
     * alias *bp, which would reload its fields in the loop. */
    const rm_batch bc = *bp, *b = &bc;
    const v4d z = {0, 0, 0, 0};
    const v4d over0 = z + b->over[0], over1 = z + b->over[1];
    const v4d under0 = z + b->under[0], under1 = z + b->under[1];
    const v4d sat_lo = z + b->sat_lo, sat_hi = z + b->sat_hi, sat_val = z + b->sat_val;
    const v4d far_over = z + b->far_over, far_under = z + b->far_under;
    const v4d tail_below = z + b->tail_below, near_below = z + b->near_below;
    const v4l tiny_pos = (v4l){0, 0, 0, 0} - (b->tiny_sign > 0);
    const v4l tiny_neg = (v4l){0, 0, 0, 0} - (b->tiny_sign < 0);
    const v4d dmax = z + DBL_MAX, tiny = z + 0x1p-960, huge = z + 0x1p1000;
    const v4d eps = z + b->eps, slack = z + (1 + 0x1p-40), mfin = z + b->max_finite;
    const v4l zl = {0, 0, 0, 0};
    const v4l emin = zl + b->emin;
    int decided = 0, k = 0;
    v4l nd = zl;
    for (; k + 4 <= n; k += 4) {
        v4d xv, vv, ov;
        memcpy(&xv, x + k, sizeof xv);
        memcpy(&vv, v + k, sizeof vv);
        memcpy(&ov, out + k, sizeof ov);
        /* special_inl's inputs for the three kinds of domain. */
        v4d xa = ABSD(xv);
        v4l spec = ~(xa <= dmax) | (xv == z);
        if (b->domain == RM_DOMAIN_POSITIVE)
            spec |= ~(xv > z);
        else if (b->domain == RM_DOMAIN_ABOVE_M1)
            spec |= ~(xv > z - 1);
        /* fast_try's range, then fast_decides. */
        v4d a = ABSD(vv);
        v4l ok = ~spec & (a >= tiny) & (a <= huge);
        /* The cell steps on 1 in the lanes ok leaves to the rules below:
         * there |v| may be tiny (exp's clamped arguments give 1e-304), and
         * its error bound subnormal, a microcode assist per operation on
         * the Intel CPUs measured; those lanes' cells are never read. */
        v4d ac = SELD(ok, a, z + 1);
        v4l e = (((v4l)ac >> 52) & 0x7ff) - 1023;
        e = SELL(e < emin, emin, e);
        v4d err = ac * eps * slack;
        v4d sc = (v4d)((b->mant_bits + 1 - e + 1023) << 52);
        v4d lo = (ac - err) * sc, hi = (ac + err) * sc;
        v4i fl = __builtin_convertvector(lo, v4i), fh = __builtin_convertvector(hi, v4i);
        ok &= __builtin_convertvector(fl == fh, v4l) & (lo != __builtin_convertvector(fl, v4d));
        v4d res;
        if (b->round) {
            /* round_cell, nearest even: k = (c + 1) & ~1, r = k h. */
            v4d h = (v4d)((e - b->mant_bits - 1 + 1023) << 52);
            v4d r = __builtin_convertvector((fl + 1) & ~1, v4d) * h;
            res = SELD(((v4l)vv < 0), -r, r);
            /* Past max_finite nv_dtype_round's overflow (IEEE 754 §7.4: under
             * nearest even it depends on the sign alone) is over[]'s. */
            v4l ovf = r > mfin;
            if (b->far)
                res = SELD(ovf, SELD(((v4l)vv < 0), over1, over0), res);
            else
                ok &= ~ovf;
        } else {
            res = vv;
        }
        v4d lres = z;
        if (b->far) {
            if (b->round) {
                v4l big = ~spec & (a > huge) & (a == a);
                v4l small = ~spec & (a < tiny), vz = vv == z;
                v4l pos = SELL(vz, tiny_pos, vv > z);
                v4l neg = SELL(vz, tiny_neg, vv < z);
                v4l under = small & (pos | (neg & ~(xv > z)));
                v4d ovr = SELD(((v4l)vv < 0), over1, over0);
                v4d unr = SELD(pos, under0, under1);
                res = SELD(big, ovr, SELD(under, unr, res));
                ok |= big | under;
                if (b->sat != RM_SAT_NONE) {
                    v4d q = b->sat == RM_SAT_SIGNED ? xv : xa;
                    v4l sat = ~spec & (q >= sat_lo) & (q < sat_hi);
                    v4d sv = sat_val;
                    if (b->sat == RM_SAT_ODD)
                        sv = SELD(((v4l)xv < 0), -sv, sv);
                    res = SELD(sat, sv, res);
                    ok |= sat;
                }
                if (b->near_below > 0) {
                    /* |f(x)| in (|x| (1 - 2^-50), |x|): the cell of that
                     * interval in the binade of its lower end, open at |x|
                     * (the cell below a boundary |x|). */
                    v4l nr = ~spec & (xa < near_below);
                    v4d nlo = xa - xa * 0x1p-50;
                    v4l ne = (v4l)((v4u)nlo >> 52) - 1023;
                    ne = SELL(ne < emin, emin, ne);
                    v4d nsc = (v4d)((b->mant_bits + 1 - ne + 1023) << 52);
                    v4d ls = nlo * nsc, hs = xa * nsc;
                    v4i nfl = __builtin_convertvector(ls, v4i), nih = __builtin_convertvector(hs, v4i);
                    v4i nfh = nih + __builtin_convertvector(__builtin_convertvector(nih, v4d) == hs, v4i);
                    nr &= __builtin_convertvector(nfl == nfh, v4l);
                    v4d nh = (v4d)((ne - b->mant_bits - 1 + 1023) << 52);
                    v4d nrv = __builtin_convertvector((nfl + 1) & ~1, v4d) * nh;
                    res = SELD(nr, SELD(((v4l)xv < 0), -nrv, nrv), res);
                    ok |= nr;
                }
            } else {
                /* far_pair precedes the fast path in eval_one: it overrides. */
                v4l fo = ~spec & (xv >= far_over), fu = ~spec & (xv <= far_under);
                ok &= ~(xa < tail_below);
                res = SELD(fo, dmax, SELD(fu, z, res));
                lres = SELD(fo, z + 0x1p970, SELD(fu, z + 0x1p-1074, z));
                ok |= fo | fu;
            }
        }
        v4d w = SELD(ok, res, ov); /* undecided lanes keep out (it may alias x) */
        memcpy(out + k, &w, sizeof w);
        if (lo_out) {
            v4d lv;
            memcpy(&lv, lo_out + k, sizeof lv);
            lv = SELD(ok, lres, lv);
            memcpy(lo_out + k, &lv, sizeof lv);
        }
        nd -= ok; /* ok is -1 where decided */
        for (int j = 0; j < 4; j++)
            undecided[k + j] = (uint8_t)(1 + ok[j]);
    }
    for (int j = 0; j < 4; j++)
        decided += (int)nd[j];
    for (; k < n; k++)
        undecided[k] = 1;
    return decided;
}
