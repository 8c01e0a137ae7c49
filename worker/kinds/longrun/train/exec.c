/* Executors of the long-run tape: the device (the backend's forward and backward
 * entries, tensors encoded across the ABI) and the host fp64 reference (the
 * catalog's plain fp64 forward and reference VJP). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "train_internal.h"

static int parse_attrs(nvw_exec *ex, const nv_op_def *op, const char *attrs, nv_op_attrs *a)
{
    json_error_t je;
    json_t *o = json_loads(attrs ? attrs : "{}", 0, &je);
    char *msg = NULL;
    int r = nv_op_parse_attrs(op, o, a, &msg);
    json_decref(o);
    if (r < 0) {
        snprintf(ex->err, sizeof ex->err, "attrs '%s' of op '%s': %s", attrs, op->name,
                 msg ? msg : "invalid");
        free(msg);
        return -EINVAL;
    }
    return 0;
}

/* ex->err = fmt(name) + ex->err, truncated to fit. */
static void prefix_err(nvw_exec *ex, const char *fmt, const char *name)
{
    char m[sizeof ex->err + 128];
    int k = snprintf(m, sizeof m, fmt, name);
    if (k < 0 || (size_t)k >= sizeof m)
        return;
    snprintf(m + k, sizeof m - (size_t)k, "%s", ex->err);
    memcpy(ex->err, m, sizeof ex->err - 1);
    ex->err[sizeof ex->err - 1] = 0;
}

nv_tensor *nvw_tensor_like(const nv_tensor *t, nv_dtype dt)
{
    return nv_tensor_new(dt, t->ndim, t->shape);
}

/* Row-major at offset 0: element i is data[i]. */
static bool row_major(const nv_tensor *t)
{
    int64_t st = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != st)
            return false;
        st *= t->shape[d];
    }
    return t->offset == 0;
}

/* ---- tensors across the ABI ----
 * views.h's nvw_view_from_tensor / nvw_tensor_from_view, with fast paths for
 * contiguous fp32 (a conversion, as views.c stores it) and bf16 (the AMP
 * dtype): bf16 is fp32 without its low 16 fraction bits, so a bf16 value's
 * encoding is the upper half of its fp32 encoding and decoding is a shift. Elements that are NaN (payloads are nv_dtype_encode's
 * business, IEEE 754-2019 §6.2.3) or not exact bf16 values go through the
 * general encoder and decoder, so the bytes and values are views.h's
 * (test-train-exec compares them over all 65536 patterns). */
static void view_header(const nv_tensor *t, void *buf, nv_tensor_view *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->dtype = (int32_t)t->dtype;
    ret->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        ret->shape[d] = t->shape[d], ret->strides[d] = t->strides[d];
    ret->data = buf;
}

int nvw_exec_to_view(const nv_tensor *t, nv_tensor_view *ret)
{
    if ((t->dtype != NV_DT_BF16 && t->dtype != NV_DT_FP32) || !row_major(t) || t->numel == 0)
        return nvw_view_from_tensor(t, ret);
    if (t->dtype == NV_DT_FP32) { /* views.c stores fp32 by conversion: the same bytes */
        float *f = malloc((size_t)t->numel * sizeof *f);
        if (!f)
            return -ENOMEM;
        for (int64_t i = 0; i < t->numel; i++)
            f[i] = (float)t->data[i];
        view_header(t, f, ret);
        return 0;
    }
    uint16_t *buf = malloc((size_t)t->numel * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    for (int64_t i = 0; i < t->numel; i++) {
        double v = t->data[i];
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        if ((double)f == v && !(u & 0xffff))
            buf[i] = (uint16_t)(u >> 16);
        else
            buf[i] = (uint16_t)nv_dtype_encode(NV_DT_BF16, v, &NV_ROUND_DEFAULT, 0);
    }
    view_header(t, buf, ret);
    return 0;
}

nv_tensor *nvw_exec_from_view(const nv_tensor_view *v)
{
    bool fast = v->dtype == NV_DT_BF16 && v->data && v->ndim >= 0 && v->ndim <= NV_MAX_DIMS;
    int64_t n = 1;
    for (int d = v->ndim - 1; fast && d >= 0; d--) {
        fast = v->shape[d] >= 0 && (v->shape[d] <= 1 || v->strides[d] == n);
        n *= v->shape[d];
    }
    nv_tensor *t = fast ? nv_tensor_new_uninit(NV_DT_BF16, v->ndim, v->shape) : NULL;
    if (!t)
        return nvw_tensor_from_view(v, false);
    const unsigned char *p = v->data;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);            /* a device's buffer need not be aligned */
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) { /* NaN */
            t->data[i] = nv_dtype_decode(NV_DT_BF16, h, false);
            continue;
        }
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        t->data[i] = f;
    }
    return t;
}

