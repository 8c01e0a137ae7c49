/* Artifact container v1: round trip, the documented byte layout, and refusal
 * of truncated, corrupt and malformed containers (docs/ARTIFACTS.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/artifact.h"
#include "common/sha256.h"
#include "tests/unit/tap.h"

/* Compress raw bytes the way a foreign writer would (zstd default API, which
 * records the content size), so layout tests do not depend on our encoder. */
static uint8_t *zc(const uint8_t *raw, size_t n, size_t *ret_len)
{
    size_t bound = ZSTD_compressBound(n);
    uint8_t *out = malloc(bound);
    if (!out)
        exit(1);
    *ret_len = ZSTD_compress(out, bound, raw, n, 1);
    return out;
}

/* Decode raw container bytes; returns the code and frees everything. */
static int decode_raw(const uint8_t *raw, size_t n, char **ret_err)
{
    size_t clen;
    uint8_t *c = zc(raw, n, &clen);
    nv_artifact *a = NULL;
    int r = nv_artifact_decode(c, clen, &a, ret_err);
    nv_artifact_free(a);
    free(c);
    return r;
}

/* The reference layout written by hand from docs/ARTIFACTS.md: manifest {"a":1},
 * one fp16 tensor "x" of shape [2] holding 1.0 (0x3C00) and -2.0 (0xC000). */
static const uint8_t HAND[] = {
    'N',  'V',  'A',  'R',  'T', 'F', '0', '1',                /* magic */
    7,    0,    0,    0,    '{', '"', 'a', '"', ':', '1', '}', /* manifest */
    1,    0,    0,    0,                                       /* n_tensors */
    1,    0,    'x',                                           /* name */
    4,    0,    0,    0,                                       /* dtype fp16 = 4 */
    1,    0,    0,    0,                                       /* ndim */
    2,    0,    0,    0,    0,   0,   0,   0,                  /* shape[0] */
    4,    0,    0,    0,    0,   0,   0,   0,                  /* nbytes */
    0x00, 0x3C, 0x00, 0xC0,                                    /* data */
};

static void test_layout(void)
{
    nv_artifact *a = nv_artifact_new();
    json_t *m = json_pack("{s:i}", "a", 1);
    int64_t shape[1] = {2};
    uint8_t data[4] = {0x00, 0x3C, 0x00, 0xC0};
    tap_ok(nv_artifact_set_manifest(a, m) == 0, "set manifest");
    tap_ok(nv_artifact_add_tensor(a, "x", 4, 1, shape, data, 4) == 0, "add fp16 tensor");
    uint8_t *buf;
    size_t len;
    char sha[65];
    tap_ok(nv_artifact_encode(a, 0, &buf, &len, sha) == 0, "encode");
    uint8_t raw[256];
    size_t n = ZSTD_decompress(raw, sizeof(raw), buf, len);
    tap_ok(!ZSTD_isError(n) && n == sizeof(HAND) && memcmp(raw, HAND, n) == 0,
           "decompressed bytes equal the hand-written layout (%zu bytes)", n);
    char want[65];
    nv_sha256_hex(buf, len, want);
    tap_ok(strcmp(sha, want) == 0 && strlen(sha) == 64, "content id is sha256 of compressed bytes");
    tap_ok(decode_raw(HAND, sizeof(HAND), NULL) == 0, "hand-written container decodes");
    free(buf);
    json_decref(m);
    nv_artifact_free(a);
}

