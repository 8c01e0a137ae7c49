/* Dtypes: table, exact decode, encode under a rounding mode, ulp, raw buffers.
 *
 * Encoding works on the bits of the double: the significand m (53 bits with the
 * implicit one) is shifted right by d bits so that the kept part counts quanta of
 * the target format at x's binade (or at emin for subnormal results), and the
 * discarded d bits decide the rounding. One routine serves every binary format,
 * parametrised by exponent/fraction width and bias, with no libm call; it is the
 * hot path of the emulator's storage rounding.
 */
#include "dtype.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

const nv_round_mode NV_ROUND_DEFAULT = {NV_ROUND_NEAREST_EVEN, false, false};

/* How a format spends its all-ones exponent field (IEEE 754-2019 §3.4; OFP8 rev
 * 1.0 §3 for e4m3fn; OCP MX v1.0 §5.3 for the MX element types). */
enum special_kind {
    SPECIAL_IEEE,   /* all-ones exponent: inf (fraction 0) or NaN */
    SPECIAL_E4M3FN, /* only S.1111.111 is NaN; all else finite; no inf */
    SPECIAL_NONE,   /* every encoding is finite (MX fp6/fp4) */
};

static const nv_dtype_info infos[NV_DT_COUNT] = {
    [NV_DT_FP64] = {"fp64", 64, 8, true, 11, 52, 1023, -1022, 1023, true, true, true, true,
                    0x1.fffffffffffffp+1023, 0x1p-1022, 0x1p-1074},
    [NV_DT_FP32] = {"fp32", 32, 4, true, 8, 23, 127, -126, 127, true, true, true, true,
                    0x1.fffffep+127, 0x1p-126, 0x1p-149},
    /* tf32: 19 significant bits held in an fp32 container, so 32 encoded bits. */
    [NV_DT_TF32] = {"tf32", 32, 4, true, 8, 10, 127, -126, 127, true, true, true, true,
                    0x1.ffcp+127, 0x1p-126, 0x1p-136},
    [NV_DT_BF16] = {"bf16", 16, 2, true, 8, 7, 127, -126, 127, true, true, true, true, 0x1.fep+127,
                    0x1p-126, 0x1p-133},
    [NV_DT_FP16] = {"fp16", 16, 2, true, 5, 10, 15, -14, 15, true, true, true, true, 65504.0,
                    0x1p-14, 0x1p-24},
    [NV_DT_FP8_E4M3] = {"fp8_e4m3", 8, 1, true, 4, 3, 7, -6, 8, false, true, true, true, 448.0,
                        0x1p-6, 0x1p-9},
    [NV_DT_FP8_E5M2] = {"fp8_e5m2", 8, 1, true, 5, 2, 15, -14, 15, true, true, true, true, 57344.0,
                        0x1p-14, 0x1p-16},
    [NV_DT_FP6_E2M3] = {"fp6_e2m3", 6, 1, true, 2, 3, 1, 0, 2, false, false, true, true, 7.5, 1.0,
                        0.125},
    [NV_DT_FP6_E3M2] = {"fp6_e3m2", 6, 1, true, 3, 2, 3, -2, 4, false, false, true, true, 28.0,
                        0.25, 0.0625},
    [NV_DT_FP4_E2M1] = {"fp4_e2m1", 4, 1, true, 2, 1, 1, 0, 2, false, false, true, true, 6.0, 1.0,
                        0.5},
    /* e8m0 (OCP MX v1.0 §5.4): field 0 is 2^-127, a normal value, so emin = -bias. */
    [NV_DT_E8M0] = {"e8m0", 8, 1, true, 8, 0, 127, -127, 127, false, true, false, false, 0x1p127,
                    0x1p-127, 0x1p-127},
    [NV_DT_INT8] = {"int8", 8, 1, false, 0, 0, 0, 0, 0, false, false, false, true, 127.0, 1.0, 1.0},
    [NV_DT_INT32] = {"int32", 32, 4, false, 0, 0, 0, 0, 0, false, false, false, true, 2147483647.0,
                     1.0, 1.0},
};