/* ---- the host reference's fp64 2-D matmul ----
 * C[M,N] = op(A) op(B), every element summed over k = 0 .. K-1 in that order,
 * one product rounded then one add rounded per step, from +0: the same values,
 * bit for bit, as the catalog's nv_op_forward_f64 / nv_op_vjp loops
 * (core/ref/ref_backward_rows.c). The speed comes only from the schedule:
 * blocks of 4 rows x 8 columns of C stay in registers across the whole k loop
 * (GCC vector extensions; the target_clones attribute adds an AVX2 build picked
 * at load time), B is read as contiguous rows (a transposed B is copied first),
 * and the k order of each element is untouched, so no value changes (Inf and
 * NaN included: every product is added, as there). ISO C11
 * leaves floating-point contraction off (-ffp-contract=off), so a*b + c is never
 * fused into an fma, in the vector code as in the scalar one. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define NVW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NVW_CLONES
#endif

typedef double v4d __attribute__((vector_size(32)));

/* Rows i0 .. i0+3, columns j0 .. j0+7 of C; A(i, k) = a[i * asi + k * ask]. */
static inline void mm_tile(const double *restrict a, int64_t asi, int64_t ask,
                           const double *restrict b, double *restrict c, int64_t i0, int64_t j0,
                           int64_t K, int64_t N)
{
    v4d acc[4][2];
    memset(acc, 0, sizeof acc);
    const double *a0 = a + i0 * asi;
    for (int64_t k = 0; k < K; k++) {
        v4d b0, b1; /* unaligned loads */
        memcpy(&b0, b + k * N + j0, sizeof b0);
        memcpy(&b1, b + k * N + j0 + 4, sizeof b1);
        for (int r = 0; r < 4; r++) {
            double av = a0[r * asi + k * ask];
            acc[r][0] += av * b0;
            acc[r][1] += av * b1;
        }
    }
    for (int r = 0; r < 4; r++)
        memcpy(c + (i0 + r) * N + j0, acc[r], sizeof acc[r]);
}

NVW_CLONES
static void mm_blocked(const double *restrict a, int64_t asi, int64_t ask, const double *restrict b,
                       double *restrict c, int64_t M, int64_t K, int64_t N)
{
    int64_t M4 = M - M % 4, N8 = N - N % 8;
    for (int64_t i = 0; i < M4; i += 4)
        for (int64_t j = 0; j < N8; j += 8)
            mm_tile(a, asi, ask, b, c, i, j, K, N);
    for (int64_t i = 0; i < M; i++) /* the edges, element by element */
        for (int64_t j = i < M4 ? N8 : 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += a[i * asi + k * ask] * b[k * N + j];
            c[i * N + j] = s;
        }
}

/* C[M,N] = op(A) op(B), row-major operands, transposes by index. Returns 0 or
 * -ENOMEM (a transposed B is copied to contiguous rows). */
static int mm(const double *a, bool ta, const double *b, bool tb, double *c, int64_t M, int64_t K,
              int64_t N)
{
    double *bt = NULL;
    if (tb) { /* B given as [N, K]: rows of op(B) made contiguous (an exact copy) */
        bt = malloc((size_t)(K * N > 0 ? K * N : 1) * sizeof *bt);
        if (!bt)
            return -ENOMEM;
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++)
                bt[k * N + j] = b[j * K + k];
        b = bt;
    }
    mm_blocked(a, ta ? 1 : K, ta ? M : 1, b, c, M, K, N);
    free(bt);
    return 0;
}

static bool plain_mm(const nv_op_def *op, int n, nv_tensor *const *in)
{
    return strcmp(op->name, "matmul") == 0 && n == 2 && in[0]->ndim == 2 && in[1]->ndim == 2 &&
           in[0]->shape[1] == in[1]->shape[0];
}

