/* Tolerances with reasons: JSON parsing and serialisation (see tolerance.h). */
#include "tolerance.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const reason_names[NV_REASON_COUNT] = {
    [NV_REASON_DTYPE_PRECISION] = "dtype_precision",
    [NV_REASON_REDUCTION_LENGTH] = "reduction_length",
    [NV_REASON_APPROXIMATION_ERROR] = "approximation_error",
    [NV_REASON_STOCHASTIC] = "stochastic",
    [NV_REASON_ACCEPTED_FAST_ALGORITHM] = "accepted_fast_algorithm",
};

static const char *const metric_names[] = {"allclose", "ulp", "bound"};
static const char *const growth_names[] = {"n", "log2n", "sqrtn", "probabilistic"};

const char *nv_reason_code_name(nv_reason_code c)
{
    return (unsigned)c < NV_REASON_COUNT ? reason_names[c] : NULL;
}

int nv_reason_code_from_name(const char *s, nv_reason_code *ret)
{
    assert(ret);
    for (int i = 0; s && i < NV_REASON_COUNT; i++) {
        if (strcmp(s, reason_names[i]) == 0) {
            *ret = (nv_reason_code)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* Sets the error outputs; always returns -EINVAL. Allocation failure of the
 * message leaves it NULL (the field alone still names the problem). */
static int fail(char **ret_field, char **ret_msg, const char *field, const char *fmt, ...)
{
    if (ret_field)
        *ret_field = strdup(field);
    if (ret_msg) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_msg, fmt, ap) < 0)
            *ret_msg = NULL;
        va_end(ap);
    }
    return -EINVAL;
}

static int find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Keys each metric accepts, besides the common ones. */
static bool key_allowed(nv_tol_metric m, const char *key)
{
    static const char *const common[] = {"metric", "reason_code", "reason", "version", "source"};
    for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
        if (strcmp(key, common[i]) == 0)
            return true;
    switch (m) {
    case NV_TOL_ALLCLOSE:
        return strcmp(key, "atol") == 0 || strcmp(key, "rtol") == 0;
    case NV_TOL_ULP:
        return strcmp(key, "max_ulp") == 0;
    default:
        return strcmp(key, "c") == 0 || strcmp(key, "growth") == 0 || strcmp(key, "u_dtype") == 0;
    }
}

/* A finite number >= 0 at key (optional unless required). */
static int get_param(const json_t *obj, const char *key, bool required, double *ret,
                     char **ret_field, char **ret_msg)
{
    char field[64];
    snprintf(field, sizeof(field), "/%s", key);
    const json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return fail(ret_field, ret_msg, field, "missing '%s': this metric needs it", key);
        *ret = 0;
        return 0;
    }
    if (!json_is_number(v))
        return fail(ret_field, ret_msg, field, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0)
        return fail(ret_field, ret_msg, field, "'%s' must be a finite number >= 0, not '%g'", key,
                    d);
    *ret = d;
    return 0;
}

static int parse_params(const json_t *obj, nv_tolerance *t, char **ret_field, char **ret_msg)
{
    int r;
    switch (t->metric) {
    case NV_TOL_ALLCLOSE:
        if (!json_object_get(obj, "atol") && !json_object_get(obj, "rtol"))
            return fail(ret_field, ret_msg, "/atol", "allclose needs 'atol' or 'rtol'");
        r = get_param(obj, "atol", false, &t->atol, ret_field, ret_msg);
        if (r == 0)
            r = get_param(obj, "rtol", false, &t->rtol, ret_field, ret_msg);
        return r;
    case NV_TOL_ULP:
        return get_param(obj, "max_ulp", true, &t->max_ulp, ret_field, ret_msg);
    default:
        break;
    }
    r = get_param(obj, "c", true, &t->c, ret_field, ret_msg);
    if (r < 0)
        return r;
    const json_t *g = json_object_get(obj, "growth");
    if (!json_is_string(g))
        return fail(ret_field, ret_msg, "/growth",
                    "'growth' must be one of \"n\", \"log2n\", \"sqrtn\", \"probabilistic\"");
    int gi = find_name(json_string_value(g), growth_names, 4);
    if (gi < 0)
        return fail(ret_field, ret_msg, "/growth",
                    "unknown growth '%s' (use \"n\", \"log2n\", \"sqrtn\" or \"probabilistic\")",
                    json_string_value(g));
    t->growth = (nv_growth)gi;
    const json_t *u = json_object_get(obj, "u_dtype");
    if (u) {
        if (!json_is_string(u) || nv_dtype_from_name(json_string_value(u), &t->u_dtype) < 0)
            return fail(ret_field, ret_msg, "/u_dtype", "unknown dtype '%s' for 'u_dtype'",
                        json_is_string(u) ? json_string_value(u) : "(not a string)");
        t->has_u_dtype = 1;
    }
    return 0;
}

