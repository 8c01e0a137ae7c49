/* Transcendental probes (docs/CONTRACT.md "Transcendentals"): every encoding of
 * a dtype of at most 16 bits, a sweep of random encodings for wider ones, per
 * function; each output against the exact value (core/ref: MPFR with Ziv's fast
 * path) for its ULP error and for correct rounding in each direction, against
 * the host C library for identity, in input order for monotonicity, and on the
 * special values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "core/numerics/rng.h"
#include "core/ref/refmath.h"

typedef struct fn_def {
    const char *op; /* catalog op */
    nv_fn fn;
    double lo, hi; /* fp32-range sweep domain (results normal and finite) */
    bool monotone; /* non-decreasing on the domain */
    float (*libmf)(float);
    double (*libm)(double);
} fn_def;

static const fn_def fns[] = {
    {"exp", NV_FN_EXP, -87, 88, true, expf, exp},
    {"exp2", NV_FN_EXP2, -126, 127, true, exp2f, exp2},
    {"expm1", NV_FN_EXPM1, -80, 88, true, expm1f, expm1},
    {"log", NV_FN_LOG, 0, INFINITY, true, logf, log},
    {"log2", NV_FN_LOG2, 0, INFINITY, true, log2f, log2},
    {"log1p", NV_FN_LOG1P, -1, INFINITY, true, log1pf, log1p},
    {"sin", NV_FN_SIN, -100, 100, false, sinf, sin},
    {"cos", NV_FN_COS, -100, 100, false, cosf, cos},
    {"tanh", NV_FN_TANH, -10, 10, true, tanhf, tanh},
    {"erf", NV_FN_ERF, -4, 4, true, erff, erf},
    {"sigmoid", NV_FN_SIGMOID, -80, 80, true, NULL, NULL},
    {"silu", NV_FN_SILU, -80, 80, false, NULL, NULL},
    {"gelu", NV_FN_GELU_ERF, -10, 10, false, NULL, NULL},
    {"rsqrt", NV_FN_RSQRT, 0, INFINITY, false, NULL, NULL},
};
#define N_FNS (sizeof fns / sizeof fns[0])

/* The inputs: finite normal encodings (and zero) of dt inside the domain. */
static int64_t inputs(nv_dtype dt, const fn_def *f, int64_t sweep, uint64_t seed, uint64_t *in)
{
    const nv_dtype_info *i = nv_dtype_get(dt);
    int64_t n = 0;
    bool exhaustive = i->bits <= 16;
    uint64_t total = exhaustive ? (uint64_t)1 << i->bits : (uint64_t)sweep;
    nv_rng rng;
    nv_rng_init(&rng, seed, 0x7472616e, (uint32_t)f->fn);
    for (uint64_t k = 0; k < total; k++) {
        for (int tries = 0; tries < 64; tries++) {
            uint64_t b = exhaustive      ? k
                         : i->bits == 64 ? nv_rng_u64(&rng)
                                         : nv_rng_u32(&rng) & ((1ull << i->bits) - 1);
            double x = ct_dec(dt, b);
            bool ok = isfinite(x) && (x == 0 || fabs(x) >= i->min_normal) && x > f->lo && x < f->hi;
            if (ok) {
                in[n++] = b;
                break;
            }
            if (exhaustive)
                break;
        }
    }
    return n;
}

typedef struct fn_stats {
    double max_ulp;
    int64_t worst, points, mono_bad, mono_first, libm_bad, libm_first;
    bool cr[4], faithful;
} fn_stats;

static int cmp_by_x(const void *a, const void *b, void *dt)
{
    double x = ct_dec(*(nv_dtype *)dt, *(const uint64_t *)a);
    double y = ct_dec(*(nv_dtype *)dt, *(const uint64_t *)b);
    return (x > y) - (x < y);
}

