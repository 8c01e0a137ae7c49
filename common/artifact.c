/* Failure artifact container v1: serialization, zstd framing, validation.
 * The byte layout is specified in docs/ARTIFACTS.md; every field is little-endian. */
#include "artifact.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "sha256.h"

#define MAGIC_LEN 8
#define MAX_NAME 255

size_t nv_artifact_dtype_size(int32_t dt)
{
    /* include/numval/backend.h: fp64 8 bytes; fp32, tf32, int32 4; bf16, fp16 2;
     * every 8-bit and sub-byte format one byte. Ids are fixed by the plugin ABI
     * (core/numerics/dtype.h). */
    static const uint8_t size[] = {8, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 1, 4};
    if (dt < 0 || (size_t)dt >= sizeof(size))
        return 0;
    return size[dt];
}

nv_artifact *nv_artifact_new(void)
{
    nv_artifact *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->manifest = json_object();
    if (!a->manifest) {
        free(a);
        return NULL;
    }
    return a;
}

void nv_artifact_free(nv_artifact *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n_tensors; i++) {
        free(a->tensors[i].name);
        free(a->tensors[i].data);
    }
    free(a->tensors);
    json_decref(a->manifest);
    free(a);
}

int nv_artifact_set_manifest(nv_artifact *a, json_t *manifest)
{
    if (!json_is_object(manifest))
        return -EINVAL;
    json_incref(manifest);
    json_decref(a->manifest);
    a->manifest = manifest;
    return 0;
}

const nv_artifact_tensor *nv_artifact_find(const nv_artifact *a, const char *name)
{
    for (int i = 0; i < a->n_tensors; i++)
        if (strcmp(a->tensors[i].name, name) == 0)
            return &a->tensors[i];
    return NULL;
}

/* Element count of a shape, or -1 when an extent is negative or the count (in
 * bytes of elem-size elements) would overflow. */
static int64_t shape_numel(int ndim, const int64_t *shape, size_t elem)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > (INT64_MAX / (int64_t)elem) / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

/* Checks shared by add_tensor and decode; 0 or a static reason. */
static const char *check_tensor(const nv_artifact *a, const char *name, size_t name_len,
                                int32_t dtype, int32_t ndim, const int64_t *shape, uint64_t nbytes,
                                int64_t *ret_numel)
{
    if (name_len == 0 || name_len > MAX_NAME || memchr(name, '\0', name_len))
        return "tensor name is empty, longer than 255 bytes or contains NUL";
    for (int i = 0; i < a->n_tensors; i++)
        if (strlen(a->tensors[i].name) == name_len && !memcmp(a->tensors[i].name, name, name_len))
            return "duplicate tensor name";
    size_t elem = nv_artifact_dtype_size(dtype);
    if (elem == 0)
        return "unknown dtype id";
    if (ndim < 0 || ndim > NV_ARTIFACT_MAX_DIMS)
        return "ndim outside 0..8";
    int64_t numel = shape_numel(ndim, shape, elem);
    if (numel < 0)
        return "negative extent or element count overflow";
    if (nbytes != (uint64_t)numel * elem)
        return "byte count does not match shape and dtype";
    *ret_numel = numel;
    return NULL;
}

int nv_artifact_add_tensor(nv_artifact *a, const char *name, int32_t dtype, int ndim,
                           const int64_t *shape, const void *data, size_t nbytes)
{
    int64_t numel;
    if (!name || (ndim > 0 && !shape) || (nbytes > 0 && !data))
        return -EINVAL;
    if (check_tensor(a, name, strlen(name), dtype, ndim, shape, nbytes, &numel))
        return -EINVAL;
    if (a->n_tensors >= NV_ARTIFACT_MAX_TENSORS)
        return -EINVAL;
    nv_artifact_tensor *ts = realloc(a->tensors, (a->n_tensors + 1) * sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    a->tensors = ts;
    nv_artifact_tensor *t = &ts[a->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return -ENOMEM;
    }
    if (nbytes > 0)
        memcpy(t->data, data, nbytes);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->numel = numel;
    t->nbytes = nbytes;
    a->n_tensors++;
    return 0;
}

/* A growable byte buffer for serialization. */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->err)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->err = -ENOMEM;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_le(wbuf *w, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, bytes);
}

static int serialize(const nv_artifact *a, wbuf *w)
{
    char *manifest = json_dumps(a->manifest, JSON_COMPACT | JSON_SORT_KEYS);
    if (!manifest)
        return -ENOMEM;
    size_t mlen = strlen(manifest);
    put(w, NV_ARTIFACT_MAGIC, MAGIC_LEN);
    put_le(w, mlen, 4);
    put(w, manifest, mlen);
    free(manifest);
    put_le(w, (uint64_t)a->n_tensors, 4);
    for (int i = 0; i < a->n_tensors; i++) {
        const nv_artifact_tensor *t = &a->tensors[i];
        size_t nlen = strlen(t->name);
        put_le(w, nlen, 2);
        put(w, t->name, nlen);
        put_le(w, (uint32_t)t->dtype, 4);
        put_le(w, (uint32_t)t->ndim, 4);
        for (int d = 0; d < t->ndim; d++)
            put_le(w, (uint64_t)t->shape[d], 8);
        put_le(w, t->nbytes, 8);
        put(w, t->data, t->nbytes);
    }
    return w->err;
}

