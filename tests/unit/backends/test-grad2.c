/* Second order: the reference second-order VJP (core/ref/backward.h nv_op_vjp2)
 * against closed forms derived by hand, the symmetry of every op's Hessian
 * (u . H w = w . H u, a property no formula error keeps by chance), the emu's
 * double-backward entry (the reference rounded once, its refusals), and the
 * loader's ABI versions: a version-1 plugin loads without a double backward, a
 * version-3 one is refused naming both versions. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "test-emu.h"
#include "tests/unit/tap.h"
#include "worker/backends/loader.h"

#define INV_SQRT_2PI 0.39894228040143267794

static nv_tensor *vec(int ndim, const int64_t *shape, double (*f)(int64_t))
{
    nv_tensor *t = nv_tensor_new(NV_DT_FP64, ndim, shape);
    for (int64_t e = 0; t && e < t->numel; e++)
        t->data[e] = f(e);
    return t;
}

static double fx(int64_t e)
{
    return sin(1.3 * (double)e + 0.2) * 1.7;
}
static double fg(int64_t e)
{
    return cos(0.7 * (double)e);
}
static double fv(int64_t e)
{
    return sin(2.1 * (double)e + 1.0);
}
static double fw(int64_t e)
{
    return cos(1.9 * (double)e + 0.4);
}

static const nv_op_def *op_attrs(const char *name, const char *attrs, nv_op_attrs *a)
{
    const nv_op_def *op = nv_op_find(name);
    json_error_t je;
    json_t *j = attrs ? json_loads(attrs, 0, &je) : NULL;
    nv_op_parse_attrs(op, j, a, NULL);
    json_decref(j);
    return op;
}

/* Unary op: hx = gy f''(x) v against the closed form f2. */
static void unary_closed(const char *name, const char *attrs, double (*f2)(double))
{
    nv_op_attrs a;
    const nv_op_def *op = op_attrs(name, attrs, &a);
    int64_t n = 32;
    nv_tensor *x = vec(1, &n, fx);
    nv_op_grad_domain(op, &a, 1, &x);
    double gy[32], v[32], hx[32], mag[32];
    for (int e = 0; e < 32; e++)
        gy[e] = fg(e), v[e] = fv(e);
    const double *vs[1] = {v};
    double *hs[1] = {hx}, *ms[1] = {mag};
    int r = nv_op_vjp2(op, &a, 1, (const nv_tensor *const *)&x, gy, vs, hs, ms);
    double worst = 0;
    bool mag_ok = true;
    for (int e = 0; e < 32; e++) {
        double want = gy[e] * f2(x->data[e]) * v[e];
        worst = fmax(worst, fabs(hx[e] - want) / fmax(fabs(want), 1e-300));
        mag_ok = mag_ok && mag[e] >= fabs(hx[e]) * (1 - 1e-12);
    }
    tap_ok(r == 0 && worst < 1e-12 && mag_ok, "%s%s: gy f''(x) v (rel. err %.2g), mag >= |hx|",
           name, attrs ? attrs : "", worst);
    nv_tensor_free(x);
}

static double tanh2(double x)
{
    double t = tanh(x);
    return -2 * t * (1 - t * t);
}
static double sigmoid2(double x)
{
    double s = 1 / (1 + exp(-x));
    return s * (1 - s) * (1 - 2 * s);
}
static double gelu2(double x)
{
    return INV_SQRT_2PI * exp(-0.5 * x * x) * (2 - x * x);
}
static double gelu_tanh2(double x)
{
    /* d/dx of 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u = c (x + a x^3) */
    double c = sqrt(2 / M_PI), k = 0.044715, u = c * (x + k * x * x * x);
    double up = c * (1 + 3 * k * x * x), upp = 6 * c * k * x, t = tanh(u), s2 = 1 - t * t;
    return 0.5 * s2 * up + 0.5 * s2 * up + 0.5 * x * (-2 * t * s2 * up * up + s2 * upp);
}
static double silu2(double x)
{
    double s = 1 / (1 + exp(-x));
    return 2 * s * (1 - s) + x * s * (1 - s) * (1 - 2 * s);
}
static double erf2(double x)
{
    return -4 * x / sqrt(M_PI) * exp(-x * x);
}
static double log2nd(double x)
{
    return -1 / (x * x);
}
static double rsqrt2(double x)
{
    return 0.75 * pow(x, -2.5);
}

