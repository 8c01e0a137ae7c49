/* A model job's "weights" field (docs/JOBS.md "Model jobs", docs/MODEL.md
 * "Checkpoints"): the checkpoint path, its optional sha256, and the tensor
 * each weight is read from. Only the field is checked here (numvald runs
 * this too and never opens the file: the path is one on the worker host);
 * the file itself is read and matched by the worker (worker/kinds/model/). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static const char *const weights_keys[] = {"safetensors", "sha256", "names", NULL};

bool nv_model_input_is_weight(const nv_model_input *mi)
{
    return mi->is_param &&
           (mi->init == NV_MINIT_NORMAL || mi->init == NV_MINIT_UNIFORM ||
            mi->init == NV_MINIT_VALUE);
}

/* Whether name matches pattern: '*' stands for one run of decimal digits (a
 * repeated block's instance); *digits gets that run. */
static bool match(const char *pat, const char *name, char *digits, size_t len)
{
    const char *star = strchr(pat, '*');
    if (!star)
        return !strcmp(pat, name);
    size_t pre = (size_t)(star - pat), post = strlen(star + 1), n = strlen(name);
    if (n < pre + post + 1 || strncmp(pat, name, pre) || strcmp(name + n - post, star + 1))
        return false;
    size_t k = n - pre - post;
    if (k >= len)
        return false;
    for (size_t i = 0; i < k; i++)
        if (!isdigit((unsigned char)name[pre + i]))
            return false;
    memcpy(digits, name + pre, k);
    digits[k] = 0;
    return true;
}

static int stars(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '*';
    return n;
}

/* The tensor name of weight `name` under the map: an exact key first, then
 * the first pattern key that matches; the parameter's own name otherwise. */
static int tensor_of(const json_t *names, const char *name, char **ret, json_t *used)
{
    const json_t *v = json_object_get(names, name);
    const char *key = name, *val = json_string_value(v);
    char digits[32] = "";
    if (!v) {
        const char *k;
        const json_t *kv;
        json_object_foreach((json_t *)names, k, kv)
        {
            if (stars(k) == 1 && match(k, name, digits, sizeof digits)) {
                key = k;
                val = json_string_value(kv);
                break;
            }
        }
    }
    if (!val) {
        *ret = strdup(name);
        return *ret ? 0 : -ENOMEM;
    }
    if (json_object_set_new(used, key, json_true()))
        return -ENOMEM;
    const char *star = strchr(val, '*');
    size_t n = strlen(val) + strlen(digits) + 1;
    char *out = malloc(n);
    if (!out)
        return -ENOMEM;
    if (star)
        snprintf(out, n, "%.*s%s%s", (int)(star - val), val, digits, star + 1);
    else
        snprintf(out, n, "%s", val);
    *ret = out;
    return 0;
}

/* The "names" map: an object of strings; a key with one '*' needs a value
 * with one '*' (the instance digits carried over), and nothing else has any. */
static int check_names(const json_t *names, nv_spec_err *e)
{
    if (!json_is_object(names))
        return nv_spec_fail_value(e, "/weights/names", names,
                                  "must be an object {PARAMETER: TENSOR} ('*' for a repeated "
                                  "block's instance number, e.g. \"hidden.*.w\": \"layers.*.w\")");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)names, k, v)
    {
        char ptr[NV_MODEL_PTR_LEN];
        nv_spec_pointer(ptr, sizeof ptr, "/weights/names", k);
        const char *s = json_string_value(v);
        if (!s || !*s || strlen(s) > 255)
            return nv_spec_fail_value(e, ptr, v, "must be a tensor name (1..255 bytes)");
        if (stars(k) > 1 || stars(s) != stars(k))
            return nv_spec_fail(e, ptr,
                                "'%s' -> '%s': a pattern has one '*' on both sides (the "
                                "instance number of a repeated block), a plain name none",
                                k, s);
    }
    return 0;
}

static int parse_sha(const json_t *w, nv_modelspec *s, nv_spec_err *e)
{
    const json_t *h = json_object_get(w, "sha256");
    if (!h)
        return 0;
    const char *x = json_string_value(h);
    bool ok = x && strlen(x) == 64;
    for (int i = 0; ok && i < 64; i++)
        ok = isxdigit((unsigned char)x[i]);
    if (!ok)
        return nv_spec_fail_value(e, "/weights/sha256", h, "must be 64 hex digits (SHA-256)");
    for (int i = 0; i < 64; i++)
        s->weights.sha256[i] = (char)tolower((unsigned char)x[i]);
    s->weights.sha256[64] = 0;
    return 0;
}

static int parse_map(const json_t *w, nv_modelspec *s, nv_spec_err *e)
{
    const json_t *names = json_object_get(w, "names");
    int r = names ? check_names(names, e) : 0;
    json_t *used = json_object();
    if (!used)
        return -ENOMEM;
    const nv_graph *g = s->graph;
    for (int i = 0; r == 0 && i < g->n_inputs; i++)
        if (nv_model_input_is_weight(&s->inputs[i]))
            r = tensor_of(names, g->inputs[i].name, &s->weights.tensor[i], used);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)names, k, v)
    {
        if (r < 0 || json_object_get(used, k))
            continue;
        char ptr[NV_MODEL_PTR_LEN];
        nv_spec_pointer(ptr, sizeof ptr, "/weights/names", k);
        r = nv_spec_fail(e, ptr,
                         "'%s' names no weight of the model (weights are parameters with a "
                         "\"dist\" or \"value\" init, by their expanded names such as "
                         "\"hidden.0.w\")",
                         k);
    }
    json_decref(used);
    return r;
}

int nv_model_weights_parse(const json_t *spec, nv_modelspec *s, nv_spec_err *e)
{
    const json_t *w = json_object_get(spec, "weights");
    if (!w) /* the tensor names still: what export-weights writes */
        return parse_map(NULL, s, e);
    if (!json_is_object(w))
        return nv_spec_fail_value(e, "/weights", w,
                                  "must be an object {\"safetensors\": PATH, \"sha256\": HEX?, "
                                  "\"names\": {...}?}");
    const char *k = nv_spec_unknown_key(w, weights_keys);
    if (k) {
        char ptr[NV_MODEL_PTR_LEN];
        nv_spec_pointer(ptr, sizeof ptr, "/weights", k);
        return nv_spec_fail(e, ptr, "unknown key '%s' in \"weights\" (safetensors, sha256, names)",
                            k);
    }
    const json_t *p = json_object_get(w, "safetensors");
    const char *path = json_string_value(p);
    if (!path || !*path || strlen(path) >= NV_MODEL_MAX_PATH)
        return nv_spec_fail_value(e, "/weights/safetensors", p,
                                  "must be the path of a .safetensors file on the worker host");
    if (!(s->weights.path = strdup(path)))
        return -ENOMEM;
    int r = parse_sha(w, s, e);
    return r ? r : parse_map(w, s, e);
}

void nv_model_weights_free(nv_model_weights *w)
{
    free(w->path);
    for (int i = 0; i < NV_GRAPH_MAX_INPUTS; i++)
        free(w->tensor[i]);
}
