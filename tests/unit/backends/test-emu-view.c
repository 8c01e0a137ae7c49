/* The emu's reductions read in place (emu_reduce.c emu_reduce_view) against the
 * decoded path they replace for large inputs (emu_view_decode, then
 * emu_reduce_op), bit for bit:
 *  - the element decode (emu_decode_at) against the loader's nvw_view_decode
 *    on every bf16 and fp16 pattern, fp32 and fp64 edges and random fp32
 *    patterns, with and without DAZ;
 *  - the kernels: sum, mean, max, var (two-pass, Welford, sample) and norm2 in
 *    every emu mode a reduction reads (orders, accum_block, accum_align, fma,
 *    directed and stochastic rounding, FTZ, saturation, DAZ, narrow
 *    accumulators) over fp32, bf16, fp16 and fp64 views holding normal values,
 *    every bit pattern (NaN payloads, Inf, subnormals, signed zeros),
 *    subnormals and zeros alone, and cancelling terms, in contiguous, strided
 *    (NaN in the gaps), transposed, reversed (negative stride) and broadcast
 *    (zero stride) layouts, along the first, a middle and the last axis: the
 *    same output bits and the same draws from the call's streams;
 *  - the whole call: emu_forward's output bytes with the view read in place and
 *    decoded (emu_view_min moved) at sizes around the threshold, and that the
 *    large call made no decoded copy. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "tests/unit/tap.h"
#include "worker/backends/emu/emu.h"
#include "worker/backends/emu/emu_internal.h"
#include "worker/backends/views/views.h"

/* ---- the element decode ---- */

