/* libFuzzer target: the artifact container reader (common/artifact.c
 * nv_artifact_decode), which numvald, numval-worker and numvalctl run on files
 * and uploads from elsewhere.
 *
 * An input that starts with the zstd frame magic is decoded as it is (frame
 * header, declared size, checksum, trailing bytes). Any other input is taken
 * as the decompressed container (magic, manifest, tensor records) and
 * compressed first: mutations of compressed bytes mostly break the checksum,
 * so the container's own parser is reached this way.
 *
 * Checked besides ASan and UBSan: decode returns 0 (with the artifact) or
 * -EBADMSG with a message, or -ENOMEM; every decoded tensor's byte count is its
 * element count times its dtype's size; and a decoded artifact survives a round
 * trip (encode, decode) unchanged, manifest and bytes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/artifact.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_artifact: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_tensor(const nv_artifact_tensor *t)
{
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= t->shape[d];
    if (numel != t->numel || (size_t)numel * nv_artifact_dtype_size(t->dtype) != t->nbytes)
        die("a tensor's byte count disagrees with its dtype and shape", t->name);
    if (t->nbytes > 0 && !t->data)
        die("a tensor without data", t->name);
}

static bool same_tensor(const nv_artifact_tensor *a, const nv_artifact_tensor *b)
{
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
           a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static void round_trip(const nv_artifact *a)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char sha[65];
    if (nv_artifact_encode(a, 1, &buf, &len, sha) < 0)
        die("a decoded artifact does not encode", NULL);
    nv_artifact *b = NULL;
    char *err = NULL;
    if (nv_artifact_decode(buf, len, &b, &err) != 0)
        die("an encoded artifact does not decode", err);
    if (!json_equal(a->manifest, b->manifest) || a->n_tensors != b->n_tensors)
        die("the round trip changed the manifest or the tensor count", NULL);
    for (int i = 0; i < a->n_tensors; i++)
        if (!same_tensor(&a->tensors[i], &b->tensors[i]))
            die("the round trip changed a tensor", a->tensors[i].name);
    nv_artifact_free(b);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t zstd_magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    uint8_t *frame = NULL;
    const uint8_t *in = data;
    size_t in_len = size;
    if (size < 4 || memcmp(data, zstd_magic, 4) != 0) {
        size_t bound = ZSTD_compressBound(size);
        frame = malloc(bound);
        if (!frame)
            return 0;
        in_len = ZSTD_compress(frame, bound, data, size, 1);
        if (ZSTD_isError(in_len))
            die("zstd cannot compress the input", ZSTD_getErrorName(in_len));
        in = frame;
    }
    nv_artifact *a = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(in, in_len, &a, &err);
    if (r == 0) {
        if (!a || !json_is_object(a->manifest))
            die("decode succeeded without an artifact", NULL);
        for (int i = 0; i < a->n_tensors; i++)
            check_tensor(&a->tensors[i]);
        round_trip(a);
    } else if (r == -EBADMSG) {
        if (!err || !err[0])
            die("a refusal without a message", NULL);
    } else if (r != -ENOMEM) {
        die("an undocumented status", NULL);
    }
    nv_artifact_free(a);
    free(err);
    free(frame);
    return 0;
}
