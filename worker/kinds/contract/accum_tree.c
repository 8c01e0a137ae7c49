/* The summation tree and the adder of sum and matmul (docs/CONTRACT.md
 * "Summation tree, block width, alignment"): the FPRev pair queries of
 * fprev.h, and the alignment probe of Fasi, Higham, Mikaitis & Pranesh,
 * "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330
 * (2021), §4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "fprev.h"

/* The order families whose tree at n is compared with the revealed one. */
static void family_matches(const ct_tree *t, int w, json_t *out)
{
    char want[1024], got[1024], name[32];
    if (!ct_tree_text(t, want, sizeof want))
        return;
    for (int f = 0; f < 2 + 2 * (t->n - 1); f++) {
        if (f == 0)
            snprintf(name, sizeof name, "sequential");
        else if (f == 1)
            snprintf(name, sizeof name, "pairwise");
        else if (f < 2 + t->n - 1)
            snprintf(name, sizeof name, "tree:%d", f - 2 + 2);
        else
            snprintf(name, sizeof name, "splitk:%d", f - 2 - (t->n - 1) + 2);
        ct_tree fam;
        if (ct_tree_family(name, t->n, w, &fam) && ct_tree_text(&fam, got, sizeof got) &&
            !strcmp(got, want))
            json_array_append_new(out, json_string(name));
    }
}

static json_t *why(const char *text)
{
    return json_pack("{s:s, s:s}", "tree", "indistinguishable", "why", text);
}

