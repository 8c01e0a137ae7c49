/* conv2d (groups, stride, padding, dilation) and avg_pool2d: the exact
 * forward references and VJPs against independent oracles written here from
 * the definitions (PyTorch's Conv2d / AvgPool2d formulas, loops over outputs
 * and taps that scatter, not the references' gathers), on small-integer
 * inputs so every sum is exact in fp64 and the comparison is bit for bit;
 * the adjoint identity <gy, J u> = <J^T gy, u>; hand values of the avg_pool2d
 * divisor (count_include_pad true and false); the backward reduction lengths;
 * the attribute and shape errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/catalog.h"
#include "core/ref/backward.h"
#include "core/ref/reference.h"
#include "numval/backend.h"
#include "tests/unit/tap.h"

static nv_tensor *ints(int64_t n, int64_t c, int64_t h, int64_t w, unsigned seed)
{
    nv_tensor *t = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){n, c, h, w});
    for (int64_t e = 0; e < t->numel; e++) {
        seed = seed * 1103515245u + 12345u;
        t->data[e] = (double)((int)((seed >> 16) % 9) - 4); /* -4 .. 4 */
    }
    return t;
}

static int attrs(const char *op, const char *json, nv_op_attrs *a, char **msg)
{
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    *msg = NULL;
    int r = nv_op_parse_attrs(nv_op_find(op), o, a, msg);
    json_decref(o);
    return r;
}

/* The oracle: y[n, co, oh, ow] += x[n, q cg + c, oh s - p + i d, ow s - p + j d]
 * w[co, c, i, j] over every output and tap, and its transpose scattered the
 * same way: gx[x index] += gy w, gw[co, c, i, j] += gy x. */
typedef struct dims {
    int64_t n, c, h, w, co, cg, kh, kw, oh, ow;
    int s, p, d, g;
} dims;

static void oracle(const dims *D, const double *x, const double *w, const double *gy, double *y,
                   double *gx, double *gw)
{
    int64_t cog = D->co / D->g;
    for (int64_t n = 0; n < D->n; n++)
        for (int64_t co = 0; co < D->co; co++)
            for (int64_t oh = 0; oh < D->oh; oh++)
                for (int64_t ow = 0; ow < D->ow; ow++) {
                    int64_t o = ((n * D->co + co) * D->oh + oh) * D->ow + ow;
                    for (int64_t c = 0; c < D->cg; c++)
                        for (int64_t i = 0; i < D->kh; i++)
                            for (int64_t j = 0; j < D->kw; j++) {
                                int64_t ih = oh * D->s - D->p + i * D->d;
                                int64_t iw = ow * D->s - D->p + j * D->d;
                                if (ih < 0 || iw < 0 || ih >= D->h || iw >= D->w)
                                    continue;
                                int64_t xe =
                                    ((n * D->c + (co / cog) * D->cg + c) * D->h + ih) * D->w + iw;
                                int64_t we = ((co * D->cg + c) * D->kh + i) * D->kw + j;
                                y[o] += x[xe] * w[we];
                                gx[xe] += gy[o] * w[we];
                                gw[we] += gy[o] * x[xe];
                            }
                }
}

static bool same(const double *a, const double *b, int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        if (a[e] != b[e])
            return false;
    return true;
}

