/* Input generators (DESIGN.md "Numerics", issue 2 "RNG and inputs"): each case
 * draws its tensors from a named class. Every value is rounded to the tensor's
 * dtype and, for the random classes, kept inside the op input's real domain
 * (catalog.h nv_op_input_desc lo/hi). A tensor's values are a pure function of
 * (seed, case index, tensor index, class, shape, dtype): the stream is
 * nv_rng_init(seed, case, tensor) (rng.h), independent of threads. */
#ifndef NUMVAL_INPUTS_H
#define NUMVAL_INPUTS_H

#include <stdint.h>

#include "dtype.h"

struct nv_op_def;

typedef enum nv_input_class {
    NV_IN_NORMAL,       /* "normal": N(0, 1) */
    NV_IN_UNIFORM,      /* "uniform": uniform over the domain clipped to [-4, 4] */
    NV_IN_NEAR_ZERO,    /* "near_zero": tiny magnitudes, half of them subnormals of dtype */
    NV_IN_LARGE,        /* "large": magnitudes in [max_finite / 16, max_finite] */
    NV_IN_SPECIALS,     /* "specials": NaN, +-Inf, +-0, +-min subnormal, +-max finite,
                           interleaved with normal values */
    NV_IN_MIDPOINTS,    /* "midpoints": exact rounding midpoints of the target dtype */
    NV_IN_CANCELLATION, /* "cancellation": large values of both signs that cancel + small */
    NV_IN_DOMAIN_EDGES, /* "domain_edges": the op's edges() and their neighbours */
    NV_IN_COUNT
} nv_input_class;

/* Canonical name ("near_zero"); NULL for an out-of-range value. */
const char *nv_input_class_name(nv_input_class c);
/* Parse a class name. Returns 0 or -EINVAL. */
int nv_input_class_from_name(const char *name, nv_input_class *ret);

typedef struct nv_input_request {
    const struct nv_op_def *op; /* domain, edges and input count; NULL: whole real line */
    int tensor_index;           /* which input of the op (matmul scales follow n_inputs) */
    nv_dtype dtype;             /* dtype of this tensor: every value is representable in it */
    nv_dtype target;            /* the op's output dtype: "midpoints" are its midpoints */
    nv_input_class cls;
    uint64_t seed;
    uint32_t case_index;
    int64_t index_range;   /* index inputs (op input is_index): values in [0, range) */
    int64_t reduction_len; /* "cancellation" pairs values within runs of this length
                              (the op's reduction axis extent; 0 or 1: whole tensor) */
} nv_input_request;

/* Fill out[0..n) (row-major logical order) with the values of the request.
 * Returns 0, or -EINVAL for a bad request (unknown class or dtype). */
int nv_inputs_generate(const nv_input_request *rq, double *out, int64_t n);

/* The next representable value of dt above (dir > 0) or below (dir < 0) x, where
 * x is representable in dt; saturates at +-max_finite. */
double nv_inputs_neighbour(nv_dtype dt, double x, int dir);

#endif
