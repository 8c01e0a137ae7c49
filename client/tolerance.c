/* numvalctl tolerance list | history | set: tolerances are versioned and carry
 * reasons; a new version without a reason code and explanation is refused by
 * the server, and numvalctl refuses it before sending. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

static const char *const TOL_H[] = {"OP",    "DTYPE",       "MODE",   "VERSION", "METRIC",
                                    "LIMIT", "REASON_CODE", "REASON", "AUTHOR",  "CREATED"};

/* Flatten the tolerance object into the row so the table can show it. */
static void flatten(json_t *rows)
{
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        json_t *tol = json_object_get(row, "tolerance");
        if (!json_is_object(tol))
            tol = row;
        const char *metric = json_string_value(json_object_get(tol, "metric"));
        char limit[160] = "-";
        char *a =
            nvc_json_text(json_object_get(tol, metric && !strcmp(metric, "allclose") ? "atol"
                                               : metric && !strcmp(metric, "bound")  ? "c"
                                                                                     : "max_ulp"));
        char *b = nvc_json_text(
            json_object_get(tol, metric && !strcmp(metric, "allclose") ? "rtol" : "growth"));
        if (metric && !strcmp(metric, "allclose"))
            snprintf(limit, sizeof(limit), "atol=%s rtol=%s", a ? a : "-", b ? b : "-");
        else if (metric && !strcmp(metric, "bound"))
            snprintf(limit, sizeof(limit), "c=%s g=%s", a ? a : "-", b ? b : "-");
        else if (metric)
            snprintf(limit, sizeof(limit), "%s ulp", a ? a : "-");
        free(a);
        free(b);
        json_object_set_new(row, "_metric", json_string(metric ? metric : "-"));
        json_object_set_new(row, "_limit", json_string(limit));
        const char *keys[] = {"reason_code", "reason", "version"};
        for (int k = 0; k < 3; k++)
            if (!json_object_get(row, keys[k]) && json_object_get(tol, keys[k]))
                json_object_set(row, keys[k], json_object_get(tol, keys[k]));
    }
}

static int list(nvc_conn *c, const char *path)
{
    json_t *resp = NULL;
    char *err = NULL;
    int r = nvc_api(c, "GET", path, NULL, &resp, &err);
    if (r < 0) {
        nvc_error("%s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json) {
        nvc_print_json(resp);
    } else {
        json_t *rows = json_object_get(resp, "tolerances");
        if (!rows)
            rows = json_object_get(resp, "history");
        flatten(rows);
        const char *k[] = {"op",     "dtype",       "mode",   "version", "_metric",
                           "_limit", "reason_code", "reason", "author",  "created_at"};
        nvc_table *t = nvc_table_new(10, TOL_H);
        for (size_t i = 0; t && i < json_array_size(rows); i++) {
            char *cells[10];
            for (int j = 0; j < 10; j++) {
                json_t *v = json_object_get(json_array_get(rows, i), k[j]);
                cells[j] = v && !json_is_null(v) ? nvc_json_text(v) : NULL;
            }
            nvc_table_add(t, (const char *const *)cells);
            for (int j = 0; j < 10; j++)
                free(cells[j]);
        }
        if (t)
            nvc_table_print(t, stdout);
        nvc_table_free(t);
    }
    json_decref(resp);
    return NVC_EXIT_OK;
}

static int number(json_t *o, const char *key, const char *opt, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0) {
        nvc_error("invalid %s '%s': expected a finite number >= 0", opt, s);
        return -EINVAL;
    }
    json_object_set_new(o, key, json_real(v));
    return 0;
}

typedef struct set_opts {
    const char *op, *dtype, *mode, *metric, *max_ulp, *atol, *rtol, *c, *growth, *u_dtype;
    const char *reason_code, *reason;
} set_opts;

/* The tolerance object from the options; NULL after printing the problem. */
static json_t *tolerance_object(const set_opts *o)
{
    if (!o->metric || !o->reason_code || !o->reason || !*o->reason) {
        nvc_error("tolerance set needs --metric, --reason-code and a non-empty --reason: a "
                  "tolerance without its reason is refused");
        return NULL;
    }
    json_t *t = json_pack("{s:s,s:s,s:s}", "metric", o->metric, "reason_code", o->reason_code,
                          "reason", o->reason);
    int r = 0;
    if (!t)
        return NULL;
    if (!strcmp(o->metric, "ulp")) {
        r = o->max_ulp ? number(t, "max_ulp", "--max-ulp", o->max_ulp) : -EINVAL;
    } else if (!strcmp(o->metric, "allclose")) {
        r = o->atol && o->rtol ? number(t, "atol", "--atol", o->atol) : -EINVAL;
        if (r == 0)
            r = number(t, "rtol", "--rtol", o->rtol);
    } else if (!strcmp(o->metric, "bound")) {
        r = o->c && o->growth ? number(t, "c", "--c", o->c) : -EINVAL;
        if (r == 0)
            json_object_set_new(t, "growth", json_string(o->growth));
        if (r == 0 && o->u_dtype)
            json_object_set_new(t, "u_dtype", json_string(o->u_dtype));
    } else {
        nvc_error("unknown --metric '%s': expected ulp, allclose or bound", o->metric);
        json_decref(t);
        return NULL;
    }
    if (r < 0) {
        nvc_error("--metric %s needs %s", o->metric,
                  !strcmp(o->metric, "ulp")        ? "--max-ulp U"
                  : !strcmp(o->metric, "allclose") ? "--atol A --rtol R"
                                                   : "--c C --growth G");
        json_decref(t);
        return NULL;
    }
    return t;
}

