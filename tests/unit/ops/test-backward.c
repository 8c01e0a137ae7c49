/* Reference backward (core/ref/backward.h) against independent oracles:
 * the complex-step derivative f'(x) = Im f(x + ih) / h (Squire & Trapp, SIAM
 * Review 40, 1998; Martins, Sturdza & Alonso, ACM TOMS 29, 2003), which has no
 * subtractive cancellation, so with h = 1e-30 it is exact to a few fp64 ulps,
 * computed here with complex forwards written independently of the reference;
 * hand-computed matmul and erf values; the structure maps and domains; and the
 * gradient job validation (gradspec.h). Also the fp64 checks (worker/kinds/gradient/gradient.h)
 * on every differentiable op. */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "core/spec/gradspec.h"
#include "core/spec/spec.h"
#include "worker/kinds/gradient/gradient.h"
#include "tests/unit/tap.h"

#define H 1e-30

static nv_tensor *vec(int ndim, const int64_t *shape, const double *v)
{
    nv_tensor *t = nv_tensor_new(NV_DT_FP64, ndim, shape);
    for (int64_t e = 0; t && e < t->numel; e++)
        t->data[e] = v ? v[e] : 0;
    return t;
}

/* ---- elementwise ---- */

static double complex cf(const char *op, double complex z)
{
    if (!strcmp(op, "exp"))
        return cexp(z);
    if (!strcmp(op, "exp2"))
        return cexp(z * M_LN2);
    if (!strcmp(op, "expm1"))
        return cexp(z) - 1;
    if (!strcmp(op, "log"))
        return clog(z);
    if (!strcmp(op, "log2"))
        return clog(z) / M_LN2;
    if (!strcmp(op, "log1p"))
        return clog(1 + z);
    if (!strcmp(op, "sin"))
        return csin(z);
    if (!strcmp(op, "cos"))
        return ccos(z);
    if (!strcmp(op, "tanh"))
        return ctanh(z);
    if (!strcmp(op, "sigmoid"))
        return 1 / (1 + cexp(-z));
    if (!strcmp(op, "silu"))
        return z / (1 + cexp(-z));
    if (!strcmp(op, "sqrt"))
        return csqrt(z);
    if (!strcmp(op, "rsqrt"))
        return 1 / csqrt(z);
    if (!strcmp(op, "reciprocal"))
        return 1 / z;
    if (!strcmp(op, "neg"))
        return -z;
    /* gelu, tanh form */
    return 0.5 * z * (1 + ctanh(0.79788456080286535588 * (z + 0.044715 * z * z * z)));
}

static void test_unary(void)
{
    static const char *const ops[] = {"exp",   "exp2",       "expm1", "log",     "log2", "log1p",
                                      "sin",   "cos",        "tanh",  "sigmoid", "silu", "sqrt",
                                      "rsqrt", "reciprocal", "neg",   "gelu",    NULL};
    static const double xs[] = {0.3, 1.7, 2.5, 0.61};
    for (int k = 0; ops[k]; k++) {
        const nv_op_def *op = nv_op_find(ops[k]);
        nv_op_attrs a;
        json_t *attrs = !strcmp(ops[k], "gelu") ? json_pack("{s:s}", "approximate", "tanh") : NULL;
        nv_op_parse_attrs(op, attrs, &a, NULL);
        json_decref(attrs);
        int64_t n = 4;
        nv_tensor *x = vec(1, &n, xs);
        double gy[4] = {1, -0.5, 2, 0.25}, gx[4], mag[4];
        double *g[1] = {gx}, *m[1] = {mag};
        int r = nv_op_vjp(op, &a, 1, (const nv_tensor *const *)&x, gy, g, m);
        double worst = 0;
        for (int e = 0; e < 4; e++) {
            double cs = cimag(cf(ops[k], xs[e] + I * H)) / H * gy[e];
            worst = fmax(worst, fabs(gx[e] - cs) / fmax(fabs(cs), 1e-300));
        }
        /* fp64 evaluation of a closed form: a few ulps (4 ulps = 2^-50). */
        tap_ok(r == 0 && worst <= 0x1p-50, "%s: VJP = complex-step derivative (rel err %.2g)",
               ops[k], worst);
        nv_tensor_free(x);
    }
    /* erf'(0.5) = 2/sqrt(pi) e^-0.25 = 0.87878257893544476 (hand value, 17 digits). */
    const nv_op_def *op = nv_op_find("erf");
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    int64_t n = 1;
    double half = 0.5, gy = 1, gx;
    double *g[1] = {&gx};
    nv_tensor *x = vec(1, &n, &half);
    nv_op_vjp(op, &a, 1, (const nv_tensor *const *)&x, &gy, g, NULL);
    tap_ok(fabs(gx - 0.87878257893544476) <= 2e-16, "erf'(0.5) = %.17g", gx);
    nv_tensor_free(x);
}