static void judge_points(nv_dtype dt, const fn_def *f, const ct_known *k, const uint64_t *in,
                         const uint64_t *out, int64_t n, fn_stats *s)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    memset(s, 0, sizeof *s);
    for (int r = 0; r < 4; r++)
        s->cr[r] = true;
    s->faithful = true;
    s->worst = s->mono_first = s->libm_first = -1;
    double prev = -INFINITY;
    nv_round_mode rm = {k->rounding_known ? k->rounding : NV_ROUND_NEAREST_EVEN, false, false};
    for (int64_t i = 0; i < n; i++) {
        double x = ct_dec(dt, in[i]), y = ct_dec(dt, out[i]);
        double hi, lo;
        nv_ref_eval(f->fn, x, dt, &hi, &lo);
        /* Results outside the normal range are FTZ's and saturation's question,
         * not the function's. */
        if (!isfinite(hi) || fabs(hi) < info->min_normal || fabs(hi) > info->max_finite)
            continue;
        /* Below 2^-968 the fp64 pair is fp64's nearest value alone (refmath.h
         * nv_ref_round_pair): no error can be measured against it. */
        if (dt == NV_DT_FP64 && fabs(hi) < 0x1p-968)
            continue;
        if (f->monotone) {
            if (y < prev) {
                if (s->mono_bad++ == 0)
                    s->mono_first = i;
            }
            if (!isnan(y))
                prev = y;
        }
        /* Host identity: the host's function in the device's evaluation width
         * (fp32 up to fp32, fp64 for fp64), rounded to dt in the measured
         * direction (a no-op for fp32 and fp64; unknowable for narrower dtypes
         * under stochastic rounding). */
        if (f->libmf && dt != NV_DT_FP64 &&
            (dt == NV_DT_FP32 || rm.rounding != NV_ROUND_STOCHASTIC)) {
            double h = nv_dtype_round(dt, (double)f->libmf((float)x), &rm, 0);
            if (!(ct_enc(dt, h) == out[i] || (isnan(h) && isnan(y))) && s->libm_bad++ == 0)
                s->libm_first = i;
        } else if (f->libm && dt == NV_DT_FP64) {
            double h = f->libm(x);
            if (!(ct_enc(dt, h) == out[i] || (isnan(h) && isnan(y))) && s->libm_bad++ == 0)
                s->libm_first = i;
        } else {
            s->libm_bad = -1; /* no host counterpart */
        }
        double cr[4];
        bool edge = false;
        for (int r = 0; r < 4; r++) {
            cr[r] = nv_ref_round_pair(hi, lo, dt, (nv_rounding)r);
            edge |= !(fabs(cr[r]) >= info->min_normal && fabs(cr[r]) <= info->max_finite);
        }
        if (edge) /* a direction rounds out of the normal range: FTZ or overflow */
            continue;
        s->points++;
        for (int r = 0; r < 4; r++)
            s->cr[r] &= ct_enc(dt, cr[r]) == out[i];
        s->faithful &= y == cr[2] || y == cr[3];
        double ulp = nv_dtype_ulp(dt, hi);
        double e = isfinite(y) ? fabs((y - hi) - lo) / ulp : INFINITY;
        if (!(e <= s->max_ulp)) {
            s->max_ulp = isnan(e) ? INFINITY : e;
            s->worst = i;
        }
    }
}

static json_t *point_json(nv_dtype dt, const fn_def *f, uint64_t in, uint64_t out)
{
    double hi, lo;
    double x = ct_dec(dt, in);
    nv_ref_eval(f->fn, x, dt, &hi, &lo);
    return json_pack("{s:o, s:o, s:o}", "input", ct_bits_json(dt, in), "output",
                     ct_bits_json(dt, out), "exact", ct_real_json(hi + lo));
}

/* f at +-0, +-inf and NaN against the correctly rounded reference. */
static json_t *specials(ct_dev *d, nv_dtype dt, const fn_def *f)
{
    double xs[5] = {0.0, -0.0, INFINITY, -INFINITY, NAN};
    uint64_t in[5], out[5];
    for (int i = 0; i < 5; i++)
        in[i] = ct_enc(dt, xs[i]);
    const uint64_t *ins[1] = {in};
    json_t *bad = json_array();
    if (ct_call(d, f->op, "{}", 1, &dt, ins, 0, 5, dt, 5, out) != NV_OK)
        return bad;
    for (int i = 0; i < 5; i++) {
        double x = ct_dec(dt, in[i]);
        if (!isfinite(x) && !nv_dtype_get(dt)->has_inf && !isnan(x))
            continue;
        double want = nv_ref_round(f->fn, x, dt, NV_ROUND_NEAREST_EVEN);
        double got = ct_dec(dt, out[i]);
        bool same = (isnan(want) && isnan(got)) || (want == got && signbit(want) == signbit(got));
        if (!same)
            json_array_append_new(
                bad, json_pack("{s:o, s:o, s:o}", "input", ct_bits_json(dt, in[i]), "output",
                               ct_bits_json(dt, out[i]), "expected", ct_real_json(want)));
    }
    return bad;
}

