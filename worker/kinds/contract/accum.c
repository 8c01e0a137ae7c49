/* Accumulation probes of sum (docs/CONTRACT.md "Accumulation").
 *
 * Effective bits: rows [B, B 2^-t, -B] in all six orders. Whatever the
 * reduction tree, some order adds B and B 2^-t first, and then the output is
 * B 2^-t only when the accumulator holds B (1 + 2^-t): t <= p - 1 (the
 * exponent-of-1 probe of Fasi, Higham, Mikaitis & Pranesh 2021, made
 * order-free by the permutations). Range: [R, R] with 2R beyond fp16's (or
 * fp32's) largest value. Order: a fit. Each order family of the vocabulary
 * (sequential, pairwise, tree:k, splitk:k) is simulated on positive random
 * vectors in the measured accumulator dtype and rounding; the families whose
 * output bits equal the device's on every vector remain. Determinism: the
 * same call repeated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "core/numerics/rng.h"
#include "core/ref/blocksum.h"

#define CT_MAX_K 128  /* tree:k and splitk:k are fitted for k in 2..CT_MAX_K */
#define CT_LONG 20011 /* > 128 * 129: ceil(n/k) differs for every k <= 128 */
#define CT_SHORT 1000
#define CT_SHORT_ROWS 128
#define CT_CANCEL 4 /* the terms that cancel a row's sum */
#define CT_LONG_ROWS 2

int ct_sum_rows(ct_dev *d, bool mm, nv_dtype dt, const double *x, int64_t rows, int64_t cols,
                    uint64_t *out)
{
    uint64_t *b = malloc((size_t)(rows * cols + cols) * sizeof *b);
    if (!b)
        return NV_E_NOMEM;
    for (int64_t i = 0; i < rows * cols; i++)
        b[i] = ct_enc(dt, x[i]);
    uint64_t *ones = b + rows * cols;
    for (int64_t i = 0; i < cols; i++)
        ones[i] = ct_enc(dt, 1.0);
    int r;
    if (mm) {
        const uint64_t *ins[2] = {b, ones};
        nv_dtype dts[2] = {dt, dt};
        const int64_t shapes[4] = {rows, cols, cols, 1};
        r = ct_call_shaped(d, "matmul", "{}", 2, dts, ins, shapes, dt, rows, out);
    } else {
        const uint64_t *ins[1] = {b};
        r = ct_call(d, "sum", "{\"axis\": -1}", 1, &dt, ins, rows, cols, dt, rows, out);
    }
    free(b);
    return r;
}

/* ---- the order model ---- */
typedef struct sim {
    nv_dtype acc, out;
    nv_round_mode rm;
    const double *x;
    int w;      /* terms per rounding of a sequential run (the measured block width) */
    bool trunc; /* the measured alignment truncates */
} sim;

#define SIM_MAX_BLOCK 256

/* a + b in the accumulator, through the truncating adder when measured so. */
static double sim_add(const sim *s, double a, double b)
{
    if (!s->trunc)
        return ct_add(s->acc, a, b, &s->rm);
    const double t[2] = {a, b};
    return nv_block_sum(t, 2, s->acc, &s->rm, 0, true);
}

/* A run of a multi-term adder: the accumulator and the next w terms rounded
 * once (blocksum.h), the first block the first w terms alone. */
static double run_blocked(const sim *s, int64_t first, int64_t stride, int64_t count)
{
    double t[SIM_MAX_BLOCK + 1], a = 0;
    for (int64_t j = 0; j < count;) {
        int n = 0;
        if (j > 0)
            t[n++] = a;
        for (int q = 0; q < s->w && j < count; q++, j++)
            t[n++] = nv_dtype_round(s->acc, s->x[first + j * stride], &s->rm, 0);
        a = nv_block_sum(t, n, s->acc, &s->rm, 0, s->trunc);
    }
    return a;
}

static double run(const sim *s, int64_t first, int64_t stride, int64_t count)
{
    if (s->w > 1 || s->trunc)
        return run_blocked(s, first, stride, count);
    double a = nv_dtype_round(s->acc, s->x[first], &s->rm, 0);
    for (int64_t j = 1; j < count; j++)
        a = ct_add(s->acc, a, nv_dtype_round(s->acc, s->x[first + j * stride], &s->rm, 0), &s->rm);
    return a;
}