static int parse_reason(const json_t *obj, nv_tolerance *t, char **ret_field, char **ret_msg)
{
    const json_t *rc = json_object_get(obj, "reason_code");
    if (!rc)
        return fail(ret_field, ret_msg, "/reason_code",
                    "missing 'reason_code': a tolerance needs a reason code");
    if (!json_is_string(rc) || nv_reason_code_from_name(json_string_value(rc), &t->reason_code) < 0)
        return fail(ret_field, ret_msg, "/reason_code",
                    "unknown reason_code '%s' (use dtype_precision, reduction_length, "
                    "approximation_error, stochastic or accepted_fast_algorithm)",
                    json_is_string(rc) ? json_string_value(rc) : "(not a string)");
    const json_t *rs = json_object_get(obj, "reason");
    if (!rs)
        return fail(ret_field, ret_msg, "/reason",
                    "missing 'reason': a tolerance needs a written explanation");
    if (!json_is_string(rs))
        return fail(ret_field, ret_msg, "/reason", "'reason' must be a string");
    const char *s = json_string_value(rs);
    size_t len = strlen(s);
    size_t lead = strspn(s, " \t\r\n");
    if (lead == len)
        return fail(ret_field, ret_msg, "/reason", "empty 'reason' '%s': explain the tolerance", s);
    if (len >= NV_TOL_REASON_MAX)
        return fail(ret_field, ret_msg, "/reason", "'reason' is %zu bytes long; the limit is %d",
                    len, NV_TOL_REASON_MAX - 1);
    memcpy(t->reason, s, len + 1);
    return 0;
}

static int parse_meta(const json_t *obj, nv_tolerance *t, char **ret_field, char **ret_msg)
{
    const json_t *v = json_object_get(obj, "version");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 2147483647)
            return fail(ret_field, ret_msg, "/version", "'version' must be an integer >= 0");
        t->version = (int)json_integer_value(v);
    }
    const json_t *s = json_object_get(obj, "source");
    if (s) {
        if (!json_is_string(s) || strlen(json_string_value(s)) >= sizeof(t->source))
            return fail(ret_field, ret_msg, "/source",
                        "'source' must be a string shorter than %zu bytes", sizeof(t->source));
        strcpy(t->source, json_string_value(s));
    }
    return 0;
}

int nv_tolerance_from_json(const json_t *obj, nv_tolerance *ret, char **ret_field, char **ret_msg)
{
    assert(ret);
    if (!json_is_object(obj))
        return fail(ret_field, ret_msg, "", "a tolerance must be a JSON object");
    nv_tolerance t;
    memset(&t, 0, sizeof(t));
    const json_t *m = json_object_get(obj, "metric");
    if (!json_is_string(m))
        return fail(ret_field, ret_msg, "/metric",
                    "missing 'metric' (use \"allclose\", \"ulp\" or \"bound\")");
    int mi = find_name(json_string_value(m), metric_names, 3);
    if (mi < 0)
        return fail(ret_field, ret_msg, "/metric",
                    "unknown metric '%s' (use \"allclose\", \"ulp\" or \"bound\")",
                    json_string_value(m));
    t.metric = (nv_tol_metric)mi;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        if (!key_allowed(t.metric, key)) {
            char field[300];
            snprintf(field, sizeof(field), "/%s", key);
            return fail(ret_field, ret_msg, field, "unknown key '%s' for metric '%s'", key,
                        metric_names[mi]);
        }
    }
    int r = parse_params(obj, &t, ret_field, ret_msg);
    if (r == 0)
        r = parse_reason(obj, &t, ret_field, ret_msg);
    if (r == 0)
        r = parse_meta(obj, &t, ret_field, ret_msg);
    if (r < 0)
        return r;
    *ret = t;
    return 0;
}

json_t *nv_tolerance_to_json(const nv_tolerance *t)
{
    assert(t);
    if ((unsigned)t->metric > NV_TOL_BOUND || (unsigned)t->reason_code >= NV_REASON_COUNT)
        return NULL;
    json_t *o = json_object();
    if (!o)
        return NULL;
    int r = json_object_set_new(o, "metric", json_string(metric_names[t->metric]));
    switch (t->metric) {
    case NV_TOL_ALLCLOSE:
        r |= json_object_set_new(o, "atol", json_real(t->atol));
        r |= json_object_set_new(o, "rtol", json_real(t->rtol));
        break;
    case NV_TOL_ULP:
        r |= json_object_set_new(o, "max_ulp", json_real(t->max_ulp));
        break;
    default:
        r |= json_object_set_new(o, "c", json_real(t->c));
        r |= json_object_set_new(o, "growth", json_string(growth_names[t->growth]));
        if (t->has_u_dtype)
            r |= json_object_set_new(o, "u_dtype", json_string(nv_dtype_name(t->u_dtype)));
        break;
    }
    r |= json_object_set_new(o, "reason_code", json_string(reason_names[t->reason_code]));
    r |= json_object_set_new(o, "reason", json_string(t->reason));
    r |= json_object_set_new(o, "version", json_integer(t->version));
    if (t->source[0])
        r |= json_object_set_new(o, "source", json_string(t->source));
    if (r != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
