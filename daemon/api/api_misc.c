/* Routes: tolerances, builds, devices, metrics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon/util/util.h"
#include "core/numerics/dtype.h"
#include "core/ops/catalog.h"

static const char *const reason_codes[] = {"dtype_precision",         "reduction_length",
                                           "approximation_error",     "stochastic",
                                           "accepted_fast_algorithm", NULL};

void api_tolerances_get(api_ctx *x, bool history)
{
    json_t *rows = NULL;
    int r = nvd_store_tolerances_list(x->app->store, api_query(x, "op"), api_query(x, "dtype"),
                                      history, &rows);
    if (r < 0) {
        api_errno(x, r, "list tolerances");
        return;
    }
    api_json(x, 200, json_pack("{s:o}", "tolerances", rows));
}

/* The metric part of a tolerance: "metric" and its numeric parameters. */
static int check_metric(api_ctx *x, const json_t *tol)
{
    const char *m = json_string_value(json_object_get(tol, "metric"));
    static const char *const need_ulp[] = {"max_ulp", NULL};
    static const char *const need_allclose[] = {"atol", "rtol", NULL};
    static const char *const need_bound[] = {"c", NULL};
    const char *const *need = !m                       ? NULL
                              : !strcmp(m, "ulp")      ? need_ulp
                              : !strcmp(m, "allclose") ? need_allclose
                              : !strcmp(m, "bound")    ? need_bound
                                                       : NULL;
    if (!need) {
        api_error(x, 400, "bad_request", "/tolerance/metric",
                  "\"metric\" must be \"ulp\", \"allclose\" or \"bound\"%s%s%s", m ? ", not '" : "",
                  m ? m : "", m ? "'" : "");
        return -1;
    }
    for (int i = 0; need[i]; i++) {
        const json_t *v = json_object_get(tol, need[i]);
        if (!json_is_number(v) || json_number_value(v) < 0) {
            char f[64];
            snprintf(f, sizeof(f), "/tolerance/%s", need[i]);
            api_error(x, 400, "bad_request", f, "metric '%s' needs a non-negative number \"%s\"", m,
                      need[i]);
            return -1;
        }
    }
    return 0;
}

/* reason_code and reason: from the tolerance object, else the top level. */
static int check_reason(api_ctx *x, const json_t *body, const json_t *tol, const char **code,
                        const char **reason)
{
    const json_t *c = json_object_get(tol, "reason_code");
    if (!c)
        c = json_object_get(body, "reason_code");
    const json_t *r = json_object_get(tol, "reason");
    if (!r)
        r = json_object_get(body, "reason");
    *code = json_string_value(c);
    bool known = false;
    for (int i = 0; *code && reason_codes[i]; i++)
        known = known || !strcmp(*code, reason_codes[i]);
    if (!known) {
        api_error(
            x, 400, "bad_request", "/tolerance/reason_code",
            "a tolerance change needs \"reason_code\": one of dtype_precision, "
            "reduction_length, approximation_error, stochastic, accepted_fast_algorithm%s%s%s",
            *code ? " (not '" : "", *code ? *code : "", *code ? "')" : "");
        return -1;
    }
    *reason = json_string_value(r);
    const char *p = *reason;
    while (p && (*p == ' ' || *p == '\t' || *p == '\n'))
        p++;
    if (!p || !*p || strlen(*reason) > 512) {
        api_error(x, 400, "bad_request", "/tolerance/reason",
                  "a tolerance change needs a non-empty \"reason\" (at most 512 bytes) that "
                  "explains it");
        return -1;
    }
    return 0;
}

/* "*" or comma-separated key=value terms with non-empty keys. */
static bool mode_pattern_ok(const char *p)
{
    if (!strcmp(p, "*"))
        return true;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p)
            return false;
        p += n + (e ? 1 : 0);
        if (e && !*p)
            return false;
    }
    return true;
}

void api_tolerances_post(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    char *metric = NULL;
    const char *op = json_string_value(json_object_get(body, "op"));
    const char *dt = json_string_value(json_object_get(body, "dtype"));
    const json_t *modev = json_object_get(body, "mode");
    const json_t *tol = json_object_get(body, "tolerance");
    nv_dtype d;
    if (!op || !nv_op_find(op)) {
        api_error(x, 400, "bad_request", "/op", "unknown op '%s'", op ? op : "(missing)");
        goto out;
    }
    if (!dt || nv_dtype_from_name(dt, &d) < 0) {
        api_error(x, 400, "bad_request", "/dtype", "unknown dtype '%s'", dt ? dt : "(missing)");
        goto out;
    }
    if (modev && (!json_is_string(modev) || json_string_length(modev) > 512 ||
                  !mode_pattern_ok(json_string_value(modev)))) {
        api_error(x, 400, "bad_request", "/mode",
                  "\"mode\" must be a pattern string: \"*\" or \"key=value,...\"");
        goto out;
    }
    if (!json_is_object(tol)) {
        api_error(x, 400, "bad_request", "/tolerance", "\"tolerance\" must be an object");
        goto out;
    }
    const char *code, *reason;
    if (check_reason(x, body, tol, &code, &reason) < 0 || check_metric(x, tol) < 0)
        goto out;
    json_t *m = json_deep_copy(tol);
    if (m) {
        json_object_del(m, "reason_code");
        json_object_del(m, "reason");
        json_object_del(m, "version");
        json_object_del(m, "source");
        metric = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(m);
    }
    if (!metric) {
        api_errno(x, -ENOMEM, "tolerance");
        goto out;
    }
    nvd_tolerance_new t = {.op = op,
                           .dtype = dt,
                           .mode = modev ? json_string_value(modev) : "*",
                           .metric_json = metric,
                           .reason_code = code,
                           .reason = reason,
                           .author = x->token_name ? x->token_name : "anonymous"};
    json_t *row = NULL;
    int r = nvd_store_tolerance_add(x->app->store, &t, nvd_now_ms(), &row);
    if (r < 0)
        api_errno(x, r, "add tolerance");
    else
        api_json(x, 201, json_pack("{s:o}", "tolerance", row));
out:
    free(metric);
    json_decref(body);
}

void api_builds(api_ctx *x)
{
    int limit = api_limit(x, 100, 1000);
    if (limit < 0)
        return;
    json_t *rows = NULL;
    int r = nvd_store_builds_list(x->app->store, limit, &rows);
    if (r < 0)
        api_errno(x, r, "list builds");
    else
        api_json(x, 200, json_pack("{s:o}", "builds", rows));
}

void api_devices(api_ctx *x, const char *name)
{
    json_t *v = NULL;
    int r = name ? nvd_store_device_get(x->app->store, name, &v)
                 : nvd_store_devices_list(x->app->store, &v);
    if (r == -ENOENT)
        api_error(x, 404, "not_found", NULL, "device '%s' not found", name);
    else if (r < 0)
        api_errno(x, r, "devices");
    else
        api_json(x, 200, name ? json_pack("{s:o}", "device", v) : json_pack("{s:o}", "devices", v));
}