/* Recursive halving, the left half first (Higham 2002, §4.2). */
static double pairwise(const sim *s, int64_t lo, int64_t n)
{
    if (n == 1)
        return nv_dtype_round(s->acc, s->x[lo], &s->rm, 0);
    int64_t h = n / 2;
    double a = pairwise(s, lo, h);
    return sim_add(s, a, pairwise(s, lo + h, n - h));
}

/* tree:k: lane j adds terms j, j + k, ... in order; the lanes are combined by
 * recursive halving (a GPU block's strided loops, then its shared-memory tree). */
static double lanes(const sim *s, int64_t n, int64_t k, int64_t lo, int64_t m)
{
    if (m == 1)
        return run(s, lo, k, (n - lo + k - 1) / k);
    int64_t h = m / 2;
    double a = lanes(s, n, k, lo, h);
    return sim_add(s, a, lanes(s, n, k, lo + h, m - h));
}

/* splitk:k: k contiguous chunks of ceil(n/k), each in order, the partials
 * added in order. */
static double splitk(const sim *s, int64_t n, int64_t k)
{
    int64_t chunk = (n + k - 1) / k;
    double a = run(s, 0, 1, chunk < n ? chunk : n);
    for (int64_t lo = chunk; lo < n; lo += chunk)
        a = sim_add(s, a, run(s, lo, 1, n - lo < chunk ? n - lo : chunk));
    return a;
}

/* Candidate c: 0 sequential, 1 pairwise, 2.. tree:k, then splitk:k. */
#define N_CAND (2 + 2 * (CT_MAX_K - 1))

static void cand_name(int c, char *buf, size_t len)
{
    if (c == 0)
        snprintf(buf, len, "sequential");
    else if (c == 1)
        snprintf(buf, len, "pairwise");
    else if (c < 2 + CT_MAX_K - 1)
        snprintf(buf, len, "tree:%d", c - 2 + 2);
    else
        snprintf(buf, len, "splitk:%d", c - 2 - (CT_MAX_K - 1) + 2);
}

static uint64_t simulate(const sim *s, int c, int64_t n)
{
    double a;
    if (c == 0)
        a = run(s, 0, 1, n);
    else if (c == 1)
        a = pairwise(s, 0, n);
    else if (c < 2 + CT_MAX_K - 1) {
        int64_t k = c - 2 + 2;
        a = lanes(s, n, k, 0, n < k ? n : k);
    } else
        a = splitk(s, n, c - 2 - (CT_MAX_K - 1) + 2);
    return nv_dtype_encode(s->out, a, &s->rm, 0);
}

/* Rows of positive terms (1 + u) 2^-e, e spread over 0..E (E = 40, or less
 * where dt's normal range ends sooner: every accumulator from bf16 to fp64
 * rounds some partial sum), each row ending in minus its sum, split into CT_CANCEL values of dt:
 * the output is then the accumulated rounding error, which an output dtype
 * narrower than the accumulator still shows. Before the last term nothing
 * cancels (no subnormal or signed-zero question enters the fit), and CT_LONG
 * terms stay below fp16's range; every term a value of dt. */
static void order_rows(nv_dtype dt, uint64_t seed, uint32_t which, double *x, int64_t rows,
                       int64_t n)
{
    const nv_dtype_info *info = nv_dtype_get(dt);
    int E = -info->emin - 2 < 40 ? -info->emin - 2 : 40;
    nv_rng rng;
    nv_rng_init(&rng, seed, 0x6f726472, which);
    for (int64_t r = 0; r < rows; r++) {
        double *row = x + r * n, s = 0;
        for (int64_t i = 0; i < n - CT_CANCEL; i++) {
            row[i] = ct_dec(dt, ct_enc(dt, ldexp(1.0 + nv_rng_uniform(&rng),
                                                 -(int)(nv_rng_u32(&rng) % (uint32_t)(E + 1)))));
            s += row[i];
        }
        /* minus the sum as CT_CANCEL values of dt, each the rounded rest */
        for (int64_t i = n - CT_CANCEL; i < n; i++) {
            row[i] = -ct_dec(dt, ct_enc(dt, s));
            s += row[i];
        }
    }
}

/* Which orders and roundings reproduce every row's sum: a model dies at the
 * first row it gets wrong, so most cost one row. */
