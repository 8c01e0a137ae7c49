/* The safetensors reader (common/safetensors.h): a good file read back, the
 * writer's output read back, and every class of bad file refused with an
 * error that names the file and the tensor at fault. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "tests/unit/tap.h"

/* A file: the header text padded to hl bytes (0: its own length), the data. */
static size_t build(uint8_t *out, const char *header, size_t hl, const void *data, size_t dl)
{
    size_t n = strlen(header);
    if (!hl)
        hl = n;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memset(out + 8, ' ', hl);
    memcpy(out + 8, header, n < hl ? n : hl);
    if (dl)
        memcpy(out + 8 + hl, data, dl);
    return 8 + hl + dl;
}

static uint8_t data16[16] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0x80, 0x3f, 0, 0x40, 1, 2, 3, 4};

/* Parse a file made of header + data16[0..dl); expect r; the error text must
 * contain every string of want (NULL-terminated). */
static void bad(const char *what, const char *header, size_t dl, const nv_st_limits *lim,
                int want_r, const char *const *want)
{
    uint8_t buf[4096];
    size_t len = build(buf, header, 0, data16, dl);
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_parse(buf, len, "ck.safetensors", lim, &f, &err);
    int ok = r == want_r && err && !f;
    for (int i = 0; ok && want[i]; i++)
        ok = strstr(err, want[i]) != NULL;
    tap_ok(ok, "%s: r=%d: %s", what, r, err ? err : "(no error)");
    free(err);
    nv_st_free(f);
}

#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_good(void)
{
    uint8_t buf[512];
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"z\":{\"dtype\":\"I8\",\"shape\":[0,3],\"data_offsets\":[12,12]},"
                    "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]}}";
    size_t len = build(buf, h, strlen(h) + 5, data16, 16); /* space padding is allowed */
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_parse(buf, len, "ck", NULL, &f, &err);
    tap_ok(r == 0 && f && f->n == 4, "a good file parses (r=%d %s)", r, err ? err : "");
    if (r < 0)
        return;
    const nv_st_tensor *a = nv_st_find(f, "a"), *b = nv_st_find(f, "b"), *z = nv_st_find(f, "z");
    float a1;
    memcpy(&a1, a->data + 4, 4);
    tap_ok(a && a->dtype == NV_ST_F32 && a->ndim == 1 && a->numel == 2 && a1 == 2.0f,
           "F32 tensor: dtype, shape, bytes at its offset");
    tap_ok(b && b->dtype == NV_ST_BF16 && b->nbytes == 4 && b->data[1] == 0x3f,
           "BF16 tensor at [8, 12)");
    tap_ok(z && z->numel == 0 && z->ndim == 2 && z->nbytes == 0, "an empty tensor");
    tap_ok(!strcmp(json_string_value(json_object_get(f->metadata, "format")), "pt"),
           "__metadata__ kept");
    tap_ok(!nv_st_find(f, "__metadata__") && !nv_st_find(f, "nope"), "find: only tensors");

    /* writer -> reader round trip of the same tensors */
    uint8_t *out = NULL;
    size_t olen = 0;
    r = nv_st_encode(f->tensors, f->n, f->metadata, &out, &olen, &err);
    nv_st_file *g = NULL;
    r = r ? r : nv_st_parse(out, olen, "rt", NULL, &g, &err);
    int same = r == 0 && g->n == f->n && out[0] % 8 == 0;
    for (size_t i = 0; same && i < f->n; i++) {
        const nv_st_tensor *x = nv_st_find(g, f->tensors[i].name);
        same = x && x->dtype == f->tensors[i].dtype && x->numel == f->tensors[i].numel &&
               x->nbytes == f->tensors[i].nbytes &&
               (!x->nbytes || !memcmp(x->data, f->tensors[i].data, x->nbytes));
    }
    tap_ok(same, "encode then parse gives the same tensors, header 8-aligned (r=%d)", r);
    free(out);
    nv_st_free(g);

    nv_st_tensor dup[2] = {f->tensors[0], f->tensors[0]};
    free(err);
    err = NULL;
    r = nv_st_encode(dup, 2, NULL, &out, &olen, &err);
    tap_ok(r == -EINVAL && err && strstr(err, "duplicate"), "encode refuses a duplicate name: %s",
           err ? err : "");
    free(err);
    err = NULL;
    nv_st_tensor lie = f->tensors[0];
    lie.nbytes = 3;
    r = nv_st_encode(&lie, 1, NULL, &out, &olen, &err);
    tap_ok(r == -EINVAL && err && strstr(err, "disagrees"), "encode refuses a size lie: %s",
           err ? err : "");
    free(err);
    nv_st_free(f);
}

