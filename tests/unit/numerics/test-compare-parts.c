/* compare in parts: a comparison split into blocks of any size, each block with
 * its own arrays, merged in index order, gives nv_compare's result over the
 * whole bit for bit (every metric, both histograms, the first mismatches, the
 * overflow rule, the bound's lambda) for the ulp, allclose and bound metrics. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/unit/tap.h"
#include "compare_fixture.h"
#include "core/numerics/compare.h"

#define N 50000

static uint64_t rs = 88172645463325252ull;
static uint64_t next(void)
{
    return cf_next(&rs);
}

static double got[N], exact[N], lo[N], abs_sum[N], peak[N], ue[N];

/* fp32 values with errors of 0 to ~4 ulps, a few NaN/Inf pairs, wrong-signed
 * zeros and huge peaks, so that every branch of the comparison is taken. */
static void fill(void)
{
    for (int i = 0; i < N; i++) {
        double e = ldexp(1 + (double)(next() % (1u << 23)) / (1u << 23), (int)(next() % 40) - 20);
        if (next() & 1)
            e = -e;
        double ulp = ldexp(1, ilogb(e) - 23);
        int k = (int)(next() % 9) - 4;
        got[i] = next() % 3 ? e : e + k * ulp;
        exact[i] = e;
        lo[i] = next() % 4 == 0 ? ulp * 0.3 * (double)(next() % 1000) / 1000 : 0;
        abs_sum[i] = fabs(e) * (1 + (double)(next() % 64));
        peak[i] = next() % 50 == 0 ? 1e39 : fabs(e);
        uint64_t s = next() % 1000;
        if (s == 0)
            got[i] = NAN;
        else if (s == 1)
            exact[i] = INFINITY, got[i] = INFINITY;
        else if (s == 2)
            got[i] = -INFINITY;
        else if (s == 3)
            exact[i] = 0, got[i] = -0.0, lo[i] = 0;
    }
}

static nv_tolerance tol_of(nv_tol_metric m)
{
    nv_tolerance t = cf_tol(m, 1e-6);
    t.c = 1;
    t.growth = NV_GROWTH_PROBABILISTIC;
    return t;
}

/* The comparison in blocks of blk (the last one shorter), merged in order. */
static int in_parts(const nv_compare_input *whole, const nv_tolerance *t, int64_t blk,
                    bool keep_ue, nv_compare_result *ret)
{
    return cf_in_parts(whole, t, blk, keep_ue ? ue : NULL, ret);
}

int main(void)
{
    fill();
    nv_compare_input in = {.dtype = NV_DT_FP32,
                           .n = N,
                           .got = got,
                           .exact = exact,
                           .exact_lo = lo,
                           .abs_sum = abs_sum,
                           .reduction_len = 64,
                           .zero_sign = true,
                           .peak = peak,
                           .acc_dtype = NV_DT_FP32,
                           .acc_range = NV_DT_FP32};
    static const nv_tol_metric metrics[] = {NV_TOL_ULP, NV_TOL_ALLCLOSE, NV_TOL_BOUND};
    static const char *const names[] = {"ulp", "allclose", "bound"};
    static const int64_t blocks[] = {1, 7, 4096, 65536};
    for (int m = 0; m < 3; m++) {
        nv_tolerance t = tol_of(metrics[m]);
        nv_compare_result whole, parts;
        int r = nv_compare(&in, &t, &whole);
        bool ok = r == 0 && whole.mismatches > NV_COMPARE_FIRST && whole.intermediate_overflows > 0;
        ok = ok && whole.nan_mismatches > 0 && whole.inf_mismatches > 0 && whole.zero_sign_mismatches > 0;
        for (size_t b = 0; ok && b < sizeof blocks / sizeof blocks[0]; b++)
            ok = in_parts(&in, &t, blocks[b], true, &parts) == 0 && cf_same_result(&whole, &parts);
        tap_ok(ok, "%s: blocks of 1, 7, 4096 and 65536 merged give nv_compare's result bit for bit "
                   "(%lld mismatches, %lld overflows, mean %.17g)",
               names[m], (long long)whole.mismatches, (long long)whole.intermediate_overflows,
               whole.mean_ulp);
    }
    /* Without the ulp errors kept, the merge adds each block's sum as one term:
     * the mean may move in its last bits (this data shows it does). */
    nv_tolerance t = tol_of(NV_TOL_ULP);
    nv_compare_result whole, parts;
    nv_compare(&in, &t, &whole);
    in_parts(&in, &t, 7, false, &parts);
    tap_ok(!cf_same(whole.mean_ulp, parts.mean_ulp) && fabs(whole.mean_ulp - parts.mean_ulp) < 1e-12,
           "block sums added as terms: mean %.17g, not one pass's %.17g (why parts keep ue)",
           parts.mean_ulp, whole.mean_ulp);
    return tap_done();
}
