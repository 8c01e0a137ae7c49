/* Input generators: determinism, representability in the dtype (checked with the
 * compiler's own float/_Float16 conversions and bit patterns, not dtype.c),
 * each class's defining property, and domain restriction. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/inputs.h"

#define N 4096

/* What an op asks of each of its input tensors, written out by hand as the op
 * layer (core/ops nv_op_input_domain) would fill it: the generators know no op. */
typedef struct fake_op {
    nv_input_domain in[4];
} fake_op;

static int gen(nv_input_class cls, nv_dtype dt, nv_dtype target, const fake_op *op, int tensor,
               double *out, int64_t n)
{
    nv_input_request rq = {.domain = op ? op->in[tensor] : (nv_input_domain){0},
                           .tensor_index = tensor,
                           .dtype = dt,
                           .target = target,
                           .cls = cls,
                           .seed = 7,
                           .case_index = 3,
                           .index_range = 10,
                           .reduction_len = 8};
    return nv_inputs_generate(&rq, out, n);
}

static uint32_t f32_bits(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static bool is_f32(double v)
{
    return isnan(v) || (double)(float)v == v;
}
/* The compiler's fp16 conversion is an independent oracle (GCC extension). */
__extension__ typedef _Float16 f16;
static bool is_f16(double v)
{
    return isnan(v) || (double)(f16)v == v;
}
/* bf16 is the top half of fp32: a value is bf16 iff its fp32 bits end in 16 zeros. */
static bool is_bf16(double v)
{
    return isnan(v) || (is_f32(v) && (f32_bits(v) & 0xFFFF) == 0);
}

static int edges_fake(nv_dtype dt, double *out, int max)
{
    (void)dt;
    if (max < 2)
        return 0;
    out[0] = 1.0;
    out[1] = 88.72283935546875; /* fp32 exp overflow threshold, an fp32 value */
    return 2;
}

#define LINE {.bounded = true, .lo = -INFINITY, .hi = INFINITY}

/* log-like: x in [0, inf), domain edges on x. */
static const fake_op op_log = {{{.bounded = true, .lo = 0, .hi = INFINITY, .edges = edges_fake}}};
/* add: y is x's tie partner for "midpoints". */
static const fake_op op_add = {
    {LINE, {.bounded = true, .lo = -INFINITY, .hi = INFINITY, .tie_partner = true}}};
static const fake_op op_unit = {{{.bounded = true, .lo = -1, .hi = 1}}};
/* cross_entropy-like: class indices as input 1. */
static const fake_op op_xent = {{LINE, {.role = NV_INPUT_INDEX}}};
/* matmul with scales: inputs 2 and 3 are scales. */
static const fake_op op_mm = {{LINE, LINE, {.role = NV_INPUT_SCALE}, {.role = NV_INPUT_SCALE}}};

static double a[N], b[N];

static void test_determinism(void)
{
    for (int c = 0; c < NV_IN_COUNT; c++) {
        /* exhaustive takes dtypes of at most 16 bits */
        nv_dtype dt = c == NV_IN_EXHAUSTIVE ? NV_DT_FP16 : NV_DT_FP32;
        int r = gen((nv_input_class)c, dt, NV_DT_BF16, &op_log, 0, a, N);
        r |= gen((nv_input_class)c, dt, NV_DT_BF16, &op_log, 0, b, N);
        bool same = r == 0;
        for (int i = 0; i < N; i++)
            same = same && TAP_SAME_DOUBLE(a[i], b[i]) && signbit(a[i]) == signbit(b[i]);
        /* A shorter tensor is a prefix: values do not depend on the call's length
         * (but a sweep spreads its points over the length it is given). */
        gen((nv_input_class)c, dt, NV_DT_BF16, &op_log, 0, b, 100);
        for (int i = 0; c != NV_IN_SWEEP && i < 100; i++)
            same = same && TAP_SAME_DOUBLE(a[i], b[i]);
        tap_ok(same, "%s: same request, same values", nv_input_class_name((nv_input_class)c));
    }
    gen(NV_IN_NORMAL, NV_DT_FP32, NV_DT_FP32, NULL, 0, a, N);
    gen(NV_IN_NORMAL, NV_DT_FP32, NV_DT_FP32, NULL, 1, b, N);
    int same = 0;
    for (int i = 0; i < N; i++)
        same += a[i] == b[i];
    tap_ok(same < 8, "tensor 1 draws another stream than tensor 0 (%d equal)", same);
}

static void test_representable(void)
{
    for (int c = 0; c < NV_IN_COUNT; c++) {
        bool ok32 = true, ok16 = true, okbf = true;
        int r = gen((nv_input_class)c, NV_DT_FP32, NV_DT_FP16, &op_add, 0, a, N);
        if (c == NV_IN_EXHAUSTIVE)
            ok32 = r == -EINVAL; /* 2^32 encodings: refused */
        for (int i = 0; r == 0 && i < N; i++)
            ok32 = ok32 && is_f32(a[i]);
        gen((nv_input_class)c, NV_DT_FP16, NV_DT_FP16, &op_add, 0, a, N);
        for (int i = 0; i < N; i++)
            ok16 = ok16 && is_f16(a[i]);
        gen((nv_input_class)c, NV_DT_BF16, NV_DT_BF16, &op_add, 1, a, N);
        for (int i = 0; i < N; i++)
            okbf = okbf && is_bf16(a[i]);
        tap_ok(ok32 && ok16 && okbf, "%s: values are fp32 / fp16 / bf16 values",
               nv_input_class_name((nv_input_class)c));
    }
    gen(NV_IN_NORMAL, NV_DT_INT8, NV_DT_INT8, NULL, 0, a, N);
    bool ints = true;
    for (int i = 0; i < N; i++)
        ints = ints && a[i] == floor(a[i]) && a[i] >= -128 && a[i] <= 127;
    tap_ok(ints, "int8 normal: integers in [-128, 127]");
}

static void test_normal_moments(void)
{
    static double v[100000];
    gen(NV_IN_NORMAL, NV_DT_FP64, NV_DT_FP64, NULL, 0, v, 100000);
    double s = 0, s2 = 0;
    for (int i = 0; i < 100000; i++) {
        s += v[i];
        s2 += v[i] * v[i];
    }
    double mean = s / 1e5, var = s2 / 1e5 - mean * mean;
    /* Standard errors with n = 1e5: mean 1/sqrt(n) = 0.0032, variance sqrt(2/n) =
     * 0.0045; 5 sigma bounds: 0.016 and 0.023. */
    tap_ok(fabs(mean) < 0.016 && fabs(var - 1) < 0.023, "normal: mean %.4f variance %.4f", mean,
           var);
}

static void test_near_zero_and_large(void)
{
    gen(NV_IN_NEAR_ZERO, NV_DT_FP32, NV_DT_FP32, NULL, 0, a, N);
    int sub = 0, tiny = 0;
    for (int i = 0; i < N; i++) {
        sub += a[i] != 0 && fabs(a[i]) < FLT_MIN;
        tiny += fabs(a[i]) < 0x1p-118; /* the 8 lowest normal binades and below */
    }
    tap_ok(sub > N / 4 && tiny == N, "fp32 near_zero: %d subnormals, all below 2^-118", sub);
    gen(NV_IN_NEAR_ZERO, NV_DT_FP16, NV_DT_FP16, NULL, 0, a, N);
    sub = 0;
    for (int i = 0; i < N; i++)
        sub += a[i] != 0 && fabs(a[i]) < 0x1p-14; /* fp16 min normal 2^-14 (IEEE 754 §3.6) */
    tap_ok(sub > N / 4, "fp16 near_zero: %d subnormals", sub);
    gen(NV_IN_LARGE, NV_DT_FP16, NV_DT_FP16, NULL, 0, a, N);
    bool big = true;
    int neg = 0;
    for (int i = 0; i < N; i++) {
        big = big && fabs(a[i]) >= 65504.0 / 16 && fabs(a[i]) <= 65504.0;
        neg += a[i] < 0;
    }
    tap_ok(big && neg > N / 4 && neg < 3 * N / 4, "fp16 large: |x| in [max/16, 65504], both signs");
}

static void test_specials(void)
{
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, NULL, 0, a, 64);
    bool nan = false, pinf = false, ninf = false, pz = false, nz = false, sub = false, max = false;
    bool odd_finite = true;
    for (int i = 0; i < 64; i++) {
        nan |= isnan(a[i]);
        pinf |= a[i] == INFINITY;
        ninf |= a[i] == -INFINITY;
        pz |= a[i] == 0 && !signbit(a[i]);
        nz |= a[i] == 0 && signbit(a[i]);
        sub |= a[i] == 0x1p-149; /* fp32 min subnormal */
        max |= a[i] == FLT_MAX;
        if (i % 2)
            odd_finite = odd_finite && isfinite(a[i]);
    }
    tap_ok(nan && pinf && ninf && pz && nz && sub && max && odd_finite,
           "fp32 specials: NaN, +-Inf, +-0, min subnormal, max finite, normals between");
    gen(NV_IN_SPECIALS, NV_DT_FP8_E4M3, NV_DT_FP8_E4M3, NULL, 0, a, 64);
    bool inf = false, m448 = false;
    nan = false;
    for (int i = 0; i < 64; i++) {
        inf |= isinf(a[i]);
        nan |= isnan(a[i]);
        m448 |= a[i] == 448;
    }
    /* OFP8 e4m3fn: no infinities, a NaN, max finite 448. */
    tap_ok(!inf && nan && m448, "e4m3 specials: NaN and 448, no infinity");
}