/* Derived per-format constants for the generic binary encoder/decoder. */
typedef struct fmt {
    int ebits, mbits, bias, emin;
    enum special_kind special;
    uint64_t max_enc;  /* encoding of max_finite (positive) */
    uint64_t sign_bit; /* 1 << (ebits + mbits) */
    double sub_scale;  /* 2^(emin - mbits): value of one subnormal quantum */
    int d;             /* 52 - mbits: fraction bits a double has beyond the format */
    uint64_t min_bits; /* bits of the double min_normal */
    uint64_t max_bits; /* bits of the double max_finite */
} fmt;

#define FMT(eb, mb, bias, emin, special, max_enc, sub_scale)                                       \
    {                                                                                              \
        eb, mb, bias, emin, special, max_enc, 1ull << ((eb) + (mb)), sub_scale, 52 - (mb),         \
            (uint64_t)((emin) + 1023) << 52,                                                       \
            ((uint64_t)(((max_enc) >> (mb)) - (bias) + 1023) << 52) |                              \
                (((max_enc) & ((1ull << (mb)) - 1)) << (52 - (mb)))                                \
    }

static const fmt fmts[NV_DT_COUNT] = {
    [NV_DT_FP32] = FMT(8, 23, 127, -126, SPECIAL_IEEE, 0x7f7fffff, 0x1p-149),
    [NV_DT_TF32] = FMT(8, 10, 127, -126, SPECIAL_IEEE, 0x3fbff, 0x1p-136),
    [NV_DT_BF16] = FMT(8, 7, 127, -126, SPECIAL_IEEE, 0x7f7f, 0x1p-133),
    [NV_DT_FP16] = FMT(5, 10, 15, -14, SPECIAL_IEEE, 0x7bff, 0x1p-24),
    [NV_DT_FP8_E4M3] = FMT(4, 3, 7, -6, SPECIAL_E4M3FN, 0x7e, 0x1p-9),
    [NV_DT_FP8_E5M2] = FMT(5, 2, 15, -14, SPECIAL_IEEE, 0x7b, 0x1p-16),
    [NV_DT_FP6_E2M3] = FMT(2, 3, 1, 0, SPECIAL_NONE, 0x1f, 0.125),
    [NV_DT_FP6_E3M2] = FMT(3, 2, 3, -2, SPECIAL_NONE, 0x1f, 0.0625),
    [NV_DT_FP4_E2M1] = FMT(2, 1, 1, 0, SPECIAL_NONE, 0x7, 0.5),
};

static inline uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double bitsd(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

const nv_dtype_info *nv_dtype_get(nv_dtype dt)
{
    if ((unsigned)dt >= NV_DT_COUNT)
        return NULL;
    return &infos[dt];
}

const char *nv_dtype_name(nv_dtype dt)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    return in ? in->name : NULL;
}

int nv_dtype_from_name(const char *name, nv_dtype *ret_dt)
{
    assert(ret_dt);
    static const struct {
        const char *alias;
        nv_dtype dt;
    } aliases[] = {
        {"e4m3fn", NV_DT_FP8_E4M3}, {"fp8_e4m3fn", NV_DT_FP8_E4M3}, {"e4m3", NV_DT_FP8_E4M3},
        {"e5m2", NV_DT_FP8_E5M2},   {"e2m3", NV_DT_FP6_E2M3},       {"e3m2", NV_DT_FP6_E3M2},
        {"e2m1", NV_DT_FP4_E2M1},
    };
    if (!name)
        return -EINVAL;
    for (int i = 0; i < NV_DT_COUNT; i++)
        if (strcmp(name, infos[i].name) == 0) {
            *ret_dt = (nv_dtype)i;
            return 0;
        }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) {
            *ret_dt = aliases[i].dt;
            return 0;
        }
    return -EINVAL;
}

/* m / 2^d rounded to an integer under rm (neg: the sign of the real value).
 * Stochastic rounding goes away from zero with probability equal to the
 * discarded fraction truncated to 32 bits: up iff rnd < frac * 2^32. */
