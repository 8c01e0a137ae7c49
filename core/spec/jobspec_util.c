/* Field checkers shared by the job-spec parsers (core/spec/spec_internal.h). */
#include "spec_internal.h"

#include "jobspec.h"

#include "core/numerics/dtype.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nv_spec_fail(nv_spec_err *e, const char *ptr, const char *fmt, ...)
{
    if (e->msg || e->oom)
        return e->oom ? -ENOMEM : -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&e->msg, fmt, ap);
    va_end(ap);
    e->ptr = strdup(ptr);
    if (r < 0 || !e->ptr) {
        if (r >= 0)
            free(e->msg);
        free(e->ptr);
        e->msg = e->ptr = NULL;
        e->oom = true;
        return -ENOMEM;
    }
    return -EINVAL;
}

int nv_spec_fail_from(nv_spec_err *e, int r, const char *ptr, const char *msg)
{
    if (r >= 0 || r == -ENOMEM)
        return r;
    if (!msg)
        return -ENOMEM;
    return nv_spec_fail(e, ptr ? ptr : "", "%s", msg);
}

char *nv_spec_show(const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (s && strlen(s) > 60)
        strcpy(s + 56, "...");
    return s;
}

int nv_spec_fail_value(nv_spec_err *e, const char *ptr, const json_t *v, const char *what)
{
    char *s = nv_spec_show(v);
    int r = nv_spec_fail(e, ptr, "'%s' %s", s ? s : "?", what);
    free(s);
    return r;
}

/* The RFC 6901 §3 escape of token written into buf from offset o, stopping
 * before a character that would not fit with the terminator; returns the end. */
static size_t put_token(char *buf, size_t n, size_t o, const char *token)
{
    for (const char *p = token; *p; p++) {
        bool esc = *p == '~' || *p == '/';
        if (o + (esc ? 2 : 1) >= n)
            break;
        if (esc) {
            buf[o++] = '~';
            buf[o++] = *p == '~' ? '0' : '1';
        } else {
            buf[o++] = *p;
        }
    }
    return o;
}

char *nv_json_pointer_escape(const char *token)
{
    size_t len = 0;
    for (const char *p = token; *p; p++)
        len += (*p == '~' || *p == '/') ? 2 : 1;
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    out[put_token(out, len + 1, 0, token)] = 0;
    return out;
}

void nv_spec_pointer(char *buf, size_t n, const char *base, const char *key)
{
    if (n == 0)
        return;
    int w = snprintf(buf, n, "%s/", base);
    if (w < 0 || (size_t)w >= n)
        return; /* base alone fills buf: snprintf cut and terminated it */
    buf[put_token(buf, n, (size_t)w, key)] = 0;
}

const char *nv_spec_unknown_key(const json_t *obj, const char *const *keys)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++)
            known = strcmp(keys[i], k) == 0;
        if (!known)
            return k;
    }
    return NULL;
}

/* The field's value (NULL when absent) and its pointer in ptr. */
static const json_t *field(const json_t *obj, const char *base, const char *key, char *ptr,
                           size_t n)
{
    nv_spec_pointer(ptr, n, base, key);
    return obj ? json_object_get(obj, key) : NULL;
}

int nv_spec_int(nv_spec_err *e, const json_t *obj, const char *base, const char *key, int64_t dflt,
                int64_t lo, int64_t hi, int64_t *ret)
{
    char ptr[160];
    const json_t *v = field(obj, base, key, ptr, sizeof ptr);
    if (!v) {
        *ret = dflt;
        return 0;
    }
    bool is_int = json_is_integer(v);
    int64_t x = is_int ? json_integer_value(v) : 0;
    if (is_int && x >= lo && x <= hi) {
        *ret = x;
        return 0;
    }
    char what[96];
    snprintf(what, sizeof what, "must be an integer in %lld..%lld", (long long)lo, (long long)hi);
    return nv_spec_fail_value(e, ptr, v, what);
}

int nv_spec_number(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                   double dflt, double lo, double hi, double *ret)
{
    char ptr[160];
    const json_t *v = field(obj, base, key, ptr, sizeof ptr);
    if (!v) {
        *ret = dflt;
        return 0;
    }
    bool is_num = json_is_number(v);
    double x = is_num ? json_number_value(v) : 0;
    if (is_num && x >= lo && x <= hi) {
        *ret = x;
        return 0;
    }
    char what[96];
    snprintf(what, sizeof what, "must be a number in %g..%g", lo, hi);
    return nv_spec_fail_value(e, ptr, v, what);
}

int nv_spec_bool(nv_spec_err *e, const json_t *obj, const char *base, const char *key, bool dflt,
                 bool *ret)
{
    char ptr[160];
    const json_t *v = field(obj, base, key, ptr, sizeof ptr);
    if (!v) {
        *ret = dflt;
        return 0;
    }
    if (json_is_boolean(v)) {
        *ret = json_is_true(v);
        return 0;
    }
    return nv_spec_fail_value(e, ptr, v, "must be true or false");
}

int nv_spec_choice(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                   const char *a, const char *b, bool *ret_is_b)
{
    char ptr[160];
    const json_t *v = field(obj, base, key, ptr, sizeof ptr);
    if (!v) {
        *ret_is_b = false;
        return 0;
    }
    const char *s = json_string_value(v);
    if (s && strcmp(s, a) == 0)
        *ret_is_b = false;
    else if (s && strcmp(s, b) == 0)
        *ret_is_b = true;
    else
        return nv_spec_fail(e, ptr, "'%s' must be \"%s\" or \"%s\"", s ? s : "(not a string)", a,
                            b);
    return 0;
}