/* div (x / y): h = gy (fxy vy, fxy vx + fyy vy); pow at one element by hand. */
static void binary_closed(void)
{
    nv_op_attrs a;
    const nv_op_def *op = op_attrs("div", NULL, &a);
    int64_t n = 1;
    nv_tensor *x = vec(1, &n, fx), *y = vec(1, &n, fw);
    x->data[0] = 1.5, y->data[0] = -0.75;
    const nv_tensor *in[2] = {x, y};
    double gy = 0.5, v0 = 0.25, v1 = -2, h0, h1;
    const double *vs[2] = {&v0, &v1};
    double *hs[2] = {&h0, &h1};
    int r = nv_op_vjp2(op, &a, 2, in, &gy, vs, hs, NULL);
    /* f_xy = -1/y^2 = -16/9, f_yy = 2x/y^3 = -64/9 */
    double w0 = gy * (-16.0 / 9) * v1, w1 = gy * ((-16.0 / 9) * v0 + (-64.0 / 9) * v1);
    tap_ok(r == 0 && fabs(h0 - w0) < 1e-15 && fabs(h1 - w1) < 1e-14,
           "div: gy (f_xy v_y, f_xy v_x + f_yy v_y) = (%.17g, %.17g)", h0, h1);
    op = op_attrs("pow", NULL, &a);
    x->data[0] = 2,
    y->data[0] = 3; /* x^y: f_xx = 6x = 12, f_xy = x^2 (1 + 3 ln 2), f_yy = 8 ln^2 2 */
    r = nv_op_vjp2(op, &a, 2, in, &gy, vs, hs, NULL);
    w0 = gy * (12 * v0 + 4 * (1 + 3 * M_LN2) * v1);
    w1 = gy * (4 * (1 + 3 * M_LN2) * v0 + 8 * M_LN2 * M_LN2 * v1);
    tap_ok(r == 0 && fabs(h0 - w0) < 1e-13 && fabs(h1 - w1) < 1e-13, "pow: the 2x2 Hessian of x^y");
    nv_tensor_free(x);
    nv_tensor_free(y);
}

/* var and matmul, whose second-order VJPs are linear maps written by hand. */
static void linear_closed(void)
{
    nv_op_attrs a;
    const nv_op_def *op = op_attrs("var", NULL, &a);
    int64_t sh[2] = {1, 4};
    nv_tensor *x = vec(2, sh, fx);
    double gy = 1.5, v[4] = {1, -2, 0.5, 3}, hx[4];
    const double *vs[1] = {v};
    double *hs[1] = {hx};
    int r = nv_op_vjp2(op, &a, 1, (const nv_tensor *const *)&x, &gy, vs, hs, NULL);
    double mv = (1 - 2 + 0.5 + 3) / 4, worst = 0;
    for (int j = 0; j < 4; j++) /* gy 2/n (v_j - mean v) */
        worst = fmax(worst, fabs(hx[j] - gy * 0.5 * (v[j] - mv)));
    tap_ok(r == 0 && worst < 1e-15, "var: gy 2/n (v - mean(v)) (err %.2g)", worst);
    nv_tensor_free(x);
    op = op_attrs("matmul", NULL, &a);
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    nv_tensor *A = vec(2, sa, fx), *B = vec(2, sb, fw);
    const nv_tensor *in[2] = {A, B};
    double G[4] = {1, -1, 0.5, 2}, vA[6] = {1, 0, -1, 2, 0.5, 1}, vB[6] = {0, 1, 2, -1, 1, 3};
    double hA[6], hB[6];
    const double *vv[2] = {vA, vB};
    double *hh[2] = {hA, hB};
    r = nv_op_vjp2(op, &a, 2, in, G, vv, hh, NULL);
    worst = 0;
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++) { /* hA = G vB^T */
            double s = 0;
            for (int q = 0; q < 2; q++)
                s += G[m * 2 + q] * vB[k * 2 + q];
            worst = fmax(worst, fabs(hA[m * 3 + k] - s));
        }
    for (int k = 0; k < 3; k++)
        for (int q = 0; q < 2; q++) { /* hB = vA^T G */
            double s = 0;
            for (int m = 0; m < 2; m++)
                s += vA[m * 3 + k] * G[m * 2 + q];
            worst = fmax(worst, fabs(hB[k * 2 + q] - s));
        }
    tap_ok(r == 0 && worst < 1e-15, "matmul: hA = gC vB^T, hB = vA^T gC (err %.2g)", worst);
    nv_tensor_free(A);
    nv_tensor_free(B);
}