static bool same_bits(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

/* emu_decode_at on n patterns stored in buf against nvw_view_decode; counts
 * mismatches and shows the first. */
static int64_t decode_diff(nv_dtype dt, const void *buf, int64_t n, bool daz)
{
    nv_tensor_view v = {
        .dtype = (int32_t)dt, .ndim = 1, .shape = {n}, .strides = {1}, .data = (void *)buf};
    double *want = malloc((size_t)n * sizeof *want);
    int64_t bad = 0;
    if (!want || nvw_view_decode(&v, daz, want) < 0) {
        free(want);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        double got = emu_decode_at(dt, buf, i, daz);
        if (!same_bits(got, want[i]) && bad++ == 0)
            tap_diag("%s 0x%llx daz=%d: emu %a, views %a", nv_dtype_name(dt),
                     (unsigned long long)nv_dtype_load_bits(dt, buf, i), daz, got, want[i]);
    }
    free(want);
    return bad;
}

static void test_decode(void)
{
    static uint16_t all16[65536];
    for (uint32_t b = 0; b < 65536; b++)
        all16[b] = (uint16_t)b;
    nv_rng g;
    nv_rng_init(&g, 5, 1, 1);
    enum { N32 = 1000000 };
    uint32_t *p32 = malloc(N32 * sizeof *p32);
    static const uint32_t e32[] = {0,           0x80000000u, 1,           0x807fffffu,
                                   0x00800000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                   0x7f800001u, 0x7fc00000u, 0xffc01234u, 0x7fbfffffu};
    static const uint64_t e64[] = {0,
                                   0x8000000000000000ull,
                                   1,
                                   0x800fffffffffffffull,
                                   0x0010000000000000ull,
                                   0x7ff0000000000000ull,
                                   0x7ff0000000000001ull,
                                   0xfff8000000001234ull,
                                   0x3ff0000000000000ull};
    for (int i = 0; i < N32; i++)
        p32[i] = i < 12 ? e32[i] : nv_rng_u32(&g);
    for (int daz = 0; daz < 2; daz++) {
        int64_t b16 = decode_diff(NV_DT_BF16, all16, 65536, daz);
        int64_t h16 = decode_diff(NV_DT_FP16, all16, 65536, daz);
        int64_t f32 = p32 ? decode_diff(NV_DT_FP32, p32, N32, daz) : -1;
        int64_t f64 = decode_diff(NV_DT_FP64, e64, 9, daz);
        tap_ok(b16 == 0 && h16 == 0 && f32 == 0 && f64 == 0,
               "emu_decode_at == nvw_view_decode, daz=%s: all bf16 and fp16 patterns, fp32 "
               "edges and 1e6 random patterns, fp64 edges (%lld, %lld, %lld, %lld differ)",
               daz ? "on" : "off", (long long)b16, (long long)h16, (long long)f32, (long long)f64);
    }
    free(p32);
}

/* ---- views of every layout ---- */

typedef enum layout { L_CONTIG, L_STRIDED, L_TRANSPOSED, L_REVERSED, L_BROADCAST } layout;
static const char *const layout_names[] = {"contiguous", "strided", "transposed", "reversed",
                                           "broadcast"};

typedef enum vclass { V_NORMAL, V_BITS, V_SUBNORMAL, V_CANCEL } vclass;
static const char *const vclass_names[] = {"normal", "all patterns", "subnormals", "cancelling"};

/* One element's encoding in class k (the j-th of the tensor). */
static uint64_t gen_bits(nv_dtype dt, vclass k, int64_t j, nv_rng *g)
{
    const nv_dtype_info *in = nv_dtype_get(dt);
    uint64_t sign = 1ull << (in->bits - 1);
    uint64_t inf = nv_dtype_encode(dt, INFINITY, &NV_ROUND_DEFAULT, 0);
    switch (k) {
    case V_NORMAL:
        return nv_dtype_encode(dt, nv_rng_normal(g), &NV_ROUND_DEFAULT, 0);
    case V_BITS: {
        uint64_t u = nv_rng_u64(g);
        if (in->bits < 64)
            u &= (1ull << in->bits) - 1;
        /* a tenth of the terms from the special patterns, the rest any pattern */
        uint32_t s = nv_rng_u32(g) % 100;
        if (s < 2)
            return (s ? sign : 0) | inf; /* +-Inf */
        if (s < 4)
            return (s == 3 ? sign : 0) | inf | (1 + (u & 7)); /* NaN, signalling, payload */
        if (s < 6)
            return (s == 5 ? sign : 0); /* +-0 */
        if (s < 10)
            return (u & sign) | (u & ((1ull << in->mant_bits) - 1)); /* +-subnormal */
        return u;
    }
    case V_SUBNORMAL: {
        uint64_t u = nv_rng_u64(g);
        uint64_t m = u % 5 == 0 ? 0 : (u >> 8) % 64; /* zeros, small subnormals */
        return (u & 1 ? sign : 0) | m;
    }
    case V_CANCEL: {
        /* a large term, later its negation (ulp-level residues decide the sum) */
        double big = ldexp(1.0 + (double)(j % 97) / 128, 10 + (int)(j % 7));
        double v = j % 3 == 2 ? nv_rng_normal(g) * 1e-3 : (j % 3 ? -big : big);
        return nv_dtype_encode(dt, v, &NV_ROUND_DEFAULT, 0);
    }
    }
    return 0;
}

/* A view of shape sh in layout l, its elements drawn from class k in row-major
 * order; gaps (strided) hold the default NaN, so that a read of one shows. */
static int make_view(nv_dtype dt, int nd, const int64_t *sh, layout l, vclass k, uint64_t seed,
                     nv_tensor_view *v)
{
    int64_t st[3], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = l == L_STRIDED ? 2 * s : s;
        s *= sh[d];
    }
    if (l == L_TRANSPOSED && nd >= 2) { /* the last two axes stored swapped */
        st[nd - 2] = 1;
        st[nd - 1] = sh[nd - 2];
        for (int d = nd - 3; d >= 0; d--)
            st[d] = st[d + 1] * sh[d + 1];
    }
    if (l == L_BROADCAST)
        st[0] = 0;
    if (nvw_view_alloc(dt, nd, sh, st, NAN, v) < 0)
        return -1;
    if (l == L_REVERSED) { /* axis 0 walks down from the last row */
        int nb = nv_dtype_get(dt)->storage_bytes;
        v->data = (char *)v->data + (sh[0] - 1) * st[0] * nb;
        v->strides[0] = -st[0];
    }
    nv_rng g;
    nv_rng_init(&g, seed, (uint32_t)dt, (uint32_t)k);
    int64_t n = s, idx[3] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0, r = j;
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = r % sh[d];
            r /= sh[d];
            off += idx[d] * v->strides[d];
        }
        nv_dtype_store_bits(dt, v->data, off, gen_bits(dt, k, j, &g));
    }
    return 0;
}

