/* The tree reveal of the contract kind (worker/kinds/contract/fprev.h) on
 * synthetic kernels: trees of every order family and block width, and random
 * trees of two- to four-child nodes over shuffled leaves, each summed by a
 * small fp32 kernel written here (two-child nodes: C float addition, nearest
 * even; multi-term nodes: the exact sum, rounded once, or the terms first cut
 * to the accumulator's ulp at the largest one: a truncating adder) on the
 * probe's rows (M at i, -M at j, the weights 2^0 .. 2^5 of one group of six
 * leaves). The survivors read from the sums must give back the tree, with the
 * node kind; a corrupted measurement must be refused. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/kinds/contract/fprev.h"

static uint64_t rng = 20261201;
static uint64_t next(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- a synthetic kernel: the row x summed over tree t ---- */
static float eval(const ct_tree *t, uint64_t set, const float *x, ct_node_kind kind)
{
    if (__builtin_popcountll(set) == 1)
        return x[__builtin_ctzll(set)];
    /* children: the largest nodes strictly inside, and the leaves of none */
    float part[CT_TREE_MAX];
    int m = 0;
    uint64_t covered = 0;
    for (int k = 0; k < t->count; k++) {
        uint64_t c = t->node[k];
        if (c == set || (c & set) != c)
            continue;
        bool top = true;
        for (int q = 0; q < t->count && top; q++) {
            uint64_t d = t->node[q];
            top = !(d != set && d != c && (d & set) == d && (c & d) == c);
        }
        if (top) {
            part[m++] = eval(t, c, x, kind);
            covered |= c;
        }
    }
    for (int i = 0; i < t->n; i++)
        if ((set >> i & 1) && !(covered >> i & 1))
            part[m++] = x[i];
    if (m == 2)
        return part[0] + part[1]; /* one fp32 addition, nearest even */
    int emax = -1000;
    for (int i = 0; i < m; i++)
        if (part[i] != 0 && ilogbf(part[i]) > emax)
            emax = ilogbf(part[i]);
    double s = 0; /* exact: integers and +-2^32 well inside 53 bits */
    for (int i = 0; i < m; i++) {
        double v = part[i];
        if (kind == CT_NODE_TRUNCATE && emax > -1000) {
            double q = ldexp(1.0, emax - 23);
            v = trunc(v / q) * q;
        }
        s += v;
    }
    return (float)s;
}

/* The probe's rows through the kernel: U(i, j) from the survivors. */
static void measure(const ct_tree *t, ct_node_kind kind, uint64_t *U)
{
    int n = t->n;
    float x[CT_TREE_MAX];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) {
                U[i * n + j] = 0;
                continue;
            }
            uint64_t surv = 0;
            for (int g = 0; g * 6 < n; g++) {
                for (int q = 0; q < n; q++)
                    x[q] = q / 6 == g ? ldexpf(1.0f, q - 6 * g) : 0.0f;
                x[i] = 0x1p32f; /* 2^(p + 8), p = 24 */
                x[j] = -0x1p32f;
                float o = eval(t, n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1, x, kind);
                uint64_t w = (uint64_t)o;
                surv |= (w & 63) << (6 * g);
            }
            uint64_t all = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
            U[i * n + j] = all & ~surv;
        }
}

static void random_tree(ct_tree *t, const int *leaf, int lo, int hi)
{
    uint64_t s = 0;
    for (int k = lo; k < hi; k++)
        s |= (uint64_t)1 << leaf[k];
    ct_tree_add(t, s);
    if (hi - lo < 2)
        return;
    int parts = 2 + (int)(next() % 3);
    if (parts > hi - lo)
        parts = hi - lo;
    int cut[5] = {lo};
    for (int p = 1; p < parts; p++) /* increasing cut points */
        cut[p] = cut[p - 1] + 1 + (int)(next() % (uint64_t)(hi - cut[p - 1] - (parts - p)));
    cut[parts] = hi;
    for (int p = 0; p < parts; p++)
        random_tree(t, leaf, cut[p], cut[p + 1]);
}

