/* Input generators: determinism, representability in the dtype (checked with the
 * compiler's own float/_Float16 conversions and bit patterns, not dtype.c),
 * each class's defining property, and domain restriction. */
#include <float.h>
#include <math.h>
#include <stdint.h>
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
        gen((nv_input_class)c, NV_DT_FP32, NV_DT_BF16, &op_log, 0, a, N);
        gen((nv_input_class)c, NV_DT_FP32, NV_DT_BF16, &op_log, 0, b, N);
        bool same = true;
        for (int i = 0; i < N; i++)
            same = same && TAP_SAME_DOUBLE(a[i], b[i]) && signbit(a[i]) == signbit(b[i]);
        /* A shorter tensor is a prefix: values do not depend on the call's length. */
        gen((nv_input_class)c, NV_DT_FP32, NV_DT_BF16, &op_log, 0, b, 100);
        for (int i = 0; i < 100; i++)
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
        gen((nv_input_class)c, NV_DT_FP32, NV_DT_FP16, &op_add, 0, a, N);
        for (int i = 0; i < N; i++)
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
        if (c == NV_IN_SPECIALS)
            continue; /* specials test IEEE behaviour outside the domain on purpose */
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

int main(void)
{
    tap_ok(nv_input_class_name(NV_IN_NEAR_ZERO) &&
               !strcmp(nv_input_class_name(NV_IN_NEAR_ZERO), "near_zero"),
           "class names");
    nv_input_class c;
    tap_ok(nv_input_class_from_name("domain_edges", &c) == 0 && c == NV_IN_DOMAIN_EDGES &&
               nv_input_class_from_name("gaussian", &c) < 0,
           "class names parse");
    test_determinism();
    test_representable();
    test_normal_moments();
    test_near_zero_and_large();
    test_specials();
    test_midpoints();
    test_cancellation();
    test_domain();
    test_index_and_scales();
    return tap_done();
}
