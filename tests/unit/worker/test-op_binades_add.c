/* nvw_binades_add (worker/kinds/op/binades.c) against its definition, one
 * element at a time: each binade's count, mismatches and worst element
 * (largest error, then least encoding, then least index), and the 16 worst
 * of the case under the same order. The elements' outputs are made up here
 * (nv_compare_elems is not what is tested): runs of one binade of varied
 * length, errors rising, falling and tied (a few distinct values), elements
 * that are not finite, zeros, subnormals, infinities and NaNs between the
 * runs; added in calls of varied size, so runs and chunks meet call edges. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/kinds/op/binades.h"

#define N 20000

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static double in[N], got[N];
static nv_compare_elem_out el[N];

typedef struct ref_el {
    double ue;
    uint32_t enc;
    int64_t index;
} ref_el;

/* The order's "worse": error, then encoding, then index. */
static bool worse(const ref_el *a, const ref_el *b)
{
    if (a->ue != b->ue)
        return a->ue > b->ue;
    if (a->enc != b->enc)
        return a->enc < b->enc;
    return a->index < b->index;
}

static int by_worse(const void *pa, const void *pb)
{
    return worse(pa, pb) ? -1 : worse(pb, pa) ? 1 : 0;
}

static uint32_t enc_of(double x)
{
    float f = (float)x;
    uint32_t e;
    memcpy(&e, &f, sizeof e);
    return e;
}

/* The bin index of binades.c: zero, subnormal, exponent -126..127, inf, NaN. */
static int bin_of(double x)
{
    if (isnan(x))
        return NVW_BIN_EXPS + 3;
    if (isinf(x))
        return NVW_BIN_EXPS + 2;
    if (x == 0)
        return 0;
    if (fabs(x) < 0x1p-126)
        return 1;
    return 2 + ilogb(x) + 126;
}

static void fill(int pattern)
{
    static const double tie[] = {0, 0.25, 0.5, 0.125};
    int64_t i = 0;
    while (i < N) {
        int64_t len = 1 + (int64_t)(next() % (next() % 4 == 0 ? 3000 : 40));
        int e = (int)(next() % 254) - 126;
        double sign = next() % 2 ? -1 : 1;
        int kind = (int)(next() % 4); /* rising, falling, tied, random errors */
        double base_ue = (double)(next() % 1000) / 2000;
        for (int64_t j = 0; j < len && i < N; j++, i++) {
            double m = 1 + (double)(next() % (1u << 23)) / (1u << 23);
            in[i] = sign * ldexp(m, e);
            if (next() % 97 == 0) { /* a special between runs */
                static const double sp[] = {0.0, -0.0, 0x1p-140, -0x1p-149, INFINITY, -INFINITY, NAN};
                in[i] = sp[next() % 7];
            }
            double ue = kind == 0   ? base_ue + j * 1e-6
                        : kind == 1 ? base_ue - j * 1e-6
                        : kind == 2 ? tie[pattern % 4]
                                    : (double)(next() % 64) / 128;
            el[i] = (nv_compare_elem_out){.finite = !isnan(in[i]) && next() % 53 != 0,
                                          .mismatch = next() % 29 == 0, .ulp_err = ue,
                                          .exact = in[i]};
            got[i] = in[i];
        }
    }
}

int main(void)
{
    static nvw_binades b;
    static ref_el all[N];
    for (int pattern = 0; pattern < 8; pattern++) {
        fill(pattern);
        nvw_binades_init(&b, NV_DT_FP32);
        int64_t at = 0;
        while (at < N) { /* calls of 1 to 5000 elements */
            int64_t n = 1 + (int64_t)(next() % 5000);
            if (n > N - at)
                n = N - at;
            nv_compare_input ci = {.dtype = NV_DT_FP32, .n = n, .got = got + at, .exact = in + at};
            if (nvw_binades_add(&b, &ci, NULL, el + at, in + at, at) < 0)
                break;
            at += n;
        }
        /* One element at a time. */
        static int64_t count[2][NVW_BIN_PER_SIGN], mism[2][NVW_BIN_PER_SIGN];
        static ref_el bw[2][NVW_BIN_PER_SIGN];
        static bool has[2][NVW_BIN_PER_SIGN];
        memset(count, 0, sizeof count);
        memset(mism, 0, sizeof mism);
        memset(has, 0, sizeof has);
        int na = 0;
        for (int64_t i = 0; i < N; i++) {
            int s = signbit(in[i]) != 0, k = bin_of(in[i]);
            count[s][k]++;
            mism[s][k] += el[i].mismatch;
            if (!el[i].finite)
                continue;
            ref_el r = {el[i].ulp_err, enc_of(in[i]), i};
            if (!has[s][k] || worse(&r, &bw[s][k]))
                bw[s][k] = r, has[s][k] = true;
            all[na++] = r;
        }
        qsort(all, (size_t)na, sizeof all[0], by_worse);
        int bad_bins = 0, bad_list = 0;
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < NVW_BIN_PER_SIGN; k++) {
                const nvw_bin *q = &b.bin[s][k];
                bool ok = q->count == count[s][k] && q->mismatches == mism[s][k] &&
                          q->has_worst == has[s][k];
                if (ok && has[s][k])
                    ok = q->max_ulp == bw[s][k].ue && q->worst_enc == bw[s][k].enc &&
                         q->worst_index == bw[s][k].index;
                if (!ok && bad_bins++ == 0)
                    tap_diag("bin [%d][%d]: count %lld/%lld, worst index %lld/%lld", s, k,
                             (long long)q->count, (long long)count[s][k], (long long)q->worst_index,
                             (long long)bw[s][k].index);
            }
        /* The list is a heap (binades.h): as a set, the 16 worst. */
        ref_el lst[NVW_WORST];
        for (int k = 0; k < b.n_worst; k++)
            lst[k] = (ref_el){b.worst[k].ulp_err, (uint32_t)b.worst[k].enc, b.worst[k].index};
        qsort(lst, (size_t)b.n_worst, sizeof lst[0], by_worse);
        bad_list = b.n_worst != (na < NVW_WORST ? na : NVW_WORST);
        for (int k = 0; !bad_list && k < b.n_worst; k++)
            bad_list = lst[k].index != all[k].index;
        tap_ok(at == N && bad_bins == 0 && !bad_list,
               "pattern %d: every binade's count, mismatches and worst, and the 16 worst, as one "
               "element at a time (%d bins differ, list %s)",
               pattern, bad_bins, bad_list ? "differs" : "same");
    }
    return tap_done();
}
