/* The long-run host reference executor (worker/kinds/longrun/train/exec.c): its blocked fp64
 * matmul (forward and both backward products) and its gelu VJP must give the
 * catalog reference's values bit for bit (core/ref: nv_op_forward_f64 and
 * nv_op_vjp are the independent oracle, a plain k-ordered loop and the closed
 * form derivative), on shapes that exercise every tile edge, on zeros and on
 * Inf/NaN operands; and its bf16 fast path across the ABI must give the
 * loader's bytes and values over all 65536 bf16 patterns (nvw_exec_to_view and
 * nvw_exec_from_view, the executor's internal interface). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "core/ref/backward.h"
#include "tests/unit/tap.h"
#include "worker/backends/views/views.h"
#include "worker/kinds/longrun/train/train_internal.h"

static nv_tensor *rnd(int64_t r, int64_t c, nv_rng *g, int special)
{
    int64_t sh[2] = {r, c};
    nv_tensor *t = nv_tensor_new(NV_DT_FP64, 2, sh);
    for (int64_t i = 0; t && i < t->numel; i++) {
        double u = nv_rng_uniform(g);
        t->data[i] = u < 0.1 ? 0.0 : nv_rng_normal(g) * ldexp(1, (int)(u * 40) - 20);
    }
    if (t && special && t->numel > 2) { /* an Inf and a NaN somewhere */
        t->data[t->numel / 2] = INFINITY;
        t->data[t->numel - 1] = NAN;
    }
    return t;
}

/* Bitwise equality of n doubles (NaN: any NaN, the catalog's loop and ours
 * produce NaN from the same operations but the payload is not the question). */
static bool same_bits(const double *x, const double *y, int64_t n, int64_t *bad)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]) && isnan(y[i]))
            continue;
        if (memcmp(&x[i], &y[i], sizeof x[i]) != 0) {
            *bad = i;
            return false;
        }
    }
    return true;
}

static void matmul_case(nvw_exec *ex, int64_t M, int64_t K, int64_t N, int special, nv_rng *g)
{
    const nv_op_def *op = nv_op_find("matmul");
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    nv_tensor *A = rnd(M, K, g, 0), *B = rnd(K, N, g, special), *G = rnd(M, N, g, 0);
    nv_tensor *ins[2] = {A, B}, *y = NULL, *gx[2] = {NULL, NULL};
    int r = nvw_exec_forward(ex, op, "{}", 2, ins, NV_DT_FP64, &y);
    r = r < 0 ? r : nvw_exec_backward(ex, op, "{}", 2, ins, y, G, gx);
    tap_ok(r == 0 && y && gx[0] && gx[1], "matmul %lldx%lldx%lld%s runs", (long long)M,
           (long long)K, (long long)N, special ? " (Inf/NaN in B)" : "");
    if (r == 0) {
        double *ry = calloc((size_t)(M * N), sizeof(double));
        double *ga = calloc((size_t)(M * K), sizeof(double));
        double *gb = calloc((size_t)(K * N), sizeof(double));
        double *gxr[2] = {ga, gb};
        const nv_tensor *cin[2] = {A, B};
        nv_op_forward_f64(op, &a, 2, cin, ry);
        nv_op_vjp(op, &a, 2, cin, G->data, gxr, NULL);
        int64_t bad = -1;
        tap_ok(same_bits(y->data, ry, M * N, &bad), "  forward equals the catalog's bit for bit%s",
               bad >= 0 ? " (first difference at element shown in diag)" : "");
        if (bad >= 0)
            tap_diag("element %lld: %a vs %a", (long long)bad, y->data[bad], ry[bad]);
        bad = -1;
        tap_ok(same_bits(gx[0]->data, ga, M * K, &bad), "  dA = gY B^T equals the catalog's");
        bad = -1;
        tap_ok(same_bits(gx[1]->data, gb, K * N, &bad), "  dB = A^T gY equals the catalog's");
        free(ry), free(ga), free(gb);
    }
    nv_tensor_free(A), nv_tensor_free(B), nv_tensor_free(G), nv_tensor_free(y);
    nv_tensor_free(gx[0]), nv_tensor_free(gx[1]);
}

