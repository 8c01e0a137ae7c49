/* The vector kernel of the comparison (core/numerics/compare_vec.c) against the
 * scalar rules: a comparison over whole arrays (chunks of 256 ordinary passing
 * pairs go through the kernel) gives bit for bit the result of the same
 * comparison in parts of one element (each part below a chunk: scalar rules
 * only), merged in index order, for fp32, bf16 and fp16 outputs under the ulp
 * and allclose metrics. The data is mostly passing pairs with errors of 0 to 1
 * ulps and low parts of both signs (exact values at powers of two whose low
 * part pulls them into the binade below, where the ulp halves), with rare
 * NaN/Inf pairs (passing and not), zeros of either side and both signs
 * (underflows, signed-zero mismatches) and mismatches, so that chunks the
 * kernel takes with skipped pairs and chunks it refuses both occur. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/unit/tap.h"
#include "compare_fixture.h"
#include "core/numerics/compare.h"
#include "core/numerics/dtype.h"

#define N 40000

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    return cf_next(&rs);
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
        else if (s == 4) /* both NaN, or the same infinity: passing specials */
            got[i] = exact[i] = next() & 1 ? NAN : -INFINITY, lo[i] = 0;
        else if (s == 5) /* an underflow to a zero of the exact value's sign */
            got[i] = copysign(0, exact[i]), exact[i] *= ldexp(1, -200);
        else if (s == 6) /* the same, the other sign: a signed-zero mismatch */
            got[i] = copysign(0, -exact[i]), exact[i] *= ldexp(1, -200), lo[i] = 0;
        else if (s == 7) /* exact -0 and a device -0, +0 or min subnormal */
            exact[i] = -0.0, lo[i] = 0, got[i] = next() % 3 == 0 ? 0.0 : next() & 1
                                                 ? -0.0 : di->min_subnormal;
        else if (s == 8) /* inf against -inf, and a finite value against inf */
            got[i] = next() & 1 ? -INFINITY : got[i], exact[i] = INFINITY, lo[i] = 0;
    }
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
            nv_tolerance t = cf_tol(metrics[m], 1e-2);
            nv_compare_result whole, single;
            bool ok = nv_compare(&in, &t, &whole) == 0 && cf_in_parts(&in, &t, 1, ue, &single) == 0;
            /* both kinds of chunk: mismatches and specials in some, none in most */
            ok = ok && whole.nonfinite > 0 && whole.mismatches > 0 &&
                 whole.mismatches < N / 100;
            if (!cf_same_result(&whole, &single))
                tap_diag("differ: max_ulp %.17g / %.17g, mean %.17g / %.17g, mism %lld / %lld, "
                         "max_rel %.17g / %.17g, head %.17g / %.17g, allowed %.17g / %.17g",
                         whole.max_ulp, single.max_ulp, whole.mean_ulp, single.mean_ulp,
                         (long long)whole.mismatches, (long long)single.mismatches, whole.max_rel,
                         single.max_rel, whole.headroom, single.headroom, whole.max_allowed,
                         single.max_allowed);
            tap_ok(ok && cf_same_result(&whole, &single),
                   "%s, %s: vector chunks give the scalar rules' result (%lld mismatches, max "
                   "%.17g ulp, mean %.17g)",
                   nv_dtype_name(dts[d]), names[m], (long long)whole.mismatches, whole.max_ulp,
                   whole.mean_ulp);
            /* nv_compare_elems (vector chunks) against nv_compare_elem, from an
             * offset that puts the chunks off the arrays' 256-element grid. */
            static nv_compare_elem_out outs[N];
            int64_t k0 = 37, bad = 0, vec_like = 0;
            ok = nv_compare_elems(&in, k0, N - k0, &t, outs) == 0;
            for (int64_t k = k0; ok && k < N; k++) {
                nv_compare_elem_out o, *e = &outs[k - k0];
                ok = nv_compare_elem(&in, k, &t, &o) == 0;
                bad += o.finite != e->finite || o.mismatch != e->mismatch ||
                       !cf_same(o.ulp_err, e->ulp_err) || !cf_same(o.exact, e->exact) ||
                       !cf_same(o.exact_lo, e->exact_lo);
                vec_like += o.finite && !o.mismatch;
            }
            tap_ok(ok && bad == 0 && vec_like > N / 2,
                   "%s, %s: nv_compare_elems = nv_compare_elem on %lld elements (%lld differ)",
                   nv_dtype_name(dts[d]), names[m], (long long)(N - k0), (long long)bad);
        }
    }
    return tap_done();
}
