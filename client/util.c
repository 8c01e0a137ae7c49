/* numvalctl helpers: option parsing, aligned tables, JSON rendering. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

void nvc_error(const char *fmt, ...)
{
    va_list ap;
    fputs("numvalctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static const nvc_opt *find_opt(const nvc_opt *opts, const char *name, size_t len)
{
    for (const nvc_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

int nvc_parse(int argc, char **argv, const nvc_opt *opts, const char **pos, int max_pos,
              int *ret_npos, char **ret_err)
{
    int npos = 0;
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] != '-' || a[2] == '\0') {
            if (!only_pos && strcmp(a, "--") == 0) {
                only_pos = true;
                continue;
            }
            if (npos >= max_pos) {
                if (asprintf(ret_err, "unexpected argument '%s'", a) < 0)
                    *ret_err = NULL;
                return -EINVAL;
            }
            pos[npos++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const nvc_opt *o = find_opt(opts, name, len);
        if (!o) {
            if (asprintf(ret_err, "unknown option '%s'", a) < 0)
                *ret_err = NULL;
            return -EINVAL;
        }
        if (o->flag) {
            if (eq) {
                if (asprintf(ret_err, "option '--%s' takes no value", o->name) < 0)
                    *ret_err = NULL;
                return -EINVAL;
            }
            *o->flag = true;
            continue;
        }
        if (eq) {
            *o->value = eq + 1;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            if (asprintf(ret_err, "option '--%s' needs a value", o->name) < 0)
                *ret_err = NULL;
            return -EINVAL;
        }
    }
    *ret_npos = npos;
    return 0;
}

struct nvc_table {
    int ncols, nrows, cap;
    char **cells; /* (nrows + 1) * ncols, row 0 the headers */
};

nvc_table *nvc_table_new(int ncols, const char *const *headers)
{
    nvc_table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ncols = ncols;
    if (nvc_table_add(t, headers) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

int nvc_table_add(nvc_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        char **p = realloc(t->cells, (size_t)cap * t->ncols * sizeof(*p));
        if (!p)
            return -ENOMEM;
        t->cells = p;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)t->nrows * t->ncols;
    for (int i = 0; i < t->ncols; i++) {
        row[i] = strdup(cells[i] ? cells[i] : "-");
        if (!row[i]) {
            while (i-- > 0)
                free(row[i]);
            return -ENOMEM;
        }
    }
    t->nrows++;
    return 0;
}

/* Display width of UTF-8 text: its code points (continuation bytes do not
 * count), so "\u2264 1 ULP" lines up. */
static int text_width(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

void nvc_table_print(const nvc_table *t, FILE *f)
{
    int w[64] = {0};
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols && c < 64; c++) {
            int n = text_width(t->cells[(size_t)r * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[(size_t)r * t->ncols + c];
            if (c == t->ncols - 1) {
                fprintf(f, "%s\n", cell);
            } else {
                fputs(cell, f);
                fprintf(f, "%*s", w[c < 64 ? c : 63] - text_width(cell) + 2, "");
            }
        }
    }
}

void nvc_table_free(nvc_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < (size_t)t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

char *nvc_json_text(const json_t *v)
{
    char buf[64];
    if (!v)
        return strdup("-");
    switch (json_typeof(v)) {
    case JSON_STRING:
        return strdup(json_string_value(v));
    case JSON_INTEGER:
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return strdup(buf);
    case JSON_REAL:
        snprintf(buf, sizeof(buf), "%.6g", json_real_value(v));
        return strdup(buf);
    case JSON_TRUE:
        return strdup("true");
    case JSON_FALSE:
        return strdup("false");
    case JSON_OBJECT:
    case JSON_ARRAY:
        return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    default:
        return strdup("-");
    }
}

const char *nvc_id_text(const json_t *v, char buf[32])
{
    if (json_is_integer(v))
        snprintf(buf, 32, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(buf, 32, "%s", json_is_string(v) ? json_string_value(v) : "");
    return buf;
}

void nvc_print_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s)
        printf("%s\n", s);
    free(s);
}

json_t *nvc_load_json_file(const char *path, char **ret_err)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson reports line -1 when the file could not be read at all. */
    int n = 0;
    if (!j && jerr.line < 0)
        n = asprintf(ret_err, "cannot read JSON file '%s': %s", path, jerr.text);
    else if (!j)
        n = asprintf(ret_err, "cannot read JSON file '%s': %s (line %d, column %d)", path,
                     jerr.text, jerr.line, jerr.column);
    if (n < 0)
        *ret_err = NULL;
    return j;
}

void nvc_csv_row(FILE *f, int n, const char *const *cells)
{
    for (int i = 0; i < n; i++) {
        const char *c = cells[i] ? cells[i] : "";
        if (i)
            fputc(',', f);
        if (strpbrk(c, ",\"\r\n")) {
            fputc('"', f);
            for (; *c; c++) {
                if (*c == '"')
                    fputc('"', f);
                fputc(*c, f);
            }
            fputc('"', f);
        } else {
            fputs(c, f);
        }
    }
    fputs("\r\n", f);
}

/* Longest line a compact array is printed on before it is cut. */
#define SHOW_LINE 160

/* Whether an array holds only scalars or arrays of scalars (one line). */
static bool flat_array(const json_t *a)
{
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        if (json_is_object(e))
            return false;
        if (json_is_array(e) && !flat_array(e))
            return false;
    }
    return true;
}