static int host_forward(nvw_exec *ex, const nv_op_def *op, const nv_op_attrs *a, int n,
                        nv_tensor *const *in, nv_tensor **ret)
{
    if (plain_mm(op, n, in)) {
        int64_t sh[2] = {in[0]->shape[0], in[1]->shape[1]};
        nv_tensor *o = nv_tensor_new(NV_DT_FP64, 2, sh);
        if (!o)
            return -ENOMEM;
        if (mm(in[0]->data, false, in[1]->data, false, o->data, sh[0], in[0]->shape[1], sh[1])) {
            nv_tensor_free(o);
            return -ENOMEM;
        }
        *ret = o;
        return 0;
    }
    int nd;
    int64_t shape[NV_MAX_DIMS];
    int r =
        nv_op_infer(op, a, n, (const nv_tensor *const *)in, &nd, shape, ex->err, sizeof ex->err);
    if (r < 0)
        return -EINVAL;
    nv_tensor *out = nv_tensor_new(NV_DT_FP64, nd, shape);
    if (!out)
        return -ENOMEM;
    r = nv_op_forward_f64(op, a, n, (const nv_tensor *const *)in, out->data);
    if (r < 0) {
        snprintf(ex->err, sizeof ex->err, "host reference forward of '%s' failed (%d)", op->name,
                 r);
        nv_tensor_free(out);
        return -EIO;
    }
    *ret = out;
    return 0;
}

static void free_views(nv_tensor_view *v, int n)
{
    for (int i = 0; i < n; i++)
        nvw_view_free(&v[i]);
}

static int dev_forward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                       nv_tensor *const *in, nv_dtype out_dt, nv_tensor **ret)
{
    nv_tensor_view iv[NV_OP_MAX_INPUTS];
    memset(iv, 0, sizeof iv);
    for (int i = 0; i < n; i++)
        if (nvw_exec_to_view(in[i], &iv[i]) < 0) {
            free_views(iv, i);
            return -ENOMEM;
        }
    nv_tensor_view out;
    memset(&out, 0, sizeof out);
    nv_op_call c = {.op = op->name,
                    .attrs_json = attrs ? attrs : "{}",
                    .out_dtype = out_dt,
                    .n_inputs = n,
                    .inputs = iv,
                    .n_outputs = 1,
                    .outputs = &out};
    int r = ex->table->forward(ex->ctx, &c, ex->err, sizeof ex->err);
    ex->calls++;
    free_views(iv, n);
    if (r < 0) {
        prefix_err(ex, "device forward of '%s' failed: ", op->name);
        return -EIO;
    }
    nv_tensor *t = nvw_exec_from_view(&out);
    if (ex->table->release_tensor)
        ex->table->release_tensor(ex->ctx, &out);
    if (!t) {
        snprintf(ex->err, sizeof ex->err, "device forward of '%s' returned an invalid tensor",
                 op->name);
        return -EIO;
    }
    *ret = t;
    return 0;
}

/* An input of a host kernel: contiguous fp64 data. A row-major tensor at offset
 * 0 is read in place through a header copy (dtype set to fp64: fp32 masters are
 * evaluated in fp64, their values unchanged); any other view is copied. */
typedef struct host_in {
    nv_tensor hdr;
    nv_tensor *owned;
} host_in;

static nv_tensor *host_in_get(host_in *h, const nv_tensor *t, bool as_f64)
{
    h->owned = NULL;
    if (row_major(t))
        h->hdr = *t;
    else if ((h->owned = nv_tensor_contiguous(t)))
        h->hdr = *h->owned;
    else
        return NULL;
    if (as_f64)
        h->hdr.dtype = NV_DT_FP64;
    return &h->hdr;
}

static void host_in_done(host_in *h, int n)
{
    for (int i = 0; i < n; i++) {
        nv_tensor_free(h[i].owned);
        h[i].owned = NULL;
    }
}

/* The declared-precision reference's one rounding of an op's exact output. */
static void round_declared(nv_tensor *t, nv_dtype dt)
{
    if (dt != NV_DT_FP64)
        for (int64_t i = 0; i < t->numel; i++)
            t->data[i] = nv_dtype_round(dt, t->data[i], &NV_ROUND_DEFAULT, 0);
    t->dtype = dt;
}

int nvw_exec_forward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                     nv_tensor *const *in, nv_dtype out_dt, nv_tensor **ret)
{
    if (!ex->host)
        return dev_forward(ex, op, attrs, n, in, out_dt, ret);
    nv_op_attrs a;
    int r = parse_attrs(ex, op, attrs, &a);
    if (r < 0)
        return r;
    host_in h[NV_OP_MAX_INPUTS];
    nv_tensor *cin[NV_OP_MAX_INPUTS] = {0};
    int got = 0;
    for (; got < n && r == 0; got++)
        if (!(cin[got] = host_in_get(&h[got], in[got], !op->inputs[got].is_index)))
            r = -ENOMEM;
    if (r == 0)
        r = host_forward(ex, op, &a, n, cin, ret);
    host_in_done(h, got);
    if (r == 0 && ex->declared)
        round_declared(*ret, out_dt);
    ex->calls++;
    return r;
}

