/* dtype unit tests: the info table against the specs, names, specials (NaN
 * payload and sign, inf, zero), e8m0, ints, FTZ/DAZ, ulp, raw buffers and
 * stochastic rounding statistics. Expected values are hand-derived from the
 * cited spec, or come from an independent oracle (hardware conversion, libm
 * nearbyint, the compiler's _Float16, MPFR). */
#include <errno.h>
#include <fenv.h>
#include <stdio.h>
#include <string.h>

#include "dtype_ref.h"
#include "tests/unit/tap.h"

static const nv_round_mode RNE = {NV_ROUND_NEAREST_EVEN, false, false};
static const nv_round_mode RNE_SAT = {NV_ROUND_NEAREST_EVEN, true, false};
static const nv_round_mode RZ = {NV_ROUND_TOWARD_ZERO, false, false};
static const nv_round_mode RU = {NV_ROUND_UP, false, false};
static const nv_round_mode RD = {NV_ROUND_DOWN, false, false};

static uint64_t enc(nv_dtype dt, double x, const nv_round_mode *m)
{
    return nv_dtype_encode(dt, x, m, 0);
}

static void test_info(void)
{
    /* Constants straight from the specs (see dtype_ref.h for the citations). */
    const ref_fmt *fs[] = {&REF_FP32, &REF_TF32, &REF_BF16, &REF_FP16, &REF_E4M3,
                           &REF_E5M2, &REF_E2M3, &REF_E3M2, &REF_E2M1};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        const nv_dtype_info *in = nv_dtype_get(fs[i]->dt);
        tap_ok(in && in->is_float && in->exp_bits == fs[i]->ebits &&
                   in->mant_bits == fs[i]->mbits && in->bias == fs[i]->bias &&
                   in->max_finite == fs[i]->max && in->emin == ref_emin(fs[i]) &&
                   in->min_normal == ref_min_normal(fs[i]) &&
                   in->min_subnormal == ref_min_sub(fs[i]) && in->has_inf == fs[i]->has_inf &&
                   in->has_nan == fs[i]->has_nan && ilogb(in->max_finite) == in->emax,
               "info %s matches its spec constants", fs[i]->name);
    }
    const nv_dtype_info *e8 = nv_dtype_get(NV_DT_E8M0);
    tap_ok(e8->max_finite == 0x1p127 && e8->min_normal == 0x1p-127 && !e8->is_signed &&
               e8->has_nan && !e8->has_inf && e8->bits == 8,
           "info e8m0: 2^-127..2^127, NaN, unsigned (OCP MX v1.0 §5.4)");
    tap_ok(nv_dtype_get(NV_DT_INT8)->max_finite == 127 &&
               nv_dtype_get(NV_DT_INT32)->max_finite == 2147483647.0,
           "info int8/int32 ranges");
    tap_ok(nv_dtype_encode(NV_DT_FP16, 1.0 + 0x1p-11, NULL, 0) == 0x3c00 &&
               nv_dtype_round(NV_DT_FP8_E4M3, 464.0, NULL, 0) == 448.0,
           "a NULL mode means NV_ROUND_DEFAULT (nearest-even, no saturation)");
    tap_ok(nv_dtype_get(NV_DT_COUNT) == NULL && nv_dtype_get((nv_dtype)-1) == NULL,
           "nv_dtype_get rejects out-of-range ids");
}

