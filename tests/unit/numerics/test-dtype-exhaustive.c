/* Exhaustive dtype tests for every format of at most 16 bits: each encoding
 * decodes to the value its spec formula gives (and, for fp16/bf16, to what the
 * compiler's _Float16 / float conversions give), re-encodes to itself under every
 * rounding mode, orders correctly; and every rounding midpoint of each format and
 * its fp32 neighbours rounds like MPFR emulating the format. */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "dtype_ref.h"
#include "tests/unit/tap.h"

static const ref_fmt *const small_fmts[] = {&REF_BF16, &REF_FP16, &REF_E4M3, &REF_E5M2,
                                            &REF_E2M3, &REF_E3M2, &REF_E2M1};
#define N_SMALL (sizeof small_fmts / sizeof small_fmts[0])

static const nv_rounding all_modes[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                        NV_ROUND_DOWN};

static bool is_nan_enc(const ref_fmt *f, uint64_t b)
{
    return isnan(ref_decode(f, b));
}

static void test_decode(const ref_fmt *f)
{
    uint64_t n = 1ull << ref_nbits(f), bad = 0, bad_payload = 0, bad_daz = 0;
    for (uint64_t b = 0; b < n; b++) {
        double got = nv_dtype_decode(f->dt, b, false);
        double want = ref_decode(f, b);
        bool neg = (b >> (ref_nbits(f) - 1)) & 1;
        if (!ref_same(got, want) || (isnan(want) && (bool)signbit(got) != neg)) {
            if (bad++ == 0)
                tap_diag("%s decode 0x%llx: got %a want %a", f->name, (unsigned long long)b, got,
                         want);
        }
        if (isnan(want) && f->has_inf) {
            /* IEEE 754-2019 §6.2.3: the payload travels in the top fraction bits. */
            uint64_t F = b & ((1ull << f->mbits) - 1);
            uint64_t s = (b >> (ref_nbits(f) - 1)) & 1;
            uint64_t expect = (s << 63) | (0x7ffull << 52) | (F << (52 - f->mbits));
            if (ref_dbits(got) != expect && bad_payload++ == 0)
                tap_diag("%s NaN 0x%llx decoded to bits %016llx", f->name, (unsigned long long)b,
                         (unsigned long long)ref_dbits(got));
        }
        /* DAZ: subnormal encodings read as signed zero, everything else unchanged. */
        double dz = nv_dtype_decode(f->dt, b, true);
        bool sub = ((b >> f->mbits) & ((1u << f->ebits) - 1)) == 0;
        double want_dz = sub ? (signbit(want) ? -0.0 : 0.0) : want;
        if (!ref_same(dz, want_dz) && bad_daz++ == 0)
            tap_diag("%s DAZ decode 0x%llx: got %a", f->name, (unsigned long long)b, dz);
    }
    tap_ok(bad == 0, "%s: all %llu encodings decode to the spec formula (%llu bad)", f->name,
           (unsigned long long)n, (unsigned long long)bad);
    if (f->has_inf)
        tap_ok(bad_payload == 0, "%s: NaN payload and sign land in the double's top bits", f->name);
    tap_ok(bad_daz == 0, "%s: DAZ decode flushes exactly the subnormal encodings", f->name);
}

/* Re-encoding a decoded value gives back its encoding under every mode; a NaN
 * comes back quiet (IEEE 754-2019 §6.2.3), inf becomes max under saturation
 * (OFP8 §4), subnormals become signed zero under FTZ. */
static void test_reencode(const ref_fmt *f)
{
    uint64_t n = 1ull << ref_nbits(f), bad = 0, checked = 0;
    uint64_t sign = 1ull << (ref_nbits(f) - 1), max_enc = ref_max_enc(f);
    for (uint64_t b = 0; b < n; b++) {
        double v = nv_dtype_decode(f->dt, b, false);
        for (int mi = 0; mi < 5; mi++) {
            for (int flags = 0; flags < 4; flags++) {
                nv_round_mode m = {mi < 4 ? all_modes[mi] : NV_ROUND_STOCHASTIC, flags & 1,
                                   (flags >> 1) & 1};
                uint32_t rnd = (uint32_t)(b * 2654435761u);
                uint64_t want = b;
                if (is_nan_enc(f, b))
                    want = f->e4m3fn ? b : b | (1ull << (f->mbits - 1));
                else if (isinf(v) && m.saturate)
                    want = (b & sign) | max_enc;
                else if (m.ftz && fabs(v) < ref_min_normal(f))
                    want = b & sign;
                uint64_t got = nv_dtype_encode(f->dt, v, &m, rnd);
                checked++;
                if (got != want && bad++ == 0)
                    tap_diag("%s: 0x%llx (%a) mode %d flags %d re-encoded to 0x%llx", f->name,
                             (unsigned long long)b, v, mi, flags, (unsigned long long)got);
            }
        }
    }
    tap_ok(bad == 0, "%s: every encoding re-encodes to itself (%llu checks, %llu bad)", f->name,
           (unsigned long long)checked, (unsigned long long)bad);
}

