/* The emu's fast paths on the long-run training step against the general paths
 * they stand for, bit for bit:
 *  - the plain fp32 / fp64 add, mul and div (inline hardware operations)
 *    against emu_round.c's correctly rounded emulation (error-free
 *    transformations, then one rounding) and, bit for bit NaNs included (of
 *    two NaN operands the first one's), its out-of-line plain functions, on
 *    edge values and random bit patterns: zeros, subnormals, the normal
 *    boundary, max finite, Inf, NaN;
 *  - the batched VJPs of emu_bwd_elementwise (gelu's erf form with its erf and
 *    exp through nv_ref_round_n, add) against emu_bwd_elementwise_each on
 *    lengths around the batch block, normal, wide and special inputs, in fp32
 *    and fp64 and under modes that leave the fast path (fma off, stochastic
 *    rounding, FTZ, bf16 compute, libm functions);
 *  - through the backend table: gelu's backward with the saved tensor given
 *    as the input's own view (decoded once), and add's fp32 gradients (encoded
 *    by conversion, NaN payloads by the general encoder) against the same
 *    gradients decoded from separate views and encoded element by element by
 *    nv_dtype_encode. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "tests/unit/tap.h"
#include "test-emu.h"
#include "worker/backends/emu/emu_backward.h"
#include "worker/backends/views/views.h"

static bool same_bits(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static const double edges[] = {0.0,        0x1p-149,   0x1.fffffcp-127, 0x1p-126,
                               0x1p-1074,  0x1p-1022,  1.0,             0x1.000002p0,
                               3.0,        0x1.555556p-2, 0x1p64,       0x1.fffffep127,
                               0x1p127,    0x1.fffffffffffffp1023, INFINITY, NAN};
#define N_EDGES ((int)(sizeof edges / sizeof edges[0]))

/* A random operand of dt: a random bit pattern (every binade, NaN included). */
static double operand(nv_dtype dt, nv_rng *g)
{
    if (dt == NV_DT_FP32)
        return bitsf(nv_rng_u32(g));
    return bitsd(nv_rng_u64(g));
}

static void test_basic_ops(void)
{
    emu_mode m;
    emu_mode_default(&m);
    emu_call c, e; /* e: the same rounding without the plain flag, emulated */
    memset(&c, 0, sizeof c);
    c.m = &m;
    c.rm.rounding = NV_ROUND_NEAREST_EVEN;
    c.plain = true;
    e = c;
    e.plain = false;
    nv_rng g;
    nv_rng_init(&g, 5, 1, 2);
    const nv_dtype dts[2] = {NV_DT_FP32, NV_DT_FP64};
    for (int d = 0; d < 2; d++) {
        nv_dtype dt = dts[d];
        int64_t bad[3] = {0, 0, 0}, n = 0;
        for (int64_t t = 0; t < 2 * N_EDGES * N_EDGES + 1000000; t++, n++) {
            double a, b;
            if (t < 2 * N_EDGES * N_EDGES) { /* the edges with both signs */
                a = edges[(t / 2) % N_EDGES] * (t % 2 ? -1 : 1);
                b = edges[(t / 2 / N_EDGES) % N_EDGES] * (t / N_EDGES % 2 ? -1 : 1);
                if (dt == NV_DT_FP32)
                    a = (float)a, b = (float)b;
            } else {
                a = operand(dt, &g), b = operand(dt, &g);
            }
            double r[3][3] = {
                {emu_add(&c, dt, a, b), emu_add_slow(&c, dt, a, b), emu_add_slow(&e, dt, a, b)},
                {emu_mul(&c, dt, a, b), emu_mul_slow(&c, dt, a, b), emu_mul_slow(&e, dt, a, b)},
                {emu_div(&c, dt, a, b), emu_div_slow(&c, dt, a, b), emu_div_slow(&e, dt, a, b)}};
            for (int o = 0; o < 3; o++) {
                /* the emulation's NaN is nv_dtype_round's; the bits of a NaN are
                 * compared with the out-of-line plain function's */
                bool ok = same_bits(r[o][0], r[o][1]) &&
                          (isnan(r[o][0]) ? isnan(r[o][2]) : same_bits(r[o][0], r[o][2]));
                if (!ok && bad[o]++ == 0)
                    tap_diag("%s op %d (%a, %a): inline %a, out of line %a, emulated %a",
                             nv_dtype_name(dt), o, a, b, r[o][0], r[o][1], r[o][2]);
            }
        }
        tap_ok(bad[0] + bad[1] + bad[2] == 0,
               "plain %s add, mul, div inline == out of line == emulated on %lld operand pairs (%lld, %lld, "
               "%lld differ)",
               nv_dtype_name(dt), (long long)n, (long long)bad[0], (long long)bad[1],
               (long long)bad[2]);
    }
}