json_t *ct_probe_tree(ct_dev *d, bool mm, nv_dtype dt, int p, bool p_lower, const ct_known *k,
                      int *ret_width, int *ret_kinds)
{
    enum { N = CT_TREE_N, GROUP = 6, GROUPS = (CT_TREE_N + 5) / 6 };
    *ret_width = 0;
    *ret_kinds = 0;
    const nv_dtype_info *info = nv_dtype_get(dt);
    if (p_lower)
        return why("the accumulator's precision is only bounded, so no M is known to absorb "
                   "the ones");
    /* An unknown rounding is tried as nearest: the outputs show whether the
     * ones were absorbed as a tree of roundings would ("unrecognized" if not). */
    if (k->rounding_known &&
        (k->rounding == NV_ROUND_STOCHASTIC || k->rounding == NV_ROUND_TOWARD_ZERO))
        return why("the ones are absorbed by M and by -M only under rounding to nearest, up or "
                   "down (toward zero moves -M + 1 off -M; stochastic rounding moves both)");
    if (info->mant_bits + 1 < GROUP)
        return why("the output cannot hold the sums 0 .. 63 of the weights exactly");
    /* The small terms of a row are the weights 2^0 .. 2^5 of one group of six
     * leaves (zeros elsewhere): sums up to 63, absorbed beside M when ulp(M) /
     * 2 > 63 and dropped by a truncating adder (no guard bit) when ulp(M) > 63:
     * M = 2^(p + 8). Under rounding up the mirror image absorbs: every input
     * negated. */
    int e = p + 8;
    if (e > info->emax)
        return why("M = 2^(p + 8) is beyond the dtype's range");
    double M = ldexp(1.0, e), sg = k->rounding_known && k->rounding == NV_ROUND_UP ? -1.0 : 1.0;
    int64_t rows = (int64_t)N * (N - 1) / 2 * GROUPS;
    double *x = calloc((size_t)(rows * N), sizeof *x);
    uint64_t *o = malloc((size_t)rows * sizeof *o);
    uint64_t *U = malloc((size_t)(N * N) * sizeof *U);
    json_t *res = NULL;
    if (!x || !o || !U)
        goto out;
    int64_t r = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            for (int g = 0; g < GROUPS; g++, r++) {
                for (int q = g * GROUP; q < N && q < (g + 1) * GROUP; q++)
                    x[r * N + q] = sg * ldexp(1.0, q - g * GROUP);
                x[r * N + i] = sg * M;
                x[r * N + j] = -sg * M;
            }
    if (ct_sum_rows(d, mm, dt, x, rows, N, o) != NV_OK) {
        res = json_pack("{s:s, s:s}", "tree", "indistinguishable", "why", d->err);
        goto out;
    }
    r = 0;
    int64_t bad = -1;
    for (int i = 0; i < N; i++) {
        U[i * N + i] = 0;
        for (int j = i + 1; j < N; j++) {
            uint64_t survivors = 0;
            for (int g = 0; g < GROUPS; g++, r++) {
                double v = sg * ct_dec(dt, o[r]);
                uint64_t w = (uint64_t)(v >= 0 && v < 64 && v == floor(v) ? v : 0);
                uint64_t allowed = 0;
                for (int q = g * GROUP; q < N && q < (g + 1) * GROUP; q++)
                    if (q != i && q != j)
                        allowed |= (uint64_t)1 << (q - g * GROUP);
                if ((v != (double)w || (w & ~allowed)) && bad < 0)
                    bad = r;
                survivors |= (w & allowed) << (g * GROUP);
            }
            uint64_t all = N == 64 ? ~(uint64_t)0 : ((uint64_t)1 << N) - 1;
            U[i * N + j] = U[j * N + i] = all & ~survivors;
        }
    }
    json_t *ev = json_pack("{s:i, s:i, s:o, s:o, s:s}", "n", N, "rows_per_pair", GROUPS, "M",
                           ct_real_json(sg * M), "first_output", ct_bits_json(dt, o[0]), "rows",
                           "pair (i, j), group g: M at i, -M at j, 2^(q - 6g) at the leaves q "
                           "of group g, zeros elsewhere");
    if (bad >= 0) {
        json_object_set_new(ev, "row", json_integer(bad));
        json_object_set_new(ev, "output", ct_bits_json(dt, o[bad]));
        res = json_pack("{s:s, s:s, s:o}", "tree", "unrecognized", "why",
                        "an output is not a sum of the row's weights: the partial sums do not "
                        "absorb as a tree of roundings would",
                        "evidence", ev);
        goto out;
    }
    ct_tree t;
    unsigned kinds = 0;
    if (!ct_tree_reveal(N, U, &t, &kinds)) {
        res = json_pack("{s:s, s:s, s:o}", "tree", "unrecognized", "why",
                        "no tree of exact or truncating nodes reproduces every pair's output",
                        "evidence", ev);
        goto out;
    }
    char text[1024];
    ct_tree_text(&t, text, sizeof text);
    int fanin = ct_tree_max_fanin(&t);
    *ret_width = fanin - 1;
    *ret_kinds = (int)kinds;
    json_t *matches = json_array();
    family_matches(&t, fanin > 2 ? fanin - 1 : 1, matches);
    res = json_pack("{s:s, s:i, s:i, s:s, s:o, s:o}", "tree", text, "n", N, "max_fan_in", fanin,
                    "nodes",
                    kinds == 3   ? "two children each (exact and truncating alike)"
                    : kinds == 1 ? "exact: one rounding of the exact sum"
                                 : "truncating: alignment drops the ones",
                    "matches", matches, "evidence", ev);
out:
    free(x);
    free(o);
    free(U);
    return res;
}