static void test_names(void)
{
    static const struct {
        const char *name;
        nv_dtype dt;
    } cases[] = {
        {"fp64", NV_DT_FP64},         {"fp32", NV_DT_FP32},           {"tf32", NV_DT_TF32},
        {"bf16", NV_DT_BF16},         {"fp16", NV_DT_FP16},           {"fp8_e4m3", NV_DT_FP8_E4M3},
        {"e4m3fn", NV_DT_FP8_E4M3},   {"fp8_e4m3fn", NV_DT_FP8_E4M3}, {"fp8_e5m2", NV_DT_FP8_E5M2},
        {"e5m2", NV_DT_FP8_E5M2},     {"fp6_e2m3", NV_DT_FP6_E2M3},   {"e2m3", NV_DT_FP6_E2M3},
        {"fp6_e3m2", NV_DT_FP6_E3M2}, {"e3m2", NV_DT_FP6_E3M2},       {"fp4_e2m1", NV_DT_FP4_E2M1},
        {"e2m1", NV_DT_FP4_E2M1},     {"e8m0", NV_DT_E8M0},           {"int8", NV_DT_INT8},
        {"int32", NV_DT_INT32}};
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nv_dtype dt = NV_DT_COUNT;
        if (nv_dtype_from_name(cases[i].name, &dt) != 0 || dt != cases[i].dt) {
            tap_diag("name '%s' parsed wrong", cases[i].name);
            bad++;
        }
    }
    tap_ok(bad == 0, "all canonical names and aliases parse");
    nv_dtype dt = NV_DT_FP64;
    tap_ok(nv_dtype_from_name("fp7", &dt) == -EINVAL && dt == NV_DT_FP64 &&
               nv_dtype_from_name(NULL, &dt) == -EINVAL,
           "unknown name gives -EINVAL and leaves the output alone");
    int rt = 0;
    for (int i = 0; i < NV_DT_COUNT; i++)
        rt += nv_dtype_from_name(nv_dtype_name((nv_dtype)i), &dt) == 0 && dt == (nv_dtype)i;
    tap_ok(rt == NV_DT_COUNT, "nv_dtype_name round-trips through nv_dtype_from_name");
}

/* NaN: payload top bits and sign kept, quiet bit set (IEEE 754-2019 §6.2.3); the
 * x86 double->float conversion (cvtsd2ss) is an independent oracle for fp32. */
static void test_nan(void)
{
    uint64_t pats[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff4000000000001ull,
                       0xfff0000000000001ull, 0x7ffabcdef1234567ull, 0xfff5555555555555ull};
    int bad = 0;
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        volatile double x = ref_bitsd(pats[i]);
        volatile float f = (float)x;
        uint32_t hw;
        memcpy(&hw, (const void *)&f, 4);
        if (enc(NV_DT_FP32, x, &RNE) != hw) {
            tap_diag("fp32 NaN %016llx: got %llx hw %x", (unsigned long long)pats[i],
                     (unsigned long long)enc(NV_DT_FP32, x, &RNE), hw);
            bad++;
        }
        /* bf16 is the top half of fp32, including the NaN payload. */
        if (enc(NV_DT_BF16, x, &RNE) != hw >> 16)
            bad++;
        uint64_t s = pats[i] >> 63;
        uint64_t top10 = (pats[i] >> 42) & 0x3ff;
        if (enc(NV_DT_FP16, x, &RZ) != ((s << 15) | 0x7c00 | top10 | 0x200))
            bad++;
        if (enc(NV_DT_FP8_E5M2, x, &RU) != ((s << 7) | 0x7c | ((pats[i] >> 50) & 3) | 2))
            bad++;
        if (enc(NV_DT_FP8_E4M3, x, &RNE_SAT) != ((s << 7) | 0x7f))
            bad++;
        /* MX fp6/fp4 have no NaN (OCP MX v1.0 §5.3): signed zero, NaN lives in the scale. */
        if (enc(NV_DT_FP6_E2M3, x, &RNE) != s << 5 || enc(NV_DT_FP4_E2M1, x, &RNE) != s << 3)
            bad++;
        if (enc(NV_DT_E8M0, x, &RNE) != 0xff || enc(NV_DT_INT8, x, &RNE) != 0 ||
            enc(NV_DT_INT32, x, &RNE) != 0)
            bad++;
        uint64_t tf = enc(NV_DT_TF32, x, &RNE);
        if (tf != (hw & ~0x1fffu) || (tf & 0x1fff))
            bad++;
        if (enc(NV_DT_FP64, x, &RNE) != pats[i])
            bad++;
    }
    tap_ok(bad == 0, "NaN payload/sign/quiet bit per format (fp32 vs hardware)");
}

/* ±inf: IEEE formats keep it; saturation clamps to ±max (OFP8 §4); e4m3fn has no
 * inf, so NaN unless saturating (OFP8 §4); MX fp6/fp4 saturate always (MX §5.3). */
