/* Which tolerance applies now (tolerance.h). */
#include "tolerance.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "core/ops/catalog.h"

int nvd_mode_match(const char *pattern, const json_t *mode)
{
    if (!pattern || !*pattern || strcmp(pattern, "*") == 0)
        return 0;
    char buf[1024];
    if (strlen(pattern) >= sizeof(buf))
        return -1;
    strcpy(buf, pattern);
    int n = 0;
    char *save = NULL;
    for (char *term = strtok_r(buf, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
        while (*term == ' ')
            term++;
        char *eq = strchr(term, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        const json_t *v = json_object_get(mode, term);
        char val[256];
        if (json_is_string(v))
            snprintf(val, sizeof(val), "%s", json_string_value(v));
        else if (json_is_integer(v))
            snprintf(val, sizeof(val), "%lld", (long long)json_integer_value(v));
        else if (json_is_boolean(v))
            snprintf(val, sizeof(val), "%s", json_is_true(v) ? "true" : "false");
        else if (json_is_real(v))
            snprintf(val, sizeof(val), "%.17g", json_real_value(v));
        else
            return -1;
        if (fnmatch(eq + 1, val, 0) != 0)
            return -1;
        n++;
    }
    return n;
}

json_t *nvd_tolerance_stored(nvd_store *s, const char *op, const char *dtype, const json_t *mode)
{
    json_t *rows = NULL;
    if (nvd_store_tolerances_list(s, op, dtype, false, &rows) < 0)
        return NULL;
    json_t *best = NULL;
    int best_score = -1;
    int64_t best_version = -1;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        int sc = nvd_mode_match(json_string_value(json_object_get(row, "mode")), mode);
        int64_t v = json_integer_value(json_object_get(row, "version"));
        if (sc > best_score || (sc == best_score && sc >= 0 && v > best_version)) {
            best = json_object_get(row, "tolerance");
            best_score = sc;
            best_version = v;
        }
    }
    json_t *out = NULL;
    if (best && best_score >= 0) {
        out = json_deep_copy(best);
        if (out)
            json_object_set_new(out, "source", json_string("store"));
    }
    json_decref(rows);
    return out;
}

int nvd_tolerance_current(nvd_store *s, const char *op, const json_t *attrs, const char *dtype,
                          const char *out_dtype, const json_t *mode, json_t **ret)
{
    json_t *t = nvd_tolerance_stored(s, op, dtype, mode);
    if (t) {
        *ret = t;
        return 0;
    }
    const nv_op_def *def = op ? nv_op_find(op) : NULL;
    nv_dtype dt;
    nv_op_attrs a;
    char *msg = NULL;
    if (!def || nv_dtype_from_name(out_dtype ? out_dtype : dtype, &dt) < 0)
        return -ENOENT;
    if (nv_op_parse_attrs(def, json_is_object(attrs) ? attrs : NULL, &a, &msg) < 0) {
        free(msg);
        return -ENOENT;
    }
    nv_tolerance tol;
    if (nv_op_default_tolerance(def, &a, dt, &tol) < 0)
        return -ENOENT;
    tol.version = 0;
    snprintf(tol.source, sizeof tol.source, "default");
    t = nv_tolerance_to_json(&tol);
    if (!t)
        return -ENOMEM;
    *ret = t;
    return 0;
}

static double param(const json_t *t, const char *key)
{
    const json_t *v = json_object_get(t, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *sparam(const json_t *t, const char *key)
{
    const char *v = json_string_value(json_object_get(t, key));
    return v ? v : "";
}

/* Whether tolerance a allows at least what b allows, element by element: the
 * same metric with every bound at least b's. */
static bool at_least_as_loose(const json_t *a, const json_t *b)
{
    const char *m = sparam(a, "metric");
    if (strcmp(m, sparam(b, "metric")))
        return false;
    if (!strcmp(m, "ulp"))
        return param(a, "max_ulp") >= param(b, "max_ulp");
    if (!strcmp(m, "allclose"))
        return param(a, "atol") >= param(b, "atol") && param(a, "rtol") >= param(b, "rtol");
    if (!strcmp(m, "bound"))
        return param(a, "c") >= param(b, "c") &&
               !strcmp(sparam(a, "growth"), sparam(b, "growth")) &&
               !strcmp(sparam(a, "u_dtype"), sparam(b, "u_dtype"));
    return false;
}

bool nvd_tolerance_fails_under(const json_t *c, const json_t *base, char *why, size_t n)
{
    const char *cls = sparam(c, "failure_class");
    const json_t *tol = json_object_get(c, "tolerance");
    /* Classes a tolerance decides (compare.h: ulp and allclose metrics report
     * ulp_exceeded, the bound metric bound_exceeded); any other failure (NaN or
     * infinity in the wrong place, a crash) fails under every tolerance. */
    if (strcmp(cls, "ulp_exceeded") && strcmp(cls, "bound_exceeded")) {
        snprintf(why, n, "failure class '%s' does not depend on the tolerance", cls);
        return true;
    }
    if (!json_is_object(base)) {
        snprintf(why, n, "no stored or default tolerance to judge it by");
        return true;
    }
    if (json_is_object(tol) && at_least_as_loose(tol, base)) {
        snprintf(why, n, "its tolerance is at least as loose as the stored/default one");
        return true;
    }
    double mu = param(c, "max_ulp");
    if (!strcmp(sparam(base, "metric"), "ulp") && !isnan(mu)) {
        bool fails = mu > param(base, "max_ulp");
        snprintf(why, n, "max_ulp %.6g %s the stored/default %.6g ULP", mu,
                 fails ? "exceeds" : "is within", param(base, "max_ulp"));
        return fails;
    }
    if (!strcmp(sparam(base, "metric"), "allclose") && param(c, "max_abs") <= param(base, "atol")) {
        snprintf(why, n, "max_abs %.6g is within the stored/default atol %.6g", param(c, "max_abs"),
                 param(base, "atol"));
        return false;
    }
    snprintf(why, n,
             "its tolerance is tighter than the stored/default one and its errors do not show "
             "that it fails that one");
    return false;
}

bool nvd_tolerance_same(const json_t *a, const json_t *b)
{
    return json_is_object(a) && json_is_object(b) && at_least_as_loose(a, b) &&
           at_least_as_loose(b, a) &&
           json_integer_value(json_object_get(a, "version")) ==
               json_integer_value(json_object_get(b, "version")) &&
           !strcmp(sparam(a, "source"), sparam(b, "source"));
}