static void check_conv(const char *json, int64_t n, int64_t c, int64_t h, int64_t w, int64_t co,
                       int64_t kh, int64_t kw)
{
    const nv_op_def *op = nv_op_find("conv2d");
    nv_op_attrs a;
    char *msg;
    if (attrs("conv2d", json, &a, &msg) < 0) {
        tap_ok(0, "conv2d %s parses: %s", json, msg);
        free(msg);
        return;
    }
    nv_tensor *x = ints(n, c, h, w, 7), *wt = ints(co, c / a.groups, kh, kw, 11);
    const nv_tensor *in[2] = {x, wt};
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    int r = nv_op_infer(op, &a, 2, in, &nd, shape, err, sizeof err);
    dims D = {n,  c,        h,        w,        co,        c / a.groups, kh,
              kw, shape[2], shape[3], a.stride, a.padding, a.dilation,   a.groups};
    nv_tensor *yr = nv_tensor_new(NV_DT_FP64, 4, shape);
    nv_tensor *gy = ints(shape[0], shape[1], shape[2], shape[3], 13);
    int64_t ny = yr->numel;
    double *y = calloc((size_t)ny, sizeof(double)), *gx = calloc((size_t)x->numel, 8),
           *gw = calloc((size_t)wt->numel, 8), *rx = calloc((size_t)x->numel, 8),
           *rw = calloc((size_t)wt->numel, 8), *f = calloc((size_t)ny, 8);
    oracle(&D, x->data, wt->data, gy->data, y, gx, gw);
    r |= nv_op_reference(op, &a, 2, in, yr, NULL, NULL);
    double *g2[2] = {rx, rw};
    r |= nv_op_vjp(op, &a, 2, in, gy->data, g2, NULL);
    r |= nv_op_forward_f64(op, &a, 2, in, f);
    tap_ok(r == 0 && same(yr->data, y, ny) && same(f, y, ny),
           "conv2d %s [%lld,%lld,%lld,%lld] * [%lld,%lld,%lld,%lld]: reference and fp64 forward "
           "equal the oracle (%lld outputs)",
           json, (long long)n, (long long)c, (long long)h, (long long)w, (long long)co,
           (long long)(c / a.groups), (long long)kh, (long long)kw, (long long)ny);
    tap_ok(r == 0 && same(rx, gx, x->numel) && same(rw, gw, wt->numel),
           "conv2d %s: the VJP of x and of the weight equal the oracle's scatter", json);
    /* adjoint: <gy, y(x, w)> = <gx, x> = <gw, w> (bilinear: y is linear in each) */
    double s0 = 0, s1 = 0, s2 = 0;
    for (int64_t e = 0; e < ny; e++)
        s0 += gy->data[e] * y[e];
    for (int64_t e = 0; e < x->numel; e++)
        s1 += rx[e] * x->data[e];
    for (int64_t e = 0; e < wt->numel; e++)
        s2 += rw[e] * wt->data[e];
    tap_ok(s0 == s1 && s0 == s2, "conv2d %s: <gy, y> = <gx, x> = <gw, w> (%g %g %g)", json, s0, s1,
           s2);
    /* second order: (H v)_x = gx(gy, v_w), (H v)_w = gw(v_x, gy) */
    double *hx = calloc((size_t)x->numel, 8), *hw = calloc((size_t)wt->numel, 8);
    double *h2[2] = {hx, hw};
    const double *vv[2] = {x->data, wt->data};
    r = nv_op_vjp2(op, &a, 2, in, gy->data, vv, h2, NULL);
    tap_ok(r == 0 && same(hx, gx, x->numel) && same(hw, gw, wt->numel),
           "conv2d %s: the second-order VJP along (x, w) is the VJP (bilinear)", json);
    free(hx);
    free(hw);
    free(y), free(gx), free(gw), free(rx), free(rw), free(f);
    nv_tensor_free(x), nv_tensor_free(wt), nv_tensor_free(yr), nv_tensor_free(gy);
}

static void test_conv(void)
{
    check_conv("{}", 2, 3, 6, 5, 4, 3, 3);
    check_conv("{\"stride\": 2, \"padding\": 1, \"dilation\": 2}", 1, 2, 9, 7, 3, 3, 2);
    check_conv("{\"groups\": 2, \"padding\": 1}", 2, 4, 5, 5, 6, 3, 3);
    check_conv("{\"groups\": 3, \"padding\": 1, \"stride\": 2}", 1, 3, 7, 6, 3, 3, 3);
    check_conv("{\"groups\": 2, \"stride\": 3, \"padding\": 2, \"dilation\": 2}", 2, 4, 8, 9, 2, 2,
               3);
}

