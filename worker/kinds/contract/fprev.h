/* The tree of a floating-point summation revealed from its outputs (FPRev:
 * Xie et al., "FPRev: Revealing the order of floating-point summation by
 * numerical testing", 2024), extended to nodes that add more than two terms
 * with one rounding (the multi-term adders of Fasi, Higham, Mikaitis &
 * Pranesh, PeerJ Comput. Sci. 7:e330, 2021).
 *
 * The query of a pair (i, j) sums n terms: M at i, -M at j, small integers
 * elsewhere, M so large that a partial sum holding M (or -M) absorbs every
 * small term added to it. Let v be the node where M and -M meet and c_i, c_j
 * its children holding them. The small terms absorbed are those of U(i, j):
 *   exact node (one rounding of the exact sum):  U = c_i + c_j
 *   truncating node (alignment drops them):      U = v
 * which agree where v has two children; the others survive. With the small
 * terms distinct powers of two (a few rows per pair) the output names the
 * survivors, so U(i, j) is measured as a set. Of U(i, j), the leaves k with
 * U(i, k) = U(i, j) are j's side (k meets i at v too); the rest, c_i, meets j
 * lower: so every c_i, i.e. every node below the root, is read off U under
 * both kinds. Counting the survivors alone (FPRev's ones) would not do for
 * multi-term nodes: ((0,1,2,3),4,5,6,7) and (0,1,2,3,(4,5,6,7)) give the same
 * counts. A tree is a laminar family of leaf sets (n <= 64 leaves as bit
 * masks), the whole set included. Used by accum_tree.c and the unit test. */
#ifndef NUMVAL_WORKER_KINDS_CONTRACT_FPREV_H
#define NUMVAL_WORKER_KINDS_CONTRACT_FPREV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CT_TREE_MAX 64 /* leaves */
#define CT_TREE_MAX_NODES (2 * CT_TREE_MAX)

typedef struct ct_tree {
    int n;                            /* leaves 0 .. n-1 */
    int count;                        /* clusters in node[] */
    uint64_t node[CT_TREE_MAX_NODES]; /* every internal node's leaf set (no singletons) */
} ct_tree;

typedef enum ct_node_kind {
    CT_NODE_EXACT,    /* D = |c_i| + |c_j| */
    CT_NODE_TRUNCATE, /* D = |v| */
} ct_node_kind;

/* Add the leaf set of a node (ignored when it has fewer than two leaves or is
 * there already). False when the tree is full. */
bool ct_tree_add(ct_tree *t, uint64_t set);

/* U(i, j) for every pair i != j as the tree predicts it under kind:
 * U[i * n + j] (the diagonal 0). */
void ct_tree_predict(const ct_tree *t, ct_node_kind kind, uint64_t *U);

/* The tree whose U is the measured one: true with *ret, and in *ret_kinds a
 * bit per kind that reproduces every U (1 << CT_NODE_EXACT, 1 << CT_NODE_TRUNCATE;
 * both for a tree of two-child nodes); false when no tree reproduces U. */
bool ct_tree_reveal(int n, const uint64_t *U, ct_tree *ret, unsigned *ret_kinds);

/* The most children of a node. */
int ct_tree_max_fanin(const ct_tree *t);

/* The tree as text: a leaf is its index, a node its children in parentheses,
 * ordered by their smallest leaf ("((0,1),(2,3))"); the same tree always gives
 * the same text. Written into buf (len bytes); false when it does not fit. */
bool ct_tree_text(const ct_tree *t, char *buf, size_t len);

/* The tree of an order family at n (the orders of emu and docs/CONTRACT.md:
 * "sequential", "pairwise", "tree:K", "splitk:K"), each sequential run adding
 * w terms per rounding (w = 1: one). False for a name it does not know. */
bool ct_tree_family(const char *name, int n, int w, ct_tree *ret);

#endif