static void check(const char *what, const ct_tree *t, ct_node_kind kind, bool binary)
{
    static uint64_t U[CT_TREE_MAX * CT_TREE_MAX];
    char want[2048], got[2048];
    ct_tree_text(t, want, sizeof want);
    measure(t, kind, U);
    ct_tree r;
    unsigned kinds = 0;
    bool ok = ct_tree_reveal(t->n, U, &r, &kinds);
    ct_tree_text(&r, got, sizeof got);
    unsigned want_kinds = binary ? 3u : 1u << kind;
    tap_ok(ok && !strcmp(want, got) && kinds == want_kinds,
           "%s (%s nodes): revealed %s, kinds %u (want %u)", what,
           kind == CT_NODE_EXACT ? "exact" : "truncating", ok ? "the same tree" : "none", kinds,
           want_kinds);
    if (!ok || strcmp(want, got))
        tap_diag("want %s\n got %s", want, got);
}

int main(void)
{
    static const char *const fams[] = {"sequential", "pairwise", "tree:2",   "tree:4",
                                       "tree:8",     "tree:5",   "splitk:4", "splitk:3"};
    static const int ns[] = {32, 20, 7};
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++)
        for (int w = 1; w <= 4; w += 3)
            for (int q = 0; q < 3; q++) {
                ct_tree t;
                if (!ct_tree_family(fams[f], ns[q], w, &t) ||
                    (w > 1 && !strcmp(fams[f], "pairwise")))
                    continue;
                char what[64];
                snprintf(what, sizeof what, "%s, %d terms per rounding, n = %d", fams[f], w, ns[q]);
                for (int kind = 0; kind < 2; kind++)
                    check(what, &t, (ct_node_kind)kind, ct_tree_max_fanin(&t) == 2);
            }
    for (int k = 0; k < 40; k++) {
        int n = 2 + (int)(next() % 63), leaf[CT_TREE_MAX];
        for (int i = 0; i < n; i++)
            leaf[i] = i;
        for (int i = n - 1; i > 0; i--) { /* shuffle: nodes of scattered leaves */
            int j = (int)(next() % (uint64_t)(i + 1)), x = leaf[i];
            leaf[i] = leaf[j];
            leaf[j] = x;
        }
        ct_tree t = {.n = n};
        random_tree(&t, leaf, 0, n);
        char what[64];
        snprintf(what, sizeof what, "random tree %d, n = %d", k, n);
        for (int kind = 0; kind < 2; kind++)
            check(what, &t, (ct_node_kind)kind, ct_tree_max_fanin(&t) == 2);
    }
    /* FPRev's counts alone cannot tell these apart; the survivor sets can. */
    ct_tree a = {.n = 8}, b = {.n = 8};
    ct_tree_add(&a, 0x0f);
    ct_tree_add(&a, 0xff);
    ct_tree_add(&b, 0xf0);
    ct_tree_add(&b, 0xff);
    check("((0,1,2,3),4,5,6,7)", &a, CT_NODE_EXACT, false);
    check("(0,1,2,3,(4,5,6,7))", &b, CT_NODE_EXACT, false);
    /* A measurement no tree explains: one survivor set changed. */
    ct_tree t, r;
    ct_tree_family("pairwise", 16, 1, &t);
    static uint64_t U[16 * 16];
    measure(&t, CT_NODE_EXACT, U);
    U[0 * 16 + 5] &= ~((uint64_t)1 << 4); /* leaf 4 said to survive (0, 5) */
    unsigned kinds;
    tap_ok(!ct_tree_reveal(16, U, &r, &kinds), "a corrupted survivor set is refused");
    /* The families' trees differ where the orders do (a name check of the texts). */
    char s1[256], s2[256];
    ct_tree x, y;
    ct_tree_family("sequential", 8, 1, &x);
    ct_tree_family("sequential", 8, 4, &y);
    ct_tree_text(&x, s1, sizeof s1);
    ct_tree_text(&y, s2, sizeof s2);
    tap_ok(!strcmp(s1, "(((((((0,1),2),3),4),5),6),7)") && !strcmp(s2, "((0,1,2,3),4,5,6,7)"),
           "sequential trees at n = 8: %s; 4 terms per rounding: %s", s1, s2);
    return tap_done();
}
