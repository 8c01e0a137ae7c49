/* The binades and worst elements of sweep cases (worker/kinds/op/binades.c):
 * a stride-128 sweep of fp32 exp over [1, 4) (two binades, 65536 encodings
 * each). On emu exact every binade is within 0.5 ulp with no mismatch, the
 * binades cover the case (counts add to compared, the largest binade max is
 * the case's max_ulp, mismatches add up); on emu:transcendental=libm the worst
 * list is recomputed here from glibc's expf and MPFR's exp alone, and no
 * element outside the list is worse; the result is the same whole, in blocks
 * on 1 thread and in blocks on 2 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <mpfr.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"

#define STRIDE 128
#define N (INT64_C(1) << 24) / STRIDE /* encodings of [1, 4): 2^24 */

static const char *spec = "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": "
                          "[[131072]], \"inputs\": [\"sweep\"], \"sweep\": {\"stride\": 128, "
                          "\"from\": 1, \"to\": 3.9999998}}";

static json_t *run(const char *backend, int threads, int64_t block, char **text)
{
    json_t *j = json_loads(spec, 0, NULL);
    nvw_run_opts o = {.threads = threads, .op_block_elems = block};
    json_t *res = NULL;
    char *err = NULL;
    int r = nvw_run_job(j, backend, &o, &res, &err);
    json_decref(j);
    if (r != 0)
        tap_diag("run failed (%d): %s", r, err ? err : "?");
    free(err);
    *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
    return res;
}

static json_t *case0(json_t *res)
{
    return json_array_get(json_object_get(res, "cases"), 0);
}

/* The binades against the case: counts, maxima and mismatches cover it. */
static void check_cover(const char *what, json_t *c)
{
    json_t *bins = json_object_get(c, "binades");
    double mx = 0;
    int64_t count = 0, mism = 0;
    size_t k;
    json_t *b;
    json_array_foreach(bins, k, b) {
        count += json_integer_value(json_object_get(b, "count"));
        mism += json_integer_value(json_object_get(b, "mismatches"));
        double m = json_real_value(json_object_get(b, "max_ulp"));
        mx = m > mx ? m : mx;
    }
    tap_ok(json_array_size(bins) == 2 && count == json_integer_value(json_object_get(c, "compared")) &&
               mism == json_integer_value(json_object_get(c, "mismatches")) &&
               mx == json_real_value(json_object_get(c, "max_ulp")),
           "%s: the binades cover the case (%zu binades, %lld elements, %lld mismatches, max %.17g "
           "= the case's max_ulp %.17g)",
           what, json_array_size(bins), (long long)count, (long long)mism, mx,
           json_real_value(json_object_get(c, "max_ulp")));
}

/* The ulp error of y against exp(x) by MPFR at 200 bits: |y - e| / ulp(e) in
 * fp32, e normal here (exp of [1, 4) is in [e, e^4)). */
static double ulp_err(float x, float y, mpfr_t e, mpfr_t d)
{
    mpfr_set_flt(e, x, MPFR_RNDN);
    mpfr_exp(e, e, MPFR_RNDN);
    mpfr_sub_d(d, e, (double)y, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_mul_2si(d, d, 23 - (int)(mpfr_get_exp(e) - 1), MPFR_RNDN);
    return mpfr_get_d(d, MPFR_RNDN);
}

typedef struct el {
    uint32_t enc;
    double ue;
} el;

static int by_error(const void *a, const void *b)
{
    const el *x = a, *y = b;
    if (x->ue != y->ue)
        return x->ue < y->ue ? 1 : -1;
    return x->enc < y->enc ? -1 : x->enc > y->enc;
}

int main(void)
{
    char *t;
    json_t *res = run("emu", 1, 4096, &t);
    json_t *c = case0(res), *bins = json_object_get(c, "binades");
    bool exact_ok = json_array_size(bins) == 2;
    for (size_t k = 0; k < json_array_size(bins); k++) {
        json_t *b = json_array_get(bins, k);
        exact_ok &= json_integer_value(json_object_get(b, "exponent")) == (json_int_t)k &&
                    !json_object_get(b, "class") &&
                    json_integer_value(json_object_get(b, "count")) == N / 2 &&
                    json_real_value(json_object_get(b, "max_ulp")) <= 0.5 &&
                    json_integer_value(json_object_get(b, "mismatches")) == 0;
    }
    tap_ok(exact_ok && json_array_size(json_object_get(c, "worst")) == 16,
           "emu exact: binades 2^0 and 2^1, 65536 elements each, within 0.5 ulp, no mismatch");
    check_cover("emu exact", c);
    json_decref(res);
    free(t);

    char *tw, *t1, *t2;
    json_t *rw = run("emu:transcendental=libm", 1, -1, &tw);
    json_t *r1 = run("emu:transcendental=libm", 1, 4096, &t1);
    json_t *r2 = run("emu:transcendental=libm", 2, 1024, &t2);
    tap_ok(tw && t1 && t2 && !strcmp(tw, t1) && !strcmp(tw, t2),
           "libm: whole, blocks of 4096 on 1 thread and of 1024 on 2 threads give the same result");
    c = case0(r1);
    check_cover("libm", c);

    /* Every encoding of the sweep, recomputed: glibc's expf is the device. */
    el *all = malloc(sizeof *all * N);
    mpfr_t e, d;
    mpfr_inits2(200, e, d, (mpfr_ptr)0);
    for (int64_t i = 0; all && i < N; i++) {
        float x;
        uint32_t enc = 0x3f800000u + (uint32_t)(i * STRIDE);
        memcpy(&x, &enc, sizeof x);
        all[i] = (el){enc, ulp_err(x, expf(x), e, d)};
    }
    if (all)
        qsort(all, N, sizeof *all, by_error);
    json_t *worst = json_object_get(c, "worst");
    bool listed = all && json_array_size(worst) == 16;
    for (size_t k = 0; listed && k < json_array_size(worst); k++) {
        json_t *w = json_array_get(worst, k);
        uint32_t enc = (uint32_t)strtoul(json_string_value(json_object_get(w, "input")), NULL, 16);
        float x, y;
        memcpy(&x, &enc, sizeof x);
        y = expf(x);
        double ue = ulp_err(x, y, e, d);
        /* The reference's exact value of exp is a double where its fast path
         * decides the fp32 rounding (lo 0): within 2^-53 relative of MPFR's,
         * that is 2^-53 2^24 = 2^-29 fp32 ulp; 2^-28 allows the error's own
         * rounding. */
        listed &= enc == all[k].enc && (double)y == json_real_value(json_object_get(w, "got")) &&
                  fabs(ue - json_real_value(json_object_get(w, "ulp_error"))) <= 0x1p-28;
        if (!listed)
            tap_diag("worst %zu: 0x%08x %.17g listed, recomputed 0x%08x %.17g", k, enc,
                     json_real_value(json_object_get(w, "ulp_error")), all[k].enc, all[k].ue);
    }
    tap_ok(listed && all[16].ue <= all[15].ue,
           "libm: the 16 worst are glibc's expf's worst by MPFR, in order (first %.6f ulp at %s, "
           "the 17th %.6f)",
           all ? all[0].ue : 0, json_string_value(json_object_get(json_array_get(worst, 0), "input")),
           all ? all[16].ue : 0);
    mpfr_clears(e, d, (mpfr_ptr)0);
    free(all);
    json_decref(rw);
    json_decref(r1);
    json_decref(r2);
    free(tw);
    free(t1);
    free(t2);
    return tap_done();
}