/* A base64 payload in a result (the long run's series.data, "encoding":
 * "zstd+base64") is no reading matter: it is named by its size and where to get
 * it. *ret is malloc'd, NULL when v is no such payload. */
static char *blob_text(const json_t *parent, const char *key, const json_t *v, const char *job_id)
{
    const char *enc = json_string_value(json_object_get(parent, "encoding"));
    size_t len = json_string_length(v);
    bool b64 = enc && strstr(enc, "base64") && !strcmp(key, "data");
    if (!b64 && len > 512) {
        /* Any other long run of base64 characters. */
        const char *t = json_string_value(v);
        b64 = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == len;
    }
    if (!b64 || !json_is_string(v))
        return NULL;
    const json_t *cb = json_object_get(parent, "compressed_bytes");
    long long n =
        json_is_integer(cb) ? (long long)json_integer_value(cb) : (long long)(len / 4 * 3);
    char *out = NULL;
    if (asprintf(&out, "<%lld bytes %s%s%s%s>", n, enc && strstr(enc, "zstd") ? "zstd" : "base64",
                 job_id ? ", GET /api/v1/jobs/" : "", job_id ? job_id : "",
                 job_id ? " for the data" : "") < 0)
        return NULL;
    return out;
}

/* Print key and v at indent: scalars on the key's line, objects as indented
 * keys, arrays of scalars on one line (cut past SHOW_LINE), arrays of objects
 * as "- " items. */
void nvc_show_value(const json_t *parent, const char *key, const json_t *v, int indent,
                    const char *job_id)
{
    int width = indent < 13 ? 14 - indent : 1;
    if (json_is_object(v) && json_object_size(v) > 0) {
        printf("%*s%s:\n", indent, "", key);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)v, k, e) nvc_show_value(v, k, e, indent + 2, job_id);
        return;
    }
    if (json_is_array(v) && json_array_size(v) > 0 && !flat_array(v)) {
        printf("%*s%s:\n", indent, "", key);
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
        {
            char item[32];
            snprintf(item, sizeof item, "- [%zu]", i);
            nvc_show_value(v, item, e, indent + 2, job_id);
        }
        return;
    }
    char *t = blob_text(parent, key, v, job_id);
    if (!t)
        t = nvc_json_text(v);
    if (t && json_is_array(v) && strlen(t) > SHOW_LINE)
        printf("%*s%-*s %.*s... (%zu items; --json for all)\n", indent, "", width, key, SHOW_LINE,
               t, json_array_size(v));
    else
        printf("%*s%-*s %s\n", indent, "", width, key, t ? t : "-");
    free(t);
}