static void gelu_case(nvw_exec *ex, nv_rng *g)
{
    const nv_op_def *op = nv_op_find("gelu");
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    int64_t n = 4099;
    nv_tensor *x = nv_tensor_new(NV_DT_FP64, 1, &n), *gy = nv_tensor_new(NV_DT_FP64, 1, &n);
    for (int64_t i = 0; i < n; i++) {
        x->data[i] = nv_rng_normal(g) * 4;
        gy->data[i] = nv_rng_normal(g);
    }
    /* edges: zeros of both signs, far tails, Inf */
    double edge[] = {0.0, -0.0, -40, 40, -1e-300, 1e300, INFINITY, -INFINITY};
    for (int i = 0; i < 8; i++)
        x->data[i] = edge[i];
    nv_tensor *ins[1] = {x}, *gx[1] = {NULL};
    int r = nvw_exec_backward(ex, op, "{}", 1, ins, NULL, gy, gx);
    double *ref = calloc((size_t)n, sizeof(double));
    double *gxr[1] = {ref};
    const nv_tensor *cin[1] = {x};
    nv_op_vjp(op, &a, 1, cin, gy->data, gxr, NULL);
    int64_t bad = -1;
    tap_ok(r == 0 && gx[0] && same_bits(gx[0]->data, ref, n, &bad),
           "gelu VJP equals the catalog's bit for bit over %lld values", (long long)n);
    free(ref);
    nv_tensor_free(x), nv_tensor_free(gy), nv_tensor_free(gx[0]);
}

/* The declared-precision reference: each op's fp64 result rounded once to the
 * dtype the tape asks for (round to nearest even, checked against the dtype's
 * own rounding and against a tie worked out by hand), gradients to their input's
 * dtype, casts rounded; the fp64 reference keeps every value. */
static void declared_case(nv_rng *g)
{
    nvw_exec dl, h64;
    memset(&dl, 0, sizeof dl);
    memset(&h64, 0, sizeof h64);
    dl.host = dl.declared = true;
    h64.host = true;
    const nv_op_def *mul = nv_op_find("mul"), *gelu = nv_op_find("gelu");
    int64_t n = 1000;
    nv_tensor *a = nv_tensor_new(NV_DT_BF16, 1, &n), *b = nv_tensor_new(NV_DT_BF16, 1, &n);
    for (int64_t i = 0; i < n; i++) {
        a->data[i] = nv_dtype_round(NV_DT_BF16, nv_rng_normal(g), &NV_ROUND_DEFAULT, 0);
        b->data[i] = nv_dtype_round(NV_DT_BF16, nv_rng_normal(g), &NV_ROUND_DEFAULT, 0);
    }
    /* 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7 in bf16 (p = 8): a tie, to the
     * even 1; (1 + 2^-7)(1 + 2^-8) = 1 + 3 * 2^-8 + 2^-15 rounds up to 1 + 2^-6. */
    a->data[0] = 1, b->data[0] = 1 + 0x1p-8;
    a->data[1] = 1 + 0x1p-7, b->data[1] = 1 + 0x1p-8;
    nv_tensor *ins[2] = {a, b}, *o = NULL, *o64 = NULL;
    int r = nvw_exec_forward(&dl, mul, "{}", 2, ins, NV_DT_BF16, &o);
    int r64 = nvw_exec_forward(&h64, mul, "{}", 2, ins, NV_DT_FP64, &o64);
    bool ok = r == 0 && r64 == 0 && o->dtype == NV_DT_BF16;
    for (int64_t i = 0; ok && i < n; i++)
        ok = o->data[i] ==
                 nv_dtype_round(NV_DT_BF16, a->data[i] * b->data[i], &NV_ROUND_DEFAULT, 0) &&
             o64->data[i] == a->data[i] * b->data[i];
    tap_ok(ok && o->data[0] == 1 && o->data[1] == 1 + 0x1p-6,
           "declared reference: mul rounded once to bf16 (ties to even), fp64 reference exact");
    nv_tensor *gy = nv_tensor_new(NV_DT_BF16, 1, &n), *gx[1] = {NULL}, *gx64[1] = {NULL};
    for (int64_t i = 0; i < n; i++)
        gy->data[i] = 1;
    nv_tensor *gin[1] = {a};
    r = nvw_exec_backward(&dl, gelu, "{}", 1, gin, NULL, gy, gx);
    r64 = nvw_exec_backward(&h64, gelu, "{}", 1, gin, NULL, gy, gx64);
    ok = r == 0 && r64 == 0 && gx[0] && gx64[0] && gx[0]->dtype == NV_DT_BF16;
    int inexact = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = gx[0]->data[i] == nv_dtype_round(NV_DT_BF16, gx64[0]->data[i], &NV_ROUND_DEFAULT, 0);
        inexact += gx[0]->data[i] != gx64[0]->data[i];
    }
    tap_ok(ok && inexact > n / 2,
           "declared reference: gelu's gradient rounded to its input's bf16 "
           "(%d of %lld values moved)",
           inexact, (long long)n);
    nv_tensor *x32 = nv_tensor_new(NV_DT_FP32, 1, &n), *c = NULL;
    for (int64_t i = 0; i < n; i++)
        x32->data[i] = (double)(float)nv_rng_normal(g);
    r = nvw_exec_cast(&dl, x32, NV_DT_FP16, &c);
    ok = r == 0 && c->dtype == NV_DT_FP16;
    for (int64_t i = 0; ok && i < n; i++)
        ok = c->data[i] == nv_dtype_round(NV_DT_FP16, x32->data[i], &NV_ROUND_DEFAULT, 0);
    tap_ok(ok, "declared reference: a cast to fp16 rounds");
    tap_ok(nvw_exec_fp64(&h64) && !nvw_exec_fp64(&dl), "only the fp64 reference is exact");
    nv_tensor_free(a), nv_tensor_free(b), nv_tensor_free(o), nv_tensor_free(o64);
    nv_tensor_free(gy), nv_tensor_free(gx[0]), nv_tensor_free(gx64[0]);
    nv_tensor_free(x32), nv_tensor_free(c);
}

