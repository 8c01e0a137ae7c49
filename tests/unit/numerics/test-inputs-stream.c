/* The current input generators against the previous scalar ones (inputs_ref.c,
 * the oracle): for every class, dtype, domain and operand, nv_inputs_generate
 * and the stream split into uneven ranges give the oracle's values bit for bit
 * (a value is a double: equal with its sign, or NaN on both sides). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/inputs.h"
#include "inputs_ref.h"

static int edges_two(nv_dtype dt, double *out, int max)
{
    (void)dt;
    if (max < 2)
        return 0;
    out[0] = 1.0;
    out[1] = 88.72283935546875;
    return 2;
}

/* The domains the op layer hands out (catalog.h nv_op_input_domain). */
static const nv_input_domain domains[] = {
    {0},
    {.bounded = true, .lo = 0, .hi = INFINITY, .edges = edges_two},
    {.bounded = true, .lo = -1, .hi = 1},
    {.bounded = true, .lo = -INFINITY, .hi = INFINITY, .tie_partner = true},
    {.cross_arity = 2},
    {.cross_arity = 3},
    {.param = true},
    {.role = NV_INPUT_INDEX},
    {.role = NV_INPUT_SCALE},
};
#define N_DOMAINS (int)(sizeof domains / sizeof domains[0])

static bool same_bits(nv_dtype dt, double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    (void)dt;
    return a == b && signbit(a) == signbit(b);
}

/* Splits [0, n) into ranges of 1, 2, 3, ... elements, then the rest in one. */
static int stream_uneven(const nv_input_request *rq, double *out, int64_t n)
{
    nv_input_stream s;
    int r = nv_inputs_stream_init(&s, rq, n);
    int64_t pos = 0;
    for (int64_t len = 1; r == 0 && pos < n; len = len * 3 + 1) {
        int64_t c = len < n - pos ? len : n - pos;
        r = nv_inputs_stream_next(&s, out + pos, c);
        pos += c;
    }
    return r;
}

int main(void)
{
    static const int64_t sizes[] = {1, 7, 4099, 65536 + 5};
    int64_t nmax = 65536 + 5;
    double *want = malloc((size_t)nmax * sizeof *want);
    double *got = malloc((size_t)nmax * sizeof *got);
    double *parts = malloc((size_t)nmax * sizeof *parts);
    if (!want || !got || !parts)
        return 1;
    /* Under the sanitizers operand 0 only (memory is checked on the same paths);
     * the optimized pass compares all three operands. */
    int operands = getenv("NV_TEST_SANITIZER") ? 1 : 3;
    for (int c = 0; c < NV_IN_COUNT; c++) {
        int64_t checked = 0, bad = 0, bad_rc = 0;
        for (int dt = 0; dt < NV_DT_COUNT; dt++) {
            if (!nv_dtype_get((nv_dtype)dt))
                continue;
            for (int d = 0; d < N_DOMAINS; d++)
                for (int t = 0; t < operands; t++)
                    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                        int64_t n = sizes[z];
                        nv_input_request rq = {.domain = domains[d],
                                               .tensor_index = t,
                                               .dtype = (nv_dtype)dt,
                                               .target = t == 2 ? NV_DT_BF16 : (nv_dtype)dt,
                                               .cls = (nv_input_class)c,
                                               .seed = 0x1234567890abcdefull + (uint64_t)z,
                                               .case_index = (uint32_t)(d * 7 + t),
                                               .index_range = 37,
                                               .reduction_len = z == 2 ? 10 : 0};
                        int r0 = ref_inputs_generate(&rq, want, n);
                        int r1 = nv_inputs_generate(&rq, got, n);
                        int r2 = stream_uneven(&rq, parts, n);
                        if (r0 != r1 || r0 != r2) {
                            bad_rc++;
                            continue;
                        }
                        if (r0 < 0)
                            continue;
                        for (int64_t i = 0; i < n; i++) {
                            checked++;
                            bad += !same_bits((nv_dtype)dt, want[i], got[i]) ||
                                   !same_bits((nv_dtype)dt, want[i], parts[i]);
                        }
                    }
        }
        tap_ok(checked > 0 && bad == 0 && bad_rc == 0,
               "%s: %lld values of every dtype, domain and %d operand(s) as the scalar "
               "generators made them, whole and streamed in uneven ranges (%lld differ, %lld "
               "return codes)",
               nv_input_class_name((nv_input_class)c), (long long)checked, operands,
               (long long)bad,
               (long long)bad_rc);
    }
    /* fp32 "exhaustive" over all 2^32 encodings, operand 0 only: element i is
     * encoding i (its first 2^16 + 5 read here, in uneven ranges). */
    nv_input_request ex = {.dtype = NV_DT_FP32, .target = NV_DT_FP32, .cls = NV_IN_EXHAUSTIVE};
    int64_t all = INT64_C(1) << 32;
    int rx = stream_uneven(&ex, parts, nmax) == -EINVAL;
    nv_input_stream xs;
    rx &= nv_inputs_stream_init(&xs, &ex, all) == 0;
    int64_t pos = 0, wrong = 0;
    for (int64_t len = 1; rx && pos < nmax; len = len * 3 + 1) {
        int64_t c = len < nmax - pos ? len : nmax - pos;
        rx &= nv_inputs_stream_next(&xs, parts + pos, c) == 0;
        pos += c;
    }
    for (int64_t i = 0; rx && i < nmax; i++) {
        float f;
        uint32_t u = (uint32_t)i;
        memcpy(&f, &u, sizeof f);
        wrong += parts[i] != (double)f;
    }
    ex.tensor_index = 1;
    tap_ok(rx && wrong == 0 && nv_inputs_stream_init(&xs, &ex, all) == -EINVAL,
           "fp32 exhaustive: element i is encoding i over a tensor of 2^32 (%lld wrong), "
           "refused for fewer elements and for operand 1",
           (long long)wrong);
    /* A stream refuses to run past its tensor. */
    nv_input_request rq = {.dtype = NV_DT_FP32, .target = NV_DT_FP32, .cls = NV_IN_NORMAL};
    nv_input_stream s;
    int r = nv_inputs_stream_init(&s, &rq, 10);
    r |= nv_inputs_stream_next(&s, got, 6);
    tap_ok(r == 0 && nv_inputs_stream_next(&s, got, 5) == -EINVAL,
           "a stream of 10 elements refuses 5 more after 6");
    free(want);
    free(got);
    free(parts);
    return tap_done();
}