static void test_inf_zero(void)
{
    tap_ok(enc(NV_DT_FP16, INFINITY, &RNE) == 0x7c00 && enc(NV_DT_FP16, -INFINITY, &RZ) == 0xfc00 &&
               enc(NV_DT_FP16, INFINITY, &RNE_SAT) == 0x7bff &&
               enc(NV_DT_BF16, -INFINITY, &RNE_SAT) == 0xff7f,
           "inf: kept in fp16/bf16, ±max under saturation");
    tap_ok(enc(NV_DT_FP8_E4M3, INFINITY, &RNE) == 0x7f &&
               enc(NV_DT_FP8_E4M3, -INFINITY, &RZ) == 0xff &&
               enc(NV_DT_FP8_E4M3, -INFINITY, &RNE_SAT) == 0xfe &&
               enc(NV_DT_FP8_E5M2, -INFINITY, &RNE) == 0xfc &&
               enc(NV_DT_FP8_E5M2, INFINITY, &RNE_SAT) == 0x7b,
           "inf: e4m3fn NaN (0x7f) or ±448 saturated; e5m2 inf or ±57344");
    tap_ok(enc(NV_DT_FP6_E2M3, INFINITY, &RNE) == 0x1f &&
               enc(NV_DT_FP6_E3M2, -INFINITY, &RNE) == 0x3f &&
               enc(NV_DT_FP4_E2M1, INFINITY, &RZ) == 0x7,
           "inf: MX fp6/fp4 saturate to ±max");
    int bad = 0;
    for (int dt = 0; dt < NV_DT_E8M0; dt++) {
        const nv_dtype_info *in = nv_dtype_get((nv_dtype)dt);
        uint64_t nz = enc((nv_dtype)dt, -0.0, &RD);
        if (enc((nv_dtype)dt, 0.0, &RU) != 0 || nz != 1ull << (in->bits - 1) ||
            !signbit(nv_dtype_decode((nv_dtype)dt, nz, false)))
            bad++;
    }
    tap_ok(bad == 0, "±0 encode to ±0 in every float format under directed modes");
}

/* Overflow thresholds per IEEE 754-2019 §7.4 with hand-computed values. */
static void test_overflow(void)
{
    /* fp16: max 65504, ulp 32, RNE threshold 65520 (tie; 65504 = 0x7bff is odd). */
    tap_ok(enc(NV_DT_FP16, 65519.99, &RNE) == 0x7bff && enc(NV_DT_FP16, 65520, &RNE) == 0x7c00 &&
               enc(NV_DT_FP16, 1e6, &RZ) == 0x7bff && enc(NV_DT_FP16, -1e6, &RU) == 0xfbff &&
               enc(NV_DT_FP16, -65504.5, &RD) == 0xfc00 && enc(NV_DT_FP16, 65504.5, &RU) == 0x7c00,
           "fp16 overflow threshold 65520 and directed overflow");
    /* e4m3fn: max 448 = 0x7e (even mantissa 110), next would be 480: 464 ties to 448. */
    tap_ok(enc(NV_DT_FP8_E4M3, 464, &RNE) == 0x7e && enc(NV_DT_FP8_E4M3, 464.01, &RNE) == 0x7f &&
               enc(NV_DT_FP8_E4M3, 464.01, &RNE_SAT) == 0x7e &&
               enc(NV_DT_FP8_E4M3, 479, &RZ) == 0x7e && enc(NV_DT_FP8_E4M3, 449, &RU) == 0x7f &&
               enc(NV_DT_FP8_E4M3, -449, &RU) == 0xfe && enc(NV_DT_FP8_E4M3, 1e30, &RZ) == 0x7e,
           "e4m3fn: 464 -> 448, above -> NaN (or 448 saturated), RZ -> 448");
    /* e5m2: max 57344 = 1.75*2^15 (mantissa 11, odd): 61440 ties up to inf. */
    tap_ok(enc(NV_DT_FP8_E5M2, 61439, &RNE) == 0x7b && enc(NV_DT_FP8_E5M2, 61440, &RNE) == 0x7c &&
               enc(NV_DT_FP8_E5M2, 61440, &RNE_SAT) == 0x7b,
           "e5m2: 61440 ties to inf (57344 has an odd significand)");
    /* MX: e2m1 max 6 (0x7), 7 would be the tie with 8: saturates anyway. */
    tap_ok(enc(NV_DT_FP4_E2M1, 5, &RNE) == 0x6 && enc(NV_DT_FP4_E2M1, 5.01, &RNE) == 0x7 &&
               enc(NV_DT_FP4_E2M1, 1e300, &RU) == 0x7 && enc(NV_DT_FP6_E2M3, -7.75, &RNE) == 0x3f &&
               enc(NV_DT_FP6_E3M2, 30, &RNE) == 0x1f,
           "MX: 5 ties to 4 in e2m1; overflow saturates in e2m1/e2m3/e3m2");
}