static int set(nvc_conn *c, const set_opts *o)
{
    if (!o->op || !o->dtype) {
        nvc_error("tolerance set needs --op and --dtype");
        return NVC_EXIT_ERROR;
    }
    json_t *tol = tolerance_object(o);
    if (!tol)
        return NVC_EXIT_ERROR;
    json_t *body = json_pack("{s:s,s:s,s:s,s:o}", "op", o->op, "dtype", o->dtype, "mode",
                             o->mode ? o->mode : "*", "tolerance", tol);
    json_t *resp = NULL;
    char *err = NULL;
    int r = body ? nvc_api(c, "POST", "/api/v1/tolerances", body, &resp, &err) : -ENOMEM;
    json_decref(body);
    if (r < 0) {
        nvc_error("%s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json) {
        nvc_print_json(resp);
    } else {
        json_t *t = json_object_get(resp, "tolerance");
        char *v = nvc_json_text(json_object_get(t ? t : resp, "version"));
        printf("tolerance %s/%s is now version %s\n", o->op, o->dtype, v ? v : "?");
        free(v);
    }
    json_decref(resp);
    return NVC_EXIT_OK;
}

int nvc_cmd_tolerance(nvc_conn *c, int argc, char **argv)
{
    set_opts o = {0};
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),
                            {"op", &o.op, NULL},
                            {"dtype", &o.dtype, NULL},
                            {"mode", &o.mode, NULL},
                            {"metric", &o.metric, NULL},
                            {"max-ulp", &o.max_ulp, NULL},
                            {"atol", &o.atol, NULL},
                            {"rtol", &o.rtol, NULL},
                            {"c", &o.c, NULL},
                            {"growth", &o.growth, NULL},
                            {"u-dtype", &o.u_dtype, NULL},
                            {"reason-code", &o.reason_code, NULL},
                            {"reason", &o.reason, NULL},
                            {NULL, NULL, NULL}};
    const char *pos[1];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 1, &npos, &err) < 0 || npos != 1) {
        nvc_error("%s", err ? err : "usage: numvalctl tolerance list|history|set ...");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char path[1024];
    char *op = o.op ? nvc_escape(o.op) : NULL, *dt = o.dtype ? nvc_escape(o.dtype) : NULL;
    int status = NVC_EXIT_ERROR;
    if ((o.op && !op) || (o.dtype && !dt))
        goto out;
    if (!strcmp(pos[0], "list")) {
        snprintf(path, sizeof(path), "/api/v1/tolerances%s%s%s%s", op ? "?op=" : "", op ? op : "",
                 dt ? (op ? "&dtype=" : "?dtype=") : "", dt ? dt : "");
        status = list(c, path);
    } else if (!strcmp(pos[0], "history")) {
        if (!op || !dt) {
            nvc_error("tolerance history needs --op and --dtype");
            goto out;
        }
        snprintf(path, sizeof(path), "/api/v1/tolerances/history?op=%s&dtype=%s", op, dt);
        status = list(c, path);
    } else if (!strcmp(pos[0], "set")) {
        status = set(c, &o);
    } else {
        nvc_error("unknown tolerance command '%s': expected list, history or set", pos[0]);
    }
out:
    free(op);
    free(dt);
    return status;
}

void nvc_tolerance_text(const json_t *tol, char *buf, size_t n)
{
    const char *metric = json_string_value(json_object_get(tol, "metric"));
    const char *src = json_string_value(json_object_get(tol, "source"));
    json_int_t ver = json_integer_value(json_object_get(tol, "version"));
    double a = json_number_value(json_object_get(tol, "max_ulp"));
    int off;
    if (!json_is_object(tol) || !metric)
        off = snprintf(buf, n, "none");
    else if (!strcmp(metric, "ulp"))
        off = snprintf(buf, n, "\u2264 %g ULP", a);
    else if (!strcmp(metric, "allclose"))
        off = snprintf(buf, n, "\u2264 atol %g + rtol %g \u00b7 |ref|",
                       json_number_value(json_object_get(tol, "atol")),
                       json_number_value(json_object_get(tol, "rtol")));
    else if (!strcmp(metric, "bound"))
        off =
            snprintf(buf, n, "bound c %g, growth %s", json_number_value(json_object_get(tol, "c")),
                     json_string_value(json_object_get(tol, "growth"))
                         ? json_string_value(json_object_get(tol, "growth"))
                         : "-");
    else
        off = snprintf(buf, n, "%s", metric);
    if (off < 0 || (size_t)off >= n || !json_is_object(tol))
        return;
    if (ver > 0)
        snprintf(buf + off, n - (size_t)off, " (v%lld)", (long long)ver);
    else if (src)
        snprintf(buf + off, n - (size_t)off, " (%s)", src);
}
