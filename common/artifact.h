/* Failure artifact container, format v1 (docs/ARTIFACTS.md).
 *
 * An artifact holds a JSON manifest and named tensors, stored exactly as the
 * caller hands them: dtype id (include/numval/backend.h numbering), shape, and
 * the raw encoded little-endian elements in contiguous row-major order, one
 * storage unit per element per the backend ABI rules. The serialized form is
 * the whole container compressed as one zstd frame (with its content checksum);
 * its content id is the SHA-256 hex of the compressed bytes.
 *
 * common/ knows nothing of the numerics core: converting nv_tensor values to and
 * from encoded bytes is the caller's job (nv_dtype_encode / nv_dtype_store_bits).
 */
#ifndef NUMVAL_ARTIFACT_H
#define NUMVAL_ARTIFACT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define NV_ARTIFACT_MAGIC "NVARTF01"
#define NV_ARTIFACT_MAX_DIMS 8
#define NV_ARTIFACT_MAX_TENSORS 4096
/* Refuse containers that would decompress to more than this (bytes). */
#define NV_ARTIFACT_MAX_RAW ((uint64_t)2 << 30)

typedef struct nv_artifact_tensor {
    char *name;    /* unique, 1..255 bytes, no NUL */
    int32_t dtype; /* nv_dtype id */
    int32_t ndim;  /* 0..NV_ARTIFACT_MAX_DIMS (0: a scalar) */
    int64_t shape[NV_ARTIFACT_MAX_DIMS];
    int64_t numel;
    size_t nbytes; /* numel * nv_artifact_dtype_size(dtype) */
    uint8_t *data; /* encoded elements, contiguous row-major, owned */
} nv_artifact_tensor;

typedef struct nv_artifact {
    json_t *manifest; /* a JSON object, owned reference */
    int n_tensors;
    nv_artifact_tensor *tensors;
} nv_artifact;

/* Storage bytes of one element of dtype id dt under the backend ABI rules, or 0
 * for an id this format does not know. */
size_t nv_artifact_dtype_size(int32_t dt);

/* An empty artifact with an empty manifest object; NULL on ENOMEM. */
nv_artifact *nv_artifact_new(void);
void nv_artifact_free(nv_artifact *a); /* NULL is a no-op */

/* Replace the manifest (must be a JSON object); takes a new reference, the
 * caller keeps its own. 0 or -EINVAL. */
int nv_artifact_set_manifest(nv_artifact *a, json_t *manifest);

/* Append a tensor, copying name and data. data holds nbytes encoded bytes,
 * which must equal numel * nv_artifact_dtype_size(dtype). Returns 0, -EINVAL
 * (bad name, duplicate name, unknown dtype, bad shape, wrong byte count) or
 * -ENOMEM. Element values are stored as given: a device output is evidence, so
 * the container never judges or canonicalizes it. */
int nv_artifact_add_tensor(nv_artifact *a, const char *name, int32_t dtype, int ndim,
                           const int64_t *shape, const void *data, size_t nbytes);

/* The tensor called name, or NULL. */
const nv_artifact_tensor *nv_artifact_find(const nv_artifact *a, const char *name);

/* Serialize and compress with zstd at level (0: default). On success writes a
 * malloc'd buffer to *ret_buf, its length to *ret_len and, when ret_sha is not
 * NULL, the content id (SHA-256 hex of the compressed bytes). -ENOMEM, or -EIO
 * when zstd fails. */
int nv_artifact_encode(const nv_artifact *a, int level, uint8_t **ret_buf, size_t *ret_len,
                       char ret_sha[65]);

/* Decompress and parse a container. Every length is validated; truncated,
 * trailing or corrupt data is refused with -EBADMSG and a malloc'd message in
 * *ret_err (when ret_err is not NULL). Nothing is ever substituted for missing
 * data. -ENOMEM on allocation failure. */
int nv_artifact_decode(const void *buf, size_t len, nv_artifact **ret, char **ret_err);

#endif
