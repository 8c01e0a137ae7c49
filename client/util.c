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

void nvc_table_print(const nvc_table *t, FILE *f)
{
    int w[64] = {0};
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols && c < 64; c++) {
            int n = (int)strlen(t->cells[(size_t)r * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[(size_t)r * t->ncols + c];
            if (c == t->ncols - 1)
                fprintf(f, "%s\n", cell);
            else
                fprintf(f, "%-*s  ", w[c < 64 ? c : 63], cell);
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
