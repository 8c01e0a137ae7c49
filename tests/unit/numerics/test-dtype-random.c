/* Random dtype tests: 10^7 random fp32 bit patterns per target format (bf16,
 * fp16, e4m3fn, e5m2, e2m3, e3m2, e2m1) under every rounding mode, random
 * saturation and FTZ flags.
 *
 * Oracle choice: MPFR costs ~0.2 us per rounding, and 10^7 x 7 targets x 4 modes
 * would take over a minute on this machine, so the bulk is judged by a bracket
 * oracle that shares nothing with dtype.c: the sorted table of every finite value
 * of the format built from the spec formula (dtype_ref.h ref_decode), a binary
 * search for the two values around |x|, and the rounding rule of each mode stated
 * on that pair (IEEE 754-2019 §4.3; overflow §7.4). Every 10th pattern (10^6 per
 * target) is also checked against MPFR emulating the format, and random doubles
 * (with bits below fp32's precision, to exercise sticky bits) against MPFR for
 * every binary format including fp32 and tf32. fp16 is checked once more against
 * the compiler's _Float16 conversion. The random source is a local xorshift, not
 * the Philox generator under test elsewhere. */
#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtype_ref.h"
#include "tests/unit/tap.h"

static uint64_t xs_state = 0x853c49e6748fea9bull;

static inline uint64_t xs64(void)
{
    xs_state ^= xs_state << 13;
    xs_state ^= xs_state >> 7;
    xs_state ^= xs_state << 17;
    return xs_state;
}

typedef struct bracket_oracle {
    const ref_fmt *f;
    uint64_t n;   /* finite non-negative encodings: 0..max_enc */
    double *vals; /* vals[k] = value of encoding k; vals[n] = max + ulp (virtual) */
} bracket_oracle;

static int oracle_init(bracket_oracle *o, const ref_fmt *f)
{
    o->f = f;
    o->n = ref_max_enc(f) + 1;
    o->vals = malloc((o->n + 1) * sizeof(double));
    if (!o->vals)
        return -1;
    for (uint64_t k = 0; k < o->n; k++)
        o->vals[k] = ref_decode(f, k);
    o->vals[o->n] = f->max + ldexp(1.0, (int)ilogb(f->max) - f->mbits);
    return 0;
}

/* The two format values around |x|: vals[lo] <= |x| < vals[lo + 1], or beyond
 * when |x| >= max + ulp. */
typedef struct bracket {
    bool beyond;
    uint64_t lo;
} bracket;