static void test_pool(void)
{
    const nv_op_def *op = nv_op_find("avg_pool2d");
    tap_ok(op && nv_op_find("conv2d") + 1 == op, "avg_pool2d follows conv2d in the catalog");
    nv_op_attrs a, b;
    char *msg;
    int r = attrs("avg_pool2d", "{\"kernel\": 2, \"stride\": 1, \"padding\": 1}", &a, &msg);
    r |= attrs("avg_pool2d",
               "{\"kernel\": 2, \"stride\": 1, \"padding\": 1, \"count_include_pad\": false}", &b,
               &msg);
    tap_ok(r == 0 && a.count_include_pad && !b.count_include_pad,
           "count_include_pad defaults to true (PyTorch's AvgPool2d)");
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 3, 3});
    for (int e = 0; e < 9; e++)
        x->data[e] = e + 1;
    const nv_tensor *in[1] = {x};
    nv_tensor *y = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 4, 4});
    nv_tensor *z = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 4, 4});
    r = nv_op_reference(op, &a, 1, in, y, NULL, NULL) |
        nv_op_reference(op, &b, 1, in, z, NULL, NULL);
    /* corner (0, 0) sees x[0, 0] = 1 and three padding zeros; (1, 1) sees
     * 1 2 4 5; edge (0, 1) sees 1 2 and two zeros */
    tap_ok(r == 0 && y->data[0] == 0.25 && z->data[0] == 1 && y->data[5] == 3 && z->data[5] == 3 &&
               y->data[1] == 0.75 && z->data[1] == 1.5,
           "avg_pool2d divisors: corner %g / %g, inner %g / %g, edge %g / %g (count_include_pad "
           "true / false)",
           y->data[0], z->data[0], y->data[5], z->data[5], y->data[1], z->data[1]);
    /* kernel 3, stride 2, padding 1 on the same x: windows (0, 0) 1 2 4 5,
     * (0, 1) 2 3 5 6, (1, 0) 4 5 7 8, (1, 1) 5 6 8 9, each with 5 padding
     * zeros */
    nv_op_attrs k3, k3x;
    r = attrs("avg_pool2d", "{\"kernel\": 3, \"stride\": 2, \"padding\": 1}", &k3, &msg) |
        attrs("avg_pool2d",
              "{\"kernel\": 3, \"stride\": 2, \"padding\": 1, \"count_include_pad\": false}", &k3x,
              &msg);
    nv_tensor *y3 = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 2, 2});
    nv_tensor *z3 = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 2, 2});
    r |= nv_op_reference(op, &k3, 1, in, y3, NULL, NULL) |
         nv_op_reference(op, &k3x, 1, in, z3, NULL, NULL);
    tap_ok(r == 0 && y3->data[0] == 12.0 / 9 && y3->data[1] == 16.0 / 9 &&
               y3->data[2] == 24.0 / 9 && y3->data[3] == 28.0 / 9 && z3->data[0] == 3 &&
               z3->data[1] == 4 && z3->data[2] == 6 && z3->data[3] == 7,
           "avg_pool2d 3x3 stride 2 padding 1 on 1..9: 12/9 16/9 24/9 28/9 with padding "
           "counted, 3 4 6 7 without");
    nv_tensor_free(y3);
    nv_tensor_free(z3);
    /* VJP: gx[e] = sum over the windows containing e of gy / divisor; with
     * gy = 1 and padding counted, x[1, 1] (centre) is in 4 windows: 4/4 */
    double gy[16], gx[9], gz[9];
    for (int e = 0; e < 16; e++)
        gy[e] = 1;
    double *pa[1] = {gx}, *pb[1] = {gz};
    r = nv_op_vjp(op, &a, 1, in, gy, pa, NULL) | nv_op_vjp(op, &b, 1, in, gy, pb, NULL);
    /* without padding counted: x[0, 0] is in windows (0,0) /1, (0,1) /2,
     * (1,0) /2, (1,1) /4: 1 + 1/2 + 1/2 + 1/4 */
    tap_ok(r == 0 && gx[4] == 1 && gx[0] == 1 && gz[0] == 2.25 && gz[4] == 1,
           "avg_pool2d VJP: centre %g, corner %g / %g", gx[4], gx[0], gz[0]);
    /* adjoint on random values, overlapping windows */
    nv_op_attrs c3;
    r = attrs("avg_pool2d", "{\"kernel\": 3, \"stride\": 2, \"padding\": 1}", &c3, &msg);
    nv_tensor *x2 = ints(2, 3, 7, 9, 5);
    const nv_tensor *in2[1] = {x2};
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    r |= nv_op_infer(op, &c3, 1, in2, &nd, shape, err, sizeof err);
    nv_tensor *y2 = nv_tensor_new(NV_DT_FP64, 4, shape),
              *g2 = ints(shape[0], shape[1], shape[2], shape[3], 9);
    double *gx2 = calloc((size_t)x2->numel, 8), *f2 = calloc((size_t)y2->numel, 8);
    double *p2[1] = {gx2};
    r |= nv_op_reference(op, &c3, 1, in2, y2, NULL, NULL) |
         nv_op_vjp(op, &c3, 1, in2, g2->data, p2, NULL);
    r |= nv_op_forward_f64(op, &c3, 1, in2, f2);
    double s0 = 0, s1 = 0, fe = 0;
    for (int64_t e = 0; e < y2->numel; e++) {
        s0 += g2->data[e] * y2->data[e];
        fe = fmax(fe, fabs(f2[e] - y2->data[e]));
    }
    for (int64_t e = 0; e < x2->numel; e++)
        s1 += gx2[e] * x2->data[e];
    tap_ok(r == 0 && fabs(s0 - s1) <= 1e-12 * fabs(s0) && fe <= 1e-15,
           "avg_pool2d 3x3 stride 2 padding 1: <gy, y> = <gx, x> (%.17g %.17g), fp64 forward "
           "within %g of the reference",
           s0, s1, fe);
    tap_ok(nv_op_vjp_reduction_len(op, &c3, 1, in2, 0) == 4,
           "avg_pool2d 3x3 stride 2: an element is in at most 2 x 2 windows");
    free(gx2), free(f2);
    nv_tensor_free(x2), nv_tensor_free(y2), nv_tensor_free(g2);
    nv_tensor_free(x), nv_tensor_free(y), nv_tensor_free(z);
}

