/* Which tolerance applies now (docs/API.md "Tolerances", "Suite"): the stored
 * row of the most specific mode pattern, else the shipped default; and whether
 * a failure found under another tolerance (a job's own) also fails under it.
 * The claim (queue.c), the promoter (promote.c) and suite replays (replay.c)
 * use it. */
#ifndef NUMVAL_DAEMON_TOLERANCE_H
#define NUMVAL_DAEMON_TOLERANCE_H

#include <jansson.h>
#include <stdbool.h>

#include "daemon/store/store.h"

/* Specificity of a mode pattern against a mode object: -1 no match, 0 for "*",
 * else the number of key=value terms (values may be fnmatch globs). */
int nvd_mode_match(const char *pattern, const json_t *mode);

/* The latest stored tolerance of (op, dtype) whose mode pattern matches mode
 * (may be NULL: only "*" matches) most specifically, with "version" and
 * "source": "store"; a new reference, or NULL when none (or on a store error). */
json_t *nvd_tolerance_stored(nvd_store *s, const char *op, const char *dtype, const json_t *mode);

/* The tolerance a case of op (attrs: its JSON attributes, may be NULL) in
 * dtype, with output dtype out_dtype (NULL: dtype), on a device in mode is
 * judged by now: the stored one, else the shipped default ("source":
 * "default", "version": 0). A new reference in *ret; -ENOENT for an unknown
 * op, dtype or attrs, -ENOMEM. */
int nvd_tolerance_current(nvd_store *s, const char *op, const json_t *attrs, const char *dtype,
                          const char *out_dtype, const json_t *mode, json_t **ret);

/* Whether a failed op or fused case (its JSON: "failure_class", "tolerance",
 * "max_ulp", "max_abs") also fails under tolerance base. True when its failure
 * class does not depend on a tolerance (a NaN or infinity mismatch, a crash),
 * when it was judged by a tolerance of base's metric at least as loose as base,
 * or when base is a ULP limit its max_ulp exceeds. False otherwise: the case
 * passes base, or nothing it reports decides it (a tighter tolerance of another
 * metric). The reason goes to why (at most n bytes). */
bool nvd_tolerance_fails_under(const json_t *c, const json_t *base, char *why, size_t n);

/* Whether a and b are the same tolerance: metric and bounds, version and
 * source (numbers compared as numbers: 1 and 1.0 are the same). */
bool nvd_tolerance_same(const json_t *a, const json_t *b);

#endif