static void bf16_view_case(void)
{
    int64_t sh[2] = {256, 256};
    nv_tensor *t = nv_tensor_new(NV_DT_BF16, 2, sh);
    for (int64_t i = 0; i < t->numel; i++)
        t->data[i] = nv_dtype_decode(NV_DT_BF16, (uint64_t)i, false);
    nv_tensor_view fast, slow;
    int r1 = nvw_exec_to_view(t, &fast), r2 = nvw_view_from_tensor(t, &slow);
    tap_ok(r1 == 0 && r2 == 0 && memcmp(fast.data, slow.data, 2 * 65536) == 0 &&
               fast.strides[0] == slow.strides[0] && fast.strides[1] == slow.strides[1],
           "bf16 nvw_exec_to_view: all 65536 patterns encode to the loader's bytes");
    nv_tensor *a = nvw_exec_from_view(&slow), *b = nvw_tensor_from_view(&slow, false);
    tap_ok(a && b && a->dtype == NV_DT_BF16 && memcmp(a->data, b->data, 8 * 65536) == 0,
           "bf16 nvw_exec_from_view: all 65536 patterns decode to the loader's values bit for bit");
    nvw_view_free(&fast), nvw_view_free(&slow);
    nv_tensor_free(t), nv_tensor_free(a), nv_tensor_free(b);
}

int main(void)
{
    bf16_view_case();
    nvw_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.host = true;
    nv_rng g;
    nv_rng_init(&g, 7, 1, 2);
    /* tiles are 4 rows x 8 columns: exact multiples, edges on each side, tiny */
    matmul_case(&ex, 8, 16, 16, 0, &g);
    matmul_case(&ex, 7, 13, 21, 0, &g);
    matmul_case(&ex, 1, 1, 1, 0, &g);
    matmul_case(&ex, 64, 33, 8, 0, &g);
    matmul_case(&ex, 12, 5, 19, 1, &g);
    gelu_case(&ex, &g);
    declared_case(&g);
    return tap_done();
}
