/* Routes: the permanent suite, retirement, build compare; suite job expansion. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_suite.h"
#include "daemon/store/store_suite.h"
#include "daemon/util/util.h"

void api_suite_list(api_ctx *x)
{
    const char *state = api_query(x, "state");
    if (state && strcmp(state, "active") && strcmp(state, "retired")) {
        api_error(x, 400, "bad_request", NULL, "state '%s' must be 'active' or 'retired'", state);
        return;
    }
    json_t *list = NULL;
    int r = nvd_store_suite_list(x->app->store, state, &list);
    if (r < 0) {
        api_errno(x, r, "suite");
        return;
    }
    api_json(x, 200, json_pack("{so}", "suite", list));
}

void api_suite_get(api_ctx *x, int64_t id)
{
    json_t *c = NULL;
    int r = nvd_store_suite_get(x->app->store, id, &c);
    if (r < 0) {
        if (r == -ENOENT)
            api_error(x, 404, "not_found", NULL, "suite case %lld not found", (long long)id);
        else
            api_errno(x, r, "suite case");
        return;
    }
    api_json(x, 200, json_pack("{so}", "suite_case", c));
}

void api_suite_retire(api_ctx *x, int64_t id)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    const json_t *reason = json_object_get(body, "reason");
    const char *rs = json_string_value(reason);
    size_t n = rs ? strlen(rs) : 0;
    while (n > 0 && (rs[n - 1] == ' ' || rs[n - 1] == '\t' || rs[n - 1] == '\n'))
        n--;
    if (!rs || n == 0 || strlen(rs) > 2000) {
        api_error(x, 400, "bad_request", "/reason",
                  "retiring a suite case needs a non-empty \"reason\" (at most 2000 bytes): "
                  "suite cases are never removed silently");
        json_decref(body);
        return;
    }
    json_t *c = NULL;
    int r = nvd_store_suite_retire(x->app->store, id, rs, x->token_name, nvd_now_ms(), &c);
    json_decref(body);
    if (r == -ENOENT)
        api_error(x, 404, "not_found", NULL, "suite case %lld not found", (long long)id);
    else if (r == -EALREADY)
        api_error(x, 409, "conflict", NULL, "suite case %lld is already retired", (long long)id);
    else if (r < 0)
        api_errno(x, r, "retire");
    else
        api_json(x, 200, json_pack("{so}", "suite_case", c));
}

/* A compare's query, copied for the threadpool (the request may go first). */
typedef struct compare_arg {
    const char *base, *head, *kind, *op; /* into text; kind and op may be NULL */
    bool no_base, no_head;               /* on -ENOENT: which build is missing */
    char text[];
} compare_arg;

/* On a read connection of the threadpool: matching 200,000 cases per build
 * takes seconds, which the loop (and /healthz) must not wait for. */
static int compare_run(nvd_store *s, void *arg, json_t **ret)
{
    compare_arg *a = arg;
    int r = nvd_store_compare(s, a->base, a->head, a->kind, a->op, ret);
    if (r == -ENOENT) {
        /* Name the side that is missing, not both. */
        char *h = NULL;
        a->no_base = nvd_store_build_resolve(s, a->base, &h) == -ENOENT;
        free(h);
        h = NULL;
        a->no_head = nvd_store_build_resolve(s, a->head, &h) == -ENOENT;
        free(h);
    }
    return r;
}

static void compare_err(api_ctx *x, int r, void *arg)
{
    const compare_arg *a = arg;
    if (r == -E2BIG)
        api_error(x, 413, "too_large", NULL,
                  "a build has more than %d cases to compare; narrow it with ?kind= "
                  "(op, gradient, fused) or ?op=",
                  NVD_COMPARE_MAX_CASES);
    else if (r == -ENOENT && a->no_base && a->no_head)
        api_error(x, 404, "not_found", "/base",
                  "no build '%s' and no build '%s' (a build hash, name or version; see GET "
                  "/api/v1/builds)",
                  a->base, a->head);
    else if (r == -ENOENT)
        api_error(x, 404, "not_found", a->no_base ? "/base" : "/head",
                  "no build '%s' (a build hash, name or version; see GET /api/v1/builds)",
                  a->no_base ? a->base : a->head);
    else
        api_errno(x, r, "compare");
}