/* FTZ on output after rounding, DAZ on decode. */
static void test_ftz_daz(void)
{
    nv_round_mode ftz = {NV_ROUND_NEAREST_EVEN, false, true};
    nv_round_mode ftz_up = {NV_ROUND_UP, false, true};
    tap_ok(enc(NV_DT_FP16, 0x1p-24, &ftz) == 0 && enc(NV_DT_FP16, -0x1p-20, &ftz) == 0x8000 &&
               enc(NV_DT_FP16, 0x1p-24, &RNE) == 1 && enc(NV_DT_FP16, 0x1p-14, &ftz) == 0x0400,
           "FTZ: fp16 subnormal results become signed zero, normals stay");
    /* 2^-14 - 2^-26 rounds (RNE) to 2^-14, a normal: FTZ looks at the rounded result. */
    tap_ok(enc(NV_DT_FP16, 0x1p-14 - 0x1p-26, &ftz) == 0x0400 &&
               enc(NV_DT_FP16, 1e-30, &ftz_up) == 0 && enc(NV_DT_BF16, 0x1p-130, &ftz) == 0,
           "FTZ applies to the rounded result");
    tap_ok(nv_dtype_decode(NV_DT_FP16, 0x0001, true) == 0 &&
               signbit(nv_dtype_decode(NV_DT_FP16, 0x8001, true)) &&
               nv_dtype_decode(NV_DT_FP16, 0x0400, true) == 0x1p-14 &&
               nv_dtype_decode(NV_DT_FP8_E4M3, 0x07, true) == 0 &&
               nv_dtype_decode(NV_DT_FP32, 0x00000001, true) == 0 &&
               nv_dtype_decode(NV_DT_FP64, 1, true) == 0 &&
               nv_dtype_decode(NV_DT_FP64, 1, false) > 0,
           "DAZ: subnormal encodings decode as signed zero");
    nv_round_mode ftz64 = {NV_ROUND_NEAREST_EVEN, false, true};
    tap_ok(enc(NV_DT_FP64, -0x1p-1070, &ftz64) == 0x8000000000000000ull &&
               enc(NV_DT_FP64, 0x1p-1022, &ftz64) == 0x0010000000000000ull,
           "FTZ on fp64");
}

/* e8m0: 2^(E-127), E = 0xff NaN (OCP MX v1.0 §5.4). Rounding as a 1-bit
 * significand binary format, checked against MPFR at precision 1 for values in
 * range; ties (1.5 * 2^k) go to 2^(k+1). */
