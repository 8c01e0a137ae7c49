/* Elementwise arithmetic probes (docs/CONTRACT.md "Arithmetic"): each property
 * is read from a handful of inputs whose outputs differ between the models, in
 * the style of Kahan's PARANOIA (every input exact in dt, so the probe depends
 * on nothing but the property). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "core/numerics/rng.h"
#include "core/ref/refmath.h"

/* One elementwise call on n elements of dt. */
static int elt(ct_dev *d, const char *op, nv_dtype dt, int n_in, const double *const *x, int64_t n,
               uint64_t *out)
{
    uint64_t *bufs[3] = {0};
    const uint64_t *ins[3];
    nv_dtype dts[3] = {dt, dt, dt};
    int r = NV_E_NOMEM;
    for (int k = 0; k < n_in; k++) {
        bufs[k] = malloc((size_t)n * sizeof(uint64_t));
        if (!bufs[k])
            goto out;
        for (int64_t i = 0; i < n; i++)
            bufs[k][i] = ct_enc(dt, x[k][i]);
        ins[k] = bufs[k];
    }
    r = ct_call(d, op, "{}", n_in, dts, ins, 0, n, dt, n, out);
out:
    for (int k = 0; k < n_in; k++)
        free(bufs[k]);
    return r;
}

static json_t *case_json(nv_dtype dt, const char *op, int n_in, const double *in, uint64_t out)
{
    json_t *a = json_array();
    for (int k = 0; k < n_in; k++)
        json_array_append_new(a, ct_bits_json(dt, ct_enc(dt, in[k])));
    return json_pack("{s:s, s:o, s:o}", "op", op, "inputs", a, "output", ct_bits_json(dt, out));
}

/* A binary op on one pair: its output bits, or a refusal. */
static int one(ct_dev *d, const char *op, nv_dtype dt, int n_in, const double *v, uint64_t *out)
{
    double x0[1] = {v[0]}, x1[1] = {n_in > 1 ? v[1] : 0}, x2[1] = {n_in > 2 ? v[2] : 0};
    const double *x[3] = {x0, x1, x2};
    return elt(d, op, dt, n_in, x, 1, out);
}

/* FTZ: (1 + 2^-m) min_normal - min_normal = min_subnormal exactly, from
 * normal inputs; DAZ: min_subnormal + min_normal, a normal result from a
 * subnormal input. Neither depends on the rounding direction (both exact). */
static void subnormals(ct_dev *d, nv_dtype dt, json_t *res, json_t *ev)
{
    const nv_dtype_info *i = nv_dtype_get(dt);
    if (!i->has_subnormals) {
        json_object_set_new(res, "ftz", json_string("indistinguishable"));
        json_object_set_new(res, "daz", json_string("indistinguishable"));
        return;
    }
    double a[2] = {i->min_normal + i->min_subnormal, i->min_normal};
    uint64_t o;
    if (one(d, "sub", dt, 2, a, &o) == NV_OK) {
        double v = ct_dec(dt, o);
        json_object_set_new(res, "ftz",
                            v == 0                  ? json_true()
                            : v == i->min_subnormal ? json_false()
                                                    : json_string("unrecognized"));
        json_array_append_new(
            ev, json_pack("{s:s, s:o}", "property", "ftz", "case", case_json(dt, "sub", 2, a, o)));
    }
    double b[2] = {i->min_subnormal, i->min_normal};
    if (one(d, "add", dt, 2, b, &o) == NV_OK) {
        double v = ct_dec(dt, o);
        json_object_set_new(res, "daz",
                            v == i->min_normal ? json_true()
                            : v == b[0] + b[1] ? json_false()
                                               : json_string("unrecognized"));
        json_array_append_new(
            ev, json_pack("{s:s, s:o}", "property", "daz", "case", case_json(dt, "add", 2, b, o)));
    }
}

/* fma(a, a, -p) with a = 1 + 2^-k, 2k > m, and p the device's own product:
 * a^2 = 1 + 2^(1-k) + 2^-2k needs 2k + 1 bits. A device that rounds the
 * product first returns a multiple of ulp(p) (0, or one ulp when a stochastic
 * rounding of the second product went the other way); one that fuses returns
 * a^2 - p exactly, +-2^-2k or 2^-2k - ulp(p), never a multiple. A compute
 * dtype wider than dt shows as fused (the product is exact there). */