/* ceil_mode and divisor_override (PyTorch's AvgPool2d): output sizes by
 * H_out = ceil((H + 2p - k) / s) + 1, less the last window when it would
 * start in the right padding; divisors clipped to the padded input; hand
 * values. */
static nv_tensor *pool_ref(const char *json, int64_t h, int64_t *ret_oh, int *ret_r)
{
    const nv_op_def *op = nv_op_find("avg_pool2d");
    nv_op_attrs a;
    char *msg, err[256];
    int r = attrs("avg_pool2d", json, &a, &msg);
    free(msg);
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, h, h});
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] = (double)(e + 1);
    const nv_tensor *in[1] = {x};
    int nd = 0;
    int64_t shape[NV_MAX_DIMS] = {0};
    r |= nv_op_infer(op, &a, 1, in, &nd, shape, err, sizeof err);
    nv_tensor *y = r == 0 ? nv_tensor_new(NV_DT_FP64, 4, shape) : NULL;
    if (y)
        r |= nv_op_reference(op, &a, 1, in, y, NULL, NULL);
    *ret_oh = r == 0 ? shape[2] : -1;
    *ret_r = r;
    nv_tensor_free(x);
    return y;
}

static void test_pool_ceil(void)
{
    int64_t oh;
    int r;
    /* 1..9 in 3x3, kernel 2 stride 2: floor gives 1x1; ceil 2x2, the windows
     * (0, 1), (1, 0), (1, 1) past the input: 1 2 4 5 / 4, 3 6 / 2, 7 8 / 2, 9 / 1 */
    nv_tensor *y = pool_ref("{\"kernel\": 2, \"ceil_mode\": true}", 3, &oh, &r);
    tap_ok(r == 0 && oh == 2 && y->data[0] == 3 && y->data[1] == 4.5 && y->data[2] == 7.5 &&
               y->data[3] == 9,
           "ceil_mode kernel 2 on 3x3: 2x2, 3 4.5 7.5 9 (divisors clipped to the input)");
    nv_tensor_free(y);
    y = pool_ref("{\"kernel\": 2}", 3, &oh, &r);
    tap_ok(r == 0 && oh == 1 && y->data[0] == 3, "floor mode on the same: 1x1, 3");
    nv_tensor_free(y);
    /* 1..16 in 4x4, kernel 3 stride 2 padding 1: floor 2x2, ceil 3x3; window
     * (0, 0) holds 1 2 5 6 and 5 padding zeros (divisor 9 with padding, 4
     * without), (2, 2) holds 16, one row and column of padding and a row and
     * column past the padded input: divisor 2 x 2 = 4 with padding, 1 without */
    y = pool_ref("{\"kernel\": 3, \"stride\": 2, \"padding\": 1, \"ceil_mode\": true}", 4, &oh,
                 &r);
    tap_ok(r == 0 && oh == 3 && y->data[0] == 14.0 / 9 && y->data[8] == 4,
           "ceil_mode 3x3 stride 2 padding 1 on 4x4: 3x3, corner 14/9, last 16/4 (padding "
           "counted inside the padded input only)");
    nv_tensor_free(y);
    y = pool_ref("{\"kernel\": 3, \"stride\": 2, \"padding\": 1, \"ceil_mode\": true, "
                 "\"count_include_pad\": false}",
                 4, &oh, &r);
    tap_ok(r == 0 && oh == 3 && y->data[0] == 3.5 && y->data[8] == 16,
           "the same without padding counted: 14/4, 16/1");
    nv_tensor_free(y);
    /* 5x5, kernel 2 stride 2 padding 1: ceil((5 + 2 - 2) / 2) + 1 = 4, but the
     * 4th window would start at 6 - 1 = 5, in the right padding: 3 */
    y = pool_ref("{\"kernel\": 2, \"padding\": 1, \"ceil_mode\": true}", 5, &oh, &r);
    tap_ok(r == 0 && oh == 3,
           "ceil_mode drops a last window that would start in the right padding (5x5, k 2, p 1: "
           "3, not 4): %lld",
           (long long)oh);
    nv_tensor_free(y);
    /* divisor_override 1: the window sums, 12 9 15 9 on 1..9 with ceil_mode */
    y = pool_ref("{\"kernel\": 2, \"ceil_mode\": true, \"divisor_override\": 1}", 3, &oh, &r);
    tap_ok(r == 0 && oh == 2 && y->data[0] == 12 && y->data[1] == 9 && y->data[2] == 15 &&
               y->data[3] == 9,
           "divisor_override 1: window sums 12 9 15 9");
    nv_tensor_free(y);
    /* VJP with divisor_override 3, kernel 2 stride 1 on 3x3: x[1, 1] is in 4
     * windows, each passing gy / 3 */
    const nv_op_def *op = nv_op_find("avg_pool2d");
    nv_op_attrs a;
    char *msg;
    r = attrs("avg_pool2d", "{\"kernel\": 2, \"stride\": 1, \"divisor_override\": 3}", &a, &msg);
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 4, (int64_t[]){1, 1, 3, 3});
    for (int e = 0; e < 9; e++)
        x->data[e] = e + 1;
    const nv_tensor *in[1] = {x};
    double gy[4] = {3, 3, 3, 3}, gx[9];
    double *pg[1] = {gx};
    r |= nv_op_vjp(op, &a, 1, in, gy, pg, NULL);
    tap_ok(r == 0 && gx[4] == 4 && gx[0] == 1 && gx[1] == 2,
           "divisor_override VJP: centre 4, corner 1, edge 2 (gy 3 / 3 per window)");
    nv_tensor_free(x);
    r = attrs("avg_pool2d", "{\"divisor_override\": 0}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "'divisor_override' must be an integer in 1.."),
           "divisor_override 0 refused: %s", msg ? msg : "");
    free(msg);
    r = attrs("avg_pool2d", "{\"ceil_mode\": 1}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "'ceil_mode' must be true or false"),
           "ceil_mode 1 refused: %s", msg ? msg : "");
    free(msg);
    r = attrs("conv2d", "{\"ceil_mode\": true}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "unknown attribute 'ceil_mode'"), "conv2d takes no ceil_mode");
    free(msg);
    json_t *j = nv_op_attrs_to_json(op, &(nv_op_attrs){.kernel = 2, .stride = 2});
    json_t *k = nv_op_attrs_to_json(
        op, &(nv_op_attrs){.kernel = 2, .stride = 2, .ceil_mode = true, .divisor_override = 3});
    tap_ok(j && k && !json_object_get(j, "ceil_mode") && !json_object_get(j, "divisor_override") &&
               json_is_true(json_object_get(k, "ceil_mode")) &&
               json_integer_value(json_object_get(k, "divisor_override")) == 3,
           "attrs_to_json names ceil_mode and divisor_override only when set (older jobs keep "
           "their canonical form)");
    json_decref(j);
    json_decref(k);
}