/* ---- the kernels ---- */

typedef struct opcase {
    const char *op, *attrs;
} opcase;

static const opcase ops[] = {
    {"sum", "{}"},
    {"mean", "{}"},
    {"max", "{}"},
    {"var", "{}"},
    {"var", "{\"algorithm\": \"welford\"}"},
    {"var", "{\"correction\": 1}"},
    {"norm2", "{}"},
};
#define N_OPS (int)(sizeof ops / sizeof ops[0])

static const char *const modes[] = {
    "",
    "accum=fp64",
    "daz=on",
    "daz=on,accum=fp64",
    "reduce=pairwise",
    "reduce=tree:8",
    "reduce=splitk:5",
    "reduce=random,seed=3",
    "reduce=randtree:7",
    "accum_block=4",
    "accum_block=8,accum_align=truncate",
    "reduce=pairwise,accum_align=truncate",
    "fma=off",
    "fma=off,reduce=tree:4",
    "rounding=stochastic,seed=5",
    "rounding=stochastic,reduce=pairwise,fma=off",
    "rounding=rtz,ftz=on",
    "rounding=down,saturate=on,daz=on",
    "rounding=up,accum_block=3",
    "accum=bf16",
    "compute=bf16,accum=fp16,daz=on",
};
#define N_MODES (int)(sizeof modes / sizeof modes[0])

typedef struct shape_case {
    int nd;
    int64_t sh[3];
    int axis;
} shape_case;

static const shape_case shapes[] = {
    {1, {1531}, 0}, {2, {37, 41}, -1}, {2, {37, 41}, 0}, {3, {5, 23, 13}, 1}};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static const nv_dtype dtypes[] = {NV_DT_FP32, NV_DT_BF16, NV_DT_FP16, NV_DT_FP64};

typedef struct tally {
    int64_t runs, bad, state_bad, rows, nonfinite, shown;
} tally;

/* op on view v both ways under the mode of ctx: the decoded path on a copy of
 * the call, the in-place one on the call itself. */