static inline uint64_t round_shift(uint64_t m, int d, bool neg, nv_rounding rm, uint32_t rnd)
{
    if (d <= 0)
        return m;
    uint64_t n, r, half;
    if (d < 64) {
        n = m >> d;
        r = m & ((1ull << d) - 1);
        half = 1ull << (d - 1);
    } else {
        /* m < 2^53 <= 2^(d-1): the kept part is 0 and the rest is below half. */
        n = 0;
        r = m;
        half = UINT64_MAX;
    }
    if (rm == NV_ROUND_NEAREST_EVEN) {
        /* Branch-free: adding half - 1 plus the kept lsb carries out of the
         * discarded bits exactly when r > half, or r == half with n odd. */
        if (d >= 64)
            return n;
        return n + ((r + (half - 1) + (n & 1)) >> d);
    }
    if (r == 0)
        return n;
    switch (rm) {
    case NV_ROUND_NEAREST_EVEN:
        return n;
    case NV_ROUND_TOWARD_ZERO:
        return n;
    case NV_ROUND_UP:
        return n + !neg;
    case NV_ROUND_DOWN:
        return n + neg;
    case NV_ROUND_STOCHASTIC: {
        uint64_t f32;
        if (d <= 32)
            f32 = r << (32 - d);
        else if (d - 32 < 64)
            f32 = (d < 64 ? r : m) >> (d - 32);
        else
            f32 = 0;
        return n + ((uint64_t)rnd < f32);
    }
    }
    return n;
}

/* True when an overflowing value goes to infinity rather than to max finite
 * (IEEE 754-2019 §7.4): nearest rounds to inf, directed modes only in their own
 * direction, toward zero never. Stochastic rounding is treated like nearest. */
static inline bool overflow_to_inf(nv_rounding rm, bool neg)
{
    switch (rm) {
    case NV_ROUND_TOWARD_ZERO:
        return false;
    case NV_ROUND_UP:
        return !neg;
    case NV_ROUND_DOWN:
        return neg;
    default:
        return true;
    }
}

/* The encoding of an infinite result: inf where the format has it; max finite
 * under saturation (OFP8 §4: saturating conversions clamp to ±max) and always for
 * MX fp6/fp4 (OCP MX v1.0 §5.3: no inf/NaN, conversions saturate); else NaN
 * (e4m3fn, OFP8 §4: S.1111.111). */
static inline uint64_t enc_inf(const fmt *f, uint64_t sign, bool saturate)
{
    if (saturate || f->special == SPECIAL_NONE)
        return sign | f->max_enc;
    if (f->special == SPECIAL_E4M3FN)
        return sign | 0x7f;
    return sign | ((((uint64_t)1 << f->ebits) - 1) << f->mbits);
}

/* NaN input: keep the sign and the top fraction bits, set the quiet bit
 * (IEEE 754-2019 §6.2.3: convertFormat keeps what payload fits and quiets). MX
 * fp6/fp4 have no NaN (OCP MX v1.0 §5.3: a NaN in a block is carried by its
 * e8m0 scale), so the element encodes as a signed zero, like ints encode NaN. */
static inline uint64_t enc_nan(const fmt *f, uint64_t sign, uint64_t frac52)
{
    if (f->special == SPECIAL_NONE)
        return sign;
    if (f->special == SPECIAL_E4M3FN)
        return sign | 0x7f;
    uint64_t quiet = 1ull << (f->mbits - 1);
    uint64_t payload = (frac52 >> (52 - f->mbits)) | quiet;
    return sign | ((((uint64_t)1 << f->ebits) - 1) << f->mbits) | payload;
}

/* Fast path for |x| (bits a) in [min_normal, max_finite]: the result is a normal
 * number no larger than max (rounding is monotone and both ends are
 * representable), so rounding is one add and one mask on the double's bits; a
 * carry out of the fraction moves into the exponent by itself. Returns the bits
 * of the rounded |x|, or 0 when the input is outside that range. */