/* ---- row-wise ops: complex forwards of one [R, C] input, last axis ---- */

typedef struct rowcase {
    const char *op;
    int n_in; /* x, then weight, bias for the norms */
} rowcase;

static void cforward(const char *op, int R, int C, const double complex *x, const double complex *w,
                     const double complex *b, const double *tgt, double complex *y)
{
    for (int r = 0; r < R; r++) {
        const double complex *xr = x + r * C;
        double complex s = 0, q = 0, m = 0, e = 0;
        for (int j = 0; j < C; j++)
            s += xr[j], q += xr[j] * xr[j], e += cexp(xr[j]);
        m = s / C;
        if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax"))
            for (int j = 0; j < C; j++)
                y[r * C + j] = !strcmp(op, "softmax") ? cexp(xr[j]) / e : xr[j] - clog(e);
        else if (!strcmp(op, "logsumexp"))
            y[r] = clog(e);
        else if (!strcmp(op, "cross_entropy"))
            y[r] = clog(e) - xr[(int)tgt[r]];
        else if (!strcmp(op, "norm2"))
            y[r] = csqrt(q);
        else if (!strcmp(op, "var")) {
            double complex v = 0;
            for (int j = 0; j < C; j++)
                v += (xr[j] - m) * (xr[j] - m);
            y[r] = v / C;
        } else if (!strcmp(op, "layer_norm")) {
            double complex v = 0;
            for (int j = 0; j < C; j++)
                v += (xr[j] - m) * (xr[j] - m);
            double complex rs = 1 / csqrt(v / C + 1e-5);
            for (int j = 0; j < C; j++)
                y[r * C + j] = (xr[j] - m) * rs * w[j] + b[j];
        } else { /* rms_norm */
            double complex rs = 1 / csqrt(q / C + 1e-5);
            for (int j = 0; j < C; j++)
                y[r * C + j] = xr[j] * rs * w[j];
        }
    }
}

static void test_rows(void)
{
    static const rowcase cases[] = {{"softmax", 1},       {"log_softmax", 1}, {"logsumexp", 1},
                                    {"cross_entropy", 2}, {"norm2", 1},       {"var", 1},
                                    {"layer_norm", 3},    {"rms_norm", 2}};
    enum { R = 3, C = 5 };
    double x[R * C], w[C], b[C], tgt[R] = {0, 4, 2}, gy[R * C];
    for (int e = 0; e < R * C; e++)
        x[e] = sin(1.3 * e + 0.2) * 2, gy[e] = cos(0.7 * e);
    for (int j = 0; j < C; j++)
        w[j] = 0.5 + 0.25 * j, b[j] = 0.1 * j - 0.2;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *name = cases[k].op;
        const nv_op_def *op = nv_op_find(name);
        nv_op_attrs a;
        nv_op_parse_attrs(op, NULL, &a, NULL);
        int64_t sx[2] = {R, C}, sc = C, sr = R;
        nv_tensor *in[3] = {vec(2, sx, x), NULL, NULL};
        if (!strcmp(name, "cross_entropy")) {
            in[1] = vec(1, &sr, tgt);
            in[1]->dtype = NV_DT_INT32;
        } else if (cases[k].n_in > 1) {
            in[1] = vec(1, &sc, w);
            in[2] = cases[k].n_in > 2 ? vec(1, &sc, b) : NULL;
        }
        bool keeps = !strcmp(name, "softmax") || !strcmp(name, "log_softmax") ||
                     !strcmp(name, "layer_norm") || !strcmp(name, "rms_norm");
        int n_out = keeps ? R * C : R;
        double gx[3][R * C];
        double *g[3] = {gx[0], gx[1], gx[2]};
        int r = nv_op_vjp(op, &a, cases[k].n_in, (const nv_tensor *const *)in, gy, g, NULL);
        double worst = 0;
        for (int i = 0; i < cases[k].n_in; i++) {
            if (!strcmp(name, "cross_entropy") && i == 1)
                continue;
            int n = i == 0 ? R * C : C;
            for (int e = 0; e < n; e++) {
                double complex cx[R * C], cw[C], cb[C], y[R * C];
                for (int t = 0; t < R * C; t++)
                    cx[t] = x[t];
                for (int t = 0; t < C; t++)
                    cw[t] = w[t], cb[t] = b[t];
                double complex *tgt_v = i == 0 ? cx : i == 1 ? cw : cb;
                tgt_v[e] += I * H;
                cforward(name, R, C, cx, cw, cb, tgt, y);
                double cs = 0, scale = 0;
                for (int o = 0; o < n_out; o++)
                    cs += gy[o] * cimag(y[o]) / H, scale += fabs(gy[o] * cimag(y[o]) / H);
                worst = fmax(worst, fabs(g[i][e] - cs) / fmax(scale, 1e-300));
            }
        }
        /* closed forms vs complex step: sums of a few terms, 2^-48 of their magnitude. */
        tap_ok(r == 0 && worst <= 0x1p-48,
               "%s: VJP of every input = complex-step "
               "(err %.2g of sum |terms|)",
               name, worst);
        for (int i = 0; i < 3; i++)
            nv_tensor_free(in[i]);
    }
}