static void fma_probe(ct_dev *d, nv_dtype dt, json_t *res, json_t *ev)
{
    int m = nv_dtype_get(dt)->mant_bits;
    if (m < 2) {
        json_object_set_new(res, "fma", json_string("indistinguishable"));
        return;
    }
    int k = m / 2 + 1;
    double a = 1.0 + ldexp(1.0, -k);
    double pa[2] = {a, a};
    uint64_t p;
    if (one(d, "mul", dt, 2, pa, &p) != NV_OK)
        return;
    double c[3] = {a, a, -ct_dec(dt, p)};
    uint64_t o;
    int r = one(d, "fma", dt, 3, c, &o);
    if (r != NV_OK) {
        json_object_set_new(res, "fma", json_string("not_offered"));
        return;
    }
    double v = ct_dec(dt, o), q = v / nv_dtype_ulp(dt, ct_dec(dt, p));
    json_object_set_new(res, "fma", json_string(q == nearbyint(q) ? "split" : "fused"));
    json_array_append_new(ev, json_pack("{s:s, s:o, s:o}", "property", "fma", "product",
                                        case_json(dt, "mul", 2, pa, p), "case",
                                        case_json(dt, "fma", 3, c, o)));
}

static inline void two_prod(double a, double b, double *p, double *e)
{
    *p = a * b;
    *e = fma(a, b, -*p);
}

/* The exact result of op as hi + lo for inputs of at most 26 bits (fp32 and
 * narrower: products are exact in fp64, quotients and roots carry their
 * remainder). */
static void exact(const char *op, double a, double b, double *hi, double *lo)
{
    if (!strcmp(op, "add")) {
        double s = a + b, bv = s - a;
        *hi = s;
        *lo = (a - (s - bv)) + (b - bv);
    } else if (!strcmp(op, "mul")) {
        two_prod(a, b, hi, lo);
    } else if (!strcmp(op, "div")) {
        *hi = a / b;
        *lo = fma(-*hi, b, a) / b;
    } else {
        *hi = sqrt(a);
        *lo = fma(-*hi, *hi, a) / (2 * *hi);
    }
}

/* Correct rounding of add, mul, div, sqrt: 512 random operand pairs (random
 * encodings of normal fp32-range values, half of them near each other so that
 * sums cancel), each output compared with the exact result rounded in each
 * direction (nv_ref_round_pair); the directions every output agrees with. */
static json_t *rounding_ops(ct_dev *d, nv_dtype dt, uint64_t seed, json_t *ev)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    if (info->bits > 32) /* fp64: the exact pairs above need narrower inputs */
        return json_string("not_probed");
    enum { N = 512 };
    double *a = malloc(2 * N * sizeof(double));
    uint64_t *o = malloc(N * sizeof(uint64_t));
    json_t *res = json_object();
    if (!a || !o || !res)
        goto out;
    double *b = a + N;
    nv_rng rng;
    nv_rng_init(&rng, seed, 0x61726974, 0);
    for (int i = 0; i < N; i++) {
        /* exponents within a third of the range: products and quotients stay
         * finite */
        int span = info->emax / 3 < 12 ? info->emax / 3 : 12;
        double u =
            ldexp(1.0 + nv_rng_uniform(&rng), (int)(nv_rng_u32(&rng) % (2 * span + 1)) - span);
        double v = i % 2 ? u * (1 + nv_rng_uniform(&rng) * 0x1p-6)
                         : ldexp(1.0 + nv_rng_uniform(&rng),
                                 (int)(nv_rng_u32(&rng) % (2 * span + 1)) - span);
        a[i] = ct_dec(dt, ct_enc(dt, u));
        b[i] = ct_dec(dt, ct_enc(dt, nv_rng_u32(&rng) & 1 ? -v : v));
    }
    static const char *const ops[] = {"add", "mul", "div", "sqrt"};
    for (int k = 0; k < 4; k++) {
        const double *x[2] = {a, b};
        bool is_sqrt = k == 3;
        if (elt(d, ops[k], dt, is_sqrt ? 1 : 2, x, N, o) != NV_OK) {
            json_object_set_new(res, ops[k], json_string("not_offered"));
            continue;
        }
        bool ok[4] = {true, true, true, true};
        int bad_i = -1;
        for (int i = 0; i < N; i++) {
            double hi, lo;
            exact(ops[k], a[i], b[i], &hi, &lo);
            if (fabs(hi) < info->min_normal) /* FTZ is judged apart */
                continue;
            for (int r = 0; r < 4; r++)
                if (ok[r] && ct_enc(dt, nv_ref_round_pair(hi, lo, dt, (nv_rounding)r)) != o[i]) {
                    ok[r] = false;
                    if (r == 0)
                        bad_i = i;
                }
        }
        json_t *dirs = json_array();
        for (int r = 0; r < 4; r++)
            if (ok[r])
                json_array_append_new(dirs, json_string(ct_rounding_name((nv_rounding)r)));
        json_object_set_new(res, ops[k],
                            json_pack("{s:b, s:o}", "correctly_rounded", json_array_size(dirs) > 0,
                                      "directions", dirs));
        if (!json_array_size(dirs) && bad_i >= 0) {
            double in[2] = {a[bad_i], b[bad_i]};
            json_array_append_new(ev,
                                  json_pack("{s:s, s:o}", "property", ops[k], "case",
                                            case_json(dt, ops[k], is_sqrt ? 1 : 2, in, o[bad_i])));
        }
    }
