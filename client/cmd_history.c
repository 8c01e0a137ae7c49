/* numvalctl history and flaky: a test's verdict and error across builds
 * (GET /api/v1/history) and the cases the agent's gate found flaky
 * (GET /api/v1/flaky). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

static int fetch(const nvc_conn *c, const char *path, json_t **ret)
{
    char *err = NULL;
    if (nvc_api(c, "GET", path, NULL, ret, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return -1;
    }
    return 0;
}

/* Append "&key=value" (escaped) when value is set. */
static void query(char *buf, size_t n, const char *key, const char *value)
{
    char *e = value ? nvc_escape(value) : NULL;
    if (!e)
        return;
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%c%s=%s", strchr(buf, '?') ? '&' : '?', key, e);
    free(e);
}

int nvc_cmd_history(nvc_conn *c, int argc, char **argv)
{
    const char *op = NULL, *dtype = NULL, *kind = NULL, *shape = NULL, *layout = NULL,
               *input = NULL, *device = NULL, *limit = NULL;
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),      {"op", &op, NULL},
                            {"dtype", &dtype, NULL}, {"kind", &kind, NULL},
                            {"shape", &shape, NULL}, {"layout", &layout, NULL},
                            {"input", &input, NULL}, {"device", &device, NULL},
                            {"limit", &limit, NULL}, {NULL, NULL, NULL}};
    char *err = NULL;
    int npos = 0;
    if (nvc_parse(argc, argv, opts, NULL, 0, &npos, &err) < 0 || !op || !dtype) {
        nvc_error("%s",
                  err ? err
                      : "usage: numvalctl history --op OP --dtype DT [--kind op|gradient|fused] "
                        "[--shape JSON] [--layout L] [--input CLASS] [--device D] [--limit N]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char path[2048] = "/api/v1/history";
    query(path, sizeof path, "op", op);
    query(path, sizeof path, "dtype", dtype);
    query(path, sizeof path, "kind", kind);
    query(path, sizeof path, "shape", shape);
    query(path, sizeof path, "layout", layout);
    query(path, sizeof path, "input", input);
    query(path, sizeof path, "device", device);
    query(path, sizeof path, "limit", limit);
    json_t *r = NULL;
    if (fetch(c, path, &r) < 0)
        return NVC_EXIT_ERROR;
    if (c->json) {
        nvc_print_json(r);
        json_decref(r);
        return NVC_EXIT_OK;
    }
    /* One line per build, oldest first; the error metric of gradient cases is
     * the device check's headroom (<= 1 passes). */
    bool grad = kind && !strcmp(kind, "gradient");
    const char *h[] = {"BUILD", "VERDICT", grad ? "HEADROOM" : "MAX_ULP",
                       "CASES", "FAILED",  "TOLERANCE",
                       "CASE",  "JOB"};
    nvc_table *t = nvc_table_new(8, h);
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(r, "points"), i, p)
    {
        const json_t *id = json_object_get(p, "identity");
        const char *name = json_string_value(json_object_get(id, "name"));
        const char *ver = json_string_value(json_object_get(id, "version"));
        const char *bid = json_string_value(json_object_get(p, "build_id"));
        char build[300], tol[200];
        if (name || ver)
            snprintf(build, sizeof build, "%s%s%s", name ? name : "", name && ver ? " " : "",
                     ver ? ver : "");
        else
            snprintf(build, sizeof build, "%.12s", bid ? bid : "-");
        nvc_tolerance_text(json_object_get(p, "tolerance"), tol, sizeof tol);
        char *cells[8] = {strdup(build),
                          nvc_json_text(json_object_get(p, "verdict")),
                          nvc_json_text(json_object_get(p, grad ? "headroom" : "max_ulp")),
                          nvc_json_text(json_object_get(p, "cases")),
                          nvc_json_text(json_object_get(p, "failed")),
                          strdup(tol),
                          nvc_json_text(json_object_get(p, "case_id")),
                          nvc_json_text(json_object_get(p, "job_id"))};
        if (t)
            nvc_table_add(t, (const char *const *)cells);
        for (int k = 0; k < 8; k++)
            free(cells[k]);
    }
    if (t)
        nvc_table_print(t, stdout);
    nvc_table_free(t);
    if (json_array_size(json_object_get(r, "points")) == 0)
        fprintf(stderr, "numvalctl: no build has a case of %s %s matching the filters\n", op,
                dtype);
    if (json_is_true(json_object_get(r, "truncated")))
        fprintf(stderr, "numvalctl: the history was cut short (too many cases to read); narrow "
                        "it with --shape, --input, --layout or --device\n");
    json_decref(r);
    return NVC_EXIT_OK;
}

int nvc_cmd_flaky(nvc_conn *c, int argc, char **argv)
{
    const char *limit = NULL;
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {"limit", &limit, NULL}, {NULL, NULL, NULL}};
    char *err = NULL;
    int npos = 0;
    if (nvc_parse(argc, argv, opts, NULL, 0, &npos, &err) < 0) {
        nvc_error("%s", err ? err : "usage: numvalctl flaky [--limit N]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char path[256] = "/api/v1/flaky";
    query(path, sizeof path, "limit", limit);
    json_t *r = NULL;
    if (fetch(c, path, &r) < 0)
        return NVC_EXIT_ERROR;
    if (c->json) {
        nvc_print_json(r);
        json_decref(r);
        return NVC_EXIT_OK;
    }
    const char *h[] = {"CASE",   "JOB",    "OP",     "DTYPE", "SHAPE",         "INPUT",
                       "LAYOUT", "DEVICE", "FAILED", "RATE",  "BIT_IDENTICAL", "CREATED"};
    nvc_table *t = nvc_table_new(12, h);
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(r, "flaky"), i, e)
    {
        const json_t *rr = json_object_get(e, "repro_rate");
        char failed[64];
        snprintf(failed, sizeof failed, "%lld/%lld",
                 (long long)json_integer_value(json_object_get(rr, "failed")),
                 (long long)json_integer_value(json_object_get(rr, "runs")));
        char *cells[12] = {nvc_json_text(json_object_get(e, "case_id")),
                           nvc_json_text(json_object_get(e, "job_id")),
                           nvc_json_text(json_object_get(e, "op")),
                           nvc_json_text(json_object_get(e, "dtype")),
                           nvc_json_text(json_object_get(e, "shape")),
                           nvc_json_text(json_object_get(e, "input")),
                           nvc_json_text(json_object_get(e, "layout")),
                           nvc_json_text(json_object_get(e, "device")),
                           strdup(failed),
                           nvc_json_text(json_object_get(e, "rate")),
                           nvc_json_text(json_object_get(rr, "bit_identical")),
                           nvc_json_text(json_object_get(e, "created_at"))};
        if (t)
            nvc_table_add(t, (const char *const *)cells);
        for (int k = 0; k < 12; k++)
            free(cells[k]);
    }
    if (t)
        nvc_table_print(t, stdout);
    nvc_table_free(t);
    json_decref(r);
    return NVC_EXIT_OK;
}