static void test_round_trip(void)
{
    nv_artifact *a = nv_artifact_new();
    json_t *m = json_pack("{s:s,s:i,s:{s:s}}", "op", "exp", "seed", 7, "device", "name", "emu0");
    nv_artifact_set_manifest(a, m);
    int64_t s2[2] = {3, 5};
    double x[15];
    for (int i = 0; i < 15; i++)
        x[i] = i * 0.25 - 1.0;
    uint8_t fp4[6] = {0x0, 0x1, 0x7, 0xF, 0x8, 0x3};
    int64_t s1[1] = {6}, s0[1] = {0};
    tap_ok(nv_artifact_add_tensor(a, "input:0", 0, 2, s2, x, sizeof(x)) == 0, "add fp64 [3,5]");
    tap_ok(nv_artifact_add_tensor(a, "output:0", 9, 1, s1, fp4, 6) == 0, "add fp4 [6]");
    tap_ok(nv_artifact_add_tensor(a, "empty", 1, 1, s0, NULL, 0) == 0, "add empty fp32 [0]");
    tap_ok(nv_artifact_add_tensor(a, "scalar", 12, 0, NULL, "\x2a\0\0\0", 4) == 0,
           "add int32 scalar");
    uint8_t *buf;
    size_t len;
    int er = nv_artifact_encode(a, 3, &buf, &len, NULL);
    tap_ok(er == 0, "encode (%zu bytes)", len);
    nv_artifact *b = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(buf, len, &b, &err);
    tap_ok(r == 0, "decode round trip (%s)", err ? err : "ok");
    if (r == 0) {
        tap_ok(json_equal(b->manifest, m), "manifest equal");
        tap_ok(b->n_tensors == 4, "4 tensors");
        const nv_artifact_tensor *t = nv_artifact_find(b, "input:0");
        tap_ok(t && t->dtype == 0 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5 &&
                   t->numel == 15 && t->nbytes == sizeof(x) && !memcmp(t->data, x, sizeof(x)),
               "input:0 identical");
        t = nv_artifact_find(b, "output:0");
        tap_ok(t && t->dtype == 9 && t->nbytes == 6 && !memcmp(t->data, fp4, 6),
               "output:0 identical, sub-byte values kept in the low bits");
        t = nv_artifact_find(b, "scalar");
        tap_ok(t && t->ndim == 0 && t->numel == 1 && t->data[0] == 0x2a, "scalar identical");
        tap_ok(nv_artifact_find(b, "missing") == NULL, "unknown name not found");
    }
    free(err);
    nv_artifact_free(b);

    /* Every strict prefix of the compressed bytes is refused. */
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        nv_artifact *c = NULL;
        if (nv_artifact_decode(buf, cut, &c, NULL) == -EBADMSG && !c)
            refused++;
    }
    tap_ok(refused == (int)len, "all %zu truncations refused (%d)", len, refused);

    /* A single flipped bit is refused (zstd frame checksum or structure), or
     * else it touched a frame-header field that does not change the content
     * (the window size, for example): then the decoded artifact must be
     * identical. What is never allowed is different content loading. */
    int safe = 0, tried = 0;
    uint8_t *ref_raw = malloc(len * 4 + 4096), *raw2 = malloc(len * 4 + 4096);
    size_t ref_n = ZSTD_decompress(ref_raw, len * 4 + 4096, buf, len);
    for (size_t i = 0; i < len; i++, tried++) {
        buf[i] ^= (uint8_t)(1u << (i % 8));
        nv_artifact *c = NULL;
        if (nv_artifact_decode(buf, len, &c, NULL) < 0) {
            safe++;
        } else {
            size_t n2 = ZSTD_decompress(raw2, len * 4 + 4096, buf, len);
            if (n2 == ref_n && !memcmp(raw2, ref_raw, n2))
                safe++;
            else
                tap_diag("bit flip at byte %zu loaded different content", i);
            nv_artifact_free(c);
        }
        buf[i] ^= (uint8_t)(1u << (i % 8));
    }
    tap_ok(safe == tried, "%d single-bit corruptions refused or content-neutral (%d)", tried, safe);
    free(ref_raw);
    free(raw2);

    /* Trailing bytes after the frame. */
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    char *e2 = NULL;
    b = NULL;
    r = nv_artifact_decode(longer, len + 1, &b, &e2);
    tap_ok(r == -EBADMSG && e2 && !b, "trailing byte: %s", e2 ? e2 : "");
    free(e2);
    free(longer);
    free(buf);
    json_decref(m);
    nv_artifact_free(a);
}

static void expect_bad(uint8_t *raw, size_t n, const char *what, const char *needle)
{
    char *err = NULL;
    int r = decode_raw(raw, n, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, needle), "%s refused: %s", what,
           err ? err : "(no message)");
    free(err);
}