static void test_lengths_errors(void)
{
    const nv_op_def *op = nv_op_find("conv2d");
    nv_op_attrs a;
    char *msg;
    attrs("conv2d", "{\"stride\": 2, \"padding\": 1, \"groups\": 2}", &a, &msg);
    nv_tensor *x = ints(2, 4, 8, 8, 1), *w = ints(6, 2, 3, 3, 2);
    const nv_tensor *in[2] = {x, w};
    /* 3 taps mod stride 2: offsets 0, 2 share residue 0; 3 output channels
     * per group; the weight sums N OH OW = 2 * 4 * 4 */
    tap_ok(nv_op_vjp_reduction_len(op, &a, 2, in, 0) == 3 * 2 * 2 &&
               nv_op_vjp_reduction_len(op, &a, 2, in, 1) == 32 &&
               nv_op_reduction_len(op, &a, 2, in) == 2 * 9 + 1,
           "conv2d reduction lengths: x %lld, weight %lld, forward %lld",
           (long long)nv_op_vjp_reduction_len(op, &a, 2, in, 0),
           (long long)nv_op_vjp_reduction_len(op, &a, 2, in, 1),
           (long long)nv_op_reduction_len(op, &a, 2, in));
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    attrs("conv2d", "{\"groups\": 3}", &a, &msg);
    int r = nv_op_infer(op, &a, 2, in, &nd, shape, err, sizeof err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "groups (3) must divide the input channels (4"),
           "groups not dividing C: %s", err);
    attrs("conv2d", "{\"groups\": 2}", &a, &msg);
    nv_tensor *w3 = ints(6, 3, 3, 3, 2);
    const nv_tensor *in3[2] = {x, w3};
    r = nv_op_infer(op, &a, 2, in3, &nd, shape, err, sizeof err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "C / groups = 4 / 2 = 2 input channels per group"),
           "weight channels not C / groups: %s", err);
    nv_tensor_free(w3);
    r = attrs("conv2d", "{\"groups\": 0}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "'groups'"), "groups 0 refused: %s", msg ? msg : "");
    free(msg);
    r = attrs("avg_pool2d", "{\"groups\": 2}", &a, &msg);
    tap_ok(r < 0 && msg && strstr(msg, "unknown attribute 'groups'"), "avg_pool2d takes no groups");
    free(msg);
    json_t *j =
        nv_op_attrs_to_json(nv_op_find("avg_pool2d"), &(nv_op_attrs){.kernel = 3, .stride = 3});
    tap_ok(j && json_is_false(json_object_get(j, "count_include_pad")),
           "attrs_to_json names count_include_pad");
    json_decref(j);
    nv_tensor_free(x), nv_tensor_free(w);
}

int main(void)
{
    test_conv();
    test_pool();
    test_pool_ceil();
    test_lengths_errors();
    return tap_done();
}