static void test_midpoints(void)
{
    /* fp32 -> bf16: a tie of bf16 has fp32 low half 0x8000; its fp32 neighbours
     * 0x8001 / 0x7FFF (bf16 keeps the top 16 bits of fp32). */
    gen(NV_IN_MIDPOINTS, NV_DT_FP32, NV_DT_BF16, NULL, 0, a, N);
    bool ties = true, beside = true;
    for (int i = 0; i < N; i++) {
        uint32_t low = f32_bits(a[i]) & 0xFFFF;
        if (i % 3 == 0)
            ties = ties && low == 0x8000;
        else
            beside = beside && (low == 0x8001 || low == 0x7FFF);
    }
    tap_ok(ties && beside, "fp32 midpoints of bf16: exact ties and their neighbours");
    /* add in fp32: y = +-ulp(x)/2, so x + y is a tie of fp32. */
    gen(NV_IN_MIDPOINTS, NV_DT_FP32, NV_DT_FP32, &op_add, 0, a, N);
    gen(NV_IN_MIDPOINTS, NV_DT_FP32, NV_DT_FP32, &op_add, 1, b, N);
    bool half = true;
    for (int i = 0; i < N; i++) {
        float x = fabsf((float)a[i]);
        double ulp = (double)nextafterf(x, INFINITY) - x;
        half = half && (x < FLT_MIN || fabs(b[i]) == ulp / 2);
    }
    tap_ok(half, "add midpoints: |y| is half an fp32 ulp of x");
}

