/* The numerics core's tensor: values held as doubles, each exactly representable
 * in the tensor's dtype (see dtype.h), with shape and element strides so that
 * transposed and strided views are real layouts, not copies. */
#ifndef NUMVAL_TENSOR_H
#define NUMVAL_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"

#define NV_MAX_DIMS 8

typedef struct nv_tensor {
    nv_dtype dtype;
    int ndim;
    int64_t shape[NV_MAX_DIMS];
    int64_t strides[NV_MAX_DIMS]; /* in elements */
    int64_t offset;               /* element offset of [0,...,0] into data */
    int64_t numel;                /* product of shape */
    int64_t storage_len;          /* elements allocated in data */
    double *data;                 /* owned by the tensor */
} nv_tensor;

/* Contiguous row-major tensor of zeros. Returns NULL on allocation failure or a
 * bad shape (ndim > NV_MAX_DIMS, negative extent, numel overflow). */
nv_tensor *nv_tensor_new(nv_dtype dt, int ndim, const int64_t *shape);
/* The same with data left unset: for a caller that writes every element
 * (decoders), where zeroing is a pass over memory for nothing. */
nv_tensor *nv_tensor_new_uninit(nv_dtype dt, int ndim, const int64_t *shape);
void nv_tensor_free(nv_tensor *t); /* NULL is a no-op */

/* Element offset in data of the multi-index idx (ndim entries). */
int64_t nv_tensor_offset(const nv_tensor *t, const int64_t *idx);
/* Element offset in data of the i-th element in row-major logical order. */
int64_t nv_tensor_offset_linear(const nv_tensor *t, int64_t i);
/* Whether every element i lies at offset + i (row-major strides, extents of 1
 * aside): loops over such a tensor index it directly. */
bool nv_tensor_dense(const nv_tensor *t);
/* nv_tensor_offset_linear, with dense = nv_tensor_dense(t) hoisted out of a loop. */
static inline int64_t nv_tensor_offset_lin(const nv_tensor *t, bool dense, int64_t i)
{
    return dense ? t->offset + i : nv_tensor_offset_linear(t, i);
}

/* A contiguous copy (logical row-major order) of any view. NULL on ENOMEM. */
nv_tensor *nv_tensor_contiguous(const nv_tensor *t);

#endif
