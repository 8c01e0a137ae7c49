/* argmax and sample (core/ops/select.c, core/ref/ref_select.c) against hand
 * computations: argmax's tie and NaN rules, sample's uniform as the Philox
 * block its definition names, its distribution after temperature, top-k and
 * top-p on logits whose softmax is 1/7, 2/7, 4/7, the tie rule of the order,
 * the rows without a distribution, and the token the reference returns for a
 * given u (the inverse CDF over the order), with the boundary alternative. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "core/ops/catalog.h"
#include "core/ref/reference.h"
#include "tests/unit/tap.h"

static nv_op_attrs attrs(const char *json)
{
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    nv_op_attrs a;
    char *msg = NULL;
    int r = nv_op_parse_attrs(nv_op_find("sample"), o, &a, &msg);
    json_decref(o);
    free(msg);
    if (r < 0)
        memset(&a, 0, sizeof a);
    return a;
}

/* hi and lo of the reference over rows of x [rows, V] */
static void ref(const char *op, const nv_op_attrs *a, const double *x, int64_t rows, int64_t V,
                double *hi, double *lo)
{
    int64_t sx[2] = {rows, V}, so[1] = {rows};
    nv_tensor *t = nv_tensor_new(NV_DT_FP32, 2, sx), *h = nv_tensor_new(NV_DT_INT32, 1, so),
              *l = nv_tensor_new(NV_DT_INT32, 1, so);
    memcpy(t->data, x, (size_t)(rows * V) * sizeof *x);
    const nv_tensor *in[1] = {t};
    nv_ref_out o = {.hi = h, .lo = l};
    int r = nv_op_reference_ex(nv_op_find(op), a, 1, in, &o);
    for (int64_t i = 0; i < rows; i++) {
        hi[i] = r == 0 ? h->data[i] : -99;
        lo[i] = r == 0 ? l->data[i] : -99;
    }
    nv_tensor_free(t);
    nv_tensor_free(h);
    nv_tensor_free(l);
}

