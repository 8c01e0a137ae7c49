/* emu backward internals (emu_backward*.c). */
#ifndef NUMVAL_WORKER_EMU_BACKWARD_H
#define NUMVAL_WORKER_EMU_BACKWARD_H

#include <jansson.h>

#include "emu_internal.h"

/* Op ids in catalog order (catalog.h nv_op_all; checked by name at first use). */
enum {
    EMU_B_NEG,
    EMU_B_ABS,
    EMU_B_ADD,
    EMU_B_SUB,
    EMU_B_MUL,
    EMU_B_DIV,
    EMU_B_FMA,
    EMU_B_SQRT,
    EMU_B_RSQRT,
    EMU_B_RECIP,
    EMU_B_EXP,
    EMU_B_EXP2,
    EMU_B_EXPM1,
    EMU_B_LOG,
    EMU_B_LOG2,
    EMU_B_LOG1P,
    EMU_B_SIN,
    EMU_B_COS,
    EMU_B_TANH,
    EMU_B_SIGMOID,
    EMU_B_ERF,
    EMU_B_GELU,
    EMU_B_SILU,
    EMU_B_RELU,
    EMU_B_POW,
    EMU_B_MAXIMUM,
    EMU_B_MINIMUM,
    EMU_B_CAST,
    EMU_B_SUM,
    EMU_B_MEAN,
    EMU_B_MAX,
    EMU_B_VAR,
    EMU_B_NORM2,
    EMU_B_LOGSUMEXP,
    EMU_B_SOFTMAX,
    EMU_B_LOG_SOFTMAX,
    EMU_B_LAYER_NORM,
    EMU_B_RMS_NORM,
    EMU_B_CROSS_ENTROPY,
    EMU_B_MATMUL,
    EMU_B_BMM,
    EMU_B_TRANSPOSE,
    EMU_B_EMBEDDING,
    EMU_B_SPLIT_HEADS,
    EMU_B_MERGE_HEADS,
    EMU_B_CACHE_WRITE,
    EMU_B_FLATTEN,
    EMU_B_MAX_POOL2D,
    EMU_B_CONV2D,
    EMU_B_AVG_POOL2D,
    EMU_B_ARGMAX, /* no backward: holds the catalog's place */
    EMU_B_SAMPLE, /* no backward: holds the catalog's place */
    EMU_B_ROTARY_EMBEDDING,
    EMU_B_COUNT
};

/* Decoded operands of one backward call: forward inputs (NULL where not saved),
 * the saved output y (or NULL), the output gradient, and the gradients to fill
 * (numel of each input, values in the compute dtype; rounded when encoded). */
typedef struct emu_bwd_io {
    const nv_tensor *shape0; /* input 0 (its shape; its values only when saved) */
    const nv_tensor *x[NV_OP_MAX_INPUTS];
    const nv_tensor *y;
    const nv_tensor *gy;
    double *gx[NV_OP_MAX_INPUTS];
} emu_bwd_io;

/* The describe() "saved" object: op -> ["input:0", "output:0", ...]. */
json_t *emu_saved_json(void);
/* The same, built once per process (read-only, shared by threads). */
const json_t *emu_saved_json_cached(void);

void emu_bwd_call_init(emu_call *ec, const emu_mode *m, const nv_op_def *op, const nv_op_attrs *a,
                       nv_dtype dt);

int emu_bwd_elementwise(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                        const emu_bwd_io *io);
/* The same element by element, without emu_bwd_elementwise's batched paths
 * (which must give its values: test-emu-trainfast compares them). */
int emu_bwd_elementwise_each(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                             const emu_bwd_io *io);
int emu_bwd_rows(emu_call *c, int id, const nv_op_def *op, const nv_op_attrs *a,
                 const emu_bwd_io *io, char *err, size_t errlen);
int emu_bwd_matmul(emu_call *c, const emu_bwd_io *io);
int emu_bwd_layout(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const emu_bwd_io *io,
                   char *err, size_t errlen);
/* conv2d and avg_pool2d (emu_backward_conv.c). */
int emu_bwd_conv(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const emu_bwd_io *io,
                 char *err, size_t errlen);

/* rotary_embedding (emu_rotary.c): the rotation by minus the angle. */
int emu_bwd_rotary(emu_call *c, const nv_op_attrs *a, const emu_bwd_io *io, char *err,
                   size_t errlen);

/* The backend table's backward and double-backward entries (emu.c). */
int emu_backward(void *ctx, nv_backward_call *call, char *err, size_t errlen);
int emu_double_backward(void *ctx, nv_double_backward_call *call, char *err, size_t errlen);

#endif