static json_t *fit_order(nv_dtype dt, nv_dtype acc, const ct_known *k, int w, bool trunc,
                         const double *xs, const uint64_t *os, const double *xl,
                         const uint64_t *ol)
{
    json_t *orders = json_array(), *roundings = json_array();
    bool rounding_ok[4] = {false};
    for (int r = 0; r < 4; r++) {
        sim s = {.acc = acc,
                 .out = dt,
                 .rm = {(nv_rounding)r, k->saturate, k->ftz},
                 .w = w,
                 .trunc = trunc};
        for (int c = 0; c < N_CAND; c++) {
            bool ok = true;
            for (int64_t q = 0; q < CT_SHORT_ROWS && ok; q++) {
                s.x = xs + q * CT_SHORT;
                ok = simulate(&s, c, CT_SHORT) == os[q];
            }
            for (int64_t q = 0; q < CT_LONG_ROWS && ok; q++) {
                s.x = xl + q * CT_LONG;
                ok = simulate(&s, c, CT_LONG) == ol[q];
            }
            if (!ok)
                continue;
            char name[32];
            cand_name(c, name, sizeof name);
            bool dup = false;
            size_t i;
            json_t *v;
            json_array_foreach(orders, i, v) dup |= !strcmp(json_string_value(v), name);
            if (!dup)
                json_array_append_new(orders, json_string(name));
            rounding_ok[r] = true;
        }
    }
    for (int r = 0; r < 4; r++)
        if (rounding_ok[r])
            json_array_append_new(roundings, json_string(ct_rounding_name((nv_rounding)r)));
    return json_pack("{s:o, s:o}", "orders", orders, "roundings", roundings);
}

/* ---- effective bits and range ---- */
static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
#define PERM_COPIES 4 /* a random-order device reaches every grouping with these */

/* Zeros between the second and the third term of an effective-bits row: a
 * multi-term adder of up to CT_PAD + 1 terms then rounds B + B 2^-t before -B
 * arrives in a sequential run (zeros are exact in every order). */
#define CT_PAD 64
#define CT_ROW (3 + CT_PAD)

static int effective_bits(ct_dev *d, bool mm, nv_dtype dt, int *ret_p, bool *ret_lower, json_t *ev)
{
    const nv_dtype_info *i = nv_dtype_get(dt);
    int b = i->emin + 60 > 0 ? i->emin + 60 : 0;
    if (b > i->emax - 2)
        b = i->emax - 2;
    int tmax = b - i->emin < 60 ? b - i->emin : 60;
    if (tmax < 1) { /* too few exponents for B 2^-t to stay normal: no bound */
        *ret_p = 1;
        *ret_lower = true;
        return NV_OK;
    }
    int rows_per_t = 6 * PERM_COPIES;
    int64_t rows = (int64_t)tmax * rows_per_t;
    double *x = calloc((size_t)(rows > 0 ? rows : 1) * CT_ROW, sizeof *x);
    uint64_t *o = malloc((size_t)rows * sizeof *o);
    int r = NV_E_NOMEM;
    if (!x || !o)
        goto out;
    static const int at[3] = {0, 1, CT_ROW - 1};
    double B = ldexp(1.0, b);
    for (int t = 1; t <= tmax; t++)
        for (int q = 0; q < rows_per_t; q++) {
            double v[3] = {B, ldexp(B, -t), -B};
            double *row = x + ((int64_t)(t - 1) * rows_per_t + q) * CT_ROW;
            for (int j = 0; j < 3; j++)
                row[at[j]] = v[perms[q % 6][j]];
        }
    r = ct_sum_rows(d, mm, dt, x, rows, CT_ROW, o);
    if (r != NV_OK)
        goto out;
    *ret_p = tmax + 1;
    *ret_lower = true;
    for (int t = 1; t <= tmax && *ret_lower; t++)
        for (int q = 0; q < rows_per_t; q++) {
            int64_t row = (int64_t)(t - 1) * rows_per_t + q;
            if (ct_dec(dt, o[row]) == ldexp(B, -t))
                continue;
            *ret_p = t;
            *ret_lower = false;
            json_t *in = json_array();
            for (int j = 0; j < 3; j++)
                json_array_append_new(in, ct_bits_json(dt, ct_enc(dt, x[row * CT_ROW + at[j]])));
            json_array_append_new(
                ev, json_pack("{s:s, s:o, s:s, s:o, s:o}", "property", "effective_bits", "inputs",
                              in, "row", "the inputs at positions 0, 1 and 66 of 67, zeros between",
                              "output", ct_bits_json(dt, o[row]), "expected_if_wider",
                              ct_bits_json(dt, ct_enc(dt, ldexp(B, -t)))));
            break;
        }
out:
    free(x);
    free(o);
    return r;
}

