/* numvalctl contract DEVICE [--build B]: the measured contract of a device
 * beside the declared one, from its newest finished contract job
 * (GET /api/v1/devices/{name}/contract; docs/CONTRACT.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

/* The measured.contract key a judged field ("contract.DTYPE.NAME") speaks
 * about: the judgement names some fields after describe()'s vocabulary. */
static const char *measured_key(const char *name)
{
    static const char *const alias[][2] = {
        {"matmul_accumulator", "matmul_accumulation"},
        {"reduction_order(matmul)", "matmul_reduction_order"},
        {"deterministic(sum)", "deterministic"},
        {"deterministic(matmul)", "matmul_deterministic"},
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(name, alias[i][0]))
            return alias[i][1];
    return name;
}

/* The entry of list (judged or mismatches) about dt's measured key, or NULL. */
static const json_t *entry_for(const json_t *list, const char *dt, const char *key)
{
    size_t i;
    const json_t *e;
    size_t l = strlen(dt);
    json_array_foreach(list, i, e)
    {
        const char *f = json_string_value(json_object_get(e, "field"));
        if (f && !strncmp(f, "contract.", 9) && !strncmp(f + 9, dt, l) && f[9 + l] == '.' &&
            !strcmp(measured_key(f + 10 + l), key))
            return e;
    }
    return NULL;
}

static void add_row(nvc_table *t, const char *dt, const char *key, const json_t *mv,
                    const json_t *resp)
{
    const json_t *j = entry_for(json_object_get(resp, "judged"), dt, key);
    const json_t *m = entry_for(json_object_get(resp, "mismatches"), dt, key);
    if (!j)
        j = m;
    char *meas = nvc_json_text(mv);
    char *decl = nvc_json_text(j ? json_object_get(j, "declared") : NULL);
    const char *cells[5] = {dt, key, decl, meas, m ? "MISMATCH" : j ? "agrees" : "not judged"};
    if (t && meas && decl)
        nvc_table_add(t, cells);
    free(meas);
    free(decl);
}

int nvc_cmd_contract(nvc_conn *c, int argc, char **argv)
{
    const char *build = NULL, *pos[1] = {NULL};
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {"build", &build, NULL}, {NULL, NULL, NULL}};
    char *err = NULL;
    int npos = 0;
    if (nvc_parse(argc, argv, opts, pos, 1, &npos, &err) < 0 || npos != 1) {
        nvc_error("%s", err ? err : "usage: numvalctl contract DEVICE [--build B] [--json]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char *dev = nvc_escape(pos[0]), *b = build ? nvc_escape(build) : NULL;
    char path[1024];
    if (!dev || (build && !b)) {
        free(dev);
        free(b);
        nvc_error("out of memory");
        return NVC_EXIT_ERROR;
    }
    snprintf(path, sizeof path, "/api/v1/devices/%s/contract%s%s", dev, b ? "?build=" : "",
             b ? b : "");
    free(dev);
    free(b);
    json_t *resp = NULL;
    if (nvc_api(c, "GET", path, NULL, &resp, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json) {
        nvc_print_json(resp);
        json_decref(resp);
        return NVC_EXIT_OK;
    }
    char id[32];
    const char *bid = json_string_value(json_object_get(resp, "build_id"));
    printf("device %s: contract job %s (%s), build %.12s, finished %s; %zu of %zu judged fields "
           "contradict describe()\n",
           json_string_value(json_object_get(resp, "device")),
           nvc_id_text(json_object_get(resp, "job_id"), id),
           json_string_value(json_object_get(resp, "state")), bid ? bid : "-",
           json_string_value(json_object_get(resp, "finished_at")),
           json_array_size(json_object_get(resp, "mismatches")),
           json_array_size(json_object_get(resp, "judged")));
    const char *h[] = {"DTYPE", "FIELD", "DECLARED", "MEASURED", "VERDICT"};
    nvc_table *t = nvc_table_new(5, h);
    const char *dt, *key;
    const json_t *fields, *mv;
    json_object_foreach(json_object_get(resp, "measured"), dt, fields)
    {
        json_object_foreach((json_t *)fields, key, mv)
        {
            /* transcendental_error {"kind", "max_ulp"}: one row each */
            if (json_is_object(mv)) {
                const char *sub;
                const json_t *sv;
                json_object_foreach((json_t *)mv, sub, sv)
                {
                    char k[128];
                    snprintf(k, sizeof k, "%s.%s", key, sub);
                    add_row(t, dt, k, sv, resp);
                }
            } else {
                add_row(t, dt, key, mv, resp);
            }
        }
    }
    if (t)
        nvc_table_print(t, stdout);
    nvc_table_free(t);
    json_decref(resp);
    return NVC_EXIT_OK;
}