/* n inputs of dt: normals of scale 2^-8 .. 2^8 (zeros among them), and with
 * specials a fifth of them edges (NaN, Inf, subnormals, huge values, the erf
 * saturation around +-4 .. +-10). */
static void inputs(double *v, int64_t n, nv_dtype dt, bool specials, nv_rng *g)
{
    for (int64_t i = 0; i < n; i++) {
        double u = nv_rng_uniform(g);
        double x = u < 0.05 ? 0.0 : nv_rng_normal(g) * ldexp(1, (int)(u * 16) - 8);
        if (specials && u < 0.2) {
            int k = (int)(nv_rng_u32(g) % (N_EDGES + 2));
            x = k < N_EDGES ? edges[k] : (k == N_EDGES ? 4 + 6 * u : -4 - 6 * u);
            x = nv_rng_u32(g) % 2 ? -x : x;
        }
        v[i] = nv_dtype_round(dt, x, &NV_ROUND_DEFAULT, 0);
    }
}

/* emu_bwd_elementwise against emu_bwd_elementwise_each for op on n elements
 * under mode text; returns the number of differing gradient elements. */
static int64_t vjp_case(const char *opname, const char *mode_text, nv_dtype dt, int64_t n,
                        bool specials, nv_rng *g)
{
    emu_mode m;
    char err[256];
    if (emu_mode_parse(mode_text, &m, err, sizeof err) != 0) {
        tap_diag("mode '%s': %s", mode_text, err);
        return -1;
    }
    const nv_op_def *op = nv_op_find(opname);
    nv_op_attrs a;
    memset(&a, 0, sizeof a);
    int id = strcmp(opname, "gelu") == 0 ? EMU_B_GELU : EMU_B_ADD;
    nv_tensor *x = nv_tensor_new(dt, 1, &n), *gy = nv_tensor_new(dt, 1, &n);
    inputs(x->data, n, dt, specials, g);
    inputs(gy->data, n, dt, specials, g);
    int ng = op->n_inputs;
    double *gx[2][2];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++)
            gx[p][k] = calloc((size_t)n, sizeof(double));
    for (int p = 0; p < 2; p++) {
        emu_bwd_io io;
        memset(&io, 0, sizeof io);
        io.shape0 = x;
        io.x[0] = id == EMU_B_GELU ? x : NULL; /* what the emu saves (emu_backward.c) */
        io.gy = gy;
        for (int k = 0; k < ng; k++)
            io.gx[k] = gx[p][k];
        emu_call c; /* a fresh call each time: the same stochastic stream */
        emu_bwd_call_init(&c, &m, op, &a, dt);
        if (p == 0)
            emu_bwd_elementwise(&c, id, op, &a, &io);
        else
            emu_bwd_elementwise_each(&c, id, op, &a, &io);
    }
    int64_t bad = 0;
    for (int k = 0; k < ng; k++)
        for (int64_t e = 0; e < n; e++)
            if (!same_bits(gx[0][k][e], gx[1][k][e]) && bad++ == 0)
                tap_diag("%s [%s] %s: element %lld (x %a, gy %a): batched %a, each %a", opname,
                         mode_text, nv_dtype_name(dt), (long long)e, x->data[e], gy->data[e],
                         gx[0][k][e], gx[1][k][e]);
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++)
            free(gx[p][k]);
    nv_tensor_free(x);
    nv_tensor_free(gy);
    return bad;
}

static void test_vjps(void)
{
    static const char *const modes[] = {"", "fma=off", "rounding=stochastic,seed=3", "ftz=on",
                                        "compute=bf16", "transcendental=libm", "rounding=rtz"};
    static const int64_t lens[] = {1, 7, 255, 256, 257, 1000, 2049};
    nv_rng g;
    nv_rng_init(&g, 6, 1, 2);
    for (int o = 0; o < 2; o++) {
        const char *opname = o == 0 ? "gelu" : "add";
        for (size_t md = 0; md < sizeof modes / sizeof modes[0]; md++) {
            int64_t bad = 0, total = 0;
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
                for (int sp = 0; sp < 2; sp++) {
                    int64_t b = vjp_case(opname, modes[md], NV_DT_FP32, lens[l], sp, &g);
                    bad += b < 0 ? 1 : b;
                    total += lens[l];
                }
            int64_t b = vjp_case(opname, modes[md], NV_DT_FP64, 300, true, &g);
            bad += b < 0 ? 1 : b;
            tap_ok(bad == 0, "%s VJP batched == element by element, mode '%s' (%lld fp32 and 300 "
                             "fp64 elements, %lld differ)",
                   opname, modes[md], (long long)total, (long long)bad);
        }
    }
}

