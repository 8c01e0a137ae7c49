/* rotary_embedding (core/ops/rotary.c, core/ref/ref_rotary.c) against values
 * computed independently with bc -l at 60-80 digits (GNU bc's c() and s(),
 * arbitrary-precision series, not MPFR): position 0 (the identity), d = 2 at
 * position 1, a large position (10^6) and the largest one (2^31 - 1) where
 * the argument reduction decides every bit, a non-dyadic frequency exponent
 * (hd = 6), a cancellation of 2^-60 relative that the Ziv loop must resolve,
 * the two pairings on a unit vector, the default tolerance's model (an fp32
 * angle with bf16 tables passes it, sin's sign flipped does not), shape and
 * attribute errors naming the problem, and the VJP (adjoint identity, zero
 * second order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/catalog.h"
#include "core/ref/backward.h"
#include "core/ref/reference.h"
#include "numval/backend.h"
#include "tests/unit/tap.h"

static const nv_op_def *rope(void)
{
    return nv_op_find("rotary_embedding");
}

static int attrs(const char *json, nv_op_attrs *a, char **msg)
{
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    *msg = NULL;
    int r = nv_op_parse_attrs(rope(), o, a, msg);
    json_decref(o);
    return r;
}

typedef struct refv {
    double hi[64], lo[64], abs[64];
    int r;
} refv;

/* The reference of x [t, d] (numel <= 64) in dtype dt under attrs json. */
static refv ref(const char *json, int64_t t, int64_t d, const double *x, nv_dtype dt)
{
    refv v;
    memset(&v, 0, sizeof v);
    nv_op_attrs a;
    char *msg;
    if (attrs(json, &a, &msg) < 0) {
        free(msg);
        v.r = -1;
        return v;
    }
    int64_t sh[2] = {t, d};
    nv_tensor *in = nv_tensor_new(dt, 2, sh), *h = nv_tensor_new(dt, 2, sh),
              *l = nv_tensor_new(dt, 2, sh), *s = nv_tensor_new(dt, 2, sh);
    memcpy(in->data, x, sizeof(double) * (size_t)(t * d));
    const nv_tensor *ins[1] = {in};
    nv_ref_out o = {.hi = h, .lo = l, .abs_sum = s};
    v.r = nv_op_reference_ex(rope(), &a, 1, ins, &o);
    memcpy(v.hi, h->data, sizeof(double) * (size_t)(t * d));
    memcpy(v.lo, l->data, sizeof(double) * (size_t)(t * d));
    memcpy(v.abs, s->data, sizeof(double) * (size_t)(t * d));
    nv_tensor_free(in);
    nv_tensor_free(h);
    nv_tensor_free(l);
    nv_tensor_free(s);
    return v;
}

/* hi is the double nearest the decimal oracle, and hi + lo agrees with it to
 * long double's 64 bits (the oracle has 60 digits). */
static bool matches(double hi, double lo, const char *oracle)
{
    double want = strtod(oracle, NULL);
    long double w = strtold(oracle, NULL), got = (long double)hi + (long double)lo;
    return hi == want && fabsl(got - w) <= fabsl(w) * 0x1p-62L;
}

static void test_position0(void)
{
    double x[8] = {1.5, -2, 3e-30, INFINITY, 0.25, -0.0, 7, 1e30};
    refv v = ref("{\"head_dim\": 4}", 1, 8, x, NV_DT_FP32);
    /* the finite head is x itself; x_b = Inf at p = 0 makes Inf * sin 0 = NaN
     * in its partner's output, as x cos - x' sin does in IEEE arithmetic */
    tap_ok(v.r == 0 && v.hi[4] == 0.25 && signbit(v.hi[5]) && v.hi[6] == 7 && v.hi[7] == 1e30 &&
               v.hi[0] == 1.5 && v.hi[2] == 3e-30 && isnan(v.hi[1]) && isinf(v.hi[3]),
           "position 0: the identity on finite heads, IEEE Inf * 0 = NaN next to an Inf");
}

