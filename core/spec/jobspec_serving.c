/* Serving job validation (servingspec.h, docs/JOBS.md "Serving jobs"): the
 * decoder's sizes, the check and its own fields, the case axes and the seed,
 * with the limits that bound a case's memory. */
#include "servingspec.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_internal.h"

static const char *const job_keys[] = {"kind",        "decoder",  "check",  "prompt", "context",
                                       "every",       "steps",    "others", "dtypes", "samples",
                                       "seed",        "build",    "name",   "device", "priority",
                                       "description", "requests", "page",   "pages",  "temperature",
                                       "top_k",       "top_p",    "draws",  "weights", NULL};
static const char *const decoder_keys[] = {"vocab", "width",     "heads", "layers",
                                           "ffn",   "rope_base", NULL};
static const char *const check_names[NV_SERVE_CHECK_COUNT] = {
    [NV_SERVE_PREFILL_DECODE] = "prefill_decode",
    [NV_SERVE_LONG_CONTEXT] = "long_context",
    [NV_SERVE_BATCH] = "batch",
    [NV_SERVE_SUSTAINED] = "sustained",
    [NV_SERVE_PAGED] = "paged",
    [NV_SERVE_SAMPLING] = "sampling",
};

const char *nv_serving_check_name(nv_serving_check c)
{
    return c < NV_SERVE_CHECK_COUNT ? check_names[c] : "?";
}

#define SERVING_DOC " (docs/JOBS.md \"Serving jobs\")"

/* "weights": {"safetensors": PATH, "sha256": HEX?}; the file is read on the
 * worker host (worker/kinds/serving/weights.c), never here. */
static int parse_weights(const json_t *spec, nv_servingspec *s, nv_spec_err *e)
{
    static const char *const keys[] = {"safetensors", "sha256", NULL};
    const json_t *w = json_object_get(spec, "weights");
    if (!w)
        return 0;
    if (!json_is_object(w))
        return nv_spec_fail_value(e, "/weights", w,
                                  "must be an object {\"safetensors\": PATH, \"sha256\": HEX?}");
    int r = nv_spec_no_unknown(e, w, keys, "/weights", true,
                               "for \"weights\" (safetensors, sha256)" SERVING_DOC);
    const json_t *p = json_object_get(w, "safetensors");
    const char *path = json_string_value(p);
    if (r == 0 && (!path || !*path || strlen(path) >= NV_SERVING_MAX_PATH))
        return nv_spec_fail_value(e, "/weights/safetensors", p,
                                  "must be the path of a .safetensors file on the worker host");
    if (r)
        return r;
    snprintf(s->weights, sizeof s->weights, "%s", path);
    const json_t *h = json_object_get(w, "sha256");
    const char *x = json_string_value(h);
    bool ok = !h || (x && strlen(x) == 64);
    for (int i = 0; ok && x && i < 64; i++)
        ok = isxdigit((unsigned char)x[i]);
    if (!ok)
        return nv_spec_fail_value(e, "/weights/sha256", h, "must be 64 hex digits (SHA-256)");
    for (int i = 0; x && i < 64; i++)
        s->weights_sha256[i] = (char)tolower((unsigned char)x[i]);
    return 0;
}