int nv_artifact_encode(const nv_artifact *a, int level, uint8_t **ret_buf, size_t *ret_len,
                       char ret_sha[65])
{
    wbuf w = {0};
    uint8_t *out = NULL;
    ZSTD_CCtx *cctx = NULL;
    int r = serialize(a, &w);
    if (r < 0)
        goto out;
    size_t bound = ZSTD_compressBound(w.len);
    out = malloc(bound);
    cctx = ZSTD_createCCtx();
    if (!out || !cctx) {
        r = -ENOMEM;
        goto out;
    }
    /* The frame carries its content size (checked on load against the limit)
     * and an XXH64 content checksum, so corruption is detected, not parsed. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1))) {
        r = -EIO;
        goto out;
    }
    size_t n = ZSTD_compress2(cctx, out, bound, w.p, w.len);
    if (ZSTD_isError(n)) {
        r = -EIO;
        goto out;
    }
    if (ret_sha)
        nv_sha256_hex(out, n, ret_sha);
    *ret_buf = out;
    *ret_len = n;
    out = NULL;
    r = 0;
out:
    ZSTD_freeCCtx(cctx);
    free(out);
    free(w.p);
    return r;
}

/* A bounds-checked reader over the decompressed container. */
typedef struct rbuf {
    const uint8_t *p;
    size_t len, pos;
} rbuf;

static int get_le(rbuf *r, int bytes, uint64_t *ret)
{
    if (r->len - r->pos < (size_t)bytes)
        return -1;
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += bytes;
    *ret = v;
    return 0;
}

static int fail(char **ret_err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **ret_err, const char *fmt, ...)
{
    if (ret_err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_err, fmt, ap) < 0)
            *ret_err = NULL;
        va_end(ap);
    }
    return -EBADMSG;
}

/* Decompress one complete zstd frame with a declared size; no trailing bytes.
 * Memory follows the output the frame actually produces, not its declared
 * size: a 17-byte frame may declare 2 GiB. A declared size the compressed bytes
 * cannot hold is refused first: every block that produces output takes at least
 * 4 bytes (RFC 8878 §3.1.1.2: a 3-byte header and one byte of an RLE block)
 * and produces at most ZSTD_BLOCKSIZE_MAX (128 KiB). */
static int decompress(const void *buf, size_t len, uint8_t **ret, size_t *ret_len, char **ret_err)
{
    size_t flen = ZSTD_findFrameCompressedSize(buf, len);
    if (ZSTD_isError(flen))
        return fail(ret_err, "artifact is not a complete zstd frame: %s", ZSTD_getErrorName(flen));
    if (flen != len)
        return fail(ret_err, "artifact has %zu bytes after its zstd frame", len - flen);
    unsigned long long raw = ZSTD_getFrameContentSize(buf, len);
    if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR)
        return fail(ret_err, "artifact zstd frame does not declare its content size");
    if (raw > NV_ARTIFACT_MAX_RAW)
        return fail(ret_err, "artifact content size '%llu' exceeds the limit of %llu bytes", raw,
                    (unsigned long long)NV_ARTIFACT_MAX_RAW);
    if (raw / ZSTD_BLOCKSIZE_MAX > len / 4)
        return fail(ret_err,
                    "artifact zstd frame declares '%llu' bytes of content, more than its %zu "
                    "compressed bytes can hold",
                    raw, len);
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    size_t cap = raw < ((size_t)1 << 20) ? (size_t)raw : (size_t)1 << 20;
    uint8_t *out = malloc(cap ? cap : 1);
    int r = 0;
    if (!dctx || !out) {
        r = -ENOMEM;
        goto out;
    }
    ZSTD_inBuffer in = {buf, len, 0};
    ZSTD_outBuffer o = {out, cap, 0};
    for (;;) {
        size_t in_before = in.pos, out_before = o.pos;
        size_t z = ZSTD_decompressStream(dctx, &o, &in);
        if (ZSTD_isError(z)) {
            r = fail(ret_err, "artifact zstd frame is corrupt: %s", ZSTD_getErrorName(z));
            goto out;
        }
        if (z == 0)
            break; /* the frame is complete, checksum verified */
        bool progress = in.pos != in_before || o.pos != out_before;
        if (o.pos == o.size && o.size < raw) {
            /* Grow as output arrives, doubling, up to the declared size. */
            size_t ncap = o.size * 2 < raw ? o.size * 2 : (size_t)raw;
            uint8_t *n = realloc(out, ncap);
            if (!n) {
                r = -ENOMEM;
                goto out;
            }
            out = n;
            o.dst = out;
            o.size = ncap;
        } else if (!progress) {
            r = fail(ret_err, "artifact zstd frame is corrupt: %s",
                     o.pos == o.size ? "more content than declared" : "truncated");
            goto out;
        }
    }
    if (o.pos != raw) {
        r = fail(ret_err, "artifact zstd frame is corrupt: size mismatch");
        goto out;
    }
    *ret = out;
    *ret_len = o.pos;
    out = NULL;
