/* safetensors reader and writer (safetensors.h). The rules checked are those
 * of the format's README and its reference implementation (Rust crate
 * safetensors, tensor.rs: header starts with '{', offsets relative to the byte
 * buffer, the buffer "entirely indexed" without holes or overlap); the caps
 * are numval's (a worker reads checkpoints named by jobs from elsewhere). */
#include "safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const nv_st_limits NV_ST_LIMITS_DEFAULT = {.max_header = 16u << 20,
                                           .max_tensors = 4096,
                                           .max_bytes = 2ull << 30,
                                           .allow_nonfinite = false};

static const struct {
    const char *name;
    size_t size;
} dtypes[NV_ST_DTYPE_COUNT] = {
    [NV_ST_BOOL] = {"BOOL", 1},       [NV_ST_U8] = {"U8", 1},
    [NV_ST_I8] = {"I8", 1},           [NV_ST_I16] = {"I16", 2},
    [NV_ST_U16] = {"U16", 2},         [NV_ST_I32] = {"I32", 4},
    [NV_ST_U32] = {"U32", 4},         [NV_ST_I64] = {"I64", 8},
    [NV_ST_U64] = {"U64", 8},         [NV_ST_F16] = {"F16", 2},
    [NV_ST_BF16] = {"BF16", 2},       [NV_ST_F32] = {"F32", 4},
    [NV_ST_F64] = {"F64", 8},         [NV_ST_F8_E5M2] = {"F8_E5M2", 1},
    [NV_ST_F8_E4M3] = {"F8_E4M3", 1}, [NV_ST_F8_E8M0] = {"F8_E8M0", 1},
};

/* The format's packed sub-byte dtypes: known, not readable here. */
static const char *const subbyte[] = {"F4", "F6_E2M3", "F6_E3M2", NULL};

const char *nv_st_dtype_name(nv_st_dtype d)
{
    return (unsigned)d < NV_ST_DTYPE_COUNT ? dtypes[d].name : "?";
}

size_t nv_st_dtype_size(nv_st_dtype d)
{
    return (unsigned)d < NV_ST_DTYPE_COUNT ? dtypes[d].size : 0;
}

int nv_st_dtype_from_name(const char *name, nv_st_dtype *ret)
{
    for (int d = 0; name && d < NV_ST_DTYPE_COUNT; d++)
        if (!strcmp(name, dtypes[d].name)) {
            *ret = (nv_st_dtype)d;
            return 0;
        }
    return -1;
}

static int fail(char **ret_err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char **ret_err, int r, const char *fmt, ...)
{
    if (ret_err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_err, fmt, ap) < 0)
            *ret_err = NULL;
        va_end(ap);
    }
    return r;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Whether element k of a float tensor is Inf or NaN (bits read little-endian). */
static bool nonfinite(nv_st_dtype d, const uint8_t *p)
{
    switch (d) {
    case NV_ST_F16:
        return (((unsigned)p[1] << 8 | p[0]) & 0x7c00) == 0x7c00;
    case NV_ST_BF16:
        return (((unsigned)p[1] << 8 | p[0]) & 0x7f80) == 0x7f80;
    case NV_ST_F32:
        return (((unsigned)p[3] << 8 | p[2]) & 0x7f80) == 0x7f80;
    case NV_ST_F64:
        return (((unsigned)p[7] << 8 | p[6]) & 0x7ff0) == 0x7ff0;
    case NV_ST_F8_E5M2:
        return (p[0] & 0x7c) == 0x7c;
    case NV_ST_F8_E4M3: /* OFP8 e4m3fn: S.1111.111 is NaN, there is no Inf */
        return (p[0] & 0x7f) == 0x7f;
    case NV_ST_F8_E8M0: /* OCP MX v1.0: 0xff is NaN */
        return p[0] == 0xff;
    default:
        return false;
    }
}

static int check_finite(const nv_st_tensor *t, const char *what, char **ret_err)
{
    size_t sz = nv_st_dtype_size(t->dtype);
    for (int64_t k = 0; k < t->numel; k++)
        if (nonfinite(t->dtype, t->data + (size_t)k * sz))
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s' (%s): element %lld is Inf or NaN "
                        "(non-finite weights are refused)",
                        what, t->name, nv_st_dtype_name(t->dtype), (long long)k);
    return 0;
}

/* Offsets as parsed, before the data pointer is set. */
typedef struct st_entry {
    uint64_t begin, end;
} st_entry;