out:
    free(a);
    free(o);
    return res;
}

/* Which NaN add(a, b) returns for two quiet NaNs told apart by payload and
 * sign (a: +, payload 1; b: -, payload 2): "first", "second", "canonical"
 * (the default NaN of either sign) or "other" (IEEE 754-2019 §6.2.3 leaves
 * the choice open). */
static json_t *nan_propagation(ct_dev *d, nv_dtype dt)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    uint64_t q = ct_enc(dt, NAN), sign = (uint64_t)1 << (info->bits - 1);
    uint64_t a = q | 1, b = (q | 2) | sign, o;
    if (dt == NV_DT_TF32) /* tf32's low 13 bits are zero: payload bits above them */
        a = q | (1u << 13), b = (q | (2u << 13)) | sign;
    uint64_t ia[1] = {a}, ib[1] = {b};
    const uint64_t *ins[2] = {ia, ib};
    nv_dtype dts[2] = {dt, dt};
    if (ct_call(d, "add", "{}", 2, dts, ins, 0, 1, dt, 1, &o) != NV_OK)
        return json_null();
    const char *which = o == a                     ? "first"
                        : o == b                   ? "second"
                        : (o | sign) == (q | sign) ? "canonical"
                        : isnan(ct_dec(dt, o))     ? "other"
                                                   : "not_nan";
    return json_pack("{s:s, s:[o,o], s:o}", "returns", which, "inputs", ct_bits_json(dt, a),
                     ct_bits_json(dt, b), "output", ct_bits_json(dt, o));
}

/* Named single cases whose outputs are the property (NaN propagation, signed
 * zeros, maximum/minimum with NaN and -0 < +0, IEEE 754-2019 §6.3, §9.6). */
static json_t *semantics(ct_dev *d, nv_dtype dt)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    json_t *res = json_object();
    double qa = NAN;
    static const struct {
        const char *name, *op;
        int which; /* 0: (-0,-0) 1: (+0,-0) 2: (NaN,1) 3: (1,NaN) 4: (-0,+0) 5: (+0,-0) */
    } cases[] = {
        {"add(-0,-0)", "add", 0},         {"add(+0,-0)", "add", 1},
        {"mul(-0,+0)", "mul", 4},         {"maximum(-0,+0)", "maximum", 4},
        {"maximum(+0,-0)", "maximum", 5}, {"minimum(-0,+0)", "minimum", 4},
        {"minimum(+0,-0)", "minimum", 5}, {"maximum(nan,1)", "maximum", 2},
        {"maximum(1,nan)", "maximum", 3}, {"minimum(nan,1)", "minimum", 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (!info->has_nan && cases[c].which >= 2 && cases[c].which != 4 && cases[c].which != 5)
            continue;
        double v[2];
        switch (cases[c].which) {
        case 0:
            v[0] = -0.0, v[1] = -0.0;
            break;
        case 1:
            v[0] = 0.0, v[1] = -0.0;
            break;
        case 2:
            v[0] = qa, v[1] = 1;
            break;
        case 3:
            v[0] = 1, v[1] = qa;
            break;
        case 4:
            v[0] = -0.0, v[1] = 0.0;
            break;
        default:
            v[0] = 0.0, v[1] = -0.0;
            break;
        }
        uint64_t o;
        if (one(d, cases[c].op, dt, 2, v, &o) != NV_OK)
            continue;
        json_object_set_new(res, cases[c].name, ct_bits_json(dt, o));
    }
    if (info->has_nan)
        json_object_set_new(res, "nan_propagation", nan_propagation(d, dt));
    return res;
}

json_t *ct_probe_arithmetic(ct_dev *d, nv_dtype dt, uint64_t seed, bool *ret_refused)
{
    double one_v[2] = {1, 1};
    uint64_t o;
    int r = one(d, "add", dt, 2, one_v, &o);
    *ret_refused = r != NV_OK && ct_refused(r);
    if (r != NV_OK)
        return *ret_refused ? NULL : json_pack("{s:s}", "error", d->err);
    json_t *res = json_object(), *ev = json_array();
    if (!res || !ev) {
        json_decref(res);
        json_decref(ev);
        return NULL;
    }
    subnormals(d, dt, res, ev);
    fma_probe(d, dt, res, ev);
    json_object_set_new(res, "basic_ops", rounding_ops(d, dt, seed, ev));
    json_object_set_new(res, "special_cases", semantics(d, dt));
    json_object_set_new(res, "evidence", ev);
    return res;
}
