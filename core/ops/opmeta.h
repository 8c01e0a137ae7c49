/* Op metadata shared by core/ops and core/ref: op ids, dtype support, axes,
 * shape text and the row view of a tensor around an axis. Not installed, not
 * part of the plugin ABI; for the catalog's own helpers see ops_internal.h. */
#ifndef NUMVAL_OPMETA_H
#define NUMVAL_OPMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

/* Op ids: the index of the op in the catalog table (catalog.c keeps the same order). */
typedef enum nvo_id {
    NVO_NEG,
    NVO_ABS,
    NVO_ADD,
    NVO_SUB,
    NVO_MUL,
    NVO_DIV,
    NVO_FMA,
    NVO_SQRT,
    NVO_RSQRT,
    NVO_RECIPROCAL,
    NVO_EXP,
    NVO_EXP2,
    NVO_EXPM1,
    NVO_LOG,
    NVO_LOG2,
    NVO_LOG1P,
    NVO_SIN,
    NVO_COS,
    NVO_TANH,
    NVO_SIGMOID,
    NVO_ERF,
    NVO_GELU,
    NVO_SILU,
    NVO_RELU,
    NVO_POW,
    NVO_MAXIMUM,
    NVO_MINIMUM,
    NVO_CAST,
    NVO_SUM,
    NVO_MEAN,
    NVO_MAX,
    NVO_VAR,
    NVO_NORM2,
    NVO_LOGSUMEXP,
    NVO_SOFTMAX,
    NVO_LOG_SOFTMAX,
    NVO_LAYER_NORM,
    NVO_RMS_NORM,
    NVO_CROSS_ENTROPY,
    NVO_MATMUL,
    NVO_BMM,
    NVO_TRANSPOSE,
    NVO_EMBEDDING,
    NVO_SPLIT_HEADS,
    NVO_MERGE_HEADS,
    NVO_CACHE_WRITE,
    NVO_FLATTEN,
    NVO_MAX_POOL2D,
    NVO_CONV2D,
    NVO_AVG_POOL2D,
    /* Selections (NV_OPK_SELECT): no backward (emu's EMU_B_* ids hold their
     * places only so that the ids stay the catalog's order). */
    NVO_ARGMAX,
    NVO_SAMPLE,
    /* Appended after the selections: ops added since keep the ids above. */
    NVO_ROTARY_EMBEDDING,
    NVO_COUNT
} nvo_id;

/* The id of a catalog op; -1 for a pointer that is not in the table. */
int nvo_op_id(const nv_op_def *op);

/* Whether op accepts dt as its (floating) data / output dtype. */
bool nvo_dtype_supported(const nv_op_def *op, nv_dtype dt);

/* Whether dt is a floating-point data format (not e8m0, not an int). */
bool nvo_is_float_dt(nv_dtype dt);

/* Reduction ops that remove the axis (sum, mean, max, var, norm2, logsumexp). */
bool nvo_reduce_removes_axis(int id);

/* The axis attribute made non-negative for a tensor of ndim dims, or -1 when out
 * of range. layer_norm / rms_norm always use the last axis. */
int nvo_norm_axis(const nv_op_def *op, const nv_op_attrs *a, int ndim);

/* Shape for an error message: "[4, 5]". */
const char *nvo_shape_str(const nv_tensor *t, char *buf, size_t len);

/* A tensor seen as outer x n x inner around the reduction axis: element (o, j, i)
 * is at (o * n + j) * inner + i; line l = o * inner + i. */
typedef struct nvb_lines {
    int64_t outer, n, inner;
} nvb_lines;

static inline int64_t nvb_at(const nvb_lines *L, int64_t l, int64_t j)
{
    return ((l / L->inner) * L->n + j) * L->inner + (l % L->inner);
}

/* The lines of x for a row-wise op (axis per nvo_norm_axis). Returns 0, or
 * -EINVAL when the axis is out of range (jacobian.c). */
int nvb_lines_of(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x, nvb_lines *ret);

#endif