static void test_bad(void)
{
    uint8_t buf[64];
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_parse("\x10\0\0", 3, "tiny.st", NULL, &f, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, "tiny.st") && strstr(err, "truncated"),
           "3 bytes: truncated: %s", err ? err : "");
    free(err);
    err = NULL;
    size_t len = build(buf, "{\"a\":{}}", 0, NULL, 0);
    r = nv_st_parse(buf, len - 3, "short.st", NULL, &f, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, "truncated"), "header cut: %s", err ? err : "");
    free(err);

    const char *t1 = "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    char h[1024];
    snprintf(h, sizeof h, "{%s}", t1);
    bad("data cut (file truncated)", h, 6, NULL, -EBADMSG,
        WANT("ck.safetensors", "'w'", "past the 6 bytes", "truncated"));
    bad("size lie (shape x dtype != offsets)",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, NULL, -EBADMSG,
        WANT("'w'", "hold 8 bytes", "needs 12"));
    bad("unknown dtype", "{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        NULL, -EBADMSG, WANT("'w'", "unknown dtype 'F33'"));
    bad("sub-byte dtype", "{\"w\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1,
        NULL, -EBADMSG, WANT("'w'", "'F4'", "not supported"));
    snprintf(h, sizeof h, "{%s,\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             t1);
    bad("overlap", h, 8, NULL, -EBADMSG, WANT("overlap", "'v'", "'w'"));
    snprintf(h, sizeof h, "{%s,\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
             t1);
    bad("hole between tensors", h, 16, NULL, -EBADMSG, WANT("'v'", "[8, 12)", "no holes"));
    bad("hole at the start", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        8, NULL, -EBADMSG, WANT("'w'", "[0, 4)"));
    snprintf(h, sizeof h, "{%s}", t1);
    bad("bytes after the last tensor", h, 12, NULL, -EBADMSG,
        WANT("4 bytes", "after the last tensor"));
    snprintf(h, sizeof h, "{%s,\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
             t1);
    bad("duplicate name", h, 16, NULL, -EBADMSG, WANT("twice", "\"w\""));
    bad("offsets reversed", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
        8, NULL, -EBADMSG, WANT("'w'", "data_offsets"));
    bad("negative shape", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
        NULL, -EBADMSG, WANT("'w'", "shape entry 0"));
    bad("shape overflow",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
        NULL, -EBADMSG, WANT("'w'", "overflows"));
    bad("unknown entry key",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, NULL,
        -EBADMSG, WANT("'w'", "unknown key 'x'"));
    bad("missing dtype", "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL, -EBADMSG,
        WANT("'w'", "dtype"));
    bad("not JSON", "{\"w\":", 0, NULL, -EBADMSG, WANT("not valid JSON"));
    bad("not an object", "[1]", 0, NULL, -EBADMSG, WANT("starting with '{'"));
    bad("metadata not strings", "{\"__metadata__\":{\"a\":1}}", 0, NULL, -EBADMSG,
        WANT("__metadata__", "'a'"));

    /* non-finite: 0x7f800000 (F32 +Inf) in element 1; BF16 0xffc0 (NaN) */
    static const uint8_t inf32[8] = {0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x7f};
    static const uint8_t nan16[4] = {0x80, 0x3f, 0xc0, 0xff};
    uint8_t fb[256];
    const char *hf = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    len = build(fb, hf, 0, inf32, 8);
    err = NULL;
    r = nv_st_parse(fb, len, "nf.st", NULL, &f, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, "'w'") && strstr(err, "element 1") &&
               strstr(err, "Inf or NaN"),
           "F32 Inf refused: %s", err ? err : "");
    free(err);
    err = NULL;
    nv_st_limits allow = NV_ST_LIMITS_DEFAULT;
    allow.allow_nonfinite = true;
    r = nv_st_parse(fb, len, "nf.st", &allow, &f, &err);
    tap_ok(r == 0, "F32 Inf accepted where allowed (r=%d)", r);
    nv_st_free(f);
    f = NULL;
    len = build(fb, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 0, nan16,
                4);
    r = nv_st_parse(fb, len, "nf.st", NULL, &f, &err);
    tap_ok(r == -EBADMSG && err && strstr(err, "'b'") && strstr(err, "BF16"),
           "BF16 NaN refused: %s", err ? err : "");
    free(err);

    /* limits: header size, tensor count, file size */
    nv_st_limits lim = NV_ST_LIMITS_DEFAULT;
    lim.max_header = 16;
    snprintf(h, sizeof h, "{%s}", t1);
    bad("header over the cap", h, 8, &lim, -EFBIG, WANT("header of", "limit of 16"));
    lim = NV_ST_LIMITS_DEFAULT;
    lim.max_tensors = 1;
    snprintf(h, sizeof h, "{%s,\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
             t1);
    bad("tensor count over the cap", h, 16, &lim, -EFBIG, WANT("2 tensors", "limit of 1"));
    lim = NV_ST_LIMITS_DEFAULT;
    lim.max_bytes = 40;
    bad("file over the cap", h, 16, &lim, -EFBIG, WANT("bytes, more than the limit of 40"));
    /* a header length that would wrap a 64-bit sum */
    memset(buf, 0xff, 8);
    buf[8] = '{';
    err = NULL;
    r = nv_st_parse(buf, 9, "huge.st", NULL, &f, &err);
    tap_ok(r == -EFBIG && err && strstr(err, "huge.st"), "header length 2^64-1: %s",
           err ? err : "");
    free(err);
}

static void test_read_file(void)
{
    char path[] = "/tmp/nv-st-test-XXXXXX";
    int fd = mkstemp(path);
    uint8_t buf[256];
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t len = build(buf, h, 0, data16, 8);
    int ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;
    if (fd >= 0)
        close(fd);
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = ok ? nv_st_read(path, NULL, &f, &err) : -1;
    tap_ok(r == 0 && f && f->n == 1, "nv_st_read of a file (r=%d)", r);
    nv_st_free(f);
    nv_st_limits lim = NV_ST_LIMITS_DEFAULT;
    lim.max_bytes = 10;
    f = NULL;
    r = nv_st_read(path, &lim, &f, &err);
    tap_ok(r == -EFBIG && err && strstr(err, path), "file size cap before reading: %s",
           err ? err : "");
    free(err);
    err = NULL;
    unlink(path);
    r = nv_st_read(path, NULL, &f, &err);
    tap_ok(r == -ENOENT && err && strstr(err, path), "missing file: %s", err ? err : "");
    free(err);
}

int main(void)
{
    test_good();
    test_bad();
    test_read_file();
    return tap_done();
}
