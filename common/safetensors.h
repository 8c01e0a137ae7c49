/* The safetensors checkpoint format (https://github.com/huggingface/safetensors,
 * README "Format"): an 8-byte little-endian header length N, N bytes of a
 * JSON object {NAME: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {str: str}?} (space padding allowed after it), then the
 * byte buffer, which the tensors must cover exactly: no holes, no overlap.
 *
 * The reader checks every rule of the format plus numval's limits, and each
 * error names the file and, where there is one, the tensor. The writer
 * produces what the reader accepts (tensors packed in the order given). */
#ifndef NUMVAL_COMMON_SAFETENSORS_H
#define NUMVAL_COMMON_SAFETENSORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NV_ST_MAX_DIMS 8
#define NV_ST_MAX_NAME 255 /* bytes of a tensor name */

/* The format's dtype names, in its spelling. Sub-byte dtypes (F4, F6_*) are
 * known and refused as unsupported, not as unknown. */
typedef enum nv_st_dtype {
    NV_ST_BOOL,
    NV_ST_U8,
    NV_ST_I8,
    NV_ST_I16,
    NV_ST_U16,
    NV_ST_I32,
    NV_ST_U32,
    NV_ST_I64,
    NV_ST_U64,
    NV_ST_F16,
    NV_ST_BF16,
    NV_ST_F32,
    NV_ST_F64,
    NV_ST_F8_E5M2,
    NV_ST_F8_E4M3,
    NV_ST_F8_E8M0,
    NV_ST_DTYPE_COUNT
} nv_st_dtype;

const char *nv_st_dtype_name(nv_st_dtype d);
size_t nv_st_dtype_size(nv_st_dtype d);
/* 0 and *ret, or -1 for a name the format does not have. */
int nv_st_dtype_from_name(const char *name, nv_st_dtype *ret);

typedef struct nv_st_limits {
    uint64_t max_header;  /* bytes of the JSON header */
    size_t max_tensors;   /* entries besides __metadata__ */
    uint64_t max_bytes;   /* the whole file */
    bool allow_nonfinite; /* else an Inf or NaN in a float tensor is refused */
} nv_st_limits;

/* 16 MiB header, 4096 tensors, 2 GiB file, non-finite values refused. */
extern const nv_st_limits NV_ST_LIMITS_DEFAULT;

typedef struct nv_st_tensor {
    char *name;
    nv_st_dtype dtype;
    int ndim;
    int64_t shape[NV_ST_MAX_DIMS];
    int64_t numel;
    const uint8_t *data; /* little-endian elements, unaligned; inside the file's buffer */
    size_t nbytes;
} nv_st_tensor;

typedef struct nv_st_file {
    uint8_t *buf; /* the whole file */
    size_t len;
    size_t n;
    nv_st_tensor *tensors; /* in data_offsets order */
    json_t *metadata;      /* the "__metadata__" object, or NULL */
} nv_st_file;

/* Parse len bytes at buf (copied). what names the file in errors. 0 and *ret;
 * -EBADMSG (a bad or truncated file), -EFBIG (a limit) with *ret_err, a
 * malloc'd message naming what and the tensor; -ENOMEM. */
int nv_st_parse(const void *buf, size_t len, const char *what, const nv_st_limits *lim,
                nv_st_file **ret, char **ret_err);
/* Read and parse the file at path; its size is checked against max_bytes
 * before it is read. Errors as nv_st_parse, plus -errno when it cannot be read. */
int nv_st_read(const char *path, const nv_st_limits *lim, nv_st_file **ret, char **ret_err);
void nv_st_free(nv_st_file *f); /* NULL is a no-op */

/* The tensor called name, or NULL. */
const nv_st_tensor *nv_st_find(const nv_st_file *f, const char *name);

/* Encode n tensors (name, dtype, ndim, shape, data, nbytes are read) and the
 * optional metadata (an object of strings) as a safetensors file in *ret_buf
 * (malloc'd). 0, -EINVAL with *ret_err (a size that disagrees with dtype x
 * shape, a duplicate or bad name, non-string metadata) or -ENOMEM. */
int nv_st_encode(const nv_st_tensor *t, size_t n, const json_t *metadata, uint8_t **ret_buf,
                 size_t *ret_len, char **ret_err);

#endif