static void test_cancellation(void)
{
    gen(NV_IN_CANCELLATION, NV_DT_FP32, NV_DT_FP32, NULL, 0, a, 64);
    bool pairs = true;
    for (int i = 0; i < 64; i += 4)
        pairs = pairs && a[i] == -a[i + 2] && fabs(a[i]) >= 0x1p27 && fabs(a[i + 1]) < 0x1p10;
    tap_ok(pairs, "cancellation: +big, small, -big, small in every group of 4");
}

static void test_domain(void)
{
    bool in = true, unit = true;
    for (int c = 0; c < NV_IN_COUNT; c++) {
        /* specials, sweep and exhaustive test IEEE behaviour outside the domain on
         * purpose */
        if (c == NV_IN_SPECIALS || c == NV_IN_SWEEP || c == NV_IN_EXHAUSTIVE)
            continue;
        gen((nv_input_class)c, NV_DT_FP32, NV_DT_BF16, &op_log, 0, a, N);
        for (int i = 0; i < N; i++)
            in = in && a[i] >= 0;
        if (c == NV_IN_DOMAIN_EDGES)
            continue;
        gen((nv_input_class)c, NV_DT_BF16, NV_DT_BF16, &op_unit, 0, a, N);
        for (int i = 0; i < N; i++)
            unit = unit && a[i] >= -1 && a[i] <= 1;
    }
    tap_ok(in, "domain [0, inf): no negative values in any random class");
    tap_ok(unit, "domain [-1, 1]: every random class stays inside");
    gen(NV_IN_DOMAIN_EDGES, NV_DT_FP32, NV_DT_FP32, &op_log, 0, a, 12);
    double want[6] = {1.0,
                      nextafterf(1.0f, 2.0f),
                      nextafterf(1.0f, 0.0f),
                      88.72283935546875,
                      nextafterf(88.72283935546875f, 100.0f),
                      nextafterf(88.72283935546875f, 0)};
    bool edges = true;
    for (int i = 0; i < 12; i++)
        edges = edges && a[i] == want[i % 6];
    tap_ok(edges, "domain_edges: each edge with its fp32 neighbours, cycled");
}