static void test_e8m0(void)
{
    int bad = 0;
    for (int e = 0; e < 255; e++)
        if (nv_dtype_decode(NV_DT_E8M0, (uint64_t)e, false) != ldexp(1.0, e - 127) ||
            enc(NV_DT_E8M0, ldexp(1.0, e - 127), &RNE) != (uint64_t)e)
            bad++;
    tap_ok(bad == 0 && isnan(nv_dtype_decode(NV_DT_E8M0, 0xff, false)),
           "e8m0: all 256 encodings decode to 2^(e-127) / NaN and re-encode");
    tap_ok(enc(NV_DT_E8M0, 3.0, &RNE) == 129 && enc(NV_DT_E8M0, 3.0, &RZ) == 128 &&
               enc(NV_DT_E8M0, 2.9, &RNE) == 128 && enc(NV_DT_E8M0, 2.1, &RU) == 129 &&
               enc(NV_DT_E8M0, 3.9, &RD) == 128,
           "e8m0: 3 is a tie between 2 and 4, goes to 4; directed modes");
    tap_ok(enc(NV_DT_E8M0, -1.0, &RNE) == 0xff && enc(NV_DT_E8M0, 0.0, &RNE) == 0 &&
               enc(NV_DT_E8M0, 1e-300, &RD) == 0 && enc(NV_DT_E8M0, 0x1p128, &RNE) == 0xff &&
               enc(NV_DT_E8M0, 0x1p128, &RNE_SAT) == 0xfe &&
               enc(NV_DT_E8M0, 0x1p128, &RZ) == 0xfe && enc(NV_DT_E8M0, INFINITY, &RNE) == 0xff,
           "e8m0: negative -> NaN, zero/tiny -> 2^-127, overflow -> NaN or 2^127");
    mpfr_t y;
    mpfr_init2(y, 1);
    int badm = 0;
    const nv_rounding modes[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                 NV_ROUND_DOWN};
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        /* Uniform significand, exponent in [-127, 126]: the result stays in range. */
        double x = ldexp(1.0 + (double)(s >> 12) * 0x1p-52, (int)(s % 254) - 127);
        if (i % 7 == 0)
            x = ldexp(1.5, (int)(s % 254) - 127); /* exact ties */
        for (int mi = 0; mi < 4; mi++) {
            nv_round_mode m = {modes[mi], false, false};
            mpfr_set_d(y, x, ref_mpfr_rnd(modes[mi]));
            double want = mpfr_get_d(y, MPFR_RNDN);
            if (nv_dtype_round(NV_DT_E8M0, x, &m, 0) != want && badm++ < 3)
                tap_diag("e8m0 %a mode %d: got %a MPFR %a", x, mi,
                         nv_dtype_round(NV_DT_E8M0, x, &m, 0), want);
        }
    }
    mpfr_clear(y);
    tap_ok(badm == 0, "e8m0 matches MPFR precision 1 on 200000 values x 4 modes");
}

/* Ints: nearbyint() under fesetround() is the oracle for the rounding, then
 * saturation to the range; NaN encodes as 0 (dtype.h). */
static void test_ints(void)
{
    const nv_rounding modes[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                 NV_ROUND_DOWN};
    const int fe[] = {FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int i = 0; i < 400000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double x = ldexp((double)(int64_t)s, -(int)(s % 61)); /* up to ±2^63, many fractions */
        if (i % 5 == 0)
            x = ldexp((double)((int)(s % 1000) - 500), -1); /* exact halves: ties */
        for (int mi = 0; mi < 4; mi++) {
            nv_round_mode m = {modes[mi], false, false};
            fesetround(fe[mi]);
            volatile double vx = x;
            double r = nearbyint(vx);
            fesetround(FE_TONEAREST);
            double r8 = r < -128 ? -128 : r > 127 ? 127 : r;
            double r32 = r < -2147483648.0 ? -2147483648.0 : r > 2147483647.0 ? 2147483647.0 : r;
            double g8 = nv_dtype_round(NV_DT_INT8, x, &m, 0);
            double g32 = nv_dtype_round(NV_DT_INT32, x, &m, 0);
            if ((g8 != r8 || g32 != r32) && bad++ < 3)
                tap_diag("int x=%a mode %d: int8 %g (want %g) int32 %g (want %g)", x, mi, g8, r8,
                         g32, r32);
        }
    }
    tap_ok(bad == 0, "int8/int32 rounding and saturation match nearbyint under 4 modes");
    tap_ok(enc(NV_DT_INT8, -200, &RNE) == 0x80 && enc(NV_DT_INT8, -1, &RNE) == 0xff &&
               enc(NV_DT_INT32, -1e10, &RNE) == 0x80000000u &&
               enc(NV_DT_INT32, INFINITY, &RZ) == 0x7fffffffu && enc(NV_DT_INT8, NAN, &RNE) == 0 &&
               enc(NV_DT_INT8, 127.5, &RNE) == 0x7f && enc(NV_DT_INT8, -128.5, &RNE) == 0x80 &&
               enc(NV_DT_INT8, -2.5, &RNE) == 0xfe,
           "int two's complement bits, saturation, NaN -> 0, ties to even");
    tap_ok(nv_dtype_decode(NV_DT_INT8, 0x80, false) == -128 &&
               nv_dtype_decode(NV_DT_INT32, 0xffffffffu, false) == -1 &&
               nv_dtype_decode(NV_DT_INT32, 0x7fffffffu, false) == 2147483647.0,
           "int decode sign-extends");
}