/* The backend's backward of op with gradients decoded; sv: the saved views. */
static nv_tensor *table_backward(emu_t *e, const char *op, int n_in, nv_tensor_view *iv,
                                 int n_saved, nv_tensor_view *sv, nv_tensor_view *gv, int k,
                                 unsigned char *raw, char *err)
{
    nv_tensor_view gx[2];
    memset(gx, 0, sizeof gx);
    nv_backward_call c = {.op = op,
                          .attrs_json = "{}",
                          .n_inputs = n_in,
                          .inputs = iv,
                          .n_saved = n_saved,
                          .saved = sv,
                          .grad_output = gv,
                          .n_grads = n_in,
                          .grad_inputs = gx};
    if (e->tb->backward(e->ctx, &c, err, ERRLEN) != NV_OK)
        return NULL;
    nv_tensor *t = nvw_tensor_from_view(&gx[k], false);
    if (raw && t)
        memcpy(raw, gx[k].data, (size_t)t->numel * 4);
    for (int i = 0; i < n_in; i++)
        e->tb->release_tensor(e->ctx, &gx[i]);
    return t;
}

static void test_table(void)
{
    emu_t e;
    char err[ERRLEN];
    if (!emu_start(&e, "", err)) {
        tap_ok(false, "emu opens: %s", err);
        return;
    }
    nv_rng g;
    nv_rng_init(&g, 7, 1, 2);
    int64_t n = 777;
    double x[777], gy[777];
    inputs(x, n, NV_DT_FP32, true, &g);
    inputs(gy, n, NV_DT_FP32, true, &g);
    gy[3] = bitsf(0x7fc01234u); /* quiet NaNs with payloads, both signs */
    gy[4] = bitsf(0xffc00abcu);
    nv_tensor *xt = mk1(NV_DT_FP32, n, x), *gt = mk1(NV_DT_FP32, n, gy);
    gt->data[3] = bitsf(0x7fc01234u), gt->data[4] = bitsf(0xffc00abcu);
    nv_tensor_view xv, xv2, gv;
    nvw_view_from_tensor(xt, &xv);
    nvw_view_from_tensor(xt, &xv2); /* the same values in other memory */
    nvw_view_from_tensor(gt, &gv);
    /* gelu: saved = the input's own view, or a separate copy of it */
    nv_tensor *g1 = table_backward(&e, "gelu", 1, &xv, 1, &xv, &gv, 0, NULL, err);
    nv_tensor *g2 = table_backward(&e, "gelu", 1, &xv, 1, &xv2, &gv, 0, NULL, err);
    int64_t bad = !g1 || !g2;
    for (int64_t i = 0; !bad && i < n; i++)
        bad += !same_bits(g1->data[i], g2->data[i]);
    tap_ok(bad == 0, "gelu backward: saved as the input's view == saved as a copy (%lld differ) %s",
           (long long)bad, bad && !g1 ? err : "");
    /* add: gradient bytes against nv_dtype_encode of the rounded gy */
    nv_tensor_view iv[2] = {xv, xv};
    unsigned char raw[777 * 4];
    nv_tensor *ga = table_backward(&e, "add", 2, iv, 0, NULL, &gv, 1, raw, err);
    bad = !ga;
    for (int64_t i = 0; ga && i < n; i++) {
        uint32_t want = (uint32_t)nv_dtype_encode(NV_DT_FP32, gt->data[i], &NV_ROUND_DEFAULT, 0);
        uint32_t got;
        memcpy(&got, raw + 4 * i, 4);
        if (want != got && bad++ == 0)
            tap_diag("add gradient %lld: 0x%08x, nv_dtype_encode 0x%08x", (long long)i, got, want);
    }
    tap_ok(bad == 0, "add backward: fp32 gradient bytes == nv_dtype_encode's, NaN payloads "
                     "included (%lld differ)",
           (long long)bad);
    nv_tensor_free(g1), nv_tensor_free(g2), nv_tensor_free(ga);
    nv_tensor_free(xt), nv_tensor_free(gt);
    nvw_view_free(&xv), nvw_view_free(&xv2), nvw_view_free(&gv);
    emu_stop(&e);
}

int main(void)
{
    test_basic_ops();
    test_vjps();
    test_table();
    return tap_done();
}