static void test_index_and_scales(void)
{
    gen(NV_IN_SPECIALS, NV_DT_INT32, NV_DT_FP32, &op_xent, 1, a, N);
    bool idx = true;
    int seen[10] = {0};
    for (int i = 0; i < N; i++) {
        idx = idx && a[i] >= 0 && a[i] < 10 && a[i] == floor(a[i]);
        if (idx)
            seen[(int)a[i]]++;
    }
    for (int k = 0; k < 10; k++)
        idx = idx && seen[k] > 0;
    tap_ok(idx, "index input: every class in [0, 10), all present");
    gen(NV_IN_NORMAL, NV_DT_E8M0, NV_DT_FP32, &op_mm, 2, a, N);
    bool pow2 = true;
    for (int i = 0; i < N; i++) {
        int e;
        double m = frexp(a[i], &e);
        pow2 = pow2 && m == 0.5 && e - 1 >= -4 && e - 1 <= 4;
    }
    tap_ok(pow2, "matmul e8m0 scales: powers of two in [2^-4, 2^4]");
}

/* add-like and fma-like ops: "specials" enumerate the ordered tuples. */
#define CROSS(k)                                                                                   \
    {                                                                                              \
        .bounded = true, .lo = -INFINITY, .hi = INFINITY, .cross_arity = k                         \
    }
static const fake_op op_bin = {{CROSS(2), CROSS(2)}};
static const fake_op op_fma = {{CROSS(3), CROSS(3), CROSS(3)}};

/* The fp32 specials by hand (IEEE 754-2019 §3.4 binary32): 0..8, and 9 for any
 * other (normal) value. */
static int f32_special_index(double v)
{
    static const double sp[] = {INFINITY, -INFINITY, 0x1p-149, -0x1p-149, FLT_MAX, -FLT_MAX};
    if (isnan(v))
        return 0;
    if (v == 0)
        return signbit(v) ? 4 : 3;
    for (int k = 0; k < 6; k++)
        if (v == sp[k])
            return k < 2 ? k + 1 : k + 3;
    return 9;
}

static void test_specials_cross(void)
{
    /* Unary: unchanged, the list at even positions in its order. */
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, NULL, 0, a, 64);
    bool order = true;
    for (int i = 0; i < 36; i += 2)
        order = order && f32_special_index(a[i]) == (i / 2) % 9;
    tap_ok(order,
           "unary specials: NaN, +Inf, -Inf, +0, -0, +-min subnormal, +-max at even positions");

    /* Binary: each ordered pair of the 9 specials and a normal value once in 100. */
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, &op_bin, 0, a, 256);
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, &op_bin, 1, b, 256);
    int seen[10][10] = {{0}};
    for (int i = 0; i < 100; i++)
        seen[f32_special_index(a[i])][f32_special_index(b[i])]++;
    int pairs = 0;
    for (int x = 0; x < 10; x++)
        for (int y = 0; y < 10; y++)
            pairs += seen[x][y] == 1;
    tap_ok(pairs == 100, "binary specials: all 100 ordered pairs in the first 100 positions (%d)",
           pairs);
    tap_ok(seen[0][9] == 1 && seen[9][0] == 1 && seen[1][2] == 1 && seen[2][1] == 1 &&
               seen[3][4] == 1 && seen[4][3] == 1,
           "(NaN, x), (x, NaN), (+Inf, -Inf), (-Inf, +Inf), (+0, -0), (-0, +0) all present");

    /* Ternary: 1000 positions hold the 1000 ordered triples. */
    static double c[1000];
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, &op_fma, 0, a, 1000);
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, &op_fma, 1, b, 1000);
    gen(NV_IN_SPECIALS, NV_DT_FP32, NV_DT_FP32, &op_fma, 2, c, 1000);
    static bool tri[1000];
    memset(tri, 0, sizeof tri);
    int triples = 0;
    for (int i = 0; i < 1000; i++) {
        int k =
            f32_special_index(a[i]) * 100 + f32_special_index(b[i]) * 10 + f32_special_index(c[i]);
        triples += !tri[k];
        tri[k] = true;
    }
    tap_ok(triples == 1000, "fma specials: all 1000 ordered triples (%d)", triples);

    /* e4m3fn has no infinity: NaN, +-0, +-min subnormal 2^-9, +-448 and a normal value. */
    gen(NV_IN_SPECIALS, NV_DT_FP8_E4M3, NV_DT_FP8_E4M3, &op_bin, 0, a, 64);
    gen(NV_IN_SPECIALS, NV_DT_FP8_E4M3, NV_DT_FP8_E4M3, &op_bin, 1, b, 64);
    bool nan448 = false, inf = false;
    for (int i = 0; i < 64; i++) {
        nan448 |= isnan(a[i]) && b[i] == -448;
        inf |= isinf(a[i]) || isinf(b[i]);
    }
    tap_ok(nan448 && !inf, "e4m3 binary specials: (NaN, -448) among 8 x 8 pairs, no infinity");
}

