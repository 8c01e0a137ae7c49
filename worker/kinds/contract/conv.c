/* Conversion probes (docs/CONTRACT.md "Conversions"). The device converts a set
 * of source encodings; every conversion model of the vocabulary (rounding
 * direction x saturation x FTZ of the result x DAZ of the source) predicts each
 * output with nv_dtype_encode, and the models no output contradicts are the
 * measured contract. A knob on which the surviving models disagree is
 * "indistinguishable" from these inputs. Stochastic rounding is the model that
 * allows either neighbour; it is kept only when repeated conversions of one
 * value differ (IEEE 754-2019 §5.4.2 fixes one result for the others). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"

#define N_MODELS (5 * 2 * 2 * 2)

typedef struct model {
    nv_round_mode rm;
    bool daz;
    bool alive;
    int64_t first_bad; /* the input that refutes it, or -1 */
} model;

static void model_at(int k, model *m)
{
    memset(m, 0, sizeof *m);
    m->rm.rounding = (nv_rounding)(k % 5);
    m->rm.saturate = (k / 5) % 2;
    m->rm.ftz = (k / 10) % 2;
    m->daz = (k / 20) % 2;
    m->alive = true;
    m->first_bad = -1;
}

/* Does the model allow output bits o for input bits b? NaN outputs match any
 * NaN prediction (payloads are reported apart). */
static bool allows(const model *m, nv_dtype src, nv_dtype dst, uint64_t b, uint64_t o,
                   uint64_t *ret_pred)
{
    double x = nv_dtype_decode(src, b, m->daz);
    double ov = ct_dec(dst, o);
    nv_round_mode rm = m->rm;
    if (rm.rounding == NV_ROUND_STOCHASTIC) {
        rm.rounding = NV_ROUND_DOWN;
        uint64_t lo = nv_dtype_encode(dst, x, &rm, 0);
        rm.rounding = NV_ROUND_UP;
        uint64_t hi = nv_dtype_encode(dst, x, &rm, 0);
        *ret_pred = lo;
        if (isnan(ov))
            return isnan(ct_dec(dst, lo)) || isnan(ct_dec(dst, hi));
        return o == lo || o == hi;
    }
    uint64_t p = nv_dtype_encode(dst, x, &rm, 0);
    *ret_pred = p;
    if (isnan(ov))
        return isnan(ct_dec(dst, p));
    return o == p;
}

/* Append v to a growing array of encodings. */
typedef struct bitset {
    uint64_t *v;
    int64_t n, cap;
} bitset;

static int push(bitset *s, uint64_t b)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 1024;
        uint64_t *p = realloc(s->v, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = b;
    return 0;
}

/* x as a src encoding when src holds x exactly. */
static int push_exact(bitset *s, nv_dtype src, double x)
{
    uint64_t b = ct_enc(src, x);
    double back = ct_dec(src, b);
    if (!(back == x) || (x == 0 && signbit(x) != signbit(back)))
        return 0;
    return push(s, b);
}

/* The src neighbours of x (one src ulp either side) as encodings. */
static int push_around(bitset *s, nv_dtype src, double x)
{
    nv_round_mode up = {NV_ROUND_UP, false, false}, dn = {NV_ROUND_DOWN, false, false};
    double ulp = nv_dtype_ulp(src, x);
    int r = push_exact(s, src, x);
    r |= push_exact(s, src, nv_dtype_round(src, x + ulp / 2, &up, 0));
    r |= push_exact(s, src, nv_dtype_round(src, x - ulp / 2, &dn, 0));
    return r;
}

/* dst's positive finite values in increasing order, by exponent field and
 * fraction: every fraction when dst has at most 16 bits, else the first and
 * last four of each binade (enough to hold every kind of midpoint: even, odd,
 * at a binade edge). */
static int boundary_set(bitset *s, nv_dtype src, nv_dtype dst)
{
    const nv_dtype_info *di = nv_dtype_get(dst);
    int m = di->mant_bits;
    int64_t nf = (int64_t)1 << m;
    int emax_field = di->emax + di->bias;
    /* From the binade of 1 up, then down to the subnormal one: the evidence of
     * a refuted model is its first misprediction, best a plain value near 1. */
    for (int ei = 0; ei <= emax_field; ei++) {
        int bias = di->bias < emax_field ? di->bias : emax_field;
        int e = bias + ei <= emax_field ? bias + ei : emax_field - ei;
        for (int64_t f = 0; f < nf; f++) {
            if (di->bits > 16 && f >= 4 && f < nf - 4)
                f = nf - 4;
            double v = e == 0 ? ldexp((double)f, di->emin - m)
                              : ldexp(1.0 + ldexp((double)f, -m), e - di->bias);
            if (v > di->max_finite)
                break;
            double next = e == 0 ? ldexp((double)(f + 1), di->emin - m)
                                 : ldexp(1.0 + ldexp((double)(f + 1), -m), e - di->bias);
            double mid = (v + next) / 2; /* the threshold of nearest rounding */
            for (int sg = 0; sg < 2; sg++) {
                double k = sg ? -1 : 1;
                if (push_around(s, src, k * v) || push_around(s, src, k * mid))
                    return -1;
            }
        }
    }
    /* Overflow: the threshold max + ulp/2 (IEEE 754-2019 §7.4), beyond it,
     * src's largest value and the specials. */
    double mx = di->max_finite, ulp = nv_dtype_ulp(dst, mx);
    const nv_dtype_info *si = nv_dtype_get(src);
    double xs[] = {mx + ulp / 2, mx + ulp,          2 * mx,         si->max_finite,
                   INFINITY,     si->min_subnormal, si->min_normal, NAN};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        for (int sg = 0; sg < 2; sg++)
            if (push_around(s, src, sg ? -xs[i] : xs[i]))
                return -1;
    return 0;
}

