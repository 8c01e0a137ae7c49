/* Summation trees from pair queries (fprev.h): every node below the root is
 * some c_i, read off the measured sets U; the tree is accepted under the node
 * kinds whose predicted U equals the measured U for every pair, so what is
 * reported always explains every output. O(n^3) for n <= 64 leaves. */
#include "fprev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bit(int i)
{
    return (uint64_t)1 << i;
}

static uint64_t all_leaves(int n)
{
    return n == 64 ? ~(uint64_t)0 : bit(n) - 1;
}

bool ct_tree_add(ct_tree *t, uint64_t set)
{
    if (__builtin_popcountll(set) < 2)
        return true;
    for (int k = 0; k < t->count; k++)
        if (t->node[k] == set)
            return true;
    if (t->count >= CT_TREE_MAX_NODES)
        return false;
    t->node[t->count++] = set;
    return true;
}

/* The smallest node holding both i and j, and the largest holding i without j. */
static void meet(const ct_tree *t, int i, int j, uint64_t *ret_v, uint64_t *ret_ci)
{
    uint64_t v = all_leaves(t->n), ci = bit(i);
    for (int k = 0; k < t->count; k++) {
        uint64_t s = t->node[k];
        if ((s & bit(i)) && (s & bit(j)) && __builtin_popcountll(s) < __builtin_popcountll(v))
            v = s;
        if ((s & bit(i)) && !(s & bit(j)) && __builtin_popcountll(s) > __builtin_popcountll(ci))
            ci = s;
    }
    *ret_v = v;
    *ret_ci = ci;
}

void ct_tree_predict(const ct_tree *t, ct_node_kind kind, uint64_t *U)
{
    int n = t->n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) {
                U[i * n + j] = 0;
                continue;
            }
            uint64_t v, ci, cj;
            meet(t, i, j, &v, &ci);
            meet(t, j, i, &v, &cj);
            U[i * n + j] = kind == CT_NODE_EXACT ? ci | cj : v;
        }
}

bool ct_tree_reveal(int n, const uint64_t *U, ct_tree *ret, unsigned *ret_kinds)
{
    memset(ret, 0, sizeof *ret);
    *ret_kinds = 0;
    if (n < 2 || n > CT_TREE_MAX)
        return false;
    ret->n = n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            uint64_t u = U[i * n + j], side_j = 0;
            if (!(u & bit(i)) || !(u & bit(j)))
                return false; /* M and -M themselves are never survivors */
            for (int k = 0; k < n; k++)
                if (k != i && (u & bit(k)) && U[i * n + k] == u)
                    side_j |= bit(k);
            if (!ct_tree_add(ret, u & ~side_j))
                return false;
        }
    for (int a = 0; a < ret->count; a++)
        for (int b = 0; b < ret->count; b++) {
            uint64_t x = ret->node[a], y = ret->node[b], m = x & y;
            if (m && m != x && m != y)
                return false; /* overlapping sets: no tree */
        }
    if (!ct_tree_add(ret, all_leaves(n)))
        return false;
    uint64_t *P = malloc((size_t)n * (size_t)n * sizeof *P);
    if (!P)
        return false;
    for (int kind = 0; kind < 2; kind++) {
        ct_tree_predict(ret, (ct_node_kind)kind, P);
        if (!memcmp(P, U, (size_t)n * (size_t)n * sizeof *P))
            *ret_kinds |= 1u << kind;
    }
    free(P);
    return *ret_kinds != 0;
}

/* The children of node s: the largest nodes strictly inside it, and its leaves
 * in none of them, as leaf sets in order of their smallest leaf. */
static int children(const ct_tree *t, uint64_t s, uint64_t *out)
{
    int m = 0;
    uint64_t covered = 0;
    for (int k = 0; k < t->count; k++) {
        uint64_t c = t->node[k];
        if (c == s || (c & s) != c)
            continue;
        bool top = true;
        for (int q = 0; q < t->count && top; q++) {
            uint64_t d = t->node[q];
            top = !(d != s && d != c && (d & s) == d && (c & d) == c);
        }
        if (top) {
            out[m++] = c;
            covered |= c;
        }
    }
    for (int i = 0; i < t->n; i++)
        if ((s & bit(i)) && !(covered & bit(i)))
            out[m++] = bit(i);
    for (int a = 1; a < m; a++) /* insertion sort by smallest leaf */
        for (int b = a; b > 0 && __builtin_ctzll(out[b]) < __builtin_ctzll(out[b - 1]); b--) {
            uint64_t x = out[b];
            out[b] = out[b - 1];
            out[b - 1] = x;
        }
    return m;
}

