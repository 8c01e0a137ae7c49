/* Input generators (docs/DESIGN.md "Numerics"): each case draws its tensors
 * from a named class. Every value is rounded to the tensor's dtype and, for the
 * random classes, kept inside the tensor's real domain. What an op asks of its
 * input tensors (domain, role, domain edges) comes in the request, filled by
 * the op layer (core/ops/catalog.h nv_op_input_domain): this module knows no
 * op. A tensor's values are a pure function of the request and the tensor's
 * element count: the stream is nv_rng_init(seed, case, tensor) (rng.h),
 * independent of threads. */
#ifndef NUMVAL_INPUTS_H
#define NUMVAL_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "rng.h"

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
    NV_IN_OFFSET,       /* "offset": rows of a large common offset and a small spread */
    NV_IN_SWEEP,        /* "sweep": every k-th encoding of the dtype, both signs */
    NV_IN_EXHAUSTIVE,   /* "exhaustive": every encoding (dtypes of at most 16 bits) */
    NV_IN_COUNT
} nv_input_class;

/* Canonical name ("near_zero"); NULL for an out-of-range value. */
const char *nv_input_class_name(nv_input_class c);
/* Parse a class name. Returns 0 or -EINVAL. */
int nv_input_class_from_name(const char *name, nv_input_class *ret);

/* Whether class c can fill a value tensor of n elements of dtype dt. Returns 0,
 * or -EINVAL with a sentence in msg (naming the class, the dtype and what to
 * use instead): "exhaustive" takes dtypes of at most 16 bits and at least one
 * element per encoding. The other classes take every dtype and size. Job-spec
 * validation calls it so that such a job is refused before it runs;
 * nv_inputs_generate refuses the same requests with -EINVAL. */
int nv_input_class_check(nv_input_class c, nv_dtype dt, int64_t n, char *msg, size_t len);

/* Domain edges for the "domain_edges" class in dtype dt: up to max values
 * written to out, count returned (nv_op_def.edges). */
typedef int (*nv_input_edges_fn)(nv_dtype dt, double *out, int max);

typedef enum nv_input_role {
    NV_INPUT_VALUES, /* data values of the class */
    NV_INPUT_INDEX,  /* class indices in [0, index_range), whatever the class */
    NV_INPUT_SCALE,  /* matmul scales: e8m0 powers of two or fp32 in [0.5, 2] */
} nv_input_role;

/* What an op asks of one input tensor. All zero (the default): data values on
 * the whole real line, no domain edges. */
typedef struct nv_input_domain {
    nv_input_role role;
    bool bounded;            /* lo and hi bound the random classes; else the whole real line */
    double lo, hi;           /* closed real domain (may be +-INFINITY) when bounded */
    nv_input_edges_fn edges; /* "domain_edges" values; NULL: normal values instead */
    /* "midpoints" for y of x + y and x - y: y = +-ulp(x) / 2 puts the result on
     * a tie. x is tensor 0, regenerated from this request with tensor_index 0,
     * so tensor 0 must share this tensor's domain (add, sub: the whole line). */
    bool tie_partner;
    /* "specials" for an elementwise op of 2 or 3 operands (its arity here; 0 or
     * 1: the unary layout). Position i holds tuple i mod L^arity of the ordered
     * tuples over the specials list plus one normal value (L entries), operand t
     * taking digit t: every ordered pair (triple) of specials, (NaN, x) and
     * (x, NaN) alike, sits at a fixed position of the operands. */
    int cross_arity;
    /* A per-channel parameter (layer_norm / rms_norm weight and bias): "offset",
     * "sweep" and "exhaustive" give it normal values, since they describe the
     * rows it scales. */
    bool param;
} nv_input_domain;

/* The "sweep" class at a stride (a job's "sweep" field, docs/JOBS.md): element
 * i of a float tensor holds the value at signed ordinal first + (i * stride mod
 * span) of the encodings from the smallest value >= from to the largest <= to,
 * in value order (-0 before +0). stride 0: the default sweep (every k-th
 * encoding across the whole range, k from the tensor's size). */
#define NV_SWEEP_MAX_STRIDE (INT64_C(1) << 40)
typedef struct nv_sweep {
    int64_t stride;
    double from, to;
} nv_sweep;

typedef struct nv_input_request {
    nv_input_domain domain; /* from the op layer (nv_op_input_domain); zero: plain values */
    int tensor_index;       /* which input of the op: keys the stream */
    nv_dtype dtype;         /* dtype of this tensor: every value is representable in it */
    nv_dtype target;        /* the op's output dtype: "midpoints" are its midpoints */
    nv_input_class cls;
    uint64_t seed;
    uint32_t case_index;
    int64_t index_range;   /* NV_INPUT_INDEX: values in [0, range) */
    int64_t reduction_len; /* "cancellation" pairs values within runs of this length
                              (the op's reduction axis extent; 0 or 1: whole tensor) */
    nv_sweep sweep;        /* "sweep" at a stride (stride 0: the default) */
} nv_input_request;

/* Fill out[0..n) (row-major logical order) with the values of the request.
 * Returns 0, or -EINVAL for a bad request (unknown class or dtype). */
int nv_inputs_generate(const nv_input_request *rq, double *out, int64_t n);

/* A generator's state (fields private to inputs.c; here so that a stream can
 * live on the stack or in a caller's struct). */
typedef struct nv_input_gen {
    nv_input_request rq;
    const nv_dtype_info *di;
    nv_rng rng;
    double lo, hi;               /* real domain of this input */
    int64_t n, pos;              /* the tensor's element count, the next element */
    double carry;                /* "cancellation": the run's big value; "offset": the row's */
    struct nv_input_gen *partner; /* "midpoints" tie partner: tensor 0's generator */
} nv_input_gen;

/* One tensor's values in consecutive ranges: after nv_inputs_stream_init(s, rq,
 * n), calls of nv_inputs_stream_next with counts adding up to n write the values
 * nv_inputs_generate(rq, out, n) writes, in the same order, however the range
 * [0, n) is split (the blocked op cases of worker/kinds/op stream their inputs
 * this way). A stream owns nothing: it may simply be dropped; it holds a
 * pointer into itself, so it is not copied once initialised. */
typedef struct nv_input_stream {
    nv_input_gen g, partner;
} nv_input_stream;

/* Returns 0, or -EINVAL for a bad request (as nv_inputs_generate). */
int nv_inputs_stream_init(nv_input_stream *s, const nv_input_request *rq, int64_t n);
/* The next count values into out[0..count). Returns 0, or -EINVAL when count
 * runs past the tensor's n elements. */
int nv_inputs_stream_next(nv_input_stream *s, double *out, int64_t count);

/* Whether the stream's values are a function of the element index alone
 * (inputs.c says which), so that it can start anywhere: after
 * nv_inputs_stream_seek(s, pos), nv_inputs_stream_next writes the values of
 * elements pos, pos + 1, ... that one pass from 0 writes. Seek returns 0, or
 * -EINVAL for a stream that is not seekable or pos outside [0, n]. */
bool nv_inputs_stream_seekable(const nv_input_stream *s);
int nv_inputs_stream_seek(nv_input_stream *s, int64_t pos);

/* The next representable value of dt above (dir > 0) or below (dir < 0) x, where
 * x is representable in dt; saturates at +-max_finite. */
double nv_inputs_neighbour(nv_dtype dt, double x, int dir);

#endif