static inline uint64_t fast_round_bits(const fmt *f, uint64_t a, bool neg, nv_rounding rm,
                                       uint32_t rnd)
{
    if (a < f->min_bits || a > f->max_bits)
        return 0;
    int d = f->d;
    uint64_t mask = (1ull << d) - 1, r = a & mask, inc;
    switch (rm) {
    case NV_ROUND_NEAREST_EVEN:
        inc = (mask >> 1) + ((a >> d) & 1);
        break;
    case NV_ROUND_TOWARD_ZERO:
        inc = 0;
        break;
    case NV_ROUND_UP:
        inc = neg ? 0 : mask;
        break;
    case NV_ROUND_DOWN:
        inc = neg ? mask : 0;
        break;
    default: { /* stochastic: d >= 29 here, so the top 32 discarded bits are r >> (d - 32) */
        uint64_t f32 = d >= 32 ? r >> (d - 32) : r << (32 - d);
        inc = (uint64_t)rnd < f32 ? mask + 1 : 0;
        break;
    }
    }
    return (a + inc) & ~mask;
}

static uint64_t encode_binary(const fmt *f, double x, const nv_round_mode *mode, uint32_t rnd)
{
    uint64_t u = dbits(x);
    bool neg = u >> 63;
    uint64_t sign = neg ? f->sign_bit : 0;
    uint64_t fast = fast_round_bits(f, u & ~(1ull << 63), neg, mode->rounding, rnd);
    if (fast) /* exponent field rebased from 1023 to the format's bias */
        return sign | ((fast >> f->d) - ((uint64_t)(1023 - f->bias) << f->mbits));
    uint64_t frac52 = u & 0xfffffffffffffull;
    int ef = (int)((u >> 52) & 0x7ff);

    if (ef == 0x7ff)
        return frac52 ? enc_nan(f, sign, frac52) : enc_inf(f, sign, mode->saturate);
    if (ef == 0 && frac52 == 0)
        return sign;

    /* |x| = m * 2^(e - 52); double subnormals use e = -1022 without the implicit one. */
    int e = ef ? ef - 1023 : -1022;
    uint64_t m = ef ? frac52 | (1ull << 52) : frac52;
    int emax_field = (1 << f->ebits) - 1; /* a bound: beyond it the value surely overflows */
    if (e - f->emin + 1 > emax_field)
        goto overflow;
    int eq = e > f->emin ? e : f->emin; /* binade whose quantum we round to */
    int d = 52 - f->mbits + (eq - e);
    uint64_t n = round_shift(m, d, neg, mode->rounding, rnd);
    /* n counts quanta of 2^(eq - mbits); n >= 2^mbits carries into the exponent. */
    uint64_t enc = ((uint64_t)(eq - f->emin) << f->mbits) + n;
    if (enc > f->max_enc)
        goto overflow;
    if (mode->ftz && enc < (1ull << f->mbits))
        return sign; /* FTZ: subnormal results (after rounding) become signed zero */
    return sign | enc;

overflow:
    if (overflow_to_inf(mode->rounding, neg))
        return enc_inf(f, sign, mode->saturate);
    return sign | f->max_enc;
}

/* e8m0 (OCP MX v1.0 §5.4): unsigned powers of two 2^-127..2^127, 0xFF NaN, no
 * zero, no sign. Rounding as a binary format with one significant bit. There is
 * no zero and no subnormal, so values below 2^-127 (and ±0) give 2^-127, the
 * representable value nearest to them; negative values, NaN and -inf have no
 * encoding and give NaN; overflow follows IEEE 754 §7.4 with NaN standing in
 * for inf unless saturating. */
static uint64_t encode_e8m0(double x, const nv_round_mode *mode, uint32_t rnd)
{
    uint64_t u = dbits(x);
    int ef = (int)((u >> 52) & 0x7ff);
    uint64_t frac52 = u & 0xfffffffffffffull;
    if (ef == 0x7ff && frac52)
        return 0xff;
    if (u == 0 || u == 0x8000000000000000ull)
        return 0x00;
    if (u >> 63)
        return 0xff;
    if (ef == 0x7ff)
        return mode->saturate ? 0xfe : 0xff;
    int e = ef ? ef - 1023 : -1022;
    if (e < -127)
        return 0x00;
    if (e > 127)
        goto overflow;
    uint64_t m = ef ? frac52 | (1ull << 52) : frac52;
    uint64_t n = round_shift(m, 52, false, mode->rounding, rnd);
    uint64_t field = (uint64_t)(e + 127) + (n == 2);
    if (field <= 0xfe)
        return field;
overflow:
    if (overflow_to_inf(mode->rounding, false) && !mode->saturate)
        return 0xff;
    return 0xfe;
}