/* Did [R, R] come back as 2R? NV_OK with *ret, or the call's code. */
static int holds(ct_dev *d, bool mm, nv_dtype dt, double R, bool *ret, json_t *ev, const char *what)
{
    R = ct_dec(dt, ct_enc(dt, R)); /* a value of dt, so 2R is exact */
    double x[2] = {R, R};
    uint64_t o;
    int r = ct_sum_rows(d, mm, dt, x, 1, 2, &o);
    if (r != NV_OK)
        return r;
    *ret = ct_dec(dt, o) == 2 * R;
    json_array_append_new(ev, json_pack("{s:s, s:[o,o], s:o}", "property", what, "inputs",
                                        ct_bits_json(dt, ct_enc(dt, R)),
                                        ct_bits_json(dt, ct_enc(dt, R)), "output",
                                        ct_bits_json(dt, o)));
    return NV_OK;
}

/* The accumulator dtype from its precision and range; NULL when none fits or
 * when the range that tells fp16 from tf32 (both 11 bits) was out of reach. */
static const char *acc_name(int p, bool lower, bool range_probed, bool fp16_range)
{
    if (lower || (p == 11 && !range_probed))
        return NULL;
    switch (p) {
    case 53:
        return "fp64";
    case 24:
        return "fp32";
    case 11:
        return fp16_range ? "fp16" : "tf32";
    case 8:
        return "bf16";
    case 4:
        return "fp8_e4m3";
    case 3:
        return "fp8_e5m2";
    default:
        return NULL;
    }
}

/* Products in the accumulation, for an accumulator of pa bits: p = [x] . [x]
 * (the device's own rounded square, x = 1 + 2^-k, 2k >= pa, so x^2 needs more
 * than pa bits), then 32 rows of [-p, x] . [1, x] and of [x, -p] . [x, 1]. A
 * product added into a running accumulator unrounded (an fma, or a block of
 * products added exactly, Fasi et al. 2021) leaves x^2 - p, a multiple of
 * 2^-2k but never of the accumulator's ulp at 1, 2^(1 - pa); a rounded one
 * leaves a multiple of it (0, or one ulp under stochastic rounding). An order
 * that starts every lane or chunk afresh (pairwise; tree:k and splitk:k at
 * K = 2) rounds each product as a first term and shows "rounded" whatever its
 * fma does. When x cannot have k <= dt's fraction bits (an accumulator more
 * than twice as precise as dt: fp64 for fp32 data) it is indistinguishable. */
static void products(ct_dev *d, nv_dtype dt, int pa, bool pa_lower, json_t *res, json_t *ev)
{
    enum { ROWS = 64 };
    int m = nv_dtype_get(dt)->mant_bits, k = (pa + 1) / 2;
    if (pa_lower || k > m || pa < 2) {
        json_object_set_new(res, "products", json_string("indistinguishable"));
        return;
    }
    double x = 1.0 + ldexp(1.0, -k), ulp_acc = ldexp(1.0, 1 - pa);
    uint64_t xb = ct_enc(dt, x), p, o[ROWS];
    nv_dtype dts[2] = {dt, dt};
    const int64_t one[4] = {1, 1, 1, 1};
    const uint64_t *ins1[2] = {&xb, &xb};
    if (ct_call_shaped(d, "matmul", "{}", 2, dts, ins1, one, dt, 1, &p) != NV_OK)
        return;
    /* A is ROWS x 2, B is 2 x 1: the column (1, x) for the first half of the
     * rows would need a B per row, so the halves are two calls. */
    uint64_t a[2 * ROWS], b[2][2] = {{ct_enc(dt, 1.0), xb}, {xb, ct_enc(dt, 1.0)}};
    uint64_t np = ct_enc(dt, -ct_dec(dt, p));
    const int64_t sh[4] = {ROWS / 2, 2, 2, 1};
    for (int h = 0; h < 2; h++) {
        for (int r = 0; r < ROWS / 2; r++) {
            a[2 * r + h] = np;
            a[2 * r + 1 - h] = xb;
        }
        const uint64_t *ins2[2] = {a, b[h]};
        if (ct_call_shaped(d, "matmul", "{}", 2, dts, ins2, sh, dt, ROWS / 2, o + h * ROWS / 2) !=
            NV_OK)
            return;
    }
    int fused_at = -1;
    for (int r = 0; r < ROWS && fused_at < 0; r++) {
        double q = ct_dec(dt, o[r]) / ulp_acc;
        if (q != nearbyint(q))
            fused_at = r;
    }
    json_object_set_new(res, "products", json_string(fused_at >= 0 ? "fused" : "rounded"));
    int r = fused_at >= 0 ? fused_at : 0, h = r >= ROWS / 2;
    json_array_append_new(
        ev, json_pack("{s:s, s:o, s:[o,o], s:[o,o], s:o}", "property", "products", "square",
                      ct_bits_json(dt, p), "a", ct_bits_json(dt, h ? xb : np),
                      ct_bits_json(dt, h ? np : xb), "b", ct_bits_json(dt, b[h][0]),
                      ct_bits_json(dt, b[h][1]), "output", ct_bits_json(dt, o[r])));
}

