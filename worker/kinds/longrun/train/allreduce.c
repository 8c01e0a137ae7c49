/* The distributed step's gradient reduction (docs/JOBS.md "Distributed
 * gradient reduction"): the device splits the batch across R ranks and its
 * collective all-reduces their gradients; it returns each rank's gradient and
 * the reduced one. numval's reference is the exact sum of the ranks'
 * gradients (core/ref/ddsum.h: exact, rounded once), and the device's reduced
 * gradient must lie within the error bound of the declared algorithm in the
 * declared dtype (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
 * ed., SIAM 2002, §4.2), element by element:
 *
 *   ring (reduce-scatter: each element summed rank after rank, the order
 *   depending on its chunk): recursive summation of R terms,
 *       |r - s| <= gamma_{R-1} sum_r |g_r|,
 *   tree (pairwise, recursive halving): |r - s| <= gamma_{ceil(log2 R)} sum_r |g_r|,
 *
 * gamma_k = k u / (1 - k u), u the declared dtype's unit roundoff (2^-24 fp32,
 * 2^-8 bf16, 2^-11 fp16). A dtype narrower than the fp32 gradients rounds
 * every term once more first: one more factor (1 + delta), gamma_{k+1}
 * (Higham Lemma 3.1). An addition whose result is subnormal is exact, so the
 * bound needs no underflow term. Elements with a non-finite term or an exact
 * sum beyond fp32's range are not judged (the scaler's inf check owns them). */
#include <math.h>
#include <stdio.h>

#include "core/ref/ddsum.h"
#include "train_internal.h"

static double unit_roundoff(nv_dtype dt)
{
    return dt == NV_DT_BF16 ? 0x1p-8 : dt == NV_DT_FP16 ? 0x1p-11 : 0x1p-24;
}

int nvw_allreduce_k(const nv_longrun_spec *s)
{
    int k = 0;
    if (s->allreduce_tree)
        while ((1 << k) < s->ranks)
            k++;
    else
        k = s->ranks - 1;
    return k + (s->allreduce_dtype != NV_DT_FP32);
}

void nvw_allreduce_bound_text(const nv_longrun_spec *s, char *out, size_t n)
{
    int k = nvw_allreduce_k(s);
    snprintf(out, n,
             "%s all-reduce of %d ranks in %s: |reduced - exact| <= gamma_%d sum_r |g_r|, "
             "gamma_k = k u / (1 - k u), u = 2^%d (%s; Higham, Accuracy and Stability of "
             "Numerical Algorithms, 2nd ed., Sec. 4.2)",
             s->allreduce_tree ? "tree" : "ring", s->ranks, nv_dtype_name(s->allreduce_dtype), k,
             (int)log2(unit_roundoff(s->allreduce_dtype)),
             s->allreduce_tree ? "pairwise summation, ceil(log2 R) additions deep"
                               : "recursive summation of R terms");
}

/* The exact sum hi + lo rounded once to fp32 (a tie of hi broken by lo). */
static double round_once(double hi, double lo)
{
    float f = (float)hi;
    if (lo != 0 && (double)f != hi && isfinite(f)) {
        float g = nextafterf(f, hi > f ? INFINITY : -INFINITY);
        if (fabs(hi - f) == fabs(hi - g) && (lo > 0) == (g > f))
            f = g;
    }
    return f;
}

bool nvw_allreduce_ok(const nv_longrun_spec *s, const nvw_model *m, nv_tensor *const *rank_g,
                      nv_tensor *const *red, nvw_run *run, char *why, size_t n)
{
    int R = s->ranks, P = m->n_params, k = nvw_allreduce_k(s);
    double u = unit_roundoff(s->allreduce_dtype), gamma = k * u / (1 - k * u);
    bool ok = true;
    double terms[64];
    for (int i = 0; i < P; i++)
        for (int64_t e = 0; e < red[i]->numel; e++) {
            bool finite = true;
            for (int r = 0; r < R; r++) {
                terms[r] = rank_g[r * P + i]->data[e];
                finite &= isfinite(terms[r]) != 0;
            }
            double hi, lo;
            nv_mag abs_mag;
            nv_dd_sum(terms, R, 1, &hi, &lo, &abs_mag);
            double ref = round_once(hi, lo), got = red[i]->data[e];
            if (!finite || !isfinite(ref)) {
                run->ar_skipped++;
                continue;
            }
            /* fp64 evaluation of the error and of the bound: relative errors
             * near 2^-52 (R - 1 more in the sum of |g_r|), allowed for by 2^-40 */
            double err = isfinite(got) ? fabs((got - hi) - lo) : INFINITY;
            double bound = gamma * nv_mag_to_d(abs_mag) * (1 + 0x1p-40);
            run->ar_elements++;
            run->ar_exact += got == ref;
            double ratio = bound > 0 ? err / bound : err > 0 ? INFINITY : 0;
            if (ratio > run->ar_worst)
                run->ar_worst = ratio;
            if (err <= bound || !ok)
                continue;
            ok = false;
            snprintf(why, n,
                     "%s[%lld]: error %.3g beyond the declared reduction's bound gamma_%d sum_r "
                     "|g_r| = %.3g (%s all-reduce of %d ranks in %s, u = 2^%d; Higham, Accuracy "
                     "and Stability of Numerical Algorithms, Sec. 4.2): the device reduced to "
                     "%.9g, the exact sum of its ranks' gradients is %.9g",
                     m->p[i].name, (long long)e, err, k, bound, s->allreduce_tree ? "tree" : "ring",
                     R, nv_dtype_name(s->allreduce_dtype), (int)log2(u), got, hi + lo);
        }
    return ok;
}