static void test_order(const ref_fmt *f)
{
    uint64_t sign = 1ull << (ref_nbits(f) - 1), max_enc = ref_max_enc(f), bad = 0;
    for (uint64_t b = 1; b <= max_enc; b++) {
        double lo = nv_dtype_decode(f->dt, b - 1, false), hi = nv_dtype_decode(f->dt, b, false);
        double nhi = nv_dtype_decode(f->dt, sign | b, false);
        if (!(lo < hi) || nhi != -hi) {
            if (bad++ == 0)
                tap_diag("%s: order breaks at 0x%llx", f->name, (unsigned long long)b);
        }
    }
    double top = nv_dtype_decode(f->dt, max_enc, false);
    tap_ok(bad == 0 && top == f->max,
           "%s: positive encodings 0..0x%llx strictly increase, negatives mirror, top = %g",
           f->name, (unsigned long long)max_enc, top);
}

/* fp16 against the compiler's _Float16 (a second, independent decoder), bf16
 * against the top half of an fp32. */
static void test_hw_decode(void)
{
    uint64_t bad16 = 0, badbf = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h16 = (uint16_t)b;
        __extension__ _Float16 h;
        memcpy(&h, &h16, 2);
        double want = (double)h, got = nv_dtype_decode(NV_DT_FP16, b, false);
        if (!ref_same(got, want) && bad16++ == 0)
            tap_diag("fp16 0x%04x: got %a, _Float16 says %a", b, got, want);
        uint32_t f32 = b << 16;
        float fl;
        memcpy(&fl, &f32, 4);
        got = nv_dtype_decode(NV_DT_BF16, b, false);
        if (!ref_same(got, (double)fl) && badbf++ == 0)
            tap_diag("bf16 0x%04x: got %a, fp32 says %a", b, got, (double)fl);
    }
    tap_ok(bad16 == 0, "fp16: all 65536 encodings decode like the compiler's _Float16");
    tap_ok(badbf == 0, "bf16: all 65536 encodings decode like the upper half of an fp32");
}

static uint64_t check_point(const ref_fmt *f, float xf, uint64_t *checked)
{
    uint64_t bad = 0;
    for (int s = 0; s < 2; s++) {
        double x = s ? -(double)xf : (double)xf;
        for (int mi = 0; mi < 4; mi++)
            for (int flags = 0; flags < 4; flags++) {
                nv_round_mode m = {all_modes[mi], flags & 1, (flags >> 1) & 1};
                double got = nv_dtype_round(f->dt, x, &m, 0);
                double want = ref_round_mpfr(f, x, all_modes[mi], m.saturate, m.ftz);
                (*checked)++;
                if (!ref_same(got, want) && bad++ == 0)
                    tap_diag("%s: x=%a mode %d sat %d ftz %d: got %a, MPFR %a", f->name, x, mi,
                             m.saturate, m.ftz, got, want);
            }
        /* Stochastic: rnd = 0xffffffff never rounds away; rnd = 0 rounds away
         * exactly when the discarded fraction, truncated to 32 bits, is nonzero,
         * i.e. (|x| - |tz|) >= 2^-32 quantum (so 2^-149 stays at zero). */
        nv_round_mode sm = {NV_ROUND_STOCHASTIC, false, false};
        double tz = ref_round_mpfr(f, x, NV_ROUND_TOWARD_ZERO, false, false);
        double aw = ref_round_mpfr(f, x, s ? NV_ROUND_DOWN : NV_ROUND_UP, false, false);
        int e = tz == 0 ? ref_emin(f) : (int)ilogb(tz);
        double quantum = ldexp(1.0, (e > ref_emin(f) ? e : ref_emin(f)) - f->mbits);
        if (ldexp(fabs(x) - fabs(tz), 32) < quantum)
            aw = tz;
        /* At or beyond max + ulp both candidates of the unbounded-exponent rounding
         * exceed max: an overflow, which stochastic rounding treats like nearest
         * (dtype.c overflow_to_inf). */
        if (fabs(x) >= f->max + ldexp(1.0, (int)ilogb(f->max) - f->mbits))
            tz = aw = ref_inf_result(f, s, false);
        double g0 = nv_dtype_round(f->dt, x, &sm, 0), g1 = nv_dtype_round(f->dt, x, &sm, ~0u);
        (*checked) += 2;
        if ((!ref_same(g0, aw) || !ref_same(g1, tz)) && bad++ == 0)
            tap_diag("%s: x=%a stochastic rnd=0 %a (want %a), rnd=~0 %a (want %a)", f->name, x, g0,
                     aw, g1, tz);
    }
    return bad;
}