static int parse_shape(const json_t *sh, nv_st_tensor *t, const char *what, char **ret_err)
{
    if (!json_is_array(sh) || json_array_size(sh) > NV_ST_MAX_DIMS)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': tensor '%s': \"shape\" must be an array of at most %d "
                    "non-negative integers",
                    what, t->name, NV_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        const json_t *v = json_array_get(sh, (size_t)d);
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
        if (n < 0)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': shape entry %d is not a non-negative "
                        "integer",
                        what, t->name, d);
        t->shape[d] = n;
        if (n && t->numel > INT64_MAX / n)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': the shape's element count overflows", what,
                        t->name);
        t->numel *= n;
    }
    return 0;
}

static const char *const entry_keys[] = {"dtype", "shape", "data_offsets", NULL};

/* One header entry: its name, dtype, shape and offsets, the size rule. */
static int parse_entry(const char *name, const json_t *v, nv_st_tensor *t, st_entry *o,
                       const char *what, char **ret_err)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > NV_ST_MAX_NAME)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': a tensor name of %zu bytes (1..%d allowed): '%.40s'", what,
                    nl, NV_ST_MAX_NAME, name);
    if (!(t->name = strdup(name)))
        return -ENOMEM;
    if (!json_is_object(v))
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': tensor '%s': its header entry must be an object "
                    "{\"dtype\", \"shape\", \"data_offsets\"}",
                    what, name);
    const char *k;
    const json_t *kv;
    json_object_foreach((json_t *)v, k, kv)
    {
        bool ok = false;
        for (int i = 0; entry_keys[i]; i++)
            ok |= !strcmp(k, entry_keys[i]);
        if (!ok)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': unknown key '%s' in its header entry", what,
                        name, k);
    }
    const char *dn = json_string_value(json_object_get(v, "dtype"));
    if (!dn)
        return fail(ret_err, -EBADMSG, "checkpoint '%s': tensor '%s': \"dtype\" missing", what,
                    name);
    if (nv_st_dtype_from_name(dn, &t->dtype) < 0) {
        for (int i = 0; subbyte[i]; i++)
            if (!strcmp(dn, subbyte[i]))
                return fail(ret_err, -EBADMSG,
                            "checkpoint '%s': tensor '%s': dtype '%s' (packed sub-byte) is not "
                            "supported",
                            what, name, dn);
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': tensor '%s': unknown dtype '%.32s' (the format's are BOOL, "
                    "U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8_E5M2, F8_E4M3, "
                    "F8_E8M0)",
                    what, name, dn);
    }
    int r = parse_shape(json_object_get(v, "shape"), t, what, ret_err);
    if (r < 0)
        return r;
    const json_t *off = json_object_get(v, "data_offsets");
    const json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) ||
        !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': tensor '%s': \"data_offsets\" must be [begin, end] with "
                    "0 <= begin <= end",
                    what, name);
    o->begin = (uint64_t)json_integer_value(b);
    o->end = (uint64_t)json_integer_value(e);
    size_t sz = nv_st_dtype_size(t->dtype);
    if ((uint64_t)t->numel > UINT64_MAX / sz || o->end - o->begin != (uint64_t)t->numel * sz)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, "
                    "its dtype %s x shape (%lld elements) needs %llu",
                    what, name, (unsigned long long)o->begin, (unsigned long long)o->end,
                    (unsigned long long)(o->end - o->begin), dn, (long long)t->numel,
                    (unsigned long long)((uint64_t)t->numel * sz));
    t->nbytes = (size_t)(o->end - o->begin);
    return 0;
}

typedef struct st_sorted {
    nv_st_tensor t;
    st_entry o;
} st_sorted;

static int by_offset(const void *a, const void *b)
{
    const st_sorted *x = a, *y = b;
    if (x->o.begin != y->o.begin)
        return x->o.begin < y->o.begin ? -1 : 1;
    if (x->o.end != y->o.end)
        return x->o.end < y->o.end ? -1 : 1;
    return strcmp(x->t.name, y->t.name);
}

/* The tensors must index the data buffer exactly (README: "the byte buffer
 * needs to be entirely indexed, and cannot contain holes"). */
static int check_layout(const st_sorted *s, size_t n, uint64_t data_len, const char *what,
                        char **ret_err)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].o.end > data_len)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': data_offsets end %llu is past the %llu "
                        "bytes of data in the file (truncated, or the header lies)",
                        what, s[i].t.name, (unsigned long long)s[i].o.end,
                        (unsigned long long)data_len);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i].o.begin < at)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': data_offsets [%llu, %llu] overlap tensor "
                        "'%s' (which ends at %llu)",
                        what, s[i].t.name, (unsigned long long)s[i].o.begin,
                        (unsigned long long)s[i].o.end, s[i - 1].t.name, (unsigned long long)at);
        if (s[i].o.begin > at)
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': tensor '%s': data_offsets begin %llu leaves bytes "
                        "[%llu, %llu) indexed by no tensor (the buffer must have no holes)",
                        what, s[i].t.name, (unsigned long long)s[i].o.begin,
                        (unsigned long long)at, (unsigned long long)s[i].o.begin);
        at = s[i].o.end;
    }
    if (at != data_len)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': the %llu bytes of data after %s are indexed by no tensor "
                    "(the buffer must have no holes)",
                    what, (unsigned long long)(data_len - at),
                    n ? "the last tensor" : "the header");
    return 0;
}