json_t *ct_probe_alignment(ct_dev *d, bool mm, nv_dtype dt, int p, bool p_lower, const ct_known *k)
{
    /* B - s, s = 1.5 B 2^-(p+1): the exact difference lies below the midpoint
     * of B and its predecessor B (1 - 2^-p), so nearest, toward zero and down
     * give B (1 - 2^-p), and up does so for the mirror -B + s. An adder that
     * aligns s to B's exponent and drops the bits shifted out (no guard bit, or
     * one) adds 0 and gives B (Fasi et al. 2021 §4.2). Then -B exposes the
     * difference whatever the output dtype: -B 2^-p from a rounding adder, 0
     * from a truncating one. The three terms go in all six orders at positions
     * 0, 1 and 66 of 67 (zeros between, as for the effective bits), so that in
     * some order B and -s meet first, and both signs; a truncating adder gives
     * only 0 and -+s (the orders where B and -B meet first). */
    enum { ROWS = 2 * 6 * 4, CONTROL = 6 * 4, LEN = 67 };
    if (p_lower || (k->rounding_known && k->rounding == NV_ROUND_STOCHASTIC))
        return json_pack("{s:s, s:s}", "alignment", "indistinguishable", "why",
                         p_lower ? "the accumulator's precision is only bounded"
                                 : "stochastic rounding moves the result either way");
    const nv_dtype_info *info = nv_dtype_get(dt);
    int b = 0;
    if (-(p + 1) < info->emin) /* keep s and B 2^-p normal in dt */
        b = info->emin + p + 1;
    if (b > info->emax || info->mant_bits < 1)
        return json_pack("{s:s, s:s}", "alignment", "indistinguishable", "why",
                         "s = 1.5 B 2^-(p+1) and B do not both fit the dtype");
    static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    static const int at[3] = {0, 1, LEN - 1};
    double B = ldexp(1.0, b), s = 1.5 * ldexp(B, -(p + 1));
    /* Control rows in the same call (kernels can differ with the shape): the
     * effective-bits rows [B, B 2^-(p-1), -B], which an accumulator of p bits
     * returns as B 2^-(p-1) in every order. */
    double *x = calloc((size_t)(ROWS + CONTROL) * LEN, sizeof *x);
    uint64_t o[ROWS + CONTROL];
    if (!x)
        return NULL;
    double c = ldexp(B, -(p - 1));
    for (int r = 0; r < ROWS + CONTROL; r++) {
        double sg = r < ROWS / 2 || r >= ROWS ? 1 : -1, v[3] = {sg * B, -sg * s, -sg * B};
        if (r >= ROWS)
            v[1] = c;
        for (int j = 0; j < 3; j++)
            x[r * LEN + at[j]] = v[perm[r % 6][j]];
    }
    int rc = ct_sum_rows(d, mm, dt, x, ROWS + CONTROL, LEN, o);
    free(x);
    if (rc != NV_OK)
        return json_pack("{s:s, s:s}", "alignment", "indistinguishable", "why", d->err);
    for (int r = ROWS; r < ROWS + CONTROL; r++)
        if (ct_dec(dt, o[r]) != c)
            return json_pack(
                "{s:s, s:s, s:o}", "alignment", "indistinguishable", "why",
                "the control row [B, B 2^-(p-1), -B] lost B 2^-(p-1) at this shape (72 rows): "
                "the accumulator here is narrower than the p measured on the effective-bits "
                "rows, so the alignment rows cannot be read",
                "evidence",
                json_pack("{s:s, s:i, s:o, s:o}", "property", "alignment_control", "rows",
                          ROWS + CONTROL, "output", ct_bits_json(dt, o[r]), "expected",
                          ct_bits_json(dt, ct_enc(dt, c))));
    /* A truncating adder gives 0 where B meets -s or -B meets -s first; an
     * exact sum (a wider accumulator than p at this shape, or one adder for
     * the whole row) gives s in every row and shows no alignment at all. */
    int shown = -1, zeros = 0;
    for (int r = 0; r < ROWS; r++) {
        double v = fabs(ct_dec(dt, o[r]));
        zeros += v == 0;
        if (v != 0 && v != s && shown < 0)
            shown = r;
    }
    if (shown < 0 && zeros == 0)
        return json_pack("{s:s, s:s, s:o}", "alignment", "indistinguishable", "why",
                         "every row summed exactly to -+s: no rounding of B - s to see (an "
                         "accumulator wider than the measured p at this shape, or one adder "
                         "for the whole row)",
                         "evidence",
                         json_pack("{s:s, s:o}", "property", "alignment", "first_output",
                                   ct_bits_json(dt, o[0])));
    int r = shown >= 0 ? shown : 0;
    double sg = r < ROWS / 2 ? 1 : -1, v[3] = {sg * B, -sg * s, -sg * B};
    json_t *inputs = json_array();
    for (int j = 0; j < 3; j++)
        json_array_append_new(inputs, ct_bits_json(dt, ct_enc(dt, v[perm[r % 6][j]])));
    json_t *ev = json_pack("{s:s, s:o, s:s, s:o, s:s}", "property", "alignment", "inputs", inputs,
                           "row", "the inputs at positions 0, 1 and 66 of 67, zeros between",
                           "output", ct_bits_json(dt, o[r]), "why",
                           shown >= 0 ? "B - s kept its rounding: a truncating adder gives 0 or s"
                                      : "no row of the 48 shows B - s other than B");
    return json_pack("{s:s, s:o}", "alignment", shown >= 0 ? "round" : "truncate", "evidence", ev);
}