/* "offset": rows of 512 with |mean| in [R, 2R) and a unit spread; fp32's R = 10^4. */
static void test_offset(void)
{
    enum { ROWS = 16, LEN = 512 };
    static double v[ROWS * LEN];
    nv_input_request rq = {.domain = LINE,
                           .dtype = NV_DT_FP32,
                           .target = NV_DT_FP32,
                           .cls = NV_IN_OFFSET,
                           .seed = 11,
                           .reduction_len = LEN};
    bool rows = true, naive_wrong = true, finite_sq = true;
    double worst = INFINITY;
    for (uint32_t cs = 0; cs < 5; cs++) {
        rq.case_index = cs;
        nv_inputs_generate(&rq, v, ROWS * LEN);
        for (int r = 0; r < ROWS; r++) {
            const double *x = v + r * LEN;
            double m = 0, q = 0;
            for (int j = 0; j < LEN; j++)
                m += x[j] / LEN;
            for (int j = 0; j < LEN; j++)
                q += (x[j] - m) * (x[j] - m) / LEN;
            double sd = sqrt(q);
            rows = rows && fabs(m) >= 9.9e3 && fabs(m) < 2.01e4 && sd > 0.8 && sd < 1.25;
            /* The textbook one-pass formula in fp32 (what the offset class is for). */
            float s1 = 0, s2 = 0;
            for (int j = 0; j < LEN; j++) {
                float f = (float)x[j];
                s1 += f;
                s2 += f * f;
                finite_sq = finite_sq && isfinite(f * f);
            }
            float mean = s1 / LEN, naive = s2 / LEN - mean * mean;
            double rel = fabs((double)naive - q) / q;
            worst = fmin(worst, rel);
            naive_wrong = naive_wrong && rel >= 0.5;
        }
    }
    tap_ok(rows, "fp32 offset: every row |mean| in [10^4, 2 10^4), sd about 1 (5 seeds x 16 rows)");
    tap_ok(naive_wrong && finite_sq,
           "fp32 E[x^2] - E[x]^2 is off by half the variance or more in every row, x^2 finite "
           "(smallest relative error %.3g)",
           worst);
    rq.dtype = rq.target = NV_DT_BF16;
    nv_inputs_generate(&rq, v, LEN);
    double m = 0;
    for (int j = 0; j < LEN; j++)
        m += v[j] / LEN;
    tap_ok(fabs(m) >= 15.5 && fabs(m) < 32.5, "bf16 offset: R = 2^(p-4) = 16 (mean %g)", m);
    rq.dtype = rq.target = NV_DT_FP32;
    rq.domain.param = true;
    nv_inputs_generate(&rq, v, LEN);
    bool small = true;
    for (int j = 0; j < LEN; j++)
        small = small && fabs(v[j]) < 8;
    tap_ok(small, "offset: per-channel parameters get normal values");
}

__extension__ typedef unsigned __int128 u128;

static void sweep_at(nv_dtype dt, int64_t stride, double from, double to, double *out, int64_t n)
{
    nv_input_request rq = {.dtype = dt, .target = dt, .cls = NV_IN_SWEEP, .seed = 7,
                           .sweep = {.stride = stride, .from = from, .to = to}};
    nv_inputs_generate(&rq, out, n);
}

/* "sweep" at a stride: the expected values from the encodings themselves
 * (fp32 bits counted by hand), not from the generator's ordinals. */
