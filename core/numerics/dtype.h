/* Dtypes: exact decode, encode under a rounding mode, ULP of an exact value.
 *
 * Every value the numerics core handles is a double. Every dtype here except the
 * int types is a binary format with at most 53 significand bits and an exponent
 * range inside fp64's, so each of its values is exactly a double; decode is exact.
 *
 * Formats (bit layouts):
 *   fp64, fp32, fp16 (IEEE 754-2019 binary64/32/16), bf16 (fp32 with 7 stored
 *   fraction bits), tf32 (fp32 range, 10 stored fraction bits; stored in a 32-bit
 *   container, low 13 fraction bits zero), fp8 e4m3fn and e5m2 (OCP 8-bit Floating
 *   Point Specification (OFP8) rev 1.0), fp6 e2m3 / e3m2, fp4 e2m1 and the e8m0
 *   scale (OCP Microscaling Formats (MX) Specification v1.0, §5), int8, int32.
 */
#ifndef NUMVAL_DTYPE_H
#define NUMVAL_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "numval/backend.h"

/* The dtypes are the plugin ABI's codes (enum nv_dt, include/numval/backend.h):
 * fp8_e4m3 is e4m3fn (no inf, NaN S.1111.111, max 448), e8m0 the unsigned MX
 * scale 2^(e-127) with 0xFF NaN. */
typedef enum nv_dt nv_dtype;
/* Not part of the ABI: the count grows with the core. Also the "no dtype" value. */
#define NV_DT_COUNT (NV_DT_INT32 + 1)

typedef struct nv_dtype_info {
    const char *name;    /* canonical name used in job specs: "fp32", "bf16", "fp8_e4m3" ... */
    int bits;            /* encoded width in bits */
    int storage_bytes;   /* bytes per element in a tensor buffer (sub-byte formats: 1) */
    bool is_float;
    int exp_bits;        /* 0 for ints */
    int mant_bits;       /* stored fraction bits (p - 1); 0 for ints and e8m0 */
    int bias;            /* exponent bias */
    int emin;            /* exponent of the smallest normal: 1 - bias */
    int emax;            /* exponent of the largest finite value */
    bool has_inf;
    bool has_nan;
    bool has_subnormals;
    bool is_signed;
    double max_finite;
    double min_normal;
    double min_subnormal; /* == min_normal when the format has no subnormals */
} nv_dtype_info;

typedef enum nv_rounding {
    NV_ROUND_NEAREST_EVEN = 0,
    NV_ROUND_TOWARD_ZERO = 1,
    NV_ROUND_UP = 2,   /* toward +inf */
    NV_ROUND_DOWN = 3, /* toward -inf */
    NV_ROUND_STOCHASTIC = 4,
} nv_rounding;

typedef struct nv_round_mode {
    nv_rounding rounding;
    /* Overflow: false follows IEEE 754 §7.4 (round to inf, or to max finite for
     * toward-zero/directed away from the sign); formats without inf give NaN when
     * not saturating (OFP8 §4 for e4m3fn; MX formats always saturate, MX §5.3). */
    bool saturate;
    bool ftz; /* flush subnormal results to signed zero */
} nv_round_mode;

/* Round-to-nearest-even, no saturation, subnormals kept. */
extern const nv_round_mode NV_ROUND_DEFAULT;

/* Static description of a dtype; NULL for an out-of-range value. */
const nv_dtype_info *nv_dtype_get(nv_dtype dt);

/* Parse a dtype name ("fp32", "bf16", "e4m3fn" ...). Returns 0 or -EINVAL. */
int nv_dtype_from_name(const char *name, nv_dtype *ret_dt);
const char *nv_dtype_name(nv_dtype dt);

/* Encode the real value x into dt's bit pattern under mode. rnd supplies the
 * random bits for stochastic rounding (uniform 32 bits; ignored otherwise).
 * NaN inputs keep as much of their payload as the format holds (IEEE 754 §6.2.3);
 * ints round per mode and saturate to their range (NaN encodes as 0). */
uint64_t nv_dtype_encode(nv_dtype dt, double x, const nv_round_mode *mode, uint32_t rnd);

/* Decode a bit pattern exactly. daz: subnormal encodings read as signed zero. */
double nv_dtype_decode(nv_dtype dt, uint64_t bits, bool daz);

/* nv_dtype_decode(NV_DT_FP32, bits, false), inlined where the exhaustive and
 * sweep classes decode billions: a normal value from its bits (no FP
 * operation, so no MXCSR mode can change it), the rest through the call. */
static inline double nv_dtype_decode_fp32(uint32_t bits)
{
    uint64_t field = (bits >> 23) & 0xff;
    if (field == 0 || field == 0xff)
        return nv_dtype_decode(NV_DT_FP32, bits, false);
    uint64_t u = (uint64_t)(bits >> 31) << 63 | (field - 127 + 1023) << 52 |
                 (uint64_t)(bits & 0x7fffff) << 29;
    double d;
    __builtin_memcpy(&d, &u, sizeof d);
    return d;
}

/* decode(encode(x)): the value x becomes when stored in dt. */
double nv_dtype_round(nv_dtype dt, double x, const nv_round_mode *mode, uint32_t rnd);

/* ulp(x) in dt, as glibc's libm-test defines it for error measurement:
 * 2^(max(floor(log2|x|), emin) - mant_bits), and 1 for int types. For x = 0 it
 * is the smallest subnormal (or the smallest normal in formats without them);
 * for |x| beyond max_finite it is the ulp of max_finite. */
double nv_dtype_ulp(nv_dtype dt, double x);

/* Pack/unpack one element at index i of a raw buffer of dt (little-endian,
 * storage_bytes per element; sub-byte formats use the low bits of one byte). */
uint64_t nv_dtype_load_bits(nv_dtype dt, const void *buf, int64_t i);
void nv_dtype_store_bits(nv_dtype dt, void *buf, int64_t i, uint64_t bits);

#endif