static bool is_lowp(nv_dtype dt)
{
    return dt != NV_DT_FP64 && dt != NV_DT_FP32 && dt != NV_DT_INT32 && dt != NV_DT_INT8;
}

void nvw_exec_count_lowp(nvw_exec *ex, const nv_tensor *g)
{
    if (!is_lowp(g->dtype))
        return;
    bool rm = row_major(g);
    for (int64_t i = 0; i < g->numel; i++)
        ex->lowp_grad_zero += g->data[rm ? i : nv_tensor_offset_linear(g, i)] == 0;
    ex->lowp_grad_elems += g->numel;
}

/* gelu's VJP (erf form) on the host: gx = gy * f'(x) with f'(x) the very
 * expression of the catalog's reference (core/ref/ref_backward.c, d_unary),
 * so the values are the same bit for bit; nv_op_vjp also evaluates the
 * magnitude bound (an erf per element) that training never asks for. */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */

static void gelu_vjp(const double *x, const double *gy, double *gx, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        double phi = INV_SQRT_2PI * exp(-0.5 * x[e] * x[e]);
        gx[e] = gy[e] * (0.5 * erfc(-x[e] / M_SQRT2) + x[e] * phi);
    }
}

static int host_backward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                         nv_tensor *const *in, const nv_tensor *gy, nv_tensor **gx)
{
    nv_op_attrs a;
    int r = parse_attrs(ex, op, attrs, &a);
    if (r < 0)
        return r;
    host_in h[NV_OP_MAX_INPUTS + 1];
    nv_tensor *cin[NV_OP_MAX_INPUTS] = {0};
    double *gxd[NV_OP_MAX_INPUTS] = {0};
    int got = 0;
    nv_tensor *cgy = host_in_get(&h[NV_OP_MAX_INPUTS], gy, false);
    if (!cgy)
        r = -ENOMEM;
    for (; got < n && r == 0; got++) {
        if (!(cin[got] = host_in_get(&h[got], in[got], !op->inputs[got].is_index)))
            r = -ENOMEM;
        else if (nv_op_grad_input(op, got)) {
            if (!(gx[got] = nv_tensor_new(NV_DT_FP64, in[got]->ndim, in[got]->shape)))
                r = -ENOMEM;
            else
                gxd[got] = gx[got]->data;
        }
    }
    if (r == 0 && plain_mm(op, n, cin)) { /* dA = gY B^T, dB = A^T gY */
        int64_t M = cin[0]->shape[0], K = cin[0]->shape[1], N = cin[1]->shape[1];
        r = mm(cgy->data, false, cin[1]->data, true, gxd[0], M, N, K);
        if (r == 0)
            r = mm(cin[0]->data, true, cgy->data, false, gxd[1], K, M, N);
    } else if (r == 0 && strcmp(op->name, "gelu") == 0 && !a.gelu_tanh && gxd[0]) {
        gelu_vjp(cin[0]->data, cgy->data, gxd[0], cin[0]->numel);
    } else if (r == 0 &&
               nv_op_vjp(op, &a, n, (const nv_tensor *const *)cin, cgy->data, gxd, NULL) < 0) {
        snprintf(ex->err, sizeof ex->err, "host reference backward of '%s' failed", op->name);
        r = -EIO;
    }
    host_in_done(h, got);
    if (cgy)
        host_in_done(&h[NV_OP_MAX_INPUTS], 1);
    ex->calls++;
    return r;
}

/* The saved tensors the backend's describe() lists for op: "input:i" or
 * "output:0". With sv NULL: whether the output is among them (its view is
 * made only then). */
static bool dev_saved(nvw_exec *ex, const nv_op_def *op, const nv_tensor_view *iv,
                      const nv_tensor_view *yv, nv_tensor_view *sv, int *ret_n)
{
    const json_t *want = json_object_get(ex->saved, op->name);
    size_t k;
    const json_t *v;
    int n = 0;
    bool out = false;
    json_array_foreach(want, k, v)
    {
        const char *name = json_string_value(v);
        if (!name || n >= NV_OP_MAX_INPUTS)
            break;
        bool in = strncmp(name, "input:", 6) == 0 && atoi(name + 6) < op->n_inputs;
        out |= !in;
        if (sv)
            sv[n] = in ? iv[atoi(name + 6)] : *yv;
        n++;
    }
    if (ret_n)
        *ret_n = n;
    return out;
}