static void compare(emu_ctx *ctx, const opcase *oc, const nv_tensor_view *v, int axis,
                    const char *what, tally *t)
{
    const nv_op_def *op = nv_op_find(oc->op);
    char attrs[128];
    snprintf(attrs, sizeof attrs, "%.*s%s\"axis\": %d}", (int)strlen(oc->attrs) - 1, oc->attrs,
             strlen(oc->attrs) > 2 ? ", " : "", axis);
    json_t *j = json_loads(attrs, 0, NULL);
    nv_op_attrs a;
    char *msg = NULL;
    if (!j || nv_op_parse_attrs(op, j, &a, &msg) < 0) {
        tap_diag("attrs %s: %s", attrs, msg ? msg : "bad JSON");
        free(msg);
        json_decref(j);
        t->bad++;
        return;
    }
    json_decref(j);
    int64_t numel = 1, rows = 1;
    for (int d = 0; d < v->ndim; d++)
        numel *= v->shape[d];
    int ax = axis < 0 ? axis + v->ndim : axis;
    rows = numel / v->shape[ax];
    nv_tensor *x = nv_tensor_new((nv_dtype)v->dtype, v->ndim, v->shape);
    double *want = malloc((size_t)rows * sizeof *want), *got = malloc((size_t)rows * sizeof *got);
    char err[256];
    if (!x || !want || !got || emu_view_decode(v, ctx->mode.daz, x->data) < 0) {
        t->bad++;
        goto out;
    }
    emu_call c1, c2;
    emu_call_init(&c1, ctx, op, &a, NV_DT_FP32, rows, NULL);
    c2 = c1;
    const nv_tensor *in[1] = {x};
    int r1 = emu_reduce_op(&c1, op, &a, 1, in, want, err, sizeof err);
    int r2 = emu_reduce_view(&c2, op, &a, v, ctx->mode.daz, got, err, sizeof err);
    t->runs++;
    bool same = r1 == NV_OK && r2 == NV_OK && !memcmp(want, got, (size_t)rows * sizeof *got);
    t->rows += rows;
    for (int64_t i = 0; i < rows; i++)
        t->nonfinite += !isfinite(want[i]);
    if (!same && t->shown++ < 3)
        for (int64_t i = 0; i < rows; i++)
            if (!same_bits(want[i], got[i])) {
                tap_diag("%s %s %s row %lld: decoded %a, in place %a", oc->op, oc->attrs, what,
                         (long long)i, want[i], got[i]);
                break;
            }
    t->bad += !same;
    t->state_bad += c1.sr_state != c2.sr_state || c1.order_state != c2.order_state;
out:
    nv_tensor_free(x);
    free(want);
    free(got);
}

static void test_kernels(void)
{
    for (int mi = 0; mi < N_MODES; mi++) {
        emu_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        char err[256];
        if (emu_mode_parse(modes[mi], &ctx.mode, err, sizeof err) < 0) {
            tap_ok(0, "mode '%s' parses: %s", modes[mi], err);
            continue;
        }
        tally t = {0};
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++)
            for (int k = V_NORMAL; k <= V_CANCEL; k++)
                for (int l = L_CONTIG; l <= L_BROADCAST; l++)
                    for (int si = 0; si < N_SHAPES; si++) {
                        const shape_case *sc = &shapes[si];
                        if (l == L_TRANSPOSED && sc->nd < 2)
                            continue;
                        nv_tensor_view v;
                        if (make_view(dtypes[di], sc->nd, sc->sh, (layout)l, (vclass)k,
                                      (uint64_t)(mi * 131 + si), &v) < 0) {
                            t.bad++;
                            continue;
                        }
                        char what[128];
                        snprintf(what, sizeof what, "%s %s %s shape %d axis %d",
                                 nv_dtype_name(dtypes[di]), vclass_names[k], layout_names[l], si,
                                 sc->axis);
                        for (int oi = 0; oi < N_OPS; oi++)
                            compare(&ctx, &ops[oi], &v, sc->axis, what, &t);
                        nvw_view_free(&v);
                    }
        free(ctx.describe);
        tap_ok(t.bad == 0 && t.state_bad == 0 && t.runs > 0,
               "mode '%s': %lld reductions read in place == decoded bit for bit (%lld differ, "
               "%lld with other stream states; %lld of %lld output rows non-finite)",
               modes[mi], (long long)t.runs, (long long)t.bad, (long long)t.state_bad,
               (long long)t.nonfinite, (long long)t.rows);
    }
}

/* ---- the whole call ---- */

