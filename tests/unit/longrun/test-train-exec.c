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
    return tap_done();
}
