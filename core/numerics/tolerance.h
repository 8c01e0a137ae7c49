/* Tolerances carry reasons (DESIGN.md "Numerics"): a metric with its parameters,
 * a reason code and a non-empty explanation. One without a reason is invalid. */
#ifndef NUMVAL_TOLERANCE_H
#define NUMVAL_TOLERANCE_H

#include <jansson.h>

#include "dtype.h"

typedef enum nv_tol_metric {
    NV_TOL_ALLCLOSE, /* |got - exact| <= atol + rtol |exact|           ("allclose") */
    NV_TOL_ULP,      /* |got - exact| / ulp(exact) <= max_ulp            ("ulp")      */
    NV_TOL_BOUND,    /* |got - exact| <= c g(n) u sum|x_i| + ulp/2      ("bound")    */
} nv_tol_metric;

/* g(n) for the bound metric, by declared reduction order (Higham, Accuracy and
 * Stability of Numerical Algorithms, 2nd ed., §4.2: recursive summation n - 1,
 * pairwise ceil(log2 n); sqrt n is the probabilistic rule of thumb of §2.8).
 * "probabilistic" replaces g(n) u by Higham & Mary's gamma~_n(lambda) (SIAM J.
 * Sci. Comput. 41(5), 2019, Thm. 3.1; about lambda sqrt(n) u), lambda set per
 * comparison for a false-failure probability of NV_TOL_PROB_FAIL, and never
 * allows more than 2 (n - 1) u (compare.c, docs/TOLERANCES.md). */
typedef enum nv_growth {
    NV_GROWTH_N,
    NV_GROWTH_LOG2N,
    NV_GROWTH_SQRTN,
    NV_GROWTH_PROBABILISTIC,
} nv_growth;

/* The per-comparison false-failure probability growth "probabilistic" is set
 * for, under independent (mean-independent) rounding errors. */
#define NV_TOL_PROB_FAIL 1e-9

typedef enum nv_reason_code {
    NV_REASON_DTYPE_PRECISION,
    NV_REASON_REDUCTION_LENGTH,
    NV_REASON_APPROXIMATION_ERROR,
    NV_REASON_STOCHASTIC,
    NV_REASON_ACCEPTED_FAST_ALGORITHM,
    NV_REASON_COUNT
} nv_reason_code;

#define NV_TOL_REASON_MAX 512

typedef struct nv_tolerance {
    nv_tol_metric metric;
    double atol, rtol;  /* allclose */
    double max_ulp;     /* ulp */
    double c;           /* bound: constant */
    nv_growth growth;   /* bound: g */
    nv_dtype u_dtype;   /* bound: u is the unit roundoff of this dtype (default: output dtype) */
    int has_u_dtype;
    nv_reason_code reason_code;
    char reason[NV_TOL_REASON_MAX];
    int version;        /* store version it came from; 0 = shipped default or job override */
    char source[32];    /* "default", "job", "store" */
} nv_tolerance;

const char *nv_reason_code_name(nv_reason_code c);
int nv_reason_code_from_name(const char *s, nv_reason_code *ret);

/* Parse {"metric": "ulp", "max_ulp": 1, "reason_code": "...", "reason": "..."}.
 * On error returns -EINVAL and sets *ret_field to a JSON pointer relative to the
 * object ("/reason") and *ret_msg to a malloc'd message (caller frees both). */
int nv_tolerance_from_json(const json_t *obj, nv_tolerance *ret, char **ret_field, char **ret_msg);
json_t *nv_tolerance_to_json(const nv_tolerance *t); /* new reference */

#endif
