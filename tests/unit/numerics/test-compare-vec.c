/* The vector kernel of the comparison (core/numerics/compare_vec.c) against the
 * scalar rules: a comparison over whole arrays (chunks of 256 ordinary passing
 * pairs go through the kernel) gives bit for bit the result of the same
 * comparison in parts of one element (each part below a chunk: scalar rules
 * only), merged in index order, for fp32, bf16 and fp16 outputs under the ulp
 * and allclose metrics. The data is mostly passing pairs with errors of 0 to 1
 * ulps and low parts of both signs (exact values at powers of two whose low
 * part pulls them into the binade below, where the ulp halves), with rare
 * NaN/Inf pairs, zeros and mismatches, so that both kinds of chunk occur. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/compare.h"
#include "core/numerics/dtype.h"

#define N 40000

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
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool same_result(const nv_compare_result *a, const nv_compare_result *b)
{
    bool ok = a->compared == b->compared && a->mismatches == b->mismatches &&
              a->nan_mismatches == b->nan_mismatches && a->inf_mismatches == b->inf_mismatches &&
              a->zero_sign_mismatches == b->zero_sign_mismatches && same(a->max_ulp, b->max_ulp) &&
              same(a->mean_ulp, b->mean_ulp) && same(a->p99_ulp, b->p99_ulp) &&
              same(a->max_abs, b->max_abs) && same(a->max_rel, b->max_rel) &&
              same(a->max_allowed, b->max_allowed) && same(a->headroom, b->headroom) &&
              a->failure == b->failure && a->n_first == b->n_first && a->nonfinite == b->nonfinite &&
              memcmp(a->ulp_hist, b->ulp_hist, sizeof a->ulp_hist) == 0;
    for (int k = 0; ok && k < a->n_first; k++)
        ok = a->first[k].index == b->first[k].index && same(a->first[k].got, b->first[k].got) &&
             same(a->first[k].ulp_err, b->first[k].ulp_err) && a->first[k].kind == b->first[k].kind;
    return ok;
}

static double got[N], exact[N], lo[N], ue[N];

/* Values of dt; mismatches (5 ulps) only in [N/2, N/2 + 3000). */
static void fill(nv_dtype dt)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    int mb = di->mant_bits, span = di->emax - di->emin < 40 ? di->emax - di->emin : 40;
    for (int i = 0; i < N; i++) {
        int ex = di->emin + (int)(next() % (uint64_t)span);
        bool pow2 = next() % 8 == 0;
        double e = pow2 ? ldexp(1, ex)
                        : ldexp(1 + (double)(next() % (1u << mb)) / (1u << mb), ex);
        if (next() & 1)
            e = -e;
        double ulp = ldexp(1, ilogb(e) - mb);
        int k = (int)(next() % 3) - 1;
        if (i >= N / 2 && i < N / 2 + 3000 && next() % 64 == 0)
            k = 5;
        got[i] = nv_dtype_round(dt, e + k * ulp / (pow2 && k < 0 ? 2 : 1), &NV_ROUND_DEFAULT, 0);
        exact[i] = e;
        /* lo of either sign, below a quarter ulp of the binade below. */
        lo[i] = next() % 3 == 0 ? ulp * 0.2 * ((double)(next() % 1000) / 1000 - 0.5) : 0;
        uint64_t s = next() % 6000;
        if (s == 0)
            got[i] = NAN;
        else if (s == 1)
            exact[i] = got[i] = INFINITY, lo[i] = 0;
        else if (s == 2)
            exact[i] = 0, got[i] = 0, lo[i] = 0;
        else if (s == 3)
            got[i] = 0;
    }
}

static nv_tolerance tol_of(nv_tol_metric m)
{
    nv_tolerance t;
    memset(&t, 0, sizeof t);
    t.metric = m;
    t.max_ulp = 2;
    t.rtol = 1e-2;
    t.atol = 1e-30;
    t.reason_code = NV_REASON_APPROXIMATION_ERROR;
    strcpy(t.reason, "test");
    return t;
}

static int one_by_one(const nv_compare_input *whole, const nv_tolerance *t, nv_compare_result *ret)
{
    static nv_compare_part acc, p;
    nv_compare_part_init(&acc, NULL);
    for (int64_t i = 0; i < whole->n; i++) {
        nv_compare_input in = *whole;
        in.n = 1;
        in.got += i;
        in.exact += i;
        in.exact_lo += i;
        nv_compare_part_init(&p, ue);
        if (nv_compare_part_run(&in, i, whole->n, t, &p) < 0)
            return -1;
        nv_compare_part_merge(&acc, &p);
    }
    nv_compare_part_finish(&acc, whole->n, t, ret);
    return 0;
}

int main(void)
{
    static const nv_dtype dts[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16};
    static const nv_tol_metric metrics[] = {NV_TOL_ULP, NV_TOL_ALLCLOSE};
    static const char *const names[] = {"ulp", "allclose"};
    for (int d = 0; d < 3; d++) {
        fill(dts[d]);
        nv_compare_input in = {.dtype = dts[d],
                               .n = N,
                               .got = got,
                               .exact = exact,
                               .exact_lo = lo,
                               .reduction_len = 1,
                               .zero_sign = true};
        for (int m = 0; m < 2; m++) {
            nv_tolerance t = tol_of(metrics[m]);
            nv_compare_result whole, single;
            bool ok = nv_compare(&in, &t, &whole) == 0 && one_by_one(&in, &t, &single) == 0;
            /* both kinds of chunk: mismatches and specials in some, none in most */
            ok = ok && whole.nonfinite > 0 && whole.mismatches > 0 &&
                 whole.mismatches < N / 100;
            if (!same_result(&whole, &single))
                tap_diag("differ: max_ulp %.17g / %.17g, mean %.17g / %.17g, mism %lld / %lld, "
                         "max_rel %.17g / %.17g, head %.17g / %.17g, allowed %.17g / %.17g",
                         whole.max_ulp, single.max_ulp, whole.mean_ulp, single.mean_ulp,
                         (long long)whole.mismatches, (long long)single.mismatches, whole.max_rel,
                         single.max_rel, whole.headroom, single.headroom, whole.max_allowed,
                         single.max_allowed);
            tap_ok(ok && same_result(&whole, &single),
                   "%s, %s: vector chunks give the scalar rules' result (%lld mismatches, max "
                   "%.17g ulp, mean %.17g)",
                   nv_dtype_name(dts[d]), names[m], (long long)whole.mismatches, whole.max_ulp,
                   whole.mean_ulp);
        }
    }
    return tap_done();
}