static void test_malformed(void)
{
    uint8_t raw[sizeof(HAND) + 8];
    memcpy(raw, HAND, sizeof(HAND));
    raw[0] = 'X';
    expect_bad(raw, sizeof(HAND), "bad magic", "magic");
    memcpy(raw, HAND, sizeof(HAND));
    raw[8] = 200;
    expect_bad(raw, sizeof(HAND), "manifest length past end", "manifest length");
    memcpy(raw, HAND, sizeof(HAND));
    raw[13] = 'b'; /* {"a":1} -> {ba":1} */
    expect_bad(raw, sizeof(HAND), "invalid manifest JSON", "not valid JSON");
    memcpy(raw, HAND, sizeof(HAND));
    raw[19] = 2; /* claims two tensors */
    expect_bad(raw, sizeof(HAND), "missing second tensor", "truncated");
    memcpy(raw, HAND, sizeof(HAND));
    raw[26] = 99; /* dtype 99 */
    expect_bad(raw, sizeof(HAND), "unknown dtype", "unknown dtype");
    memcpy(raw, HAND, sizeof(HAND));
    raw[30] = 9; /* ndim 9 */
    expect_bad(raw, sizeof(HAND), "ndim 9", "ndim");
    memcpy(raw, HAND, sizeof(HAND));
    raw[42] = 6; /* nbytes 6 for two fp16 elements */
    expect_bad(raw, sizeof(HAND), "byte count mismatch", "byte count");
    memcpy(raw, HAND, sizeof(HAND));
    raw[34] = 0xff; /* shape[0] = -1 after the high byte is set too */
    raw[41] = 0xff;
    expect_bad(raw, sizeof(HAND), "negative extent", "negative extent");
    memcpy(raw, HAND, sizeof(HAND));
    expect_bad(raw, sizeof(HAND) - 1, "tensor data cut short", "data is truncated");
    memcpy(raw, HAND, sizeof(HAND));
    raw[sizeof(HAND)] = 0;
    expect_bad(raw, sizeof(HAND) + 1, "byte after last tensor", "after its last tensor");

    /* A frame without a declared content size (streaming writer) is refused:
     * the loader bounds memory before decompressing. */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint8_t out[256];
    ZSTD_outBuffer ob = {out, sizeof(out), 0};
    ZSTD_inBuffer ib = {HAND, sizeof(HAND), 0};
    ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue);
    ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end);
    ZSTD_freeCCtx(cc);
    nv_artifact *a = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(out, ob.pos, &a, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, "content size"), "unknown content size: %s",
           err ? err : "");
    free(err);
}

static void test_add_refusals(void)
{
    nv_artifact *a = nv_artifact_new();
    int64_t s[2] = {2, 2};
    uint8_t d[16] = {0};
    tap_ok(nv_artifact_add_tensor(a, "t", 3, 2, s, d, 8) == 0, "bf16 [2,2] accepted");
    tap_ok(nv_artifact_add_tensor(a, "t", 3, 2, s, d, 8) == -EINVAL, "duplicate name refused");
    tap_ok(nv_artifact_add_tensor(a, "u", 3, 2, s, d, 7) == -EINVAL, "wrong byte count refused");
    tap_ok(nv_artifact_add_tensor(a, "", 3, 2, s, d, 8) == -EINVAL, "empty name refused");
    tap_ok(nv_artifact_add_tensor(a, "v", 13, 2, s, d, 8) == -EINVAL, "dtype 13 refused");
    int64_t big[2] = {INT64_MAX / 2, 4};
    tap_ok(nv_artifact_add_tensor(a, "w", 0, 2, big, d, 8) == -EINVAL, "overflowing shape refused");
    json_t *arr = json_array();
    tap_ok(nv_artifact_set_manifest(a, arr) == -EINVAL, "non-object manifest refused");
    json_decref(arr);
    nv_artifact_free(a);
    nv_artifact_free(NULL);
}

int main(void)
{
    test_layout();
    test_round_trip();
    test_malformed();
    test_add_refusals();
    return tap_done();
}