static int dev_backward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                        nv_tensor *const *in, const nv_tensor *y, const nv_tensor *gy,
                        nv_tensor **gx)
{
    if (!ex->table->backward) {
        snprintf(ex->err, sizeof ex->err,
                 "backend has no backward entry (inference-only): op '%s' cannot be trained",
                 op->name);
        return -ENOTSUP;
    }
    nv_tensor_view iv[NV_OP_MAX_INPUTS], yv, gv, sv[NV_OP_MAX_INPUTS + 1], gxv[NV_OP_MAX_INPUTS];
    memset(iv, 0, sizeof iv);
    memset(&yv, 0, sizeof yv);
    memset(&gv, 0, sizeof gv);
    memset(gxv, 0, sizeof gxv);
    int r = 0, n_views = 0, n_saved = 0, n_grads = 0;
    for (; n_views < n && r == 0; n_views++)
        r = nvw_exec_to_view(in[n_views], &iv[n_views]);
    if (r == 0 && dev_saved(ex, op, iv, NULL, NULL, NULL))
        r = nvw_exec_to_view(y, &yv);
    if (r == 0)
        r = nvw_exec_to_view(gy, &gv);
    if (r < 0) {
        r = -ENOMEM;
        goto out;
    }
    dev_saved(ex, op, iv, &yv, sv, &n_saved);
    for (int i = 0; i < n; i++)
        n_grads += nv_op_grad_input(op, i);
    nv_backward_call bc = {.op = op->name,
                           .attrs_json = attrs ? attrs : "{}",
                           .n_inputs = n,
                           .inputs = iv,
                           .n_saved = n_saved,
                           .saved = sv,
                           .grad_output = &gv,
                           .n_grads = n_grads,
                           .grad_inputs = gxv};
    r = ex->table->backward(ex->ctx, &bc, ex->err, sizeof ex->err);
    ex->calls++;
    if (r < 0) {
        prefix_err(ex, "device backward of '%s' failed: ", op->name);
        r = r == NV_E_UNSUPPORTED ? -ENOTSUP : -EIO;
        goto out;
    }
    for (int i = 0, k = 0; i < n; i++) {
        if (!nv_op_grad_input(op, i))
            continue;
        gx[i] = nvw_exec_from_view(&gxv[k]);
        if (!gx[i] || gx[i]->numel != in[i]->numel) {
            snprintf(ex->err, sizeof ex->err,
                     "device backward of '%s' returned an invalid "
                     "gradient for input %d",
                     op->name, i);
            r = -EIO;
        } else
            nvw_exec_count_lowp(ex, gx[i]);
        k++;
    }
out:
    for (int k = 0; k < n_grads; k++)
        if (gxv[k].data && ex->table->release_tensor)
            ex->table->release_tensor(ex->ctx, &gxv[k]);
    free_views(iv, n_views);
    nvw_view_free(&yv);
    nvw_view_free(&gv);
    return r;
}

int nvw_exec_backward(nvw_exec *ex, const nv_op_def *op, const char *attrs, int n,
                      nv_tensor *const *in, const nv_tensor *y, const nv_tensor *gy, nv_tensor **gx)
{
    for (int i = 0; i < n; i++)
        gx[i] = NULL;
    int r = ex->host ? host_backward(ex, op, attrs, n, in, gy, gx)
                     : dev_backward(ex, op, attrs, n, in, y, gy, gx);
    for (int i = 0; r >= 0 && ex->declared && i < n; i++)
        if (gx[i]) /* a gradient in its input's dtype, as the device returns it */
            round_declared(gx[i], in[i]->dtype);
    if (r < 0)
        for (int i = 0; i < n; i++) {
            nv_tensor_free(gx[i]);
            gx[i] = NULL;
        }
    return r;
}

/* Cast on the executor: the device's cast op; on the host an exact copy. */
int nvw_exec_cast(nvw_exec *ex, nv_tensor *t, nv_dtype to, nv_tensor **ret)
{
    if (ex->host || t->dtype == to) {
        nv_tensor *c = nv_tensor_contiguous(t);
        if (!c)
            return -ENOMEM;
        if (ex->declared)
            round_declared(c, to);
        *ret = c;
        return 0;
    }
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"to\":\"%s\"}", nv_dtype_name(to));
    return nvw_exec_forward(ex, nv_op_find("cast"), attrs, 1, &t, to, ret);
}