static void test_matmul(void)
{
    const nv_op_def *op = nv_op_find("matmul");
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    int64_t s[2] = {2, 2};
    double A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8}, G[4] = {1, 0, 0, 1}, gA[4], gB[4];
    nv_tensor *in[2] = {vec(2, s, A), vec(2, s, B)};
    double *g[2] = {gA, gB};
    nv_op_vjp(op, &a, 2, (const nv_tensor *const *)in, G, g, NULL);
    /* gC = I: gA = B^T, gB = A^T (hand-computed). */
    tap_ok(gA[0] == 5 && gA[1] == 7 && gA[2] == 6 && gA[3] == 8, "matmul: gA = gC B^T");
    tap_ok(gB[0] == 1 && gB[1] == 3 && gB[2] == 2 && gB[3] == 4, "matmul: gB = A^T gC");
    nv_jac_map *m = NULL;
    nv_jac_map_new(op, &a, 2, (const nv_tensor *const *)in, 1, &m);
    /* C[m, n] depends on column n of B: B[1, 0] is group 0 (column 0), position 1. */
    tap_ok(m && m->n_pos == 2 && m->n_groups == 2 && m->in_group[2] == 0 && m->in_pos[2] == 1 &&
               m->out_group[1] == 1,
           "matmul: B's Jacobian groups are its columns");
    nv_jac_map_free(m);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
}

static void test_structure_and_domain(void)
{
    const nv_op_def *sm = nv_op_find("softmax"), *ln = nv_op_find("layer_norm");
    nv_op_attrs a;
    nv_op_parse_attrs(sm, NULL, &a, NULL);
    int64_t s[2] = {3, 4}, c = 4;
    nv_tensor *x = vec(2, s, NULL), *w = vec(1, &c, NULL), *b = vec(1, &c, NULL);
    nv_jac_map *m = NULL;
    nv_jac_map_new(sm, &a, 1, (const nv_tensor *const *)&x, 0, &m);
    tap_ok(m && m->n_groups == 3 && m->n_pos == 4 && m->out_group[6] == 1 && m->in_pos[6] == 2,
           "softmax [3, 4]: 3 row groups of 4 positions");
    nv_jac_map_free(m);
    const nv_tensor *in[3] = {x, w, b};
    nv_jac_map_new(ln, &a, 3, in, 1, &m);
    tap_ok(m && m->n_groups == 4 && m->n_pos == 1 && m->out_group[5] == 1,
           "layer_norm weight: one group per column");
    nv_jac_map_free(m);
    tap_ok(nv_op_jac_kind(sm, &a) == NV_JAC_ROW_BLOCK &&
               nv_op_jac_kind(nv_op_find("tanh"), &a) == NV_JAC_DIAGONAL,
           "declared kinds: softmax row_block, tanh diagonal");
    /* relu at 0 and a max tie are moved off the kink. */
    int64_t n = 3;
    double v[3] = {0, -0.0, 1};
    nv_tensor *r = vec(1, &n, v);
    nv_op_grad_domain(nv_op_find("relu"), &a, 1, &r);
    tap_ok(r->data[0] == 0.25 && r->data[1] == -0.25 && r->data[2] == 1,
           "relu domain: 0 -> 0.25, -0 -> -0.25, 1 kept");
    double t[3] = {2, 2, 1};
    nv_tensor *mx = vec(1, &n, t);
    nv_op_grad_domain(nv_op_find("max"), &a, 1, &mx);
    tap_ok(mx->data[0] == 3 && mx->data[1] == 2, "max domain: the tie 2, 2 becomes 3, 2");
    nv_tensor_free(r);
    nv_tensor_free(mx);
    nv_tensor_free(x);
    nv_tensor_free(w);
    nv_tensor_free(b);
}