static void test_d2(void)
{
    /* d = 2, offset 1: the angle is exactly 1 */
    double x[2] = {1, 0};
    refv v = ref("{\"offset\": 1}", 1, 2, x, NV_DT_FP32);
    tap_ok(v.r == 0 &&
               matches(v.hi[0], v.lo[0],
                       "0.540302305868139717400936607442976603732310420617922227670097") &&
               matches(v.hi[1], v.lo[1],
                       "0.841470984807896506652502321630298999622563060798371065672751"),
           "d = 2 at position 1: (cos 1, sin 1) to 2^-62 (bc oracle)");
    double y[2] = {0, 1};
    v = ref("{\"offset\": 1}", 1, 2, y, NV_DT_FP64);
    tap_ok(v.r == 0 &&
               matches(-v.hi[0], -v.lo[0],
                       "0.841470984807896506652502321630298999622563060798371065672751") &&
               matches(v.hi[1], v.lo[1],
                       "0.540302305868139717400936607442976603732310420617922227670097"),
           "d = 2, x = (0, 1): (-sin 1, cos 1), the rotation's sign (fp64)");
}

static void test_large_positions(void)
{
    double x[2] = {1, 0};
    refv v = ref("{\"offset\": 1000000}", 1, 2, x, NV_DT_FP32);
    tap_ok(v.r == 0 &&
               matches(v.hi[0], v.lo[0],
                       "0.936752127533144786938532535074918775708097804212365879720578") &&
               matches(v.hi[1], v.lo[1],
                       "-0.349993502171292952117652486780771469061406605328716273857059"),
           "position 10^6: cos, sin of 10^6 to 2^-62 (bc)");
    /* the last position, hd = 8, pair k = 1: angle (2^31 - 1) 10000^(-1/4) =
     * 214748364.7, irrational in binary */
    double z[8] = {0, 1, 0, 0, 0, 0, 0, 0};
    v = ref("{\"offset\": 2147483647}", 1, 8, z, NV_DT_FP32);
    tap_ok(v.r == 0 &&
               matches(v.hi[1], v.lo[1],
                       "0.0810024805630151096215801871328114398595290656941999343786134092591") &&
               matches(v.hi[5], v.lo[5],
                       "-0.9967138998442022125632547727158069953734402743457648864117210375794"),
           "position 2^31 - 1, frequency 10000^(-1/4): cos and sin of 214748364.7 (bc)");
    double w[6] = {0, 1, 0, 0, 0, 0};
    v = ref("{\"offset\": 1000}", 1, 6, w, NV_DT_FP32);
    tap_ok(
        v.r == 0 &&
            matches(v.hi[1], v.lo[1],
                    "-0.7596630714585294014933211219673640317187974285905638727378790553235695") &&
            matches(v.hi[4], v.lo[4],
                    "0.6503168595863044762934411562277088180633433185039406858410293151358396"),
        "hd = 6 (exponent -1/3, not dyadic), position 1000: angle 46.4158883... (bc)");
}

static void test_cancellation(void)
{
    /* x = (sin 10^6, cos 10^6) rounded: y_a cancels to -1.2856e-18, 2^-60 of |x| */
    double x[2] = {-0x1.6664b2568d867p-2, 0x1.df9df9906d32cp-1};
    refv v = ref("{\"offset\": 1000000}", 1, 2, x, NV_DT_FP64);
    tap_ok(v.r == 0 && matches(v.hi[0], v.lo[0],
                               "-1.28564253835064661400705849215413232767155581755417299243e-18"),
           "cancellation to 2^-60 relative: the Ziv loop resolves hi and lo (bc)");
}

static void test_pairing(void)
{
    double x[4] = {1, 0, 0, 0};
    double c1 = strtod("0.5403023058681397174009366", NULL),
           s1 = strtod("0.8414709848078965066525023", NULL);
    refv h = ref("{\"offset\": 1}", 1, 4, x, NV_DT_FP32);
    refv i = ref("{\"offset\": 1, \"interleaved\": true}", 1, 4, x, NV_DT_FP32);
    tap_ok(h.r == 0 && h.hi[0] == c1 && h.hi[1] == 0 && h.hi[2] == s1 && h.hi[3] == 0,
           "half split (default): e0 rotates into element hd/2 = 2 (GPT-NeoX / Llama)");
    tap_ok(i.r == 0 && i.hi[0] == c1 && i.hi[1] == s1 && i.hi[2] == 0 && i.hi[3] == 0,
           "interleaved: e0 rotates into element 1 (RoFormer's pairs)");
}

