/* Routes: a test's history across builds and the flaky cases (docs/API.md
 * "History", "Flaky cases"), both read on the threadpool (api_read.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_history.h"
#include "daemon/store/store_history.h"

/* The filter's strings, copied: the request's arena may go while the read runs. */
typedef struct history_arg {
    char op[136], dtype[32], kind[16], shape[512], layout[32], input[32], device[136];
    int limit;
    json_t *key; /* the answer's "key" (owned; freed by run) */
} history_arg;

static const char *opt(const char *s)
{
    return s[0] ? s : NULL;
}

static int history_run(nvd_store *s, void *arg, json_t **ret)
{
    history_arg *a = arg;
    nvd_history_filter f = {.op = a->op,
                            .dtype = a->dtype,
                            .kind = opt(a->kind),
                            .shape = opt(a->shape),
                            .layout = opt(a->layout),
                            .input = opt(a->input),
                            .device = opt(a->device),
                            .limit = a->limit};
    json_t *points = NULL;
    bool truncated = false;
    int r = nvd_store_history(s, &f, &points, &truncated);
    json_t *key = a->key;
    a->key = NULL;
    if (r < 0) {
        json_decref(key);
        return r;
    }
    *ret = json_pack("{so so sb}", "key", key, "points", points, "truncated", truncated);
    return *ret ? 0 : -ENOMEM;
}

/* Copy query parameter name into buf (n bytes) and key; 0, or -1 after a 400. */
static int param(api_ctx *x, const char *name, char *buf, size_t n, json_t *key, bool required)
{
    const char *v = api_query(x, name);
    buf[0] = '\0';
    if (!v) {
        if (required)
            api_error(x, 400, "bad_request", name,
                      "history needs ?%s= (GET /api/v1/history?op=OP&dtype=DTYPE)", name);
        return required ? -1 : 0;
    }
    if (strlen(v) >= n) {
        api_error(x, 400, "bad_request", name, "'%s' is longer than %zu bytes", name, n - 1);
        return -1;
    }
    snprintf(buf, n, "%s", v);
    json_object_set_new(key, name, json_string(v));
    return 0;
}

/* ?shape=[64,257]: a JSON array of sizes, kept as compact JSON. */
static int shape_param(api_ctx *x, history_arg *a, json_t *key)
{
    const char *v = api_query(x, "shape");
    if (!v)
        return 0;
    json_t *sh = json_loads(v, 0, NULL);
    size_t i;
    json_t *d;
    bool ok = json_is_array(sh);
    json_array_foreach(sh, i, d) ok = ok && json_is_integer(d) && json_integer_value(d) >= 0;
    char *text = ok ? json_dumps(sh, JSON_COMPACT) : NULL;
    if (!text || strlen(text) >= sizeof a->shape) {
        api_error(x, 400, "bad_request", "shape",
                  "shape '%s' must be a JSON array of sizes, e.g. [64,257]", v);
        free(text);
        json_decref(sh);
        return -1;
    }
    snprintf(a->shape, sizeof a->shape, "%s", text);
    free(text);
    json_object_set_new(key, "shape", sh);
    return 0;
}

void api_history(api_ctx *x)
{
    history_arg *a = calloc(1, sizeof *a);
    json_t *key = json_object();
    if (!a || !key) {
        free(a);
        json_decref(key);
        api_errno(x, -ENOMEM, "history");
        return;
    }
    int limit = -1;
    if (param(x, "op", a->op, sizeof a->op, key, true) < 0 ||
        param(x, "dtype", a->dtype, sizeof a->dtype, key, true) < 0 ||
        param(x, "kind", a->kind, sizeof a->kind, key, false) < 0 || shape_param(x, a, key) < 0 ||
        param(x, "layout", a->layout, sizeof a->layout, key, false) < 0 ||
        param(x, "input", a->input, sizeof a->input, key, false) < 0 ||
        param(x, "device", a->device, sizeof a->device, key, false) < 0)
        goto fail;
    if (a->kind[0] && strcmp(a->kind, "op") && strcmp(a->kind, "gradient") &&
        strcmp(a->kind, "fused")) {
        api_error(x, 400, "bad_request", "kind", "kind '%s' is not op, gradient or fused", a->kind);
        goto fail;
    }
    if ((limit = api_limit(x, 20, NVD_HISTORY_MAX_BUILDS)) < 0)
        goto fail;
    a->limit = limit;
    a->key = key;
    api_read_run(x, history_run, a, "history");
    return;
fail:
    json_decref(key);
    free(a);
}

typedef struct flaky_arg {
    int limit;
} flaky_arg;

static int flaky_run(nvd_store *s, void *arg, json_t **ret)
{
    const flaky_arg *a = arg;
    json_t *list = NULL;
    int r = nvd_store_flaky(s, a->limit, &list);
    if (r < 0)
        return r;
    *ret = json_pack("{so}", "flaky", list);
    return *ret ? 0 : -ENOMEM;
}

void api_flaky(api_ctx *x)
{
    int limit = api_limit(x, 100, NVD_FLAKY_MAX);
    if (limit < 0)
        return;
    flaky_arg *a = calloc(1, sizeof *a);
    if (!a) {
        api_errno(x, -ENOMEM, "flaky cases");
        return;
    }
    a->limit = limit;
    api_read_run(x, flaky_run, a, "flaky cases");
}