static void test_sweep_stride(void)
{
    enum { M = 5000 };
    static double v[M];
    /* [1, 2) at stride 1: the encodings 0x3f800000 + i */
    sweep_at(NV_DT_FP32, 1, 1.0, 1.9, v, M);
    bool ok = true;
    for (int i = 0; i < M; i++)
        ok = ok && f32_bits(v[i]) == 0x3f800000u + (uint32_t)i;
    tap_ok(ok, "sweep stride 1 from 1: element i is the fp32 encoding 0x3f800000 + i");
    /* stride 1000 from 1: every 1000th encoding, wrapping at the last <= 1.5 */
    sweep_at(NV_DT_FP32, 1000, 1.0, 1.5, v, M);
    uint32_t span = 0x3fc00000u - 0x3f800000u + 1; /* 1.0 ... 1.5 */
    ok = true;
    for (int i = 0; i < M; i++)
        ok = ok && f32_bits(v[i]) == 0x3f800000u + (uint32_t)(((uint64_t)i * 1000) % span);
    tap_ok(ok, "sweep stride 1000 over [1, 1.5]: encoding 0x3f800000 + (1000 i mod span)");
    /* across zero: from the largest negative subnormal down to -0, +0, up */
    sweep_at(NV_DT_FP32, 1, -0x1p-148, 0x1p-148, v, 6);
    ok = v[0] == -0x1p-148 && v[1] == -0x1p-149 && v[2] == 0 && signbit(v[2]) && v[3] == 0 &&
         !signbit(v[3]) && v[4] == 0x1p-149 && v[5] == 0x1p-148;
    tap_ok(ok, "sweep stride 1 across zero: -2^-148, -2^-149, -0, +0, 2^-149, 2^-148");
    /* bounds between encodings round inward; a range beyond the format is clipped */
    sweep_at(NV_DT_BF16, 1, 1.001, 1.02, v, 4);
    ok = v[0] == 1 + 0x1p-7 && v[1] == 1 + 0x1p-6 && v[2] == v[0]; /* 1.0078, 1.0156 */
    sweep_at(NV_DT_BF16, 1, 1e300, 1e301, v, 2);
    tap_ok(ok && isfinite(v[0]) && v[0] == v[1],
           "sweep bounds round inward (bf16 [1.001, 1.02]: 1 + 2^-7, 1 + 2^-6), clipped to max");
    /* fp64 over [-max, max]: 2 * 0x7ff0000000000000 signed ordinals, a stride
     * just below that span, so (i stride) mod span passes 2^64 before its
     * reduction; the ordinal from the value's bits (-k - 1 for -x). */
    const uint64_t cnt = UINT64_C(0x7ff0000000000000), sp64 = 2 * cnt;
    const uint64_t st = sp64 - 3;
    sweep_at(NV_DT_FP64, (int64_t)(st >> 1), -DBL_MAX, DBL_MAX, v, M); /* stride a signed int64 */
    ok = true;
    for (int i = 0; i < M; i++) {
        uint64_t b;
        memcpy(&b, &v[i], sizeof b);
        int64_t k = b >> 63 ? -(int64_t)(b & ~(UINT64_C(1) << 63)) - 1 : (int64_t)b;
        uint64_t off = (uint64_t)(((u128)i * (st >> 1)) % sp64);
        ok = ok && (uint64_t)k == (uint64_t)0 - cnt + off; /* modulo 2^64: no int64 overflow */
    }
    tap_ok(ok, "sweep fp64 at stride 2^63 - 2 over [-max, max]: ordinal -count + (i stride mod span)");
}

/* A seekable stream started at pos writes what one pass from 0 writes there;
 * the classes that are not seekable say so. */
static void test_seek(void)
{
    enum { M = 20000 };
    static double whole[M], part[M];
    struct {
        nv_input_class cls;
        nv_dtype dt;
        int tensor;
        bool bounded;
    } cs[] = {{NV_IN_NORMAL, NV_DT_FP32, 0, false},  {NV_IN_NORMAL, NV_DT_BF16, 1, false},
              {NV_IN_NORMAL, NV_DT_INT8, 0, false},  {NV_IN_NORMAL, NV_DT_FP32, 2, true},
              {NV_IN_SWEEP, NV_DT_FP32, 1, false},   {NV_IN_EXHAUSTIVE, NV_DT_FP16, 1, false}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        nv_input_request rq = {.dtype = cs[c].dt, .target = cs[c].dt, .cls = cs[c].cls,
                               .seed = 11, .case_index = 4, .tensor_index = cs[c].tensor};
        if (cs[c].bounded)
            rq.domain = (nv_input_domain){.bounded = true, .lo = 0.25, .hi = 3};
        nv_inputs_generate(&rq, whole, M);
        static const int64_t at[] = {0, 1, 7, 8, 4093, 12345, M - 3};
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            nv_input_stream s;
            int64_t len = M - at[k] < 1000 ? M - at[k] : 1000;
            bool ok = nv_inputs_stream_init(&s, &rq, M) == 0 && nv_inputs_stream_seekable(&s) &&
                      nv_inputs_stream_seek(&s, at[k]) == 0 &&
                      nv_inputs_stream_next(&s, part, len) == 0 &&
                      memcmp(part, whole + at[k], (size_t)len * sizeof(double)) == 0;
            bad += !ok;
        }
    }
    nv_input_request un = {.dtype = NV_DT_FP32, .target = NV_DT_FP32, .cls = NV_IN_UNIFORM};
    nv_input_stream s;
    bool refused = nv_inputs_stream_init(&s, &un, M) == 0 && !nv_inputs_stream_seekable(&s) &&
                   nv_inputs_stream_seek(&s, 5) == -EINVAL;
    tap_ok(bad == 0 && refused, "seekable streams (normal fp32/bf16/int8/bounded, sweep, "
           "exhaustive) from 7 positions equal one pass (%d differ); uniform is refused", bad);
}