/* The default tolerance's allowance of output e (bound, n = 2: c (n-1) u abs_sum + ulp/2). */
static double allowed(const refv *v, int e, nv_dtype dt)
{
    nv_tolerance t;
    nv_op_attrs a;
    char *msg;
    attrs("{}", &a, &msg);
    nv_op_default_tolerance(rope(), &a, dt, &t);
    double u = ldexp(1.0, -nv_dtype_get(t.u_dtype)->mant_bits - 1);
    return t.c * u * v->abs[e] + nv_dtype_ulp(dt, v->hi[e]) / 2;
}

static double bf(double x)
{
    return nv_dtype_round(NV_DT_BF16, x, &NV_ROUND_DEFAULT, 0);
}

static void test_tolerance(void)
{
    nv_tolerance t;
    nv_op_attrs a;
    char *msg;
    attrs("{}", &a, &msg);
    tap_ok(nv_op_default_tolerance(rope(), &a, NV_DT_BF16, &t) == 0 && t.metric == NV_TOL_BOUND &&
               t.u_dtype == NV_DT_BF16 && strstr(t.reason, "fp32") != NULL,
           "default tolerance: the bound metric in the output dtype, with its reason");
    /* a framework's bf16 rope at position 4000, k = 0: angle 4000 in fp32 (exact),
     * cos, sin in fp32 then rounded to bf16 tables, products in fp32, output bf16 */
    double x[2] = {bf(0.8125), bf(-1.40625)};
    refv v = ref("{\"offset\": 4000}", 1, 2, x, NV_DT_BF16);
    double cs = bf((float)cosf(4000.0f)), sn = bf((float)sinf(4000.0f));
    double ya = bf((float)((float)(x[0] * cs) - (float)(x[1] * sn)));
    double yb = bf((float)((float)(x[1] * cs) + (float)(x[0] * sn)));
    double flip = bf((float)((float)(x[0] * cs) + (float)(x[1] * sn)));
    tap_ok(v.r == 0 && fabs(ya - v.hi[0]) <= allowed(&v, 0, NV_DT_BF16) &&
               fabs(yb - v.hi[1]) <= allowed(&v, 1, NV_DT_BF16),
           "bf16: tables in bf16 from an fp32 angle pass the default (err %.3g, %.3g; allowed "
           "%.3g)",
           fabs(ya - v.hi[0]), fabs(yb - v.hi[1]), allowed(&v, 0, NV_DT_BF16));
    tap_ok(fabs(flip - v.hi[0]) > allowed(&v, 0, NV_DT_BF16),
           "bf16: sin's sign flipped fails it (err %.3g)", fabs(flip - v.hi[0]));
    /* fp32 at position 3001, pair k = 1 of hd = 8: the angle 300.1 rounded in fp32 */
    double z[8] = {0.5, 0.75, 0, 0, -1.25, 0.5, 0, 0};
    v = ref("{\"offset\": 3001}", 1, 8, z, NV_DT_FP32);
    float inv = (float)pow(10000.0, -0.25), phi = 3001.0f * inv;
    float c32 = cosf(phi), s32 = sinf(phi);
    float y1 = (float)(z[1] * c32) - (float)(z[5] * s32);
    float y1f = (float)(z[1] * c32) + (float)(z[5] * s32);
    tap_ok(v.r == 0 && fabs(y1 - v.hi[1]) <= allowed(&v, 1, NV_DT_FP32) &&
               fabs(y1 - v.hi[1]) > nv_dtype_ulp(NV_DT_FP32, v.hi[1]),
           "fp32: an fp32 angle errs by more than 1 ulp (%.3g) and passes (allowed %.3g)",
           fabs(y1 - v.hi[1]), allowed(&v, 1, NV_DT_FP32));
    tap_ok(fabs(y1f - v.hi[1]) > allowed(&v, 1, NV_DT_FP32), "fp32: sin's sign flipped fails");
}