static int parse_decoder(const json_t *spec, nv_servingspec *s, nv_spec_err *e)
{
    const json_t *d = json_object_get(spec, "decoder");
    if (!json_is_object(d))
        return nv_spec_fail_value(e, "/decoder", d,
                                  "must be an object with the decoder's sizes (vocab, width, "
                                  "heads, layers, ffn)");
    int r = nv_spec_no_unknown(e, d, decoder_keys, "/decoder", true, "for the decoder" SERVING_DOC);
    r = r ? r : nv_spec_int32(e, d, "/decoder", "vocab", 64, 2, 4096, &s->vocab);
    r = r ? r : nv_spec_int32(e, d, "/decoder", "width", 32, 2, 1024, &s->width);
    r = r ? r : nv_spec_int32(e, d, "/decoder", "heads", 2, 1, 64, &s->heads);
    r = r ? r : nv_spec_int32(e, d, "/decoder", "layers", 2, 1, 16, &s->layers);
    r = r ? r : nv_spec_int32(e, d, "/decoder", "ffn", 64, 1, 4096, &s->ffn);
    r = r ? r : nv_spec_number(e, d, "/decoder", "rope_base", 10000, 2, 1e9, &s->rope_base);
    if (r < 0)
        return r;
    if (s->width % s->heads || (s->width / s->heads) % 2)
        return nv_spec_fail(e, "/decoder/heads",
                            "'%d' heads must divide width %d into even head widths (the rotary "
                            "embedding rotates pairs)",
                            s->heads, s->width);
    return 0;
}

static int parse_others(const json_t *spec, nv_servingspec *s, nv_spec_err *e)
{
    const json_t *a = json_object_get(spec, "others");
    if (!a) {
        static const int dflt[] = {3, 9, 5};
        s->n_others = 3;
        memcpy(s->others, dflt, sizeof dflt);
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > NV_SERVING_MAX_OTHERS)
        return nv_spec_fail_value(e, "/others", a,
                                  "must be an array of 1..8 prompt lengths (the other requests)");
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/others/%zu", i);
        json_int_t n = json_integer_value(v);
        if (!json_is_integer(v) || n < 1 || n > 4096)
            return nv_spec_fail_value(e, ptr, v, "must be an integer in 1..4096");
        s->others[s->n_others++] = (int)n;
    }
    return 0;
}

static int parse_check(const json_t *spec, nv_servingspec *s, nv_spec_err *e)
{
    const char *c = json_string_value(json_object_get(spec, "check"));
    int k = 0;
    while (c && k < NV_SERVE_CHECK_COUNT && strcmp(c, check_names[k]))
        k++;
    if (!c || k == NV_SERVE_CHECK_COUNT)
        return nv_spec_fail_value(e, "/check", json_object_get(spec, "check"),
                                  "must be \"prefill_decode\", \"long_context\", \"batch\", "
                                  "\"sustained\", \"paged\" or \"sampling\"");
    s->check = (nv_serving_check)k;
    int r = nv_spec_int32(e, spec, "", "prompt", 16, 1, 4096, &s->prompt);
    r = r ? r : nv_spec_int32(e, spec, "", "context", 1024, 2, NV_SERVING_MAX_CONTEXT, &s->context);
    r = r ? r : nv_spec_int32(e, spec, "", "every", 64, 1, NV_SERVING_MAX_CONTEXT, &s->every);
    r = r ? r : nv_spec_int32(e, spec, "", "steps", 8, 1, 256, &s->steps);
    r = r ? r : nv_spec_int32(e, spec, "", "requests", 8, 1, NV_SERVING_MAX_REQUESTS, &s->requests);
    r = r ? r : nv_spec_int32(e, spec, "", "page", 4, 1, 4096, &s->page);
    r = r ? r : nv_spec_int32(e, spec, "", "pages", 6, 1, 1 << 20, &s->pages);
    r = r ? r : parse_others(spec, s, e);
    /* the sampling defaults: a temperature below 1, a top-k and a top-p that
     * both cut (docs/SERVING.md "Repeated sampling") */
    r = r ? r : nv_spec_number(e, spec, "", "temperature", 0.7, 0x1p-20, 1e6, &s->temperature);
    r = r ? r : nv_spec_number(e, spec, "", "top_p", 0.9, 0x1p-20, 1, &s->top_p);
    r = r ? r : nv_spec_int32(e, spec, "", "top_k", 40, 0, 4096, &s->top_k);
    r = r ? r : nv_spec_int32(e, spec, "", "draws", 20000, 100, NV_SERVING_MAX_DRAWS, &s->draws);
    if (r < 0)
        return r;
    int64_t need = (s->prompt + s->steps + s->page - 1) / s->page;
    for (int i = 0; i < s->n_others; i++) {
        int64_t q = (s->others[i] + s->steps + s->page - 1) / s->page;
        need = q > need ? q : need;
    }
    if (s->check == NV_SERVE_PAGED && s->pages < need)
        return nv_spec_fail(e, "/pages",
                            "'%d' pages cannot hold the longest request (%lld pages of %d "
                            "positions): it could never run",
                            s->pages, (long long)need, s->page);
    int64_t longest = s->check == NV_SERVE_LONG_CONTEXT ? s->context : s->prompt + s->steps;
    for (int i = 0; (s->check == NV_SERVE_BATCH || s->check == NV_SERVE_PAGED) && i < s->n_others;
         i++)
        if (s->others[i] + s->steps > longest)
            longest = s->others[i] + s->steps;
    int64_t held = (int64_t)s->layers * longest * s->width *
                   (s->check == NV_SERVE_SUSTAINED ? s->requests
                    : s->check == NV_SERVE_PAGED   ? 2 * (1 + s->n_others)
                                                   : 1);
    if (held > NV_SERVING_MAX_CACHE)
        return nv_spec_fail(e, s->check == NV_SERVE_LONG_CONTEXT ? "/context" : "/prompt",
                            "layers x positions x width (x requests) = %lld KV-cache values, "
                            "more than %d",
                            (long long)held, NV_SERVING_MAX_CACHE);
    int64_t pre = s->check == NV_SERVE_LONG_CONTEXT ? 0 : longest;
    if ((int64_t)s->heads * pre * pre > NV_SERVING_MAX_SCORES)
        return nv_spec_fail(e, "/prompt",
                            "heads x prompt^2 = %lld attention scores in one prefill, more than "
                            "%d",
                            (long long)s->heads * pre * pre, NV_SERVING_MAX_SCORES);
    return 0;
}

