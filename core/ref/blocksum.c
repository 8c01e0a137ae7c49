/* One rounding for a block of terms (blocksum.h). The exact sum is held by the
 * long accumulator of ddsum.h; rounding it to a format of at most 51 bits goes
 * through rounding to odd at 53 bits (Boldo & Melquiond, "Emulation of FMA and
 * correctly rounded sums: proved algorithms using rounding to odd", IEEE TC
 * 57(4), 2008), which then rounds like the exact value in every direction. */
#include "blocksum.h"

#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "ddsum.h"

static double to_odd53(mpfr_srcptr v)
{
    double r = mpfr_get_d(v, MPFR_RNDZ);
    if (mpfr_cmp_d(v, r) == 0 || !isfinite(r))
        return r;
    uint64_t u;
    memcpy(&u, &r, sizeof u);
    return (u & 1) ? r : nextafter(r, mpfr_sgn(v) > 0 ? INFINITY : -INFINITY);
}

static mpfr_rnd_t mpfr_dir(nv_rounding r)
{
    switch (r) {
    case NV_ROUND_TOWARD_ZERO:
        return MPFR_RNDZ;
    case NV_ROUND_UP:
        return MPFR_RNDU;
    case NV_ROUND_DOWN:
        return MPFR_RNDD;
    default:
        return MPFR_RNDN;
    }
}

double nv_block_sum(const double *t, int n, nv_dtype acc, const nv_round_mode *mode, uint32_t rnd,
                    bool truncate)
{
    int p = nv_dtype_get(acc)->mant_bits + 1;
    int emax = INT32_MIN;
    bool all_neg_zero = n > 0;
    for (int i = 0; i < n; i++) {
        if (isfinite(t[i]) && t[i] != 0 && ilogb(t[i]) > emax)
            emax = ilogb(t[i]);
        all_neg_zero &= t[i] == 0 && signbit(t[i]);
    }
    nv_xacc a;
    nv_xacc_init(&a);
    for (int i = 0; i < n; i++) {
        double x = t[i];
        if (truncate && isfinite(x) && emax != INT32_MIN) {
            double q = ldexp(1.0, emax - (p - 1));
            x = trunc(x / q) * q; /* x / q: a power-of-two scaling, exact */
        }
        nv_xacc_add(&a, x);
    }
    mpfr_t v;
    mpfr_init2(v, 64);
    nv_xacc_get_mpfr(&a, v);
    double r;
    if (mpfr_zero_p(v))
        r = all_neg_zero || mode->rounding == NV_ROUND_DOWN ? -0.0 : 0.0;
    else if (acc == NV_DT_FP64)
        r = mpfr_get_d(v, mpfr_dir(mode->rounding));
    else
        r = to_odd53(v);
    mpfr_clear(v);
    return nv_dtype_round(acc, r, mode, rnd);
}
