/* What the tests of comparison in parts share (test-compare-parts.c,
 * test-compare-vec.c): a seeded xorshift stream for their data, result
 * equality field by field with doubles by their bits, the tolerance they
 * judge under, and the comparison run in blocks merged in index order. */
#ifndef NUMVAL_TEST_COMPARE_FIXTURE_H
#define NUMVAL_TEST_COMPARE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/compare.h"

/* The next value of Marsaglia's xorshift64 (13, 7, 17) from *state (not 0). */
uint64_t cf_next(uint64_t *state);

/* a and b have the same bits. */
bool cf_same(double a, double b);

/* Every field of the two results equal, doubles by their bits, the first
 * mismatches up to n_first and the ULP histogram included. */
bool cf_same_result(const nv_compare_result *a, const nv_compare_result *b);

/* A tolerance of metric m: 2 ulps, rtol, atol 1e-30, reason "test". */
nv_tolerance cf_tol(nv_tol_metric m, double rtol);

/* whole compared in blocks of blk elements (the last one shorter), each with
 * its own arrays (NULL ones stay NULL), merged in index order into *ret; ue
 * (whole->n doubles) keeps the per-element ULP errors, NULL drops them. 0,
 * or -1 when a block does not run. */
int cf_in_parts(const nv_compare_input *whole, const nv_tolerance *t, int64_t blk, double *ue,
                nv_compare_result *ret);

#endif