static int parse_all(const json_t *spec, void *ret, nv_spec_err *e)
{
    nv_servingspec *s = ret;
    if (!json_is_object(spec))
        return nv_spec_fail(e, "", "a job spec must be a JSON object");
    int r = nv_spec_no_unknown(e, spec, job_keys, "", true, "for a serving job" SERVING_DOC);
    r = r ? r : parse_decoder(spec, s, e);
    r = r ? r : parse_weights(spec, s, e);
    r = r ? r : parse_check(spec, s, e);
    r = r ? r : nv_spec_float_dtypes(e, spec, s->dtypes, &s->n_dtypes);
    int64_t samples = 1, seed = 0;
    r = r ? r : nv_spec_int(e, spec, "", "samples", 1, 1, 100, &samples);
    r = r ? r : nv_spec_int(e, spec, "", "seed", 0, 0, INT64_MAX, &seed);
    if (r < 0)
        return r;
    s->samples = (int)samples;
    s->seed = (uint64_t)seed;
    s->n_cases = (int64_t)s->n_dtypes * s->samples;
    if (s->n_cases > NV_SERVING_MAX_CASES)
        return nv_spec_fail(e, "", "the job expands to %lld cases (dtypes x samples), more than %d",
                            (long long)s->n_cases, NV_SERVING_MAX_CASES);
    return 0;
}

int nv_servingspec_parse(const json_t *spec, nv_servingspec **ret, char **ret_pointer,
                         char **ret_msg)
{
    void *s = NULL;
    int r = nv_spec_parse_new(spec, sizeof(nv_servingspec), parse_all, &s, ret_pointer, ret_msg);
    if (r == 0)
        *ret = s;
    return r;
}

int nv_servingspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_servingspec *s = NULL;
    int r = nv_servingspec_parse(spec, &s, ret_pointer, ret_msg);
    free(s);
    return r;
}

void nv_servingspec_case(const nv_servingspec *s, int64_t i, nv_dtype *ret_dt, int *ret_sample)
{
    *ret_sample = (int)(i % s->samples);
    *ret_dt = s->dtypes[i / s->samples];
}
