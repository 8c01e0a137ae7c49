/* The emu's fp32/bf16 encode and decode fast paths (emu_internal.h
 * emu_store_exact, emu.c emu_view_decode) against the general encoder and
 * decoder (nv_dtype_encode, the loader's nvw_view_decode) bit for bit:
 * exhaustively over the 65536 bf16 patterns (with and without DAZ) and over
 * fp32 edge values and 10^6 random fp32 patterns. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/backends/emu/emu_internal.h"
#include "worker/backends/loader.h"
#include "core/numerics/rng.h"

static bool same(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

static void test_bf16_encode(void)
{
    int64_t bad = 0, nan_ok = 0, nans = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        double v = nv_dtype_decode(NV_DT_BF16, b, false);
        uint16_t got = 0;
        bool took = emu_store_exact(NV_DT_BF16, &got, 0, v);
        if (isnan(v)) {
            nans++;
            nan_ok += !took; /* NaN is left to the general encoder */
            continue;
        }
        uint64_t want = nv_dtype_encode(NV_DT_BF16, v, &NV_ROUND_DEFAULT, 0);
        if (!took || got != want || got != b) {
            if (bad++ == 0)
                tap_diag("bf16 0x%04x: fast 0x%04x, encode 0x%04llx", b, got,
                         (unsigned long long)want);
        }
    }
    tap_ok(bad == 0, "bf16 store: all %d non-NaN patterns encode as nv_dtype_encode (%lld differ)",
           65536 - (int)nans, (long long)bad);
    tap_ok(nan_ok == nans && nans == 2 * 127, "bf16 store declines all %lld NaN patterns",
           (long long)nans);
}

static void test_fp32_encode(void)
{
    nv_rng g;
    nv_rng_init(&g, 21, 1, 1);
    static const uint32_t edge[] = {0,          0x80000000u, 1,           0x807fffffu, 0x00800000u,
                                    0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x3f800000u};
    int64_t bad = 0, n = 0;
    for (int64_t i = 0; i < 1000000 + 10; i++, n++) {
        uint32_t u = i < 10 ? edge[i] : nv_rng_u32(&g);
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f))
            continue;
        uint32_t got = 0;
        bool took = emu_store_exact(NV_DT_FP32, &got, 0, f);
        uint64_t want = nv_dtype_encode(NV_DT_FP32, f, &NV_ROUND_DEFAULT, 0);
        if ((!took || got != want) && bad++ == 0)
            tap_diag("fp32 0x%08x: fast 0x%08x, encode 0x%08llx", u, got, (unsigned long long)want);
    }
    tap_ok(bad == 0, "fp32 store: edges and 1e6 random patterns encode as nv_dtype_encode (%lld differ)",
           (long long)bad);
}

static void test_bf16_decode(bool daz)
{
    int64_t n = 65536;
    uint16_t *bits = malloc(sizeof(uint16_t) * (size_t)n);
    double *fast = malloc(sizeof(double) * (size_t)n), *slow = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        bits[i] = (uint16_t)i;
    nv_tensor_view v;
    memset(&v, 0, sizeof v);
    v.dtype = NV_DT_BF16, v.ndim = 2, v.shape[0] = 256, v.shape[1] = 256;
    v.strides[0] = 256, v.strides[1] = 1, v.data = bits;
    int r1 = emu_view_decode(&v, daz, fast), r2 = nvw_view_decode(&v, daz, slow);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!same(fast[i], slow[i]) && bad++ == 0)
            tap_diag("bf16 0x%04llx: fast %a, loader %a", (long long)i, fast[i], slow[i]);
    tap_ok(r1 == 0 && r2 == 0 && bad == 0,
           "bf16 decode%s: all 65536 patterns as the loader's, bit for bit (%lld differ)",
           daz ? " with DAZ" : "", (long long)bad);
    /* a transposed view takes the loader's path: same values in the view's order */
    v.strides[0] = 1, v.strides[1] = 256;
    r1 = emu_view_decode(&v, daz, fast), r2 = nvw_view_decode(&v, daz, slow);
    bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += !same(fast[i], slow[i]);
    tap_ok(r1 == 0 && r2 == 0 && bad == 0 && same(fast[1], slow[1]) && slow[1] == nv_dtype_decode(NV_DT_BF16, 256, daz),
           "bf16 decode%s of a transposed view equals the loader's", daz ? " with DAZ" : "");
    free(bits), free(fast), free(slow);
}

int main(void)
{
    test_bf16_encode();
    test_fp32_encode();
    test_bf16_decode(false);
    test_bf16_decode(true);
    return tap_done();
}