int ct_tree_max_fanin(const ct_tree *t)
{
    int best = 0;
    uint64_t kids[CT_TREE_MAX];
    for (int k = 0; k < t->count; k++) {
        int m = children(t, t->node[k], kids);
        if (m > best)
            best = m;
    }
    return best;
}

static bool text(const ct_tree *t, uint64_t s, char *buf, size_t len, size_t *pos)
{
    int w;
    if (__builtin_popcountll(s) == 1) {
        w = snprintf(buf + *pos, len - *pos, "%d", __builtin_ctzll(s));
        *pos += (size_t)w;
        return *pos < len;
    }
    uint64_t kids[CT_TREE_MAX];
    int m = children(t, s, kids);
    for (int c = 0; c <= m; c++) {
        if (*pos + 1 >= len)
            return false;
        buf[(*pos)++] = c == 0 ? '(' : (c == m ? ')' : ',');
        buf[*pos] = 0;
        if (c < m && !text(t, kids[c], buf, len, pos))
            return false;
    }
    return true;
}

bool ct_tree_text(const ct_tree *t, char *buf, size_t len)
{
    size_t pos = 0;
    if (len == 0)
        return false;
    buf[0] = 0;
    return text(t, all_leaves(t->n), buf, len, &pos);
}

/* The nodes of a sequential run over idx[0..m) adding w terms per rounding:
 * the prefixes of w, 2w, ... terms (then the whole run); the run's set. */
static uint64_t run_nodes(ct_tree *t, const int *idx, int m, int w)
{
    uint64_t s = 0;
    for (int j = 0; j < m; j++) {
        s |= bit(idx[j]);
        if ((j + 1) % w == 0 || j == m - 1)
            ct_tree_add(t, s);
    }
    return s;
}

/* Recursive halving of [lo, lo + m) of the sets part[], the left half first. */
static uint64_t halving(ct_tree *t, const uint64_t *part, int lo, int m)
{
    if (m == 1)
        return part[lo];
    int h = m / 2;
    uint64_t s = halving(t, part, lo, h) | halving(t, part, lo + h, m - h);
    ct_tree_add(t, s);
    return s;
}

bool ct_tree_family(const char *name, int n, int w, ct_tree *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->n = n;
    int idx[CT_TREE_MAX], k = 0;
    uint64_t part[CT_TREE_MAX];
    if (n < 1 || n > CT_TREE_MAX || w < 1)
        return false;
    if (!strcmp(name, "sequential")) {
        for (int j = 0; j < n; j++)
            idx[j] = j;
        run_nodes(ret, idx, n, w);
    } else if (!strcmp(name, "pairwise")) {
        for (int j = 0; j < n; j++)
            part[j] = bit(j);
        halving(ret, part, 0, n);
    } else if (sscanf(name, "tree:%d", &k) == 1 && k >= 1) {
        int lanes = n < k ? n : k;
        for (int l = 0; l < lanes; l++) {
            int m = 0;
            for (int j = l; j < n; j += k)
                idx[m++] = j;
            part[l] = run_nodes(ret, idx, m, w);
        }
        halving(ret, part, 0, lanes);
    } else if (sscanf(name, "splitk:%d", &k) == 1 && k >= 1) {
        int chunk = (n + k - 1) / k;
        uint64_t acc = 0;
        for (int lo = 0; lo < n; lo += chunk) {
            int m = 0;
            for (int j = lo; j < n && j < lo + chunk; j++)
                idx[m++] = j;
            acc |= run_nodes(ret, idx, m, w);
            ct_tree_add(ret, acc);
        }
    } else
        return false;
    ct_tree_add(ret, all_leaves(n));
    return true;
}