static int check_metadata(const json_t *m, const char *what, char **ret_err)
{
    if (!json_is_object(m))
        return fail(ret_err, -EBADMSG, "checkpoint '%s': \"__metadata__\" must be an object",
                    what);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v)
    {
        if (!json_is_string(v))
            return fail(ret_err, -EBADMSG,
                        "checkpoint '%s': \"__metadata__\" entry '%s' must be a string", what, k);
    }
    return 0;
}

static int parse_header(nv_st_file *f, const json_t *h, size_t data_off, const char *what,
                        const nv_st_limits *lim, char **ret_err)
{
    size_t n = json_object_size(h);
    const json_t *meta = json_object_get(h, "__metadata__");
    if (meta) {
        n--;
        int r = check_metadata(meta, what, ret_err);
        if (r < 0)
            return r;
        f->metadata = json_incref((json_t *)meta);
    }
    if (n > lim->max_tensors)
        return fail(ret_err, -EFBIG, "checkpoint '%s': %zu tensors, more than the limit of %zu",
                    what, n, lim->max_tensors);
    st_sorted *s = calloc(n ? n : 1, sizeof *s);
    if (!s)
        return -ENOMEM;
    size_t i = 0;
    int r = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)h, k, v)
    {
        if (!strcmp(k, "__metadata__"))
            continue;
        if ((r = parse_entry(k, v, &s[i].t, &s[i].o, what, ret_err)) < 0) {
            i++;
            break;
        }
        i++;
    }
    if (r == 0) {
        qsort(s, n, sizeof *s, by_offset);
        r = check_layout(s, n, f->len - data_off, what, ret_err);
    }
    if (r == 0 && !(f->tensors = calloc(n ? n : 1, sizeof *f->tensors)))
        r = -ENOMEM;
    for (size_t j = 0; j < i; j++) {
        if (r < 0) {
            free(s[j].t.name);
            continue;
        }
        f->tensors[j] = s[j].t;
        f->tensors[j].data = f->buf + data_off + s[j].o.begin;
        f->n++;
    }
    free(s);
    for (size_t j = 0; r == 0 && !lim->allow_nonfinite && j < f->n; j++)
        r = check_finite(&f->tensors[j], what, ret_err);
    return r;
}

static int parse_buf(nv_st_file *f, const char *what, const nv_st_limits *lim, char **ret_err)
{
    if (f->len < 8)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': truncated: %zu bytes, a safetensors file starts with an "
                    "8-byte header length",
                    what, f->len);
    uint64_t hl = le64(f->buf);
    if (hl > lim->max_header)
        return fail(ret_err, -EFBIG,
                    "checkpoint '%s': a header of %llu bytes, more than the limit of %llu", what,
                    (unsigned long long)hl, (unsigned long long)lim->max_header);
    if (hl > f->len - 8)
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': truncated: the header length says %llu bytes, %zu follow",
                    what, (unsigned long long)hl, f->len - 8);
    if (hl < 2 || f->buf[8] != '{')
        return fail(ret_err, -EBADMSG,
                    "checkpoint '%s': the header must be a JSON object starting with '{'", what);
    json_error_t je;
    json_t *h = json_loadb((const char *)f->buf + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!h && !strncmp(je.text, "duplicate object key", 20))
        return fail(ret_err, -EBADMSG, "checkpoint '%s': the header names a tensor twice (%s)",
                    what, je.text);
    if (!h)
        return fail(ret_err, -EBADMSG, "checkpoint '%s': the header is not valid JSON: %s", what,
                    je.text);
    int r = json_is_object(h) ? parse_header(f, h, 8 + (size_t)hl, what, lim, ret_err)
                              : fail(ret_err, -EBADMSG,
                                     "checkpoint '%s': the header must be a JSON object", what);
    json_decref(h);
    return r;
}

int nv_st_parse(const void *buf, size_t len, const char *what, const nv_st_limits *lim,
                nv_st_file **ret, char **ret_err)
{
    if (!lim)
        lim = &NV_ST_LIMITS_DEFAULT;
    if (len > lim->max_bytes)
        return fail(ret_err, -EFBIG, "checkpoint '%s': %zu bytes, more than the limit of %llu",
                    what, len, (unsigned long long)lim->max_bytes);
    nv_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->buf = malloc(len ? len : 1))) {
        free(f);
        return -ENOMEM;
    }
    if (len)
        memcpy(f->buf, buf, len);
    f->len = len;
    int r = parse_buf(f, what, lim, ret_err);
    if (r < 0) {
        nv_st_free(f);
        return r;
    }
    *ret = f;
    return 0;
}

