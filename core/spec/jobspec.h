/* Op job specs (docs/JOBS.md): validation with errors that name the offending
 * field by JSON pointer (RFC 6901), and the parsed form the runner expands into
 * cases. In core/spec so numvald validates submissions with the same code. */
#ifndef NUMVAL_JOBSPEC_H
#define NUMVAL_JOBSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/inputs.h"
#include "core/numerics/tolerance.h"
#include "core/ops/catalog.h"

/* Per-tensor element limit: keeps one case's tensors (as doubles, with the
 * strided layout's 2x storage) within a few GiB. */
#define NV_JOB_MAX_ELEMENTS (INT64_C(1) << 27)
/* The one larger tensor: every fp32 encoding of a unary op's "exhaustive" input,
 * as rows of at most 2^16 (jobspec.c streamed(): [65536, 65536]). */
#define NV_JOB_MAX_STREAMED (INT64_C(1) << 32)
#define NV_JOB_MAX_CASES 100000
#define NV_JOB_MAX_REPEAT 16
#define NV_JOB_MAX_SAMPLES 1000
#define NV_JOB_MAX_TENSORS (NV_OP_MAX_INPUTS + 2) /* op inputs + matmul scales */

typedef enum nv_layout {
    NV_LAYOUT_CONTIGUOUS, /* "contiguous": row-major */
    NV_LAYOUT_TRANSPOSED, /* "transposed": last two dims swapped via strides */
    NV_LAYOUT_STRIDED,    /* "strided": every other element of a 2x larger storage */
    NV_LAYOUT_COUNT
} nv_layout;

const char *nv_layout_name(nv_layout l);
int nv_layout_from_name(const char *name, nv_layout *ret);

typedef enum nv_expect_kind {
    NV_EXPECT_SHAPE_MISMATCH, /* "shape_mismatch": backend must return NV_E_SHAPE */
    NV_EXPECT_WRONG_DTYPE,    /* "wrong_dtype": backend must return NV_E_DTYPE */
    NV_EXPECT_COUNT
} nv_expect_kind;

const char *nv_expect_kind_name(nv_expect_kind k);

/* One entry of "shapes": either one shape (n == 0: input 0's shape, the others
 * derived; matmul: [..batch, M, K, N]) or one explicit shape per op input. */
typedef struct nv_job_shape {
    int n; /* 0: single form; else the count of explicit shapes */
    int ndim[NV_OP_MAX_INPUTS];
    int64_t dims[NV_OP_MAX_INPUTS][NV_MAX_DIMS];
} nv_job_shape;

typedef struct nv_jobspec {
    const nv_op_def *op;
    nv_op_attrs attrs;
    char *attrs_json; /* JSON text handed to backends, "{}" when none */
    int n_dtypes;
    nv_dtype dtypes[NV_DT_COUNT];
    int n_shapes;
    nv_job_shape *shapes;
    int n_layouts;
    nv_layout layouts[NV_LAYOUT_COUNT];
    int n_classes;
    nv_input_class classes[NV_IN_COUNT];
    int samples;
    uint64_t seed;
    bool has_out_dtype;
    nv_dtype out_dtype;
    bool has_tolerance;
    nv_tolerance tolerance; /* source "job" */
    bool has_by_dtype[NV_DT_COUNT];
    nv_tolerance by_dtype[NV_DT_COUNT]; /* source "store", with version */
    bool deterministic;
    int repeat;
    nv_sweep sweep; /* "sweep": the class's stride and range (stride 0: the default sweep) */
    int n_expect;
    nv_expect_kind expect[NV_EXPECT_COUNT];
    int64_t n_cases; /* regular cases: dtypes x shapes x layouts x classes x samples */
    int64_t n_total; /* + one expect_error case per (dtype, expected error) */
} nv_jobspec;

/* One case of a job, decoded from its index (regular cases first, in the order
 * dtype, shape, layout, class, sample; then the expect_error cases). */
typedef struct nv_job_case {
    int64_t index;
    nv_dtype dtype;
    const nv_job_shape *shape;
    int shape_index;
    nv_layout layout;
    nv_input_class cls;
    int sample;
    bool expect_error;
    nv_expect_kind expect;
} nv_job_case;

/* Op jobs ("kind": "op"): validate and parse. Returns 0, or -EINVAL with
 * *ret_pointer (the JSON pointer of the offending field, "" for the root) and
 * *ret_msg (a sentence naming the value in quotes), both malloc'd and owned by
 * the caller; the pointers may be NULL when the caller does not want them.
 * -ENOMEM possible. Any other kind is refused at "/kind"; validating a spec of
 * any kind is nv_jobspec_validate (spec.h). *ret (free with nv_jobspec_free)
 * only on success. */
int nv_jobspec_parse(const json_t *spec, nv_jobspec **ret, char **ret_pointer, char **ret_msg);
void nv_jobspec_free(nv_jobspec *s);

/* Decode case index i (0 <= i < n_total). Returns 0 or -EINVAL. */
int nv_jobspec_case(const nv_jobspec *s, int64_t i, nv_job_case *ret);

/* The output dtype for input dtype dt: "out_dtype" when set, attrs.cast_to for
 * cast, the accumulate dtype for matmul of 8-bit-or-narrower floats, else dt. */
nv_dtype nv_jobspec_out_dtype(const nv_jobspec *s, nv_dtype dt);

/* The input tensors of a case, without data: dtype, ndim, shape (contiguous
 * strides, numel). Matmul scales follow the op's inputs. bad: build the invalid
 * inputs of an expect_error kind instead (>= 0), or -1 for the valid ones.
 * Returns the tensor count; -EINVAL when the kind does not apply to the op,
 * -ERANGE for a matmul shape of the single form with fewer than 3 extents,
 * -EOVERFLOW when a tensor's element count (checked) does not fit in int64_t:
 * that tensor's numel is then INT64_MAX. */
int nv_jobspec_tensors(const nv_jobspec *s, const nv_job_shape *sh, nv_dtype dt, int bad,
                       nv_tensor *ret, int max);

/* RFC 6901 escaping of one reference token ("~" -> "~0", "/" -> "~1"). malloc'd. */
char *nv_json_pointer_escape(const char *token);

#endif