static int cmp_double(const void *x, const void *y)
{
    double u = *(const double *)x, w = *(const double *)y;
    return (u > w) - (u < w);
}

/* "sweep": every k-th encoding; fp32 at 65536 elements puts points where
 * PyTorch 1.13's sigmoid returns 0 (exact values normal or subnormal floats). */
static void test_sweep(void)
{
    enum { M = 65536 };
    static double v[M], w[M];
    gen(NV_IN_SWEEP, NV_DT_FP32, NV_DT_FP32, &op_log, 0, v, M);
    int in_gap = 0, neg = 0;
    bool finite = true, ends = false, inc = true;
    double last = -1;
    for (int i = 0; i < M; i++) {
        in_gap += v[i] >= -104 && v[i] <= -88.72;
        neg += signbit(v[i]) != 0;
        finite = finite && isfinite(v[i]) && is_f32(v[i]);
        if (i % 2 == 0) {
            inc = inc && v[i] > last;
            last = v[i];
        }
    }
    ends = v[0] == 0 && !signbit(v[0]) && v[1] == 0 && signbit(v[1]) && v[M - 2] == FLT_MAX &&
           v[M - 1] == -FLT_MAX;
    tap_ok(in_gap >= 16, "fp32 sweep of 65536: %d points in [-104, -88.72]", in_gap);
    tap_ok(finite && ends && inc && neg == M / 2,
           "fp32 sweep: +-0 to +-max finite, increasing, half negative, ignores the domain");
    /* bf16 has 32640 finite non-negative values: 65536 elements hold them all. */
    gen(NV_IN_SWEEP, NV_DT_BF16, NV_DT_BF16, NULL, 0, v, M);
    static bool hit[M];
    memset(hit, 0, sizeof hit);
    int distinct = 0;
    for (int i = 0; i < M; i++) {
        uint32_t top = f32_bits(v[i]) >> 16; /* the bf16 encoding */
        distinct += is_bf16(v[i]) && !hit[top];
        hit[top] = true;
    }
    tap_ok(distinct == 2 * 32640, "bf16 sweep of 65536: every finite bf16 value (%d)", distinct);
    /* Operand 1 of a binary op: the same values in another order. */
    gen(NV_IN_SWEEP, NV_DT_FP32, NV_DT_FP32, &op_bin, 0, v, 4096);
    gen(NV_IN_SWEEP, NV_DT_FP32, NV_DT_FP32, &op_bin, 1, w, 4096);
    int same_pos = 0;
    for (int i = 0; i < 4096; i++)
        same_pos += v[i] == w[i];
    qsort(v, 4096, sizeof v[0], cmp_double);
    qsort(w, 4096, sizeof w[0], cmp_double);
    bool perm = true;
    for (int i = 0; i < 4096; i++)
        perm = perm && v[i] == w[i];
    tap_ok(perm && same_pos < 8, "binary sweep: operand 1 is operand 0 rotated (%d equal)",
           same_pos);
    gen(NV_IN_SWEEP, NV_DT_INT8, NV_DT_FP32, NULL, 0, v, 256);
    qsort(v, 256, sizeof v[0], cmp_double);
    bool ints = true;
    for (int i = 0; i < 256; i++)
        ints = ints && v[i] == i - 128;
    tap_ok(ints, "int8 sweep of 256: every value -128 .. 127");
}