/* The output bytes of op on v through emu_forward; NULL on failure. */
static unsigned char *forward_bytes(emu_ctx *ctx, const char *op, const char *attrs,
                                    const nv_tensor_view *v, size_t *ret_len)
{
    const nv_backend *b = nvw_emu_backend();
    nv_tensor_view out;
    memset(&out, 0, sizeof out);
    nv_op_call call = {.op = op,
                       .attrs_json = attrs,
                       .out_dtype = NV_DT_FP32,
                       .n_inputs = 1,
                       .inputs = (nv_tensor_view *)v,
                       .n_outputs = 1,
                       .outputs = &out};
    char err[256];
    if (b->forward(ctx, &call, err, sizeof err) != NV_OK) {
        tap_diag("%s %s: %s", op, attrs, err);
        return NULL;
    }
    int64_t n = 1;
    for (int d = 0; d < out.ndim; d++)
        n *= out.shape[d];
    unsigned char *bytes = malloc((size_t)n * 4 + 1);
    if (bytes)
        memcpy(bytes, out.data, (size_t)n * 4);
    *ret_len = (size_t)n * 4;
    b->release_tensor(ctx, &out);
    return bytes;
}

static void test_forward(void)
{
    static const char *const fmodes[] = {"", "daz=on,reduce=pairwise",
                                         "rounding=stochastic,seed=9"};
    static const int64_t sizes[] = {(1 << 16) - 1, 1 << 16, (1 << 16) + 1, 3 << 16};
    const nv_backend *b = nvw_emu_backend();
    int64_t saved = emu_view_min;
    for (int mi = 0; mi < 3; mi++) {
        int64_t runs = 0, bad = 0, copies = 0;
        for (int si = 0; si < 4; si++)
            for (int q = 0; q < 5; q++) {
                static const int lq[5] = {L_CONTIG, L_STRIDED, L_TRANSPOSED, L_STRIDED,
                                          L_TRANSPOSED};
                static const vclass kq[5] = {V_NORMAL, V_NORMAL, V_NORMAL, V_SUBNORMAL, V_CANCEL};
                int l = lq[q];
                vclass k = kq[q];
                int64_t sh[2] = {sizes[si] / 64, 64};
                if (sizes[si] % 64)
                    sh[0] = 1, sh[1] = sizes[si];
                nv_tensor_view v;
                if (make_view(NV_DT_FP32, 2, sh, (layout)l, k, (uint64_t)si, &v) < 0) {
                    bad++;
                    continue;
                }
                for (int oi = 0; oi < N_OPS; oi++)
                    for (int axis = -1; axis <= 0; axis++) {
                        char attrs[128];
                        snprintf(attrs, sizeof attrs, "%.*s%s\"axis\": %d}",
                                 (int)strlen(ops[oi].attrs) - 1, ops[oi].attrs,
                                 strlen(ops[oi].attrs) > 2 ? ", " : "", axis);
                        void *c1 = NULL, *c2 = NULL;
                        char err[256];
                        size_t n1 = 0, n2 = 0;
                        b->open(fmodes[mi], &c1, err, sizeof err);
                        b->open(fmodes[mi], &c2, err, sizeof err);
                        emu_view_min = INT64_MAX;
                        unsigned char *want = forward_bytes(c1, ops[oi].op, attrs, &v, &n1);
                        emu_view_min = saved;
                        unsigned char *got = forward_bytes(c2, ops[oi].op, attrs, &v, &n2);
                        runs++;
                        bad += !want || !got || n1 != n2 || memcmp(want, got, n1);
                        /* the large call made no decoded copy of its input */
                        copies += (sizes[si] > saved) != (((emu_ctx *)c2)->scratch_cap[0] == 0);
                        free(want);
                        free(got);
                        b->close(c1);
                        b->close(c2);
                    }
                nvw_view_free(&v);
            }
        tap_ok(bad == 0 && copies == 0 && runs > 0,
               "mode '%s': %lld calls at 2^16 - 1 .. 3 2^16 fp32 elements (normal, subnormal, "
               "cancelling; contiguous, strided, transposed) give the same output bytes "
               "read in place and decoded (%lld differ); a decoded copy exactly where n <= 2^16 "
               "(%lld otherwise)",
               fmodes[mi], (long long)runs, (long long)bad, (long long)copies);
    }
}

int main(void)
{
    test_decode();
    test_kernels();
    test_forward();
    return tap_done();
}