static int exhaustive_set(bitset *s, nv_dtype src)
{
    uint64_t n = (uint64_t)1 << nv_dtype_get(src)->bits;
    const nv_dtype_info *si = nv_dtype_get(src);
    uint64_t one = (uint64_t)si->bias << si->mant_bits; /* the encoding of 1 */
    /* from 1 on, wrapping round: values near 1 come first in the evidence
     * (see boundary_set) */
    for (uint64_t k = 0; k < n; k++)
        if (push(s, (k + one) % n))
            return -1;
    return 0;
}

/* The one value of a knob among the surviving models, or "indistinguishable". */
static json_t *knob(const model *ms, const char *a, const char *b, int which)
{
    bool seen[2] = {false, false};
    for (int k = 0; k < N_MODELS; k++) {
        if (!ms[k].alive)
            continue;
        bool v = which == 0 ? ms[k].rm.saturate : which == 1 ? ms[k].rm.ftz : ms[k].daz;
        seen[v] = true;
    }
    if (seen[0] && seen[1])
        return json_string("indistinguishable");
    if (!seen[0] && !seen[1])
        return json_null();
    return json_string(seen[1] ? b : a);
}

static json_t *rounding_knob(const model *ms)
{
    int n = 0, which = -1;
    for (int r = 0; r < 5; r++) {
        bool any = false;
        for (int k = 0; k < N_MODELS; k++)
            any |= ms[k].alive && ms[k].rm.rounding == (nv_rounding)r;
        if (any)
            n++, which = r;
    }
    if (n == 0)
        return json_string("unrecognized");
    return json_string(n == 1 ? ct_rounding_name((nv_rounding)which) : "indistinguishable");
}

static json_t *model_name(const model *m)
{
    char buf[96];
    snprintf(buf, sizeof buf, "rounding=%s,saturate=%s,ftz=%s,daz=%s",
             ct_rounding_name(m->rm.rounding), m->rm.saturate ? "on" : "off",
             m->rm.ftz ? "on" : "off", m->daz ? "on" : "off");
    return json_string(buf);
}

/* Evidence: for each knob value no surviving model has, the input that
 * refuted the first model with that value (what the device did instead). */
static json_t *evidence(const model *ms, nv_dtype src, nv_dtype dst, const uint64_t *in,
                        const uint64_t *out)
{
    json_t *ev = json_array();
    bool shown[5 + 6] = {false};
    for (int k = 0; k < N_MODELS && ev; k++) {
        const model *m = &ms[k];
        if (m->alive || m->first_bad < 0)
            continue;
        int slot = (int)m->rm.rounding;
        /* One refutation per rounding direction, plus the first of each on-knob. */
        if (m->rm.saturate)
            slot = 5;
        if (m->rm.ftz)
            slot = 6;
        if (m->daz)
            slot = 7;
        if (shown[slot])
            continue;
        shown[slot] = true;
        int64_t i = m->first_bad;
        uint64_t pred;
        allows(m, src, dst, in[i], out[i], &pred);
        json_array_append_new(ev, json_pack("{s:o, s:o, s:o, s:o}", "refutes", model_name(m),
                                            "input", ct_bits_json(src, in[i]), "output",
                                            ct_bits_json(dst, out[i]), "model_predicts",
                                            ct_bits_json(dst, pred)));
    }
    return ev;
}

/* NaN inputs: are outputs NaN, is the sign kept, is the payload kept (as
 * nv_dtype_encode keeps it, IEEE 754-2019 §6.2.3) or one canonical pattern. */
static json_t *nan_report(nv_dtype src, nv_dtype dst, const uint64_t *in, const uint64_t *out,
                          int64_t n)
{
    int64_t nans = 0, out_nan = 0, sign_kept = 0, payload_kept = 0;
    uint64_t first = 0;
    bool one_pattern = true;
    const nv_dtype_info *di = nv_dtype_get(dst);
    for (int64_t i = 0; i < n; i++) {
        double x = ct_dec(src, in[i]);
        if (!isnan(x))
            continue;
        nans++;
        double o = ct_dec(dst, out[i]);
        if (!isnan(o))
            continue;
        if (out_nan++ == 0)
            first = out[i];
        one_pattern &= out[i] == first;
        bool sx = (in[i] >> (nv_dtype_get(src)->bits - 1)) & 1;
        bool so = (out[i] >> (di->bits - 1)) & 1;
        sign_kept += sx == so;
        payload_kept += out[i] == ct_enc(dst, x);
    }
    if (!nans)
        return json_null();
    const char *payload = payload_kept == out_nan ? "preserved"
                          : one_pattern           ? "canonical"
                                                  : "mixed";
    return json_pack("{s:I, s:I, s:s, s:b, s:o}", "inputs", (json_int_t)nans, "nan_outputs",
                     (json_int_t)out_nan, "payload", payload, "sign_preserved",
                     sign_kept == out_nan && out_nan > 0, "canonical_pattern",
                     one_pattern && out_nan ? ct_bits_json(dst, first) : json_null());
}