json_t *ct_probe_transcendental(ct_dev *d, nv_dtype dt, const ct_known *k, int64_t sweep,
                                uint64_t seed, bool *ret_refused)
{
    *ret_refused = false;
    const nv_dtype_info *info = nv_dtype_get(dt);
    int64_t cap = info->bits <= 16 ? (int64_t)1 << info->bits : sweep;
    if (cap < 1)
        return json_pack("{s:s}", "kind", "not_probed");
    uint64_t *in = malloc((size_t)cap * sizeof *in), *out = malloc((size_t)cap * sizeof *out);
    json_t *res = json_object(), *per = json_object();
    if (!in || !out || !res || !per)
        goto oom;
    bool all_cr = true, all_libm = true, any_libm = false, all_faithful = true, any = false;
    bool cr_dir[4] = {true, true, true, true};
    double max_ulp = 0;
    for (size_t q = 0; q < N_FNS; q++) {
        const fn_def *f = &fns[q];
        int64_t n = inputs(dt, f, sweep, seed, in);
        qsort_r(in, (size_t)n, sizeof *in, cmp_by_x, &dt);
        const uint64_t *ins[1] = {in};
        int r = ct_call(d, f->op, "{}", 1, &dt, ins, 0, n, dt, n, out);
        if (r != NV_OK) {
            if (!ct_refused(r)) {
                json_object_set_new(per, f->op, json_pack("{s:s}", "error", d->err));
                all_cr = all_libm = false;
            }
            continue;
        }
        any = true;
        fn_stats s;
        judge_points(dt, f, k, in, out, n, &s);
        json_t *dirs = json_array();
        for (int r2 = 0; r2 < 4; r2++) {
            cr_dir[r2] &= s.cr[r2];
            if (s.cr[r2])
                json_array_append_new(dirs, json_string(ct_rounding_name((nv_rounding)r2)));
        }
        all_cr &= json_array_size(dirs) > 0;
        all_faithful &= s.faithful;
        if (s.libm_bad >= 0) {
            any_libm = true;
            all_libm &= s.libm_bad == 0;
        }
        if (s.max_ulp > max_ulp)
            max_ulp = s.max_ulp;
        json_t *e = json_pack("{s:I, s:b, s:o, s:o, s:o, s:o}", "points", (json_int_t)s.points,
                              "exhaustive", info->bits <= 16, "max_ulp", ct_num_json(s.max_ulp),
                              "correctly_rounded", dirs, "special_values", specials(d, dt, f),
                              "matches_host_libm",
                              s.libm_bad < 0 ? json_null() : json_boolean(s.libm_bad == 0));
        if (s.worst >= 0)
            json_object_set_new(e, "worst", point_json(dt, f, in[s.worst], out[s.worst]));
        if (f->monotone) {
            json_object_set_new(e, "monotonic", json_boolean(s.mono_bad == 0));
            if (s.mono_first > 0)
                json_object_set_new(
                    e, "monotonicity_break",
                    json_pack("{s:o, s:o}", "before",
                              point_json(dt, f, in[s.mono_first - 1], out[s.mono_first - 1]),
                              "after", point_json(dt, f, in[s.mono_first], out[s.mono_first])));
        }
        if (s.libm_first >= 0)
            json_object_set_new(e, "host_libm_differs",
                                point_json(dt, f, in[s.libm_first], out[s.libm_first]));
        json_object_set_new(per, f->op, e);
    }
    if (!any) {
        *ret_refused = true;
        json_decref(res);
        json_decref(per);
        free(in);
        free(out);
        return NULL;
    }
    bool one_dir = false;
    for (int r = 0; r < 4; r++)
        one_dir |= cr_dir[r];
    bool stochastic = k->rounding_known && k->rounding == NV_ROUND_STOCHASTIC;
    /* Correctly rounded: one direction for every function, or, under measured
     * stochastic rounding, always one of the two neighbours of the exact value. */
    const char *kind = all_cr && one_dir                                    ? "correctly_rounded"
                       : any_libm && all_libm                               ? "host_libm"
                       : stochastic && all_faithful                         ? "correctly_rounded"
                       : stochastic && dt != NV_DT_FP32 && dt != NV_DT_FP64 ? "indistinguishable"
                                                                            : "approximation";
    json_object_set_new(res, "kind", json_string(kind));
    json_object_set_new(res, "max_ulp", ct_num_json(max_ulp));
    json_object_set_new(res, "functions", per);
    free(in);
    free(out);
    return res;
oom:
    json_decref(res);
    json_decref(per);
    free(in);
    free(out);
    return NULL;
}