/* embedding's weight gradient sums the gy rows of repeated ids exactly: ids
 * {1, 0, 1, 1} with gy rows 1e16, 5, 1, -1e16 give row 1 = 1e16 + 1 - 1e16 = 1
 * (an fp64 left-to-right sum gives 0) and row 0 = 5; the permutations
 * (transpose) route each gy to its source: gx = gy^T. */
static void test_layout_vjp(void)
{
    const nv_op_def *emb = nv_op_find("embedding");
    nv_op_attrs a;
    nv_op_parse_attrs(emb, NULL, &a, NULL);
    int64_t ws[2] = {3, 1}, is[1] = {4};
    nv_tensor *w = nv_tensor_new(NV_DT_FP64, 2, ws), *ids = nv_tensor_new(NV_DT_INT32, 1, is);
    double idv[4] = {1, 0, 1, 1}, gy[4] = {1e16, 5, 1, -1e16}, g[3] = {-7, -7, -7};
    for (int e = 0; e < 4; e++)
        ids->data[e] = idv[e];
    const nv_tensor *in[2] = {w, ids};
    double *gx[2] = {g, NULL};
    int r = nv_op_vjp(emb, &a, 2, in, gy, gx, NULL);
    tap_ok(r == 0 && g[0] == 5 && g[1] == 1 && g[2] == 0,
           "embedding VJP: repeated ids summed exactly (got %g %g %g)", g[0], g[1], g[2]);
    const nv_op_def *tr = nv_op_find("transpose");
    int64_t ts[2] = {2, 3};
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 2, ts);
    double gt[6] = {1, 2, 3, 4, 5, 6}, gxt[6];
    const nv_tensor *tin[1] = {x};
    double *tgx[1] = {gxt};
    r = nv_op_vjp(tr, &a, 1, tin, gt, tgx, NULL);
    /* gy is [3, 2]: gx[i][j] = gy[j][i] */
    tap_ok(r == 0 && gxt[0] == 1 && gxt[1] == 3 && gxt[2] == 5 && gxt[3] == 2 && gxt[4] == 4 &&
               gxt[5] == 6,
           "transpose VJP is the transpose of gy");
    nv_tensor_free(w);
    nv_tensor_free(ids);
    nv_tensor_free(x);
}

/* Every differentiable op passes the fp64 formula check (full and fast) and
 * second order on random inputs in its domain. */