/* int8 exhaustively: every encoding decodes to its two's complement value and
 * re-encodes to itself under every mode. */
static void test_int8_exhaustive(void)
{
    const nv_rounding modes[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                 NV_ROUND_DOWN, NV_ROUND_STOCHASTIC};
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        double v = nv_dtype_decode(NV_DT_INT8, (uint64_t)b, false);
        if (v != (b < 128 ? b : b - 256))
            bad++;
        for (int mi = 0; mi < 5; mi++) {
            nv_round_mode m = {modes[mi], mi & 1, mi & 2};
            if (nv_dtype_encode(NV_DT_INT8, v, &m, (uint32_t)b * 0x9e3779b9u) != (uint64_t)b)
                bad++;
        }
    }
    tap_ok(bad == 0, "int8: all 256 encodings decode and re-encode under every mode");
}

/* tf32: the value has 10 fraction bits in an fp32 container whose low 13 bits are
 * zero on encode and ignored on decode (dtype.h). */
static void test_tf32(void)
{
    uint64_t s = 0x0123456789abcdefull;
    int bad = 0;
    for (int i = 0; i < 100000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double x = ref_bitsd((s & 0x800fffffffffffffull) |
                             ((uint64_t)(1023 - 140 + (s >> 52) % 280) << 52));
        nv_round_mode m = {(nv_rounding)(i % 5), i & 8, i & 16};
        uint64_t b = nv_dtype_encode(NV_DT_TF32, x, &m, (uint32_t)s);
        if ((b & 0x1fff) || b >> 32)
            bad++;
    }
    tap_ok(bad == 0 && nv_dtype_decode(NV_DT_TF32, 0x3f801fffu, false) == 1.0 &&
               enc(NV_DT_TF32, 1.0 + 0x1p-10, &RNE) == 0x3f802000u &&
               enc(NV_DT_TF32, 1.0 + 0x1p-11, &RNE) == 0x3f800000u &&
               enc(NV_DT_TF32, 1.0 + 0x1p-11 + 0x1p-30, &RNE) == 0x3f802000u,
           "tf32: low 13 container bits zero on encode, ignored on decode; 1+2^-11 ties to 1");
}

/* ulp per dtype.h (glibc libm-test): 2^(max(floor(log2|x|), emin) - mant_bits). */
static void test_ulp(void)
{
    tap_ok(nv_dtype_ulp(NV_DT_FP32, 1.0) == 0x1p-23 && nv_dtype_ulp(NV_DT_FP32, 1.999) == 0x1p-23 &&
               nv_dtype_ulp(NV_DT_FP32, -2.0) == 0x1p-22 &&
               nv_dtype_ulp(NV_DT_FP32, 0) == 0x1p-149 &&
               nv_dtype_ulp(NV_DT_FP32, 1e-45) == 0x1p-149,
           "ulp fp32: 1, 2, 0, subnormal");
    tap_ok(nv_dtype_ulp(NV_DT_BF16, 3.0) == 0x1p-6 &&
               nv_dtype_ulp(NV_DT_FP16, 0x1p-20) == 0x1p-24 &&
               nv_dtype_ulp(NV_DT_FP16, 1e9) == 32 && nv_dtype_ulp(NV_DT_FP8_E4M3, 448) == 32 &&
               nv_dtype_ulp(NV_DT_FP8_E4M3, 1000) == 32 &&
               nv_dtype_ulp(NV_DT_FP8_E5M2, 0) == 0x1p-16 &&
               nv_dtype_ulp(NV_DT_FP4_E2M1, 0.7) == 0.5 && nv_dtype_ulp(NV_DT_FP4_E2M1, 5) == 2 &&
               nv_dtype_ulp(NV_DT_TF32, 1.0) == 0x1p-10,
           "ulp bf16/fp16/fp8/fp4/tf32 incl. beyond max and subnormal");
    tap_ok(nv_dtype_ulp(NV_DT_FP64, 1.0) == 0x1p-52 && nv_dtype_ulp(NV_DT_FP64, 0) == 0x1p-1074 &&
               nv_dtype_ulp(NV_DT_FP64, 0x1p-1030) == 0x1p-1074 &&
               nv_dtype_ulp(NV_DT_INT8, 5) == 1 && nv_dtype_ulp(NV_DT_E8M0, 4) == 4 &&
               nv_dtype_ulp(NV_DT_E8M0, 0) == 0x1p-127,
           "ulp fp64 (incl. subnormal), int, e8m0");
}