/* u . H w = w . H u for every op with a backward, all inputs at once. */
static void symmetry(void)
{
    size_t nops;
    const nv_op_def *ops = nv_op_all(&nops);
    int tried = 0, bad = 0;
    for (size_t k = 0; k < nops; k++) {
        nv_op_attrs a;
        nv_op_parse_attrs(&ops[k], NULL, &a, NULL);
        if (!nv_op_has_backward(&ops[k], &a))
            continue;
        bool mm = ops[k].kind == NV_OPK_MATMUL;
        int n_in = ops[k].n_inputs;
        int64_t s2[2] = {3, 5}, sa[2] = {3, 4}, sb[2] = {4, 5}, c = 5, r3 = 3;
        /* conv2d and avg_pool2d: x [1, 2, 4, 4], conv2d's weight [3, 2, 3, 3] */
        int64_t sx[4] = {1, 2, 4, 4}, sw[4] = {3, 2, 3, 3};
        bool conv = ops[k].kind == NV_OPK_CONV;
        nv_tensor *in[3] = {0};
        for (int i = 0; i < n_in; i++) {
            bool param = ops[k].kind == NV_OPK_REDUCE && i > 0;
            in[i] = param  ? vec(1, ops[k].inputs[i].is_index ? &r3 : &c, fw)
                    : mm   ? vec(2, i ? sb : sa, i ? fw : fx)
                    : conv ? vec(4, i ? sw : sx, i ? fw : fx)
                           : vec(2, s2, i ? fw : fx);
            if (ops[k].inputs[i].is_index) {
                in[i]->dtype = NV_DT_INT32;
                for (int64_t e = 0; e < in[i]->numel; e++)
                    in[i]->data[e] = (double)(e % 5);
            }
        }
        nv_op_grad_domain(&ops[k], &a, n_in, in);
        double gy[32], *u[3] = {0}, *w[3] = {0}, *hu[3] = {0}, *hw[3] = {0};
        for (int e = 0; e < 32; e++)
            gy[e] = fg(e);
        for (int i = 0; i < n_in; i++) {
            if (!nv_op_grad_input(&ops[k], i))
                continue;
            int64_t m = in[i]->numel;
            u[i] = malloc(sizeof(double) * (size_t)m), w[i] = malloc(sizeof(double) * (size_t)m);
            hu[i] = malloc(sizeof(double) * (size_t)m), hw[i] = malloc(sizeof(double) * (size_t)m);
            for (int64_t e = 0; e < m; e++)
                u[i][e] = fv(e + 7 * i), w[i][e] = fw(e + 3 * i);
        }
        int r = nv_op_vjp2(&ops[k], &a, n_in, (const nv_tensor *const *)in, gy,
                           (const double *const *)u, hu, NULL) |
                nv_op_vjp2(&ops[k], &a, n_in, (const nv_tensor *const *)in, gy,
                           (const double *const *)w, hw, NULL);
        double uhw = 0, whu = 0, sz = 0;
        for (int i = 0; i < n_in; i++)
            for (int64_t e = 0; u[i] && e < in[i]->numel; e++) {
                uhw += u[i][e] * hw[i][e], whu += w[i][e] * hu[i][e];
                sz += fabs(u[i][e] * hw[i][e]) + fabs(w[i][e] * hu[i][e]);
            }
        tried++;
        if (r || fabs(uhw - whu) > 1e-12 * (sz + 1e-300)) {
            bad++;
            tap_diag("%s: u.Hw %.17g, w.Hu %.17g", ops[k].name, uhw, whu);
        }
        for (int i = 0; i < n_in; i++) {
            nv_tensor_free(in[i]);
            free(u[i]), free(w[i]), free(hu[i]), free(hw[i]);
        }
    }
    tap_ok(bad == 0 && tried > 35, "u . H w = w . H u for %d ops (%d not)", tried, bad);
}