int nv_spec_no_unknown(nv_spec_err *e, const json_t *obj, const char *const *keys, const char *ptr,
                       bool at_key, const char *where)
{
    const char *key = nv_spec_unknown_key(obj, keys);
    if (!key)
        return 0;
    char at[300];
    snprintf(at, sizeof at, "%s", ptr);
    if (at_key)
        nv_spec_pointer(at, sizeof at, ptr, key);
    return nv_spec_fail(e, at, "unknown key '%s' %s", key, where);
}

int nv_spec_int32(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                  int64_t dflt, int64_t lo, int64_t hi, int *ret)
{
    int64_t v;
    int r = nv_spec_int(e, obj, base, key, dflt, lo, hi, &v);
    if (r == 0)
        *ret = (int)v;
    return r;
}

int nv_spec_names(nv_spec_err *e, const json_t *spec, const char *key, const char *const *names,
                  int n, const char *noun, bool *set)
{
    char ptr[160];
    nv_spec_pointer(ptr, sizeof ptr, "", key);
    const json_t *a = json_object_get(spec, key);
    if (!a) {
        for (int c = 0; c < n; c++)
            set[c] = true;
        return 0;
    }
    char what[300];
    if (!json_is_array(a) || json_array_size(a) == 0) {
        snprintf(what, sizeof what, "must be a non-empty array of %s names", noun);
        return nv_spec_fail_value(e, ptr, a, what);
    }
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char at[192];
        snprintf(at, sizeof at, "%s/%zu", ptr, i);
        int found = -1;
        for (int c = 0; c < n && json_is_string(v); c++)
            if (!strcmp(json_string_value(v), names[c]))
                found = c;
        if (found < 0) {
            int o = snprintf(what, sizeof what, "is not a %s (", noun);
            for (int c = 0; c < n && o > 0 && (size_t)o < sizeof what; c++)
                o += snprintf(what + o, sizeof what - (size_t)o, "%s%s", c ? ", " : "", names[c]);
            if (o > 0 && (size_t)o < sizeof what)
                snprintf(what + o, sizeof what - (size_t)o, ")");
            return nv_spec_fail_value(e, at, v, what);
        }
        if (set[found])
            return nv_spec_fail(e, at, "duplicate %s '%s'", noun, names[found]);
        set[found] = true;
    }
    return 0;
}

int nv_spec_parse_new(const json_t *spec, size_t size, nv_spec_parse_fn parse_all, void **ret,
                      char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    void *s = calloc(1, size);
    if (!s)
        return -ENOMEM;
    int r = nv_spec_err_finish(&e, parse_all(spec, s, &e), ret_pointer, ret_msg);
    if (r < 0) {
        free(s);
        return r;
    }
    *ret = s;
    return 0;
}

static const char *const kind_names[NV_SPEC_KIND_COUNT] = {
    [NV_SPEC_KIND_OP] = "op",
    [NV_SPEC_KIND_GRADIENT] = "gradient",
    [NV_SPEC_KIND_FUSED] = "fused",
    [NV_SPEC_KIND_LONGRUN] = "longrun",
    [NV_SPEC_KIND_MODEL] = "model",
    [NV_SPEC_KIND_SUITE] = "suite",
    [NV_SPEC_KIND_CONTRACT] = "contract",
    [NV_SPEC_KIND_SERVING] = "serving",
    [NV_SPEC_KIND_RNG] = "rng",
};

int nv_spec_kind_of(const json_t *spec)
{
    const char *k = json_string_value(json_is_object(spec) ? json_object_get(spec, "kind") : NULL);
    for (int i = 0; k && i < NV_SPEC_KIND_COUNT; i++)
        if (strcmp(k, kind_names[i]) == 0)
            return i;
    return -1;
}

void nv_spec_kind_list(char *buf, size_t n)
{
    size_t o = 0;
    if (n == 0)
        return;
    buf[0] = 0;
    for (int i = 0; i < NV_SPEC_KIND_COUNT && o < n; i++) {
        int w = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", kind_names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

int nv_spec_err_finish(nv_spec_err *e, int r, char **ret_pointer, char **ret_msg)
{
    if (r >= 0 && !e->msg && !e->oom)
        return 0;
    if (r == -ENOMEM || e->oom || !e->msg) {
        free(e->ptr);
        free(e->msg);
        *e = (nv_spec_err){0};
        return -ENOMEM;
    }
    if (ret_pointer)
        *ret_pointer = e->ptr;
    else
        free(e->ptr);
    if (ret_msg)
        *ret_msg = e->msg;
    else
        free(e->msg);
    *e = (nv_spec_err){0};
    return -EINVAL;
}

int nv_spec_float_dtypes(nv_spec_err *e, const json_t *spec, nv_dtype *dtypes, int *ret_n)
{
    const json_t *arr = json_object_get(spec, "dtypes");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return nv_spec_fail_value(e, "/dtypes", arr,
                                  "must be a non-empty array of the model's dtypes (fp32, bf16 ...)");
    int n = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/dtypes/%zu", i);
        const char *name = json_string_value(v);
        nv_dtype dt;
        const nv_dtype_info *di =
            name && nv_dtype_from_name(name, &dt) == 0 ? nv_dtype_get(dt) : NULL;
        if (!di || !di->is_float || dt == NV_DT_E8M0)
            return nv_spec_fail(e, ptr, "'%s' is not a float dtype (fp32, bf16 ...)",
                                name ? name : "(not a string)");
        for (int k = 0; k < n; k++)
            if (dtypes[k] == dt)
                return nv_spec_fail(e, ptr, "duplicate name '%s'", name);
        if (n == NV_DT_COUNT)
            return nv_spec_fail(e, ptr, "too many dtypes");
        dtypes[n++] = dt;
    }
    *ret_n = n;
    return 0;
}