/* Ints: round to an integer per mode, then saturate to the range; NaN gives 0. */
static uint64_t encode_int(int bits, double x, const nv_round_mode *mode, uint32_t rnd)
{
    int64_t lo = bits == 8 ? INT8_MIN : INT32_MIN;
    int64_t hi = bits == 8 ? INT8_MAX : INT32_MAX;
    uint64_t mask = bits == 8 ? 0xffu : 0xffffffffu;
    uint64_t u = dbits(x);
    bool neg = u >> 63;
    int ef = (int)((u >> 52) & 0x7ff);
    uint64_t frac52 = u & 0xfffffffffffffull;
    int64_t v;
    if (ef == 0x7ff && frac52)
        return 0;
    if (ef >= 1023 + 40) {
        v = neg ? lo : hi; /* |x| >= 2^40 (or inf): beyond both ranges */
    } else {
        int e = ef ? ef - 1023 : -1022;
        uint64_t m = ef ? frac52 | (1ull << 52) : frac52;
        uint64_t n = round_shift(m, 52 - e, neg, mode->rounding, rnd);
        v = neg ? -(int64_t)n : (int64_t)n;
        v = v < lo ? lo : v > hi ? hi : v;
    }
    return (uint64_t)v & mask;
}

uint64_t nv_dtype_encode(nv_dtype dt, double x, const nv_round_mode *mode, uint32_t rnd)
{
    if (!mode)
        mode = &NV_ROUND_DEFAULT;
    switch (dt) {
    case NV_DT_FP64: {
        uint64_t u = dbits(x);
        if (mode->ftz && (u & 0x7ff0000000000000ull) == 0)
            return u & 0x8000000000000000ull;
        return u;
    }
    case NV_DT_TF32:
        return encode_binary(&fmts[dt], x, mode, rnd) << 13;
    case NV_DT_FP32:
    case NV_DT_BF16:
    case NV_DT_FP16:
    case NV_DT_FP8_E4M3:
    case NV_DT_FP8_E5M2:
    case NV_DT_FP6_E2M3:
    case NV_DT_FP6_E3M2:
    case NV_DT_FP4_E2M1:
        return encode_binary(&fmts[dt], x, mode, rnd);
    case NV_DT_E8M0:
        return encode_e8m0(x, mode, rnd);
    case NV_DT_INT8:
        return encode_int(8, x, mode, rnd);
    case NV_DT_INT32:
        return encode_int(32, x, mode, rnd);
    default:
        return 0;
    }
}

static double decode_binary(const fmt *f, uint64_t bits, bool daz)
{
    uint64_t total = (uint64_t)f->ebits + (uint64_t)f->mbits;
    bits &= (f->sign_bit << 1) - 1;
    bool neg = (bits >> total) & 1;
    uint64_t fmask = (1ull << f->mbits) - 1;
    uint64_t frac = bits & fmask;
    int field = (int)((bits >> f->mbits) & ((1ull << f->ebits) - 1));
    uint64_t sign = neg ? 0x8000000000000000ull : 0;
    int allones = (1 << f->ebits) - 1;

    if (field == 0) {
        if (frac == 0 || daz)
            return bitsd(sign);
        double v = (double)frac * f->sub_scale;
        return neg ? -v : v;
    }
    if (field == allones) {
        if (f->special == SPECIAL_IEEE) {
            if (frac == 0)
                return bitsd(sign | 0x7ff0000000000000ull);
            return bitsd(sign | 0x7ff0000000000000ull | (frac << (52 - f->mbits)));
        }
        if (f->special == SPECIAL_E4M3FN && frac == fmask)
            return bitsd(sign | 0x7ff8000000000000ull);
    }
    uint64_t de = (uint64_t)(field - f->bias + 1023);
    return bitsd(sign | (de << 52) | (frac << (52 - f->mbits)));
}