/* Do repeated conversions of one inexact value differ? 256 copies of the value
 * a quarter of the way between two neighbours of dst near 1, converted in two
 * calls: a device that draws its rounding bits per element shows both
 * neighbours within a call, one that draws them per call between the calls. */
static int repeats_differ(ct_dev *d, nv_dtype src, nv_dtype dst, bool *ret)
{
    const nv_dtype_info *di = nv_dtype_get(dst);
    double x = 1.0 + ldexp(1.0, -di->mant_bits - 2);
    if (di->max_finite < 2)
        x = di->min_normal * x;
    uint64_t b = ct_enc(src, x);
    *ret = false;
    if (ct_dec(src, b) != x)
        return 0;
    enum { N = 256 };
    uint64_t in[N], out[2][N];
    for (int i = 0; i < N; i++)
        in[i] = b;
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"to\": \"%s\"}", di->name);
    const uint64_t *ins[1] = {in};
    for (int c = 0; c < 2; c++) {
        int r = ct_call(d, "cast", attrs, 1, &src, ins, 0, N, dst, N, out[c]);
        if (r != NV_OK)
            return r;
    }
    for (int i = 0; i < N; i++)
        *ret |= out[0][i] != out[0][0] || out[1][i] != out[0][0];
    return 0;
}

json_t *ct_probe_conversion(ct_dev *d, nv_dtype src, nv_dtype dst, bool *ret_refused)
{
    *ret_refused = false;
    bitset in = {0};
    uint64_t *out = NULL;
    json_t *res = NULL;
    bool exhaustive = nv_dtype_get(src)->bits <= 16;
    if ((exhaustive ? exhaustive_set(&in, src) : boundary_set(&in, src, dst)) < 0)
        goto out;
    out = malloc((size_t)in.n * sizeof *out);
    if (!out)
        goto out;
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"to\": \"%s\"}", nv_dtype_name(dst));
    const uint64_t *ins[1] = {in.v};
    int r = ct_call(d, "cast", attrs, 1, &src, ins, 0, in.n, dst, in.n, out);
    if (r != NV_OK) {
        *ret_refused = ct_refused(r);
        if (!*ret_refused)
            res = json_pack("{s:s, s:s, s:s}", "from", nv_dtype_name(src), "to", nv_dtype_name(dst),
                            "error", d->err);
        goto out;
    }
    model ms[N_MODELS];
    for (int k = 0; k < N_MODELS; k++)
        model_at(k, &ms[k]);
    for (int64_t i = 0; i < in.n; i++)
        for (int k = 0; k < N_MODELS; k++) {
            uint64_t pred;
            if (ms[k].alive && !allows(&ms[k], src, dst, in.v[i], out[i], &pred)) {
                ms[k].alive = false;
                ms[k].first_bad = i;
            }
        }
    bool differ = false;
    if (repeats_differ(d, src, dst, &differ) < 0)
        differ = false;
    /* The either-neighbour model survives every deterministic device: keep it
     * only when repetition shows the rounding varies, and then only it. */
    bool any_det = false;
    for (int k = 0; k < N_MODELS; k++)
        any_det |= ms[k].alive && ms[k].rm.rounding != NV_ROUND_STOCHASTIC;
    for (int k = 0; k < N_MODELS; k++) {
        bool sr = ms[k].rm.rounding == NV_ROUND_STOCHASTIC;
        if (ms[k].alive && (sr ? !differ && any_det : differ)) {
            ms[k].alive = false;
            ms[k].first_bad = -1;
        }
    }
    json_t *models = json_array();
    for (int k = 0; k < N_MODELS && models; k++)
        if (ms[k].alive)
            json_array_append_new(models, model_name(&ms[k]));
    res = json_pack(
        "{s:s, s:s, s:I, s:b, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "from", nv_dtype_name(src),
        "to", nv_dtype_name(dst), "inputs", (json_int_t)in.n, "exhaustive", exhaustive, "rounding",
        rounding_knob(ms), "saturation", knob(ms, "overflow", "saturate", 0), "subnormal_results",
        knob(ms, "kept", "flushed", 1), "subnormal_inputs", knob(ms, "kept", "flushed", 2),
        "repeats_differ", differ, "nan", nan_report(src, dst, in.v, out, in.n), "models", models,
        "evidence", evidence(ms, src, dst, in.v, out));
out:
    free(in.v);
    free(out);
    return res;
}