out:
    ZSTD_freeDCtx(dctx);
    free(out);
    return r;
}

static int parse_manifest(rbuf *rb, nv_artifact *a, char **ret_err)
{
    uint64_t mlen;
    if (rb->len < MAGIC_LEN || memcmp(rb->p, NV_ARTIFACT_MAGIC, MAGIC_LEN) != 0)
        return fail(ret_err, "artifact does not start with magic '%s'", NV_ARTIFACT_MAGIC);
    rb->pos = MAGIC_LEN;
    if (get_le(rb, 4, &mlen) < 0 || mlen > rb->len - rb->pos)
        return fail(ret_err, "artifact manifest length is truncated or exceeds the container");
    json_error_t jerr;
    json_t *m = json_loadb((const char *)rb->p + rb->pos, mlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!m)
        return fail(ret_err, "artifact manifest is not valid JSON: %s (at byte %d)", jerr.text,
                    jerr.position);
    rb->pos += mlen;
    if (!json_is_object(m)) {
        json_decref(m);
        return fail(ret_err, "artifact manifest is not a JSON object");
    }
    json_decref(a->manifest);
    a->manifest = m;
    return 0;
}

static int parse_tensor(rbuf *rb, nv_artifact *a, uint64_t idx, char **ret_err)
{
    uint64_t nlen, dtype, ndim, nbytes;
    int64_t shape[NV_ARTIFACT_MAX_DIMS];
    if (get_le(rb, 2, &nlen) < 0 || nlen > rb->len - rb->pos)
        return fail(ret_err, "artifact tensor %llu: name is truncated", (unsigned long long)idx);
    const char *name = (const char *)rb->p + rb->pos;
    rb->pos += nlen;
    if (get_le(rb, 4, &dtype) < 0 || get_le(rb, 4, &ndim) < 0)
        return fail(ret_err, "artifact tensor %llu: header is truncated", (unsigned long long)idx);
    if (ndim > NV_ARTIFACT_MAX_DIMS)
        return fail(ret_err, "artifact tensor %llu: ndim '%llu' outside 0..8",
                    (unsigned long long)idx, (unsigned long long)ndim);
    for (uint64_t d = 0; d < ndim; d++) {
        uint64_t v;
        if (get_le(rb, 8, &v) < 0)
            return fail(ret_err, "artifact tensor %llu: shape is truncated",
                        (unsigned long long)idx);
        shape[d] = (int64_t)v;
    }
    if (get_le(rb, 8, &nbytes) < 0)
        return fail(ret_err, "artifact tensor %llu: byte count is truncated",
                    (unsigned long long)idx);
    int64_t numel;
    const char *why =
        check_tensor(a, name, nlen, (int32_t)(uint32_t)dtype, (int32_t)ndim, shape, nbytes, &numel);
    if (why || dtype > INT32_MAX)
        return fail(ret_err, "artifact tensor %llu ('%.*s'): %s", (unsigned long long)idx,
                    (int)(nlen > MAX_NAME ? MAX_NAME : nlen), name, why ? why : "unknown dtype id");
    if (nbytes > rb->len - rb->pos)
        return fail(ret_err, "artifact tensor '%.*s': data is truncated (%llu of %llu bytes)",
                    (int)nlen, name, (unsigned long long)(rb->len - rb->pos),
                    (unsigned long long)nbytes);
    char *cname = strndup(name, nlen);
    if (!cname)
        return -ENOMEM;
    int r =
        nv_artifact_add_tensor(a, cname, (int32_t)dtype, (int)ndim, shape, rb->p + rb->pos, nbytes);
    free(cname);
    rb->pos += nbytes;
    return r;
}

int nv_artifact_decode(const void *buf, size_t len, nv_artifact **ret, char **ret_err)
{
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    nv_artifact *a = NULL;
    int r = decompress(buf, len, &raw, &raw_len, ret_err);
    if (r < 0)
        goto out;
    a = nv_artifact_new();
    if (!a) {
        r = -ENOMEM;
        goto out;
    }
    rbuf rb = {raw, raw_len, 0};
    r = parse_manifest(&rb, a, ret_err);
    if (r < 0)
        goto out;
    uint64_t n;
    if (get_le(&rb, 4, &n) < 0) {
        r = fail(ret_err, "artifact tensor count is truncated");
        goto out;
    }
    if (n > NV_ARTIFACT_MAX_TENSORS) {
        r = fail(ret_err, "artifact tensor count '%llu' exceeds %d", (unsigned long long)n,
                 NV_ARTIFACT_MAX_TENSORS);
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        r = parse_tensor(&rb, a, i, ret_err);
        if (r < 0)
            goto out;
    }
    if (rb.pos != rb.len) {
        r = fail(ret_err, "artifact has %zu unexpected bytes after its last tensor",
                 rb.len - rb.pos);
        goto out;
    }
    *ret = a;
    a = NULL;
    r = 0;
out:
    nv_artifact_free(a);
    free(raw);
    return r;
}