static void test_buffers(void)
{
    unsigned char b[16];
    memset(b, 0xaa, sizeof b);
    nv_dtype_store_bits(NV_DT_FP16, b, 1, 0x3c00);
    int ok16 = b[2] == 0x00 && b[3] == 0x3c && b[0] == 0xaa && b[4] == 0xaa &&
               nv_dtype_load_bits(NV_DT_FP16, b, 1) == 0x3c00;
    nv_dtype_store_bits(NV_DT_FP32, b, 2, 0x3f800001u);
    int ok32 = b[8] == 0x01 && b[9] == 0x00 && b[10] == 0x80 && b[11] == 0x3f &&
               nv_dtype_load_bits(NV_DT_FP32, b, 2) == 0x3f800001u;
    nv_dtype_store_bits(NV_DT_FP64, b, 1, 0x0102030405060708ull);
    int ok64 = b[8] == 0x08 && b[15] == 0x01 &&
               nv_dtype_load_bits(NV_DT_FP64, b, 1) == 0x0102030405060708ull;
    nv_dtype_store_bits(NV_DT_FP4_E2M1, b, 3, 0xff);
    int ok4 = b[3] == 0x0f && nv_dtype_load_bits(NV_DT_FP4_E2M1, b, 3) == 0xf;
    b[4] = 0xff;
    int ok6 = nv_dtype_load_bits(NV_DT_FP6_E3M2, b, 4) == 0x3f;
    b[5] = 0x77;
    nv_dtype_store_bits(NV_DT_COUNT, b, 5, 0);
    int okbad = nv_dtype_load_bits(NV_DT_COUNT, b, 5) == 0 && b[5] == 0x77;
    tap_ok(ok16 && ok32 && ok64 && ok4 && ok6 && okbad,
           "load/store bits: little-endian per storage_bytes, sub-byte in low bits");
}

/* Stochastic rounding is unbiased: with P(away) = f (the discarded fraction, here
 * chosen with 32 bits so it is exact), the count K of away-roundings in N trials
 * is Binomial(N, f). We accept |K - N f| <= 5 sqrt(N f (1 - f)): for a correct
 * implementation the chance of exceeding it is ~6e-7 (normal approximation), and
 * the random bits come from a fixed xorshift seed, so the test is deterministic.
 * Equivalently the mean of the rounded values is within 5 sigma of x. */