static bracket oracle_find(const bracket_oracle *o, double a)
{
    bracket b = {a >= o->vals[o->n], 0};
    if (b.beyond)
        return b;
    uint64_t lo = 0, hi = o->n; /* invariant: vals[lo] <= a < vals[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (o->vals[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    b.lo = lo;
    return b;
}

/* The value of finite x (bracketed by br) rounded to o->f (mode, saturate, ftz;
 * rnd for stochastic). */
static double oracle_round(const bracket_oracle *o, bracket br, double x, nv_rounding mode,
                           bool sat, bool ftz, uint32_t rnd)
{
    const ref_fmt *f = o->f;
    bool neg = signbit(x);
    double a = fabs(x), r;
    if (br.beyond) {
        /* Both candidates of the unbounded rounding overflow (§7.4): toward zero
         * gives max; nearest, stochastic and the directed mode away from zero inf. */
        bool away = mode == NV_ROUND_NEAREST_EVEN || mode == NV_ROUND_STOCHASTIC ||
                    (mode == NV_ROUND_UP && !neg) || (mode == NV_ROUND_DOWN && neg);
        return away ? ref_inf_result(f, neg, sat) : (neg ? -f->max : f->max);
    }
    uint64_t lo = br.lo, hi = lo + 1;
    double vlo = o->vals[lo], vhi = o->vals[hi];
    bool up = false;
    if (a != vlo) {
        switch (mode) {
        case NV_ROUND_NEAREST_EVEN: {
            double mid = (vlo + vhi) / 2; /* exact: adjacent values of a <= 11-bit format */
            up = a > mid || (a == mid && (lo & 1));
            break;
        }
        case NV_ROUND_TOWARD_ZERO:
            up = false;
            break;
        case NV_ROUND_UP:
            up = !neg;
            break;
        case NV_ROUND_DOWN:
            up = neg;
            break;
        case NV_ROUND_STOCHASTIC: {
            /* a - vlo is exact (both are multiples of a's fp32 quantum and the
             * difference is below one format quantum); the gap is a power of two. */
            double frac32 = floor(ldexp((a - vlo) / (vhi - vlo), 32));
            up = (double)rnd < frac32;
            break;
        }
        }
    }
    if (up && hi == o->n)
        return ref_inf_result(f, neg, sat);
    r = up ? vhi : vlo;
    if (ftz && r != 0 && r < ref_min_normal(f))
        r = 0;
    return neg ? -r : r;
}

/* NaN and inf inputs: rules of IEEE 754 §6.2.3, OFP8 §4, OCP MX §5.3. */
static double special_result(const ref_fmt *f, double x, bool sat)
{
    bool neg = signbit(x);
    if (isinf(x))
        return ref_inf_result(f, neg, sat);
    return f->has_nan ? NAN : (neg ? -0.0 : 0.0);
}

static const nv_rounding modes4[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                     NV_ROUND_DOWN};

static void test_random_fp32(const ref_fmt *f, long count)
{
    bracket_oracle o;
    if (oracle_init(&o, f) != 0) {
        tap_ok(0, "%s: out of memory", f->name);
        return;
    }
    long bad = 0, bad_mpfr = 0, n_mpfr = 0;
    for (long i = 0; i < count; i++) {
        uint64_t r = xs64();
        uint32_t bits = (uint32_t)r;
        bool sat = (r >> 32) & 1, ftz = (r >> 33) & 1;
        uint32_t rnd = (uint32_t)(r >> 34) ^ (uint32_t)(r >> 2);
        float xf;
        memcpy(&xf, &bits, 4);
        double x = xf;
        bracket br = isfinite(x) ? oracle_find(&o, fabs(x)) : (bracket){true, 0};
        for (int mi = 0; mi < 5; mi++) {
            nv_rounding md = mi < 4 ? modes4[mi] : NV_ROUND_STOCHASTIC;
            nv_round_mode m = {md, sat, ftz};
            double got = nv_dtype_round(f->dt, x, &m, rnd);
            double want = isfinite(x) ? oracle_round(&o, br, x, md, sat, ftz, rnd)
                                      : special_result(f, x, sat);
            if (!ref_same(got, want) && bad++ < 3)
                tap_diag("%s: x=%a (0x%08x) mode %d sat %d ftz %d rnd %08x: got %a want %a",
                         f->name, x, bits, mi, sat, ftz, rnd, got, want);
            if (i % 10 == 0 && mi < 4 && isfinite(x)) {
                double wm = ref_round_mpfr(f, x, md, sat, ftz);
                n_mpfr++;
                if (!ref_same(got, wm) && bad_mpfr++ < 3)
                    tap_diag("%s: x=%a mode %d: got %a MPFR %a", f->name, x, mi, got, wm);
            }
        }
    }
    free(o.vals);
    tap_ok(bad == 0, "%s: %ld random fp32 patterns x 5 modes match the bracket oracle (%ld bad)",
           f->name, count, bad);
    tap_ok(bad_mpfr == 0, "%s: %ld of them x 4 modes match MPFR (%ld bad)", f->name, n_mpfr / 4,
           bad_mpfr);
}

/* Random doubles (full 53-bit significands) with exponents around the format's
 * range, against MPFR: this is what an fp64 reference value goes through. */
static void test_random_double(const ref_fmt *f, long count)
{
    int lo_e = 1 - f->bias - f->mbits - 3, span = f->bias * 2 + f->mbits + 6;
    long bad = 0;
    for (long i = 0; i < count; i++) {
        uint64_t r = xs64();
        double x = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, lo_e + (int)(r % (uint64_t)span));
        if (r & 0x800)
            x = -x;
        if ((r & 0x3ff) == 0)
            x = ldexp(nearbyint(ldexp(x, f->mbits + 1 - ilogb(x))), ilogb(x) - f->mbits - 1);
        bool sat = (r >> 8) & 1, ftz = (r >> 9) & 1;
        for (int mi = 0; mi < 4; mi++) {
            nv_round_mode m = {modes4[mi], sat, ftz};
            double got = nv_dtype_round(f->dt, x, &m, 0);
            double want = ref_round_mpfr(f, x, modes4[mi], sat, ftz);
            if (!ref_same(got, want) && bad++ < 3)
                tap_diag("%s: double x=%a mode %d sat %d ftz %d: got %a MPFR %a", f->name, x, mi,
                         sat, ftz, got, want);
        }
    }
    tap_ok(bad == 0, "%s: %ld random doubles x 4 modes match MPFR", f->name, count);
}

/* fp16 against the compiler's _Float16 conversion from float (libgcc's soft-fp
 * on x86-64, which reads the rounding mode from MXCSR). */
static void test_fp16_compiler(long count)
{
    const int fe[] = {FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD};
    long bad = 0;
    for (long i = 0; i < count; i++) {
        uint32_t bits = (uint32_t)xs64();
        float xf;
        memcpy(&xf, &bits, 4);
        if (isnan(xf))
            continue;
        int mi = (int)(i & 3);
        nv_round_mode m = {modes4[mi], false, false};
        fesetround(fe[mi]);
        volatile float vx = xf;
        __extension__ volatile _Float16 h = (_Float16)vx;
        fesetround(FE_TONEAREST);
        double want = (double)h;
        double got = nv_dtype_round(NV_DT_FP16, xf, &m, 0);
        if (!ref_same(got, want) && bad++ < 3)
            tap_diag("fp16: x=%a mode %d: got %a _Float16 %a", (double)xf, mi, got, want);
    }
    tap_ok(bad == 0, "fp16: %ld random fp32 patterns (modes cycled) match _Float16", count);
}

int main(int argc, char **argv)
{
    /* An argument scales the run down for quick local iterations. The sanitizer
     * pass of scripts/test.sh (NV_TEST_SANITIZER set) looks for memory and UB
     * errors, not numerical coverage: the full 10^7 per target runs in the
     * optimized pass, 10^6 suffice to drive every code path under ASan/UBSan. */
    long count = argc > 1 ? atol(argv[1]) : getenv("NV_TEST_SANITIZER") ? 1000000 : 10000000;
    const ref_fmt *targets[] = {&REF_BF16, &REF_FP16, &REF_E4M3, &REF_E5M2,
                                &REF_E2M3, &REF_E3M2, &REF_E2M1};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        test_random_fp32(targets[i], count);
    const ref_fmt *all[] = {&REF_FP32, &REF_TF32, &REF_BF16, &REF_FP16, &REF_E4M3,
                            &REF_E5M2, &REF_E2M3, &REF_E3M2, &REF_E2M1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        test_random_double(all[i], count / 50);
    test_fp16_compiler(count / 5);
    return tap_done();
}