int nv_st_read(const char *path, const nv_st_limits *lim, nv_st_file **ret, char **ret_err)
{
    if (!lim)
        lim = &NV_ST_LIMITS_DEFAULT;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fail(ret_err, -errno, "checkpoint '%s': cannot be read: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) < 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return fail(ret_err, -EINVAL, "checkpoint '%s': cannot be read: not a regular file",
                    path);
    }
    if ((uint64_t)st.st_size > lim->max_bytes) {
        fclose(fp);
        return fail(ret_err, -EFBIG, "checkpoint '%s': %lld bytes, more than the limit of %llu",
                    path, (long long)st.st_size, (unsigned long long)lim->max_bytes);
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(fp);
        return -ENOMEM;
    }
    size_t got = fread(buf, 1, len, fp);
    int bad = ferror(fp);
    fclose(fp);
    int r = bad ? fail(ret_err, -EIO, "checkpoint '%s': read error", path)
                : nv_st_parse(buf, got, path, lim, ret, ret_err);
    free(buf);
    return r;
}

void nv_st_free(nv_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    json_decref(f->metadata);
    free(f->buf);
    free(f);
}

const nv_st_tensor *nv_st_find(const nv_st_file *f, const char *name)
{
    for (size_t i = 0; f && i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

static json_t *header_json(const nv_st_tensor *t, size_t n, const json_t *metadata,
                           char **ret_err, int *r)
{
    json_t *h = json_object();
    if (!h) {
        *r = -ENOMEM;
        return NULL;
    }
    if (metadata && (check_metadata(metadata, "(being written)", ret_err) < 0 ||
                     json_object_set(h, "__metadata__", (json_t *)metadata))) {
        *r = -EINVAL;
        json_decref(h);
        return NULL;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++)
            numel *= t[i].shape[d];
        size_t want = (size_t)numel * nv_st_dtype_size(t[i].dtype);
        const char *bad = !t[i].name || !*t[i].name || strlen(t[i].name) > NV_ST_MAX_NAME ||
                                  !strcmp(t[i].name, "__metadata__")
                              ? "a bad name"
                          : json_object_get(h, t[i].name) ? "a duplicate name"
                          : t[i].ndim < 0 || t[i].ndim > NV_ST_MAX_DIMS ||
                                  (unsigned)t[i].dtype >= NV_ST_DTYPE_COUNT || want != t[i].nbytes
                              ? "a size that disagrees with its dtype and shape"
                              : NULL;
        json_t *shape = json_array(), *e = NULL;
        for (int d = 0; shape && d < t[i].ndim && !bad; d++)
            json_array_append_new(shape, json_integer(t[i].shape[d]));
        if (!bad)
            e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", nv_st_dtype_name(t[i].dtype), "shape",
                          shape, "data_offsets", (json_int_t)at, (json_int_t)(at + t[i].nbytes));
        else
            json_decref(shape);
        if (bad || !e || json_object_set_new(h, t[i].name, e)) {
            *r = bad ? fail(ret_err, -EINVAL, "tensor %zu ('%s'): %s", i,
                            t[i].name ? t[i].name : "", bad)
                     : -ENOMEM;
            json_decref(h);
            return NULL;
        }
        at += t[i].nbytes;
    }
    return h;
}

int nv_st_encode(const nv_st_tensor *t, size_t n, const json_t *metadata, uint8_t **ret_buf,
                 size_t *ret_len, char **ret_err)
{
    int r = 0;
    json_t *h = header_json(t, n, metadata, ret_err, &r);
    if (!h)
        return r;
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!text)
        return -ENOMEM;
    /* pad the header with spaces to a multiple of 8 so the data starts aligned
     * (what the reference implementation writes) */
    size_t hl = strlen(text), pad = (8 - hl % 8) % 8, data = 0;
    for (size_t i = 0; i < n; i++)
        data += t[i].nbytes;
    size_t len = 8 + hl + pad + data;
    uint8_t *buf = malloc(len);
    if (!buf) {
        free(text);
        return -ENOMEM;
    }
    uint64_t v = hl + pad;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(v >> (8 * i));
    memcpy(buf + 8, text, hl);
    memset(buf + 8 + hl, ' ', pad);
    free(text);
    size_t at = 8 + hl + pad;
    for (size_t i = 0; i < n; i++) {
        if (t[i].nbytes)
            memcpy(buf + at, t[i].data, t[i].nbytes);
        at += t[i].nbytes;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}