static void test_argmax(void)
{
    nv_op_attrs a;
    char *msg = NULL;
    nv_op_parse_attrs(nv_op_find("argmax"), NULL, &a, &msg);
    double x[4][4] = {{1, 3, 3, 2}, {-0.0, 0.0, -1, -2}, {1, NAN, 5, NAN}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    double hi[4], lo[4];
    ref("argmax", &a, &x[0][0], 4, 4, hi, lo);
    tap_ok(hi[0] == 1 && hi[1] == 0 && hi[2] == 1 && hi[3] == 0 && lo[2] == 1,
           "argmax: ties to the lowest index (1; -0 = +0: 0), the first NaN (1), all -inf: 0");
    tap_ok(nv_argmax_row(x[2], 4) == 1, "nv_argmax_row: the first NaN");
    nv_tolerance t;
    tap_ok(nv_op_default_tolerance(nv_op_find("argmax"), &a, NV_DT_INT32, &t) == 0 &&
               t.max_ulp == 0 && t.reason[0],
           "argmax: default tolerance 0 (int32), with a reason");
}

static void test_uniform(void)
{
    uint32_t ctr[4] = {7, 1, NV_SAMPLE_STREAM_TAG, 0}, key[2] = {0x89abcdef, 0x01234567}, out[4];
    nv_philox4x32_10(ctr, key, out);
    double want = (double)((((uint64_t)out[0] << 32) | out[1]) >> 11) * 0x1p-53;
    tap_ok(nv_sample_uniform(0x0123456789abcdefull, ((uint64_t)1 << 32) | 7) == want,
           "the uniform is ((w0 << 32 | w1) >> 11) 2^-53 of Philox(ctr {lo, hi, 'samp', 0}, key = seed)");
    tap_ok(nv_sample_uniform(1, 2) != nv_sample_uniform(1, 3) &&
               nv_sample_uniform(1, 2) != nv_sample_uniform(2, 2),
           "another counter or seed, another uniform");
}

static void test_probs(void)
{
    double T = 0.5, x[3] = {0, T * log(2), T * log(4)}, p[3];
    nv_op_attrs a = attrs("{\"temperature\": 0.5}");
    int r = nv_ref_sample_probs(x, 3, &a, p);
    tap_ok(r == 0 && fabs(p[0] - 1 / 7.) < 1e-15 && fabs(p[1] - 2 / 7.) < 1e-15 &&
               fabs(p[2] - 4 / 7.) < 1e-15,
           "softmax(x / T) = 1/7, 2/7, 4/7 (%.17g %.17g %.17g)", p[0], p[1], p[2]);
    a = attrs("{\"temperature\": 0.5, \"top_k\": 2}");
    nv_ref_sample_probs(x, 3, &a, p);
    tap_ok(p[0] == 0 && fabs(p[1] - 1 / 3.) < 1e-15 && fabs(p[2] - 2 / 3.) < 1e-15,
           "top-k 2 keeps the two largest, renormalised: 0, 1/3, 2/3");
    a = attrs("{\"temperature\": 0.5, \"top_p\": 0.6}");
    nv_ref_sample_probs(x, 3, &a, p);
    tap_ok(p[0] == 0 && fabs(p[1] - 1 / 3.) < 1e-15,
           "top-p 0.6: 4/7 < 0.6 <= 6/7, the nucleus is the two largest");
    a = attrs("{\"temperature\": 0.5, \"top_p\": 0.5}");
    nv_ref_sample_probs(x, 3, &a, p);
    tap_ok(p[0] == 0 && p[1] == 0 && p[2] == 1, "top-p 0.5 <= 4/7: the largest alone");
    a = attrs("{\"temperature\": 0.5, \"top_p\": 0.5714285714285714}");
    nv_ref_sample_probs(x, 3, &a, p);
    tap_ok(p[2] == 1 || fabs(p[2] - 2 / 3.) < 1e-15, "top-p at 4/7 (rounded) is decided exactly");
    double tie[4] = {1, 2, 1, 1}, p4[4];
    a = attrs("{\"top_k\": 2}");
    nv_ref_sample_probs(tie, 4, &a, p4);
    tap_ok(p4[1] > 0 && p4[0] > 0 && p4[2] == 0 && p4[3] == 0,
           "equal logits: the lower index first (top-k 2 keeps 1, then 0)");
    double bad[3] = {0, NAN, 1}, inf[3] = {0, INFINITY, 1}, none[2] = {-INFINITY, -INFINITY};
    a = attrs("{}");
    tap_ok(nv_ref_sample_probs(bad, 3, &a, p) == -1 && nv_ref_sample_probs(inf, 3, &a, p) == -1 &&
               nv_ref_sample_probs(none, 2, &a, p) == -1,
           "NaN, +Inf or all -inf: no distribution");
    double rows[2][3] = {{0, NAN, 1}, {-INFINITY, 0, -INFINITY}}, hi[2], lo[2];
    ref("sample", &a, &rows[0][0], 2, 3, hi, lo);
    tap_ok(hi[0] == -1 && hi[1] == 1, "sample: -1 without a distribution; -inf logits never drawn");
}

/* The token for offset n: the inverse CDF over the order 2, 1, 0 at u. */
static void test_tokens(void)
{
    double T = 0.5, x[3] = {0, T * log(2), T * log(4)};
    nv_op_attrs a = attrs("{\"temperature\": 0.5, \"seed\": 9}");
    int wrong = 0, alt = 0;
    int64_t count[3] = {0};
    enum { N = 3000 };
    static double xs[N][3], hi[N], lo[N];
    for (int i = 0; i < N; i++)
        memcpy(xs[i], x, sizeof x);
    ref("sample", &a, &xs[0][0], N, 3, hi, lo);
    for (int i = 0; i < N; i++) {
        double u = nv_sample_uniform(9, (uint64_t)i);
        int want = u < 4 / 7. ? 2 : u < 6 / 7. ? 1 : 0;
        wrong += hi[i] != want;
        alt += lo[i] != hi[i];
        count[(int)hi[i]]++;
    }
    tap_ok(wrong == 0, "row r draws u(seed, offset + r) and the token of the interval holding it "
                       "(%lld, %lld, %lld of %d)", (long long)count[0], (long long)count[1],
           (long long)count[2], N);
    tap_ok(alt == 0, "no u of these rows lies within delta of 4/7 or 6/7: no alternative");
    /* a row whose u lies on a boundary: logits whose first interval (the
     * larger logit's) ends at u, for an offset with u > 1/2 */
    uint64_t k = 0;
    while (nv_sample_uniform(9, k) <= 0.5)
        k++;
    double u0 = nv_sample_uniform(9, k);
    double y[2] = {log(u0 / (1 - u0)), 0}, h1, l1;
    char js[64];
    snprintf(js, sizeof js, "{\"seed\": 9, \"offset\": %llu}", (unsigned long long)k);
    nv_op_attrs b = attrs(js);
    ref("sample", &b, y, 1, 2, &h1, &l1);
    tap_ok((h1 == 0 && l1 == 1) || (h1 == 1 && l1 == 0),
           "u on a CDF boundary: the token across it is the alternative (hi %g, lo %g)", h1, l1);
}

int main(void)
{
    test_argmax();
    test_uniform();
    test_probs();
    test_tokens();
    return tap_done();
}