double nv_dtype_decode(nv_dtype dt, uint64_t bits, bool daz)
{
    switch (dt) {
    case NV_DT_FP64: {
        if (daz && (bits & 0x7ff0000000000000ull) == 0)
            return bitsd(bits & 0x8000000000000000ull);
        return bitsd(bits);
    }
    case NV_DT_TF32:
        /* The low 13 fraction bits of the container are not part of the value. */
        return decode_binary(&fmts[dt], (bits & 0xffffffffu) >> 13, daz);
    case NV_DT_FP32: {
        /* A normal value (the exhaustive and sweep classes decode billions):
         * decode_binary's last step with fp32's constants. */
        uint64_t field = (bits >> 23) & 0xff;
        if (field != 0 && field != 0xff)
            return bitsd((bits >> 31 & 1) << 63 | (field - 127 + 1023) << 52 |
                         (bits & 0x7fffff) << 29);
        return decode_binary(&fmts[dt], bits, daz);
    }
    case NV_DT_BF16:
    case NV_DT_FP16:
    case NV_DT_FP8_E4M3:
    case NV_DT_FP8_E5M2:
    case NV_DT_FP6_E2M3:
    case NV_DT_FP6_E3M2:
    case NV_DT_FP4_E2M1:
        return decode_binary(&fmts[dt], bits, daz);
    case NV_DT_E8M0:
        bits &= 0xff;
        if (bits == 0xff)
            return bitsd(0x7ff8000000000000ull);
        return bitsd((uint64_t)((int)bits - 127 + 1023) << 52);
    case NV_DT_INT8:
        return (double)(int8_t)(uint8_t)bits;
    case NV_DT_INT32:
        return (double)(int32_t)(uint32_t)bits;
    default:
        return NAN;
    }
}

double nv_dtype_round(nv_dtype dt, double x, const nv_round_mode *mode, uint32_t rnd)
{
    if (!mode)
        mode = &NV_ROUND_DEFAULT;
    if (dt >= NV_DT_FP32 && dt <= NV_DT_FP4_E2M1) {
        uint64_t u = dbits(x);
        uint64_t fast = fast_round_bits(&fmts[dt], u & ~(1ull << 63), u >> 63, mode->rounding, rnd);
        if (fast)
            return bitsd((u & (1ull << 63)) | fast);
    }
    return nv_dtype_decode(dt, nv_dtype_encode(dt, x, mode, rnd), false);
}

double nv_dtype_ulp(nv_dtype dt, double x)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    if (!in)
        return NAN;
    if (!in->is_float)
        return 1.0;
    if (isnan(x))
        return x;
    double a = fabs(x);
    if (a > in->max_finite)
        a = in->max_finite;
    if (a == 0)
        return in->min_subnormal;
    uint64_t u = dbits(a);
    int ef = (int)(u >> 52);
    /* floor(log2 a): double subnormals lie far below every emin here except fp64's. */
    int e = ef ? ef - 1023 : -1023;
    if (e < in->emin)
        e = in->emin;
    int k = e - in->mant_bits;
    /* Build 2^k from its bits; only fp64's subnormal ulps need ldexp. */
    return k >= -1022 ? bitsd((uint64_t)(k + 1023) << 52) : ldexp(1.0, k);
}

uint64_t nv_dtype_load_bits(nv_dtype dt, const void *buf, int64_t i)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    if (!in)
        return 0;
    const unsigned char *p = (const unsigned char *)buf + i * in->storage_bytes;
    uint64_t v = 0;
    for (int k = in->storage_bytes - 1; k >= 0; k--)
        v = (v << 8) | p[k];
    if (in->bits < 8)
        v &= (1u << in->bits) - 1;
    return v;
}

void nv_dtype_store_bits(nv_dtype dt, void *buf, int64_t i, uint64_t bits)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    if (!in)
        return;
    unsigned char *p = (unsigned char *)buf + i * in->storage_bytes;
    if (in->bits < 8)
        bits &= (1u << in->bits) - 1;
    for (int k = 0; k < in->storage_bytes; k++) {
        p[k] = (unsigned char)(bits & 0xff);
        bits >>= 8;
    }
}