/* "exhaustive": every fp16 encoding, checked against the compiler's _Float16. */
static void test_exhaustive(void)
{
    enum { M = 65536 };
    static double v[M], w[M];
    int r = gen(NV_IN_EXHAUSTIVE, NV_DT_FP16, NV_DT_FP16, &op_bin, 0, v, M);
    bool all = r == 0;
    int nans = 0;
    for (int i = 0; i < M; i++) {
        uint16_t u = (uint16_t)i;
        f16 h;
        memcpy(&h, &u, 2);
        double want = (double)h;
        all = all && (isnan(want) ? isnan(v[i]) : (v[i] == want && signbit(v[i]) == signbit(want)));
        nans += isnan(v[i]) != 0;
    }
    tap_ok(all && nans == 2046, "fp16 exhaustive: element i is encoding i (%d NaNs)", nans);
    gen(NV_IN_EXHAUSTIVE, NV_DT_FP16, NV_DT_FP16, &op_bin, 1, w, M);
    int nans1 = 0, same_pos = 0;
    for (int i = 0; i < M; i++) {
        nans1 += isnan(w[i]) != 0;
        same_pos += v[i] == w[i];
    }
    qsort(v, M, sizeof v[0], cmp_double); /* NaNs compare equal to all: sort the rest */
    int k = 0;
    for (int i = 0; i < M; i++)
        if (!isnan(w[i]))
            w[k++] = w[i];
    int k0 = 0;
    static double v2[M];
    gen(NV_IN_EXHAUSTIVE, NV_DT_FP16, NV_DT_FP16, &op_bin, 0, v2, M);
    for (int i = 0; i < M; i++)
        if (!isnan(v2[i]))
            v2[k0++] = v2[i];
    qsort(w, (size_t)k, sizeof w[0], cmp_double);
    qsort(v2, (size_t)k0, sizeof v2[0], cmp_double);
    bool perm = k == k0;
    for (int i = 0; perm && i < k; i++)
        perm = v2[i] == w[i];
    tap_ok(perm && nans1 == 2046 && same_pos < 64,
           "fp16 exhaustive, operand 1: every encoding once, in another order");
    /* e4m3: 65536 elements make every ordered pair (NaN's two encodings read alike). */
    gen(NV_IN_EXHAUSTIVE, NV_DT_FP8_E4M3, NV_DT_FP8_E4M3, &op_bin, 0, v, M);
    gen(NV_IN_EXHAUSTIVE, NV_DT_FP8_E4M3, NV_DT_FP8_E4M3, &op_bin, 1, w, M);
    static uint8_t pair[256][256];
    memset(pair, 0, sizeof pair);
    int distinct = 0;
    for (int i = 0; i < M; i++) {
        /* e4m3 values by hand: 254 non-NaN values, indexed by their order in
         * the element sequence of operand 0's first 256. */
        int x = i % 256, y = -1;
        for (int j = 0; j < 256; j++)
            if ((isnan(w[i]) && isnan(v[j])) || (w[i] == v[j] && signbit(w[i]) == signbit(v[j]))) {
                y = j;
                break;
            }
        if (isnan(v[x]))
            x = isnan(v[0x7f]) ? 0x7f : x;
        if (y >= 0 && !pair[x][y]) {
            pair[x][y] = 1;
            distinct++;
        }
    }
    tap_ok(distinct == 255 * 255, "e4m3 exhaustive binary of 65536: every ordered pair (%d)",
           distinct);
    char msg[256];
    tap_ok(gen(NV_IN_EXHAUSTIVE, NV_DT_FP32, NV_DT_FP32, NULL, 0, v, 16) == -EINVAL &&
               nv_input_class_check(NV_IN_EXHAUSTIVE, NV_DT_FP32, M, msg, sizeof msg) == -EINVAL &&
               strstr(msg, "'fp32'") && strstr(msg, "'sweep'"),
           "exhaustive fp32 refused: %s", msg);
    tap_ok(nv_input_class_check(NV_IN_EXHAUSTIVE, NV_DT_BF16, 1000, msg, sizeof msg) == -EINVAL &&
               strstr(msg, "65536") && strstr(msg, "1000"),
           "exhaustive bf16 on 1000 elements refused: %s", msg);
    tap_ok(nv_input_class_check(NV_IN_EXHAUSTIVE, NV_DT_BF16, M, msg, sizeof msg) == 0 &&
               nv_input_class_check(NV_IN_SWEEP, NV_DT_FP64, 8, msg, sizeof msg) == 0 &&
               nv_input_class_check(NV_IN_EXHAUSTIVE, NV_DT_FP4_E2M1, 16, msg, sizeof msg) == 0,
           "exhaustive bf16 of 65536, fp4 of 16 and sweep of fp64 accepted");
}

int main(void)
{
    tap_ok(nv_input_class_name(NV_IN_NEAR_ZERO) &&
               !strcmp(nv_input_class_name(NV_IN_NEAR_ZERO), "near_zero"),
           "class names");
    nv_input_class c;
    tap_ok(nv_input_class_from_name("domain_edges", &c) == 0 && c == NV_IN_DOMAIN_EDGES &&
               nv_input_class_from_name("gaussian", &c) < 0,
           "class names parse");
    tap_ok(nv_input_class_from_name("offset", &c) == 0 && c == NV_IN_OFFSET &&
               nv_input_class_from_name("sweep", &c) == 0 && c == NV_IN_SWEEP &&
               nv_input_class_from_name("exhaustive", &c) == 0 && c == NV_IN_EXHAUSTIVE,
           "offset, sweep, exhaustive parse");
    test_determinism();
    test_representable();
    test_normal_moments();
    test_near_zero_and_large();
    test_specials();
    test_midpoints();
    test_cancellation();
    test_domain();
    test_index_and_scales();
    test_specials_cross();
    test_offset();
    test_sweep();
    test_sweep_stride();
    test_seek();
    test_exhaustive();
    return tap_done();
}