/* The reduction order: random when repeats differed, else the fit of the
 * order models on the rows xs (outputs os) and xl (outputs ol), n values in all
 * from xl on (xs follows xl); or why it cannot be fitted. */
static json_t *reduction_json(nv_dtype dt, const char *acc, bool det, const ct_known *k, int w,
                              bool trunc, uint64_t seed, const double *xs, const uint64_t *os, double *xl,
                              const uint64_t *ol, int64_t n_all)
{
    if (!det)
        return json_pack("{s:s, s:s}", "order", "random", "why",
                         "repeated calls on the same input differ");
    if (!acc)
        return json_pack("{s:s, s:s}", "order", "indistinguishable", "why",
                         "no accumulator dtype fits the measured bits and range, so no order "
                         "model can be simulated bit for bit");
    if (k->rounding_known && k->rounding == NV_ROUND_STOCHASTIC)
        return json_pack("{s:s, s:s}", "order", "indistinguishable", "why",
                         "stochastic rounding: every rounding draws bits the probe cannot see, "
                         "so no order model can be simulated bit for bit");
    nv_dtype acc_dt;
    nv_dtype_from_name(acc, &acc_dt);
    /* The model reads its inputs as the device does: DAZ flushes the subnormal
     * cancelling terms. */
    double min_normal = nv_dtype_get(dt)->min_normal;
    if (k->daz)
        for (int64_t i = 0; i < n_all; i++)
            if (fabs(xl[i]) < min_normal)
                xl[i] = copysign(0.0, xl[i]);
    json_t *fit = fit_order(dt, acc_dt, k, w, trunc, xs, os, xl, ol);
    json_t *orders = json_object_get(fit, "orders");
    size_t n = json_array_size(orders);
    json_object_set_new(fit, "order",
                        n == 1   ? json_incref(json_array_get(orders, 0))
                        : n == 0 ? json_string("unrecognized")
                                 : json_string("indistinguishable"));
    json_object_set_new(fit, "vectors",
                        json_pack("{s:i, s:i, s:i, s:i, s:I, s:o, s:o}", "short_rows",
                                  CT_SHORT_ROWS, "short_length", CT_SHORT, "long_rows",
                                  CT_LONG_ROWS, "long_length", CT_LONG, "seed", (json_int_t)seed,
                                  "first_short_output", ct_bits_json(dt, os[0]),
                                  "first_long_output", ct_bits_json(dt, ol[0])));
    return fit;
}

