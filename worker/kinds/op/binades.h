/* Per-binade summary and worst elements of a sweep or exhaustive case of a
 * unary elementwise op (docs/RESULT_SCHEMA.md "binades"): a block's elements
 * are added to a part, parts merge in any order to the same figures (sums,
 * maxima, and a total order on elements: error desc, encoding asc, index asc). */
#ifndef NUMVAL_WORKER_OP_BINADES_H
#define NUMVAL_WORKER_OP_BINADES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/compare.h"

#define NVW_WORST 16
/* Per sign: zero, subnormal, the exponents emin..emax of a float of at most 8
 * exponent bits (fp32's -126..127), infinity, NaN. */
#define NVW_BIN_EXPS 254
#define NVW_BIN_PER_SIGN (NVW_BIN_EXPS + 4)

typedef struct nvw_bin {
    int64_t count, mismatches;
    double max_ulp;
    bool has_worst;
    uint64_t worst_enc;
    int64_t worst_index;
} nvw_bin;

typedef struct nvw_worst {
    uint64_t enc;
    int64_t index;
    double in, got, exact, ulp_err;
} nvw_worst;

typedef struct nvw_binades {
    nv_dtype in_dt;
    nvw_bin bin[2][NVW_BIN_PER_SIGN];
    int n_worst;
    nvw_worst worst[NVW_WORST]; /* a heap, root least bad (binades.c); the JSON is sorted */
} nvw_binades;

/* Whether a case of this op kind, input count, class and input dtype gets them. */
bool nvw_binades_wanted(int op_kind, int n_in, int cls, nv_dtype in_dt);
void nvw_binades_init(nvw_binades *b, nv_dtype in_dt);
/* Elements [0, ci->n) of ci, elements base.. of the case, input values in;
 * elems: their nv_compare_elems outputs under tol when the caller has them
 * (nv_compare_part's), else NULL. */
int nvw_binades_add(nvw_binades *b, const nv_compare_input *ci, const nv_tolerance *tol,
                    const nv_compare_elem_out *elems, const double *in, int64_t base);
void nvw_binades_merge(nvw_binades *acc, const nvw_binades *p);
/* "binades" and "worst" into case JSON cj. Returns 0 or -ENOMEM. */
int nvw_binades_json(const nvw_binades *b, json_t *cj);

#endif