/* Every midpoint between adjacent values (including the one between 0 and the
 * smallest subnormal, and max + ulp/2, the round-to-nearest overflow threshold),
 * its two fp32 neighbours, each value itself and its fp32 successor. */
static void test_midpoints(const ref_fmt *f)
{
    uint64_t max_enc = ref_max_enc(f), bad = 0, checked = 0;
    int emax = (int)ilogb(f->max);
    for (uint64_t b = 0; b <= max_enc; b++) {
        double a = ref_decode(f, b);
        double next = b < max_enc ? ref_decode(f, b + 1) : f->max + ldexp(1.0, emax - f->mbits);
        float mid = (float)((a + next) / 2);
        float pts[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)a,
                       nextafterf((float)a, INFINITY)};
        if ((double)mid != (a + next) / 2 && bad++ == 0)
            tap_diag("%s: midpoint of 0x%llx not an fp32", f->name, (unsigned long long)b);
        for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
            bad += check_point(f, pts[i], &checked);
    }
    /* At and beyond max + ulp even truncation overflows: RZ must still give max. */
    int emax_plus = (int)ilogb(f->max) + 1;
    float beyond[] = {(float)(f->max + ldexp(1.0, emax - f->mbits)), FLT_MAX,
                      emax_plus < 127 ? (float)ldexp(1.5, emax_plus) : FLT_MAX};
    for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
        if (isfinite(beyond[i])) /* bf16's max + ulp is 2^128, not an fp32 */
            bad += check_point(f, beyond[i], &checked);
    tap_ok(bad == 0, "%s: midpoints, their fp32 neighbours, thresholds match MPFR (%llu checks)",
           f->name, (unsigned long long)checked);
}

/* fp32 decoding against the hardware's float -> double conversion (exact for
 * every non-NaN value) and the payload rule for NaNs (the fraction shifted up,
 * signalling NaNs left signalling), with and without DAZ, on every 257th
 * encoding and every encoding of the four boundary exponent fields (0, 1,
 * 254, 255) with 4096 fractions each. */
static int fp32_decode_bad(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    bool nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu);
    uint64_t want = nan ? (uint64_t)(u >> 31) << 63 | 0x7ff0000000000000ull |
                              (uint64_t)(u & 0x7fffffu) << 29
                        : 0;
    double w = (double)f, dz = (u & 0x7f800000u) == 0 ? (u >> 31 ? -0.0 : 0.0) : w;
    double got = nv_dtype_decode(NV_DT_FP32, u, false), gz = nv_dtype_decode(NV_DT_FP32, u, true);
    uint64_t gb, gzb;
    memcpy(&gb, &got, 8);
    memcpy(&gzb, &gz, 8);
    if (nan)
        return gb != want || gzb != want;
    return memcmp(&got, &w, 8) != 0 || memcmp(&gz, &dz, 8) != 0;
}

static void test_fp32_decode(void)
{
    uint64_t bad = 0, n = 0;
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += 257, n++)
        bad += fp32_decode_bad((uint32_t)u);
    static const uint32_t fields[] = {0, 1, 254, 255};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++)
            for (uint32_t fr = 0; fr < 4096; fr++, n++) {
                uint32_t frac = fr < 2048 ? fr : 0x7fffffu - (fr - 2048);
                bad += fp32_decode_bad((uint32_t)s << 31 | fields[k] << 23 | frac);
            }
    tap_ok(bad == 0, "fp32: %llu encodings decode like float -> double (NaN payloads kept), "
           "with and without DAZ (%llu bad)", (unsigned long long)n, (unsigned long long)bad);
}

int main(void)
{
    test_fp32_decode();
    for (size_t i = 0; i < N_SMALL; i++) {
        test_decode(small_fmts[i]);
        test_reencode(small_fmts[i]);
        test_order(small_fmts[i]);
    }
    test_hw_decode();
    for (size_t i = 0; i < N_SMALL; i++)
        test_midpoints(small_fmts[i]);
    return tap_done();
}
