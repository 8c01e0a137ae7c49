/* libFuzzer target: the safetensors reader (common/safetensors.c nv_st_parse),
 * which numval-worker runs on checkpoint files that model jobs name.
 *
 * Checked besides ASan and UBSan: parse returns 0 (with the file) or -EBADMSG
 * / -EFBIG with a message that names the file, or -ENOMEM; a parsed file's
 * tensors each have nbytes = numel x dtype size, lie inside the buffer and
 * cover its data region without overlap; and a parsed file survives a round
 * trip (encode, parse) with the same tensors, bytes and metadata. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_safetensors: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_file(const nv_st_file *f)
{
    size_t covered = 0;
    for (size_t i = 0; i < f->n; i++) {
        const nv_st_tensor *t = &f->tensors[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d];
        if (numel != t->numel || (size_t)numel * nv_st_dtype_size(t->dtype) != t->nbytes)
            die("a tensor's byte count disagrees with its dtype and shape", t->name);
        if (t->data < f->buf || t->data + t->nbytes > f->buf + f->len)
            die("a tensor outside the buffer", t->name);
        covered += t->nbytes;
    }
    if (f->n && (size_t)(f->buf + f->len - f->tensors[0].data) != covered)
        die("the tensors do not cover the data region exactly", NULL);
}

static void round_trip(const nv_st_file *f, const nv_st_limits *lim)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char *err = NULL;
    int r = nv_st_encode(f->tensors, f->n, f->metadata, &buf, &len, &err);
    if (r == -ENOMEM)
        return;
    if (r < 0)
        die("a parsed file does not encode", err);
    nv_st_file *g = NULL;
    /* the encoded header may be longer than the input's (padding, spelling): the
     * size caps are not what the round trip checks */
    nv_st_limits rl = NV_ST_LIMITS_DEFAULT;
    rl.allow_nonfinite = lim->allow_nonfinite;
    r = nv_st_parse(buf, len, "round trip", &rl, &g, &err);
    free(buf);
    if (r == -ENOMEM)
        return;
    if (r < 0)
        die("an encoded file does not parse", err);
    if (g->n != f->n || !json_equal(g->metadata ? g->metadata : json_null(),
                                    f->metadata ? f->metadata : json_null()))
        die("the round trip changed the tensor count or the metadata", NULL);
    for (size_t i = 0; i < f->n; i++) {
        const nv_st_tensor *a = &f->tensors[i], *b = nv_st_find(g, a->name);
        if (!b || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes ||
            memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) ||
            (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
            die("the round trip changed a tensor", a->name);
    }
    nv_st_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* small caps so that the limit paths are reached too */
    nv_st_limits lim = {.max_header = 8192, .max_tensors = 64, .max_bytes = 1 << 20,
                        .allow_nonfinite = size % 2 == 0};
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_parse(data, size, "fuzz.st", &lim, &f, &err);
    if (r == 0) {
        if (err)
            die("success with an error message", err);
        check_file(f);
        round_trip(f, &lim);
        nv_st_free(f);
        return 0;
    }
    if (f)
        die("a failed parse returned a file", NULL);
    if (r != -ENOMEM && (r != -EBADMSG && r != -EFBIG))
        die("an unexpected error code", err);
    if (r != -ENOMEM && (!err || !strstr(err, "'fuzz.st'")))
        die("an error that does not name the file", err);
    free(err);
    return 0;
}