static void test_errors(void)
{
    nv_op_attrs a;
    char *msg;
    int r = attrs("{\"theta\": 1}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "theta"), "theta 1 refused: %s", msg ? msg : "");
    free(msg);
    r = attrs("{\"interleaved\": 1}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "interleaved"), "interleaved must be a boolean: %s",
           msg ? msg : "");
    free(msg);
    r = attrs("{\"heads\": 2}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "head_dim"), "unknown key lists the accepted ones: %s",
           msg ? msg : "");
    free(msg);
    struct {
        const char *json;
        int nd;
        int64_t shape[2];
        const char *want;
    } bad[] = {{"{}", 1, {8, 0}, "[8]"},
               {"{}", 2, {4, 5}, "[4, 5]"},
               {"{\"head_dim\": 6}", 2, {4, 8}, "head_dim 6"},
               {"{\"offset\": 2147483647}", 2, {2, 8}, "2^31 - 1"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        attrs(bad[k].json, &a, &msg);
        free(msg);
        nv_tensor *x = nv_tensor_new(NV_DT_FP32, bad[k].nd, bad[k].shape);
        const nv_tensor *in[1] = {x};
        int nd;
        int64_t sh[NV_MAX_DIMS];
        char err[256] = "";
        r = nv_op_infer(rope(), &a, 1, in, &nd, sh, err, sizeof err);
        tap_ok(r == NV_E_SHAPE && strstr(err, bad[k].want), "refused: %s", err);
        nv_tensor_free(x);
    }
}

static void test_vjp(void)
{
    nv_op_attrs a;
    char *msg;
    attrs("{\"offset\": 5, \"head_dim\": 4}", &a, &msg);
    int64_t sh[2] = {3, 8};
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 2, sh);
    double gy[24], y[24], gx[24], mg[24], hx[24], v[24];
    for (int i = 0; i < 24; i++) {
        x->data[i] = sin(1.7 * i + 0.3);
        gy[i] = cos(0.9 * i - 0.2);
        v[i] = 1;
    }
    const nv_tensor *in[1] = {x};
    double *gxs[1] = {gx}, *mgs[1] = {mg}, *hxs[1] = {hx};
    const double *vs[1] = {v};
    int r = nv_op_forward_f64(rope(), &a, 1, in, y);
    r = r ? r : nv_op_vjp(rope(), &a, 1, in, gy, gxs, mgs);
    double lhs = 0, rhs = 0, scale = 0;
    for (int i = 0; i < 24; i++) {
        lhs += gy[i] * y[i], rhs += gx[i] * x->data[i];
        scale += fabs(gy[i] * y[i]);
    }
    tap_ok(r == 0 && fabs(lhs - rhs) <= 1e-14 * scale,
           "VJP: <gy, R x> = <R^T gy, x> (%.3g vs %.3g)", lhs, rhs);
    /* the rotation preserves the norm of each pair */
    double n0 = x->data[0] * x->data[0] + x->data[2] * x->data[2];
    double n1 = y[0] * y[0] + y[2] * y[2];
    tap_ok(fabs(n0 - n1) <= 1e-15 * n0, "forward: |pair| kept (%.17g, %.17g)", n0, n1);
    tap_ok(mg[8] > fabs(gy[8]) * 5, "mag of row 1 (position 6) carries the angle's weight");
    r = nv_op_vjp2(rope(), &a, 1, in, gy, vs, hxs, NULL);
    bool zero = r == 0;
    for (int i = 0; i < 24; i++)
        zero = zero && hx[i] == 0;
    tap_ok(zero, "second-order VJP: 0 (linear in x)");
    tap_ok(nv_op_vjp_reduction_len(rope(), &a, 1, in, 0) == 2 &&
               nv_op_jac_kind(rope(), &a) == NV_JAC_ROW_BLOCK,
           "each gradient a sum of 2 terms; row_block Jacobian");
    nv_tensor_free(x);
}

int main(void)
{
    test_position0();
    test_d2();
    test_large_positions();
    test_cancellation();
    test_pairing();
    test_tolerance();
    test_errors();
    test_vjp();
    return tap_done();
}