static json_t *probe(ct_dev *d, bool mm, nv_dtype dt, const ct_known *k, int repeats, uint64_t seed,
                     bool *ret_refused)
{
    *ret_refused = false;
    double one_v[2] = {1, 1};
    uint64_t o1;
    int r = ct_sum_rows(d, mm, dt, one_v, 1, 2, &o1);
    if (r != NV_OK) {
        *ret_refused = ct_refused(r);
        return *ret_refused ? NULL : json_pack("{s:s}", "error", d->err);
    }
    json_t *res = json_object(), *ev = json_array();
    int64_t ns = CT_SHORT_ROWS * CT_SHORT, nl = CT_LONG_ROWS * CT_LONG;
    double *xl = malloc((size_t)(nl + ns) * sizeof(double));
    uint64_t *reps = malloc((size_t)repeats * CT_SHORT_ROWS * sizeof *reps);
    uint64_t ol[CT_LONG_ROWS];
    if (!res || !ev || !xl || !reps)
        goto oom;
    double *xs = xl + nl;
    order_rows(dt, seed, 0, xs, CT_SHORT_ROWS, CT_SHORT);
    order_rows(dt, seed, 1, xl, CT_LONG_ROWS, CT_LONG);
    /* Determinism: the short rows, repeats times. */
    bool det = true;
    for (int i = 0; i < repeats; i++) {
        uint64_t *o = reps + (int64_t)i * CT_SHORT_ROWS;
        if (ct_sum_rows(d, mm, dt, xs, CT_SHORT_ROWS, CT_SHORT, o) != NV_OK)
            goto oom;
        for (int q = 0; q < CT_SHORT_ROWS && det; q++)
            if (o[q] != reps[q]) {
                det = false;
                json_array_append_new(
                    ev, json_pack("{s:s, s:s, s:i, s:o, s:o}", "property", "deterministic",
                                  "inputs", "row of the order probe (seed, length 1000)", "row", q,
                                  "first_output", ct_bits_json(dt, reps[q]), "differing_output",
                                  ct_bits_json(dt, o[q])));
            }
    }
    const uint64_t *os = reps;
    if (ct_sum_rows(d, mm, dt, xl, CT_LONG_ROWS, CT_LONG, ol) != NV_OK)
        goto oom;
    int p = 0;
    bool lower = false;
    if (effective_bits(d, mm, dt, &p, &lower, ev) != NV_OK)
        goto oom;
    const nv_dtype_info *info = nv_dtype_get(dt);
    bool fp16_ok = true, fp32_ok = true;
    bool fp16_probe = info->max_finite > 1e5, fp32_probe = info->max_finite > 1e39;
    if (fp16_probe && holds(d, mm, dt, 40000, &fp16_ok, ev, "range_beyond_fp16") != NV_OK)
        goto oom;
    if (fp32_probe && holds(d, mm, dt, 0x1.8p127, &fp32_ok, ev, "range_beyond_fp32") != NV_OK)
        goto oom;
    const char *range = !fp16_probe   ? "indistinguishable"
                        : !fp16_ok    ? "fp16"
                        : !fp32_probe ? "at_least_fp32"
                        : !fp32_ok    ? "fp32"
                                      : "at_least_fp64";
    const char *acc = acc_name(p, lower, fp16_probe, !fp16_ok);
    json_object_set_new(res, "effective_bits", json_integer(p));
    json_object_set_new(res, "effective_bits_is_lower_bound", json_boolean(lower));
    json_object_set_new(res, "range", json_string(range));
    json_object_set_new(res, "accumulator",
                        acc ? json_string(acc) : json_string("indistinguishable"));
    json_object_set_new(res, "deterministic", json_boolean(det));
    /* The tree and the adder before the order fit, which models them. */
    int width = 0, kinds = 0;
    json_t *tree = det ? ct_probe_tree(d, mm, dt, p, lower, k, &width, &kinds)
                       : json_pack("{s:s, s:s}", "tree", "random", "why",
                                   "repeated calls on the same input differ");
    json_t *align = ct_probe_alignment(d, mm, dt, p, lower, k);
    if (!tree || !align) {
        json_decref(tree);
        json_decref(align);
        goto oom;
    }
    const char *al = json_string_value(json_object_get(align, "alignment"));
    bool trunc = al && !strcmp(al, "truncate");
    json_object_set_new(res, "tree", tree);
    json_object_set_new(res, "block_width", width > 0 ? json_integer(width)
                                                      : json_string("indistinguishable"));
    json_object_set_new(res, "alignment", json_string(al ? al : "indistinguishable"));
    json_array_append(ev, json_object_get(align, "evidence") ? json_object_get(align, "evidence")
                                                             : align);
    json_decref(align);
    json_t *order = reduction_json(dt, acc, det, k, width > 1 ? width : 1, trunc, seed, xs, os,
                                   xl, ol, nl + ns);
    json_object_set_new(res, "reduction", order);
    if (mm)
        products(d, dt, p, lower, res, ev);
    json_object_set_new(res, "evidence", ev);
    free(xl);
    free(reps);
    return res;
oom:
    if (res && !*ret_refused && d->err[0]) {
        json_decref(ev);
        json_object_clear(res);
        json_object_set_new(res, "error", json_string(d->err));
        free(xl);
        free(reps);
        return res;
    }
    json_decref(res);
    json_decref(ev);
    free(xl);
    free(reps);
    return NULL;
}

json_t *ct_probe_accumulation(ct_dev *d, nv_dtype dt, const ct_known *k, int repeats, uint64_t seed,
                              bool *ret_refused)
{
    return probe(d, false, dt, k, repeats, seed, ret_refused);
}

json_t *ct_probe_matmul(ct_dev *d, nv_dtype dt, const ct_known *k, int repeats, uint64_t seed,
                        bool *ret_refused)
{
    return probe(d, true, dt, k, repeats, seed, ret_refused);
}