static void test_checks(void)
{
    size_t n;
    const nv_op_def *ops = nv_op_all(&n);
    int bad = 0, tried = 0;
    for (size_t k = 0; k < n; k++) {
        nv_op_attrs a;
        nv_op_parse_attrs(&ops[k], NULL, &a, NULL);
        if (!nv_op_has_backward(&ops[k], &a))
            continue;
        bool mm = ops[k].kind == NV_OPK_MATMUL;
        int64_t s2[3] = {mm ? 2 : 3, 4, 5}, c = 4, r = 3;
        nv_tensor *in[3] = {0};
        int n_in = ops[k].n_inputs;
        for (int i = 0; i < n_in; i++) {
            bool param = ops[k].kind == NV_OPK_REDUCE && i > 0;
            /* merge_heads takes [H, T, Dh], max_pool2d, avg_pool2d and conv2d
             * [N, C, H, W] (conv2d's weight [Co, C, kh, kw]); embedding's ids
             * index its 3 weight rows */
            bool heads3 = !strcmp(ops[k].name, "merge_heads");
            bool conv = ops[k].kind == NV_OPK_CONV;
            bool pool4 = !strcmp(ops[k].name, "max_pool2d") || conv;
            int64_t n_cls = !strcmp(ops[k].name, "embedding") ? 3 : 4;
            in[i] = param            ? vec(1, ops[k].inputs[i].is_index ? &r : &c, NULL)
                    : mm && i == 1   ? vec(2, (int64_t[]){4, 5}, NULL)
                    : conv && i == 1 ? vec(4, (int64_t[]){3, 2, 3, 3}, NULL)
                    : pool4          ? vec(4, (int64_t[]){1, 2, 4, 4}, NULL)
                                     : vec(heads3 ? 3 : 2, s2, NULL);
            for (int64_t e = 0; e < in[i]->numel; e++)
                in[i]->data[e] = ops[k].inputs[i].is_index ? e % n_cls : sin(3.1 * e + i) * 1.5;
            if (ops[k].inputs[i].is_index)
                in[i]->dtype = NV_DT_INT32;
        }
        if (mm)
            in[0]->shape[1] = 4, in[0]->shape[0] = 2, in[0]->numel = 8;
        nv_op_grad_domain(&ops[k], &a, n_in, in);
        double gy[64];
        for (int e = 0; e < 64; e++)
            gy[e] = cos(e * 0.9);
        nvw_grad_problem p = {.op = &ops[k],
                              .attrs = &a,
                              .n_in = n_in,
                              .in = in,
                              .gy = gy,
                              .eps = 1e-6,
                              .atol = 1e-5,
                              .rtol = 1e-3,
                              .seed = 3};
        for (int i = 0; i < n_in; i++) {
            if (!nv_op_grad_input(&ops[k], i))
                continue;
            nvw_grad_report rf, st, rq, r2;
            int rc = nvw_grad_formula(&p, i, false, &rf, &st) |
                     nvw_grad_formula(&p, i, true, &rq, &st) | nvw_grad_second(&p, i, false, &r2);
            tried++;
            if (rc || !rf.passed || !rq.passed || !st.passed || !r2.passed) {
                bad++;
                tap_diag("%s input %d: full %d fast %d structure %d second %d", ops[k].name, i,
                         rf.passed, rq.passed, st.passed, r2.passed);
            }
        }
        for (int i = 0; i < n_in; i++)
            nv_tensor_free(in[i]);
    }
    tap_ok(bad == 0 && tried > 40, "fp64 checks pass for %d op inputs (%d failed)", tried, bad);
}

static void expect_invalid(const char *json, const char *ptr)
{
    json_error_t e;
    json_t *j = json_loads(json, 0, &e);
    char *p = NULL, *m = NULL;
    int r = nv_jobspec_validate(j, &p, &m);
    tap_ok(r == -EINVAL && p && !strcmp(p, ptr), "refused at %s: %s", ptr, m ? m : "(none)");
    free(p);
    free(m);
    json_decref(j);
}

static void test_spec(void)
{
    json_error_t e;
    json_t *ok = json_loads("{\"kind\":\"gradient\",\"op\":\"softmax\",\"dtypes\":[\"fp32\","
                            "\"bf16\"],\"shapes\":[[4,8]],\"order\":2,\"mode\":\"fast\","
                            "\"eps\":{\"value\":1e-7,\"reason\":\"steep\"}}",
                            0, &e);
    nv_gradspec *g = NULL;
    int r = nv_gradspec_parse(ok, &g, NULL, NULL);
    tap_ok(r == 0 && g->order == 2 && g->fast && g->eps.value == 1e-7 && g->eps.set &&
               g->atol.value == 1e-5 && g->base->n_cases == 2,
           "valid gradient spec parses");
    nv_gradspec_free(g);
    json_decref(ok);
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"cast\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"attrs\":{\"to\":\"bf16\"}}",
                   "/op");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp8_e4m3\"],"
                   "\"shapes\":[[4]]}",
                   "/dtypes/0");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"relu\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"inputs\":[\"normal\",\"near_zero\"]}",
                   "/inputs/1");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"order\":3}",
                   "/order");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"mode\":\"quick\"}",
                   "/mode");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"atol\":{\"value\":1e-3}}",
                   "/atol/reason");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"layouts\":[\"strided\"]}",
                   "/layouts");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"softmax\",\"dtypes\":[\"fp32\"],"
                   "\"shapes\":[[1,8192]]}",
                   "/shapes/0");
    expect_invalid("{\"kind\":\"gradient\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],\"shapes\":[[4]],"
                   "\"device_tolerance\":{\"metric\":\"ulp\",\"max_ulp\":1}}",
                   "/device_tolerance/reason_code");
}

int main(void)
{
    test_unary();
    test_rows();
    test_matmul();
    test_structure_and_domain();
    test_checks();
    test_layout_vjp();
    test_spec();
    return tap_done();
}