/* The emu's double backward: the reference rounded once to the storage dtype. */
static void emu_entry(void)
{
    emu_t e;
    char err[ERRLEN];
    emu_start(&e, "", err);
    double xs[4] = {0.5, -1.25, 2.0, 0.125}, gs[4] = {1, 0.5, -2, 3}, vs[4] = {-1, 2, 0.25, 1};
    nv_tensor *x = mk1(NV_DT_FP32, 4, xs), *gy = mk1(NV_DT_FP32, 4, gs),
              *v = mk1(NV_DT_FP32, 4, vs);
    nv_tensor_view xv, gv, vv, out;
    nvw_view_from_tensor(x, &xv), nvw_view_from_tensor(gy, &gv), nvw_view_from_tensor(v, &vv);
    memset(&out, 0, sizeof out);
    nv_double_backward_call c = {.op = "gelu",
                                 .attrs_json = "{}",
                                 .n_inputs = 1,
                                 .inputs = &xv,
                                 .n_saved = 1,
                                 .saved = &xv,
                                 .grad_output = &gv,
                                 .n_grads = 1,
                                 .grad_grads = &vv,
                                 .grad_inputs = &out};
    int r = e.tb->double_backward(e.ctx, &c, err, ERRLEN);
    nv_tensor *h = r == NV_OK ? nvw_tensor_from_view(&out, false) : NULL;
    bool exact = h && out.dtype == NV_DT_FP32;
    for (int k = 0; exact && k < 4; k++) {
        double want =
            nv_dtype_round(NV_DT_FP32, gs[k] * gelu2(xs[k]) * vs[k], &NV_ROUND_DEFAULT, 0);
        exact = h->data[k] == want;
    }
    tap_ok(r == NV_OK && exact,
           "emu gelu double backward: gy gelu''(x) v rounded once to fp32 (%s)",
           r == NV_OK ? "ok" : err);
    if (r == NV_OK)
        e.tb->release_tensor(e.ctx, &out);
    c.n_grads = 2;
    r = e.tb->double_backward(e.ctx, &c, err, ERRLEN);
    tap_ok(r == NV_E_INVALID && strstr(err, "1 gradients"), "a wrong number of directions: %s",
           err);
    emu_stop(&e);
    emu_start(&e, "inference_only=on", err);
    c.n_grads = 1;
    r = e.tb->double_backward(e.ctx, &c, err, ERRLEN);
    tap_ok(r == NV_E_UNSUPPORTED && strstr(err, "inference-only"),
           "an inference-only emu refuses double backward: %s", err);
    emu_stop(&e);
    nvw_view_free(&xv), nvw_view_free(&gv), nvw_view_free(&vv);
    nv_tensor_free(x), nv_tensor_free(gy), nv_tensor_free(v), nv_tensor_free(h);
}

static void loader_versions(void)
{
    nvw_backend *b = NULL;
    char err[512] = "";
    int r = nvw_backend_load("plugin:" PLUGIN_V1, &b, err, sizeof err);
    const nv_backend *t = r == 0 ? nvw_backend_table(b) : NULL;
    tap_ok(r == 0 && t && t->abi_version == 1 && !t->double_backward && !t->train && t->backward &&
               !strcmp(t->name, "abi_v1"),
           "a version-1 plugin loads, with no double backward or train (%s)", err);
    nvw_backend_free(b);
    b = NULL;
    r = nvw_backend_load("plugin:" PLUGIN_V3, &b, err, sizeof err);
    char future[32], ours[32];
    snprintf(future, sizeof future, "version %d", NV_BACKEND_ABI_VERSION + 1);
    snprintf(ours, sizeof ours, "version %d", NV_BACKEND_ABI_VERSION);
    tap_ok(r == -EINVAL && !b && strstr(err, future) && strstr(err, ours) &&
               strstr(err, PLUGIN_V3),
           "a plugin of the next ABI version is refused naming the file and both versions: %s",
           err);
    r = nvw_backend_load("plugin:" PLUGIN_RNGLESS, &b, err, sizeof err);
    t = r == 0 ? nvw_backend_table(b) : NULL;
    tap_ok(r == 0 && t && t->abi_version == 3 && !t->rng && t->train && t->double_backward,
           "a version-3 plugin loads with train and double backward but no rng entry (%s)", err);
    nvw_backend_free(b);
    b = NULL;
    r = nvw_backend_load("plugin:" PLUGIN_V4, &b, err, sizeof err);
    t = r == 0 ? nvw_backend_table(b) : NULL;
    tap_ok(r == 0 && t && t->abi_version == 4 && t->rng && !t->configure,
           "a version-4 plugin loads with rng but no configure entry (%s)", err);
    nvw_backend_free(b);
}

int main(void)
{
    unary_closed("tanh", NULL, tanh2);
    unary_closed("sigmoid", NULL, sigmoid2);
    unary_closed("gelu", NULL, gelu2);
    unary_closed("gelu", "{\"approximate\": \"tanh\"}", gelu_tanh2);
    unary_closed("silu", NULL, silu2);
    unary_closed("erf", NULL, erf2);
    unary_closed("log", NULL, log2nd);
    unary_closed("rsqrt", NULL, rsqrt2);
    binary_closed();
    linear_closed();
    symmetry();
    emu_entry();
    loader_versions();
    return tap_done();
}