static void test_stochastic(void)
{
    static const struct {
        nv_dtype dt;
        double lo, ulp;
        uint32_t f32;
    } cases[] = {
        {NV_DT_BF16, 1.0, 0x1p-7, 0x4ccccccdu},      /* 1 + 0.3 ulp */
        {NV_DT_BF16, -3.0, -0x1p-6, 0x00010000u},    /* tiny fraction 2^-16, negative */
        {NV_DT_FP16, 0x1p-24, 0x1p-24, 0x80000000u}, /* subnormal, exact half */
        {NV_DT_FP8_E4M3, 256.0, 32.0, 0xe0000000u},  /* 0.875 ulp */
        {NV_DT_FP4_E2M1, 4.0, 2.0, 0x12345678u},
    };
    const int N = 1000000;
    nv_round_mode sm = {NV_ROUND_STOCHASTIC, false, false};
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double f = cases[c].f32 * 0x1p-32;
        double x = cases[c].lo + cases[c].ulp * f;
        double hi = cases[c].lo + cases[c].ulp;
        long k = 0, other = 0;
        double sum = 0;
        for (int i = 0; i < N; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            double r = nv_dtype_round(cases[c].dt, x, &sm, (uint32_t)(s >> 32));
            sum += r;
            if (r == hi)
                k++;
            else if (r != cases[c].lo)
                other++;
        }
        double sd = sqrt(N * f * (1 - f));
        double mean_err = fabs(sum / N - x) / fabs(cases[c].ulp);
        tap_ok(other == 0 && fabs(k - N * f) <= 5 * sd && mean_err <= 5 * sd / N,
               "stochastic %s x=%a: %ld/%d away (expect %.1f ± 5*%.1f), mean error %.2e ulp",
               nv_dtype_name(cases[c].dt), x, k, N, N * f, sd, mean_err);
        tap_ok(nv_dtype_round(cases[c].dt, x, &sm, 0) == hi &&
                   nv_dtype_round(cases[c].dt, x, &sm, 0xffffffffu) == cases[c].lo &&
                   nv_dtype_round(cases[c].dt, x, &sm, cases[c].f32 - 1) == hi &&
                   nv_dtype_round(cases[c].dt, x, &sm, cases[c].f32) == cases[c].lo,
               "stochastic %s: rnd=0 away, rnd=~0 toward zero, threshold at rnd = f*2^32",
               nv_dtype_name(cases[c].dt));
    }
    tap_ok(nv_dtype_round(NV_DT_BF16, 1.0, &sm, 0) == 1.0 &&
               nv_dtype_round(NV_DT_FP16, -0.0, &sm, 0) == 0 &&
               signbit(nv_dtype_round(NV_DT_FP16, -0.0, &sm, 0)),
           "stochastic: representable values and -0 are left alone");
}

/* fp32 against the hardware double->float conversion under each rounding mode. */
static void test_fp32_hw(void)
{
    const nv_rounding modes[] = {NV_ROUND_NEAREST_EVEN, NV_ROUND_TOWARD_ZERO, NV_ROUND_UP,
                                 NV_ROUND_DOWN};
    const int fe[] = {FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD};
    uint64_t s = 0xdeadbeefcafef00dull;
    long bad = 0, n = 0;
    for (int i = 0; i < 500000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        /* Doubles whose exponent spans fp32's range and beyond on both ends. */
        uint64_t u = (s & 0x800fffffffffffffull) | ((uint64_t)(1023 - 160 + (s >> 52) % 300) << 52);
        if (i % 4 == 0)
            u = (u & ~0x1fffffffull) | 0x10000000ull; /* exact fp32 midpoints */
        double x = ref_bitsd(u);
        for (int mi = 0; mi < 4; mi++) {
            nv_round_mode m = {modes[mi], false, false};
            fesetround(fe[mi]);
            volatile double vx = x;
            volatile float hf = (float)vx;
            fesetround(FE_TONEAREST);
            uint32_t hw;
            memcpy(&hw, (const void *)&hf, 4);
            n++;
            if (enc(NV_DT_FP32, x, &m) != hw && bad++ < 3)
                tap_diag("fp32 x=%a mode %d: got %llx hw %x", x, mi,
                         (unsigned long long)enc(NV_DT_FP32, x, &m), hw);
        }
    }
    tap_ok(bad == 0, "fp32 encode of %ld random doubles x modes matches hardware", n);
}

int main(void)
{
    test_info();
    test_names();
    test_nan();
    test_inf_zero();
    test_overflow();
    test_ftz_daz();
    test_e8m0();
    test_ints();
    test_int8_exhaustive();
    test_tf32();
    test_ulp();
    test_buffers();
    test_stochastic();
    test_fp32_hw();
    return tap_done();
}