static const char *copy_in(char **p, const char *s)
{
    if (!s)
        return NULL;
    char *out = strcpy(*p, s);
    *p += strlen(s) + 1;
    return out;
}

void api_compare(api_ctx *x)
{
    const char *base = api_query(x, "base"), *head = api_query(x, "head");
    if (!base || !head || !*base || !*head) {
        api_error(x, 400, "bad_request", base && *base ? "/head" : "/base",
                  "compare needs ?base=BUILD&head=BUILD (a build hash, name or version)");
        return;
    }
    const char *kind = api_query(x, "kind"), *op = api_query(x, "op");
    if (kind && strcmp(kind, "op") && strcmp(kind, "gradient") && strcmp(kind, "fused") &&
        strcmp(kind, "contract")) {
        api_error(x, 400, "bad_request", "/kind",
                  "kind '%s' is not op, gradient, fused or contract", kind);
        return;
    }
    if (kind && !*kind)
        kind = NULL;
    if (op && !*op)
        op = NULL;
    size_t n = strlen(base) + strlen(head) + (kind ? strlen(kind) : 0) + (op ? strlen(op) : 0) + 4;
    compare_arg *a = calloc(1, sizeof(*a) + n);
    if (!a) {
        api_errno(x, -ENOMEM, "compare");
        return;
    }
    char *p = a->text;
    a->base = copy_in(&p, base);
    a->head = copy_in(&p, head);
    a->kind = copy_in(&p, kind);
    a->op = copy_in(&p, op);
    api_read_run_err(x, compare_run, a, "compare", compare_err);
}

bool api_suite_is(const json_t *body)
{
    const char *k = json_string_value(json_object_get(body, "kind"));
    return k && !strcmp(k, "suite");
}

static int filter_fields(api_ctx *x, const json_t *f, const char **kind, const char **op,
                         const char **dtype, const json_t **ids)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)f, key, v)
    {
        if (!strcmp(key, "op") || !strcmp(key, "dtype") || !strcmp(key, "kind")) {
            if (!json_is_string(v)) {
                char ptr[32];
                snprintf(ptr, sizeof ptr, "/filter/%s", key);
                api_error(x, 400, "bad_request", ptr, "\"%s\" must be a string", key);
                return -1;
            }
            *(!strcmp(key, "op") ? op : !strcmp(key, "kind") ? kind : dtype) = json_string_value(v);
        } else if (!strcmp(key, "ids")) {
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) if (!json_is_integer(e)) break;
            if (!json_is_array(v) || i < json_array_size(v)) {
                api_error(x, 400, "bad_request", "/filter/ids",
                          "\"ids\" must be an array of suite case ids");
                return -1;
            }
            *ids = v;
        } else {
            api_error(x, 400, "bad_request", "/filter",
                      "unknown filter key '%s' (kind, op, dtype, ids)", key);
            return -1;
        }
    }
    return 0;
}

int api_suite_expand(api_ctx *x, json_t *body)
{
    static const char *const allowed[] = {"kind",  "filter", "device", "priority",
                                          "build", "name",   NULL};
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int k = 0;
        while (allowed[k] && strcmp(allowed[k], key))
            k++;
        if (!allowed[k]) {
            api_error(x, 400, "bad_request", "",
                      "unknown key '%s' in a suite job (kind, filter, "
                      "device, priority, build, name)",
                      key);
            return -1;
        }
    }
    const json_t *f = json_object_get(body, "filter");
    const char *kind = NULL, *op = NULL, *dtype = NULL;
    const json_t *ids = NULL;
    if (f && !json_is_object(f)) {
        api_error(x, 400, "bad_request", "/filter", "\"filter\" must be an object");
        return -1;
    }
    if (f && filter_fields(x, f, &kind, &op, &dtype, &ids) < 0)
        return -1;
    json_t *cases = NULL;
    int r = nvd_store_suite_active(x->app->store, kind, op, dtype, ids, &cases);
    if (r < 0) {
        api_errno(x, r, "suite");
        return -1;
    }
    if (json_array_size(cases) == 0) {
        json_decref(cases);
        api_error(x, 400, "bad_request", "/filter", "no active suite case matches the filter");
        return -1;
    }
    json_object_set_new(body, "cases", cases);
    return 0;
}
