/* The minimized reproducer as an artifact (minimize.h, docs/ARTIFACTS.md
 * "Minimized reproducers"). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minimize.h"

#define MAX_LISTED 64

static json_t *shape_json(const nv_tensor *t)
{
    json_t *a = json_array();
    for (int d = 0; a && d < t->ndim; d++)
        if (json_array_append_new(a, json_integer(t->shape[d])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *num(double x)
{
    if (isnan(x))
        return json_string("nan");
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

/* The elements not at their neutral value, with multi-indices (at most 64). */
static json_t *nonneutral_list(const nvw_repro *rc, const nvw_min_result *m)
{
    json_t *list = json_array();
    if (!list)
        return NULL;
    for (int i = 0; i < m->n_in; i++) {
        double nv = nvw_neutral_value(rc, i);
        if (isnan(nv))
            continue;
        const nv_tensor *t = m->in[i];
        for (int64_t k = 0; k < t->numel && json_array_size(list) < MAX_LISTED; k++) {
            double v = t->data[k];
            if (v == nv && (v != 0 || signbit(v) == signbit(nv)))
                continue;
            json_t *idx = json_array();
            int64_t rest = k;
            int64_t ix[NV_MAX_DIMS];
            for (int d = t->ndim - 1; d >= 0; d--) {
                ix[d] = rest % t->shape[d];
                rest /= t->shape[d];
            }
            for (int d = 0; idx && d < t->ndim; d++)
                json_array_append_new(idx, json_integer(ix[d]));
            json_t *e = json_pack("{si so* so*}", "input", i, "index", idx, "value", num(v));
            if (!e || json_array_append_new(list, e) < 0) {
                json_decref(list);
                return NULL;
            }
        }
    }
    return list;
}

static json_t *minimized_json(const nvw_repro *rc, const nvw_min_result *m)
{
    json_t *neutral = json_array();
    for (int i = 0; neutral && i < m->n_in; i++) {
        double nv = nvw_neutral_value(rc, i);
        json_array_append_new(neutral, isnan(nv) ? json_null() : num(nv));
    }
    return json_pack("{ss si sf ss sI sI sI sI sb so* so*}", "method",
                     "window bisection + ddmin of non-neutral elements + value simplification",
                     "probes", m->probes, "seconds", m->seconds, "stop", m->stop, "elements_before",
                     (json_int_t)m->numel_before, "elements_after", (json_int_t)m->numel_after,
                     "non_neutral_before", (json_int_t)m->nonneutral_before, "non_neutral_after",
                     (json_int_t)m->nonneutral_after, "verified", m->verified, "neutral_values",
                     neutral, "non_neutral", nonneutral_list(rc, m));
}

static int build_manifest(const nvw_repro *rc, const nvw_min_result *m, json_t **ret)
{
    json_t *man = json_deep_copy(rc->manifest);
    json_t *shapes = json_array();
    json_t *names = json_array();
    if (!man || !shapes || !names)
        goto fail;
    for (int i = 0; i < m->n_in; i++) {
        char name[32];
        snprintf(name, sizeof name, "input:%d", i);
        if (json_array_append_new(shapes, shape_json(m->in[i])) < 0 ||
            json_array_append_new(names, json_string(name)) < 0)
            goto fail;
    }
    json_array_append_new(names, json_string("output:0"));
    const char *cls = m->last.cls;
    json_t *sig = nvw_repro_signature(rc, cls);
    int r = json_object_set_new(man, "shape", shape_json(m->in[0])) |
            json_object_set_new(man, "input_shapes", shapes) |
            json_object_set_new(man, "tensors", names) |
            json_object_set_new(man, "failure_class", json_string(cls)) |
            json_object_set_new(man, "max_ulp", num(m->last.max_ulp)) |
            json_object_set_new(man, "mismatches", json_integer(m->last.mismatches)) |
            json_object_set_new(man, "signature", sig) |
            json_object_set_new(man, "repro_rate",
                                json_pack("{si si si}", "runs", m->gate_runs, "failed",
                                          m->gate_failed, "bit_identical", m->gate_bits)) |
            json_object_set_new(man, "minimized", minimized_json(rc, m));
    shapes = names = NULL;
    json_object_del(man, "first_mismatches"); /* they index the original inputs */
    if (rc->sha[0])
        r |= json_object_set_new(man, "minimized_from", json_string(rc->sha));
    if (r)
        goto fail;
    *ret = man;
    return 0;
fail:
    json_decref(man);
    json_decref(shapes);
    json_decref(names);
    return -ENOMEM;
}

static int add_input(nv_artifact *a, const char *name, const nv_tensor *t)
{
    nv_tensor_view v;
    int r = nvw_view_from_tensor(t, &v);
    if (r < 0)
        return r;
    size_t n = (size_t)t->numel * nv_artifact_dtype_size((int32_t)t->dtype);
    r = nv_artifact_add_tensor(a, name, (int32_t)t->dtype, t->ndim, t->shape, n ? v.data : NULL, n);
    nvw_view_free(&v);
    return r;
}

int nvw_minimized_artifact(const nvw_repro *rc, const nvw_min_result *m, uint8_t **ret_buf,
                           size_t *ret_len, char sha[65])
{
    if (!m->last.out_bytes)
        return -EINVAL; /* the final probe produced no output: nothing to store */
    nv_artifact *a = nv_artifact_new();
    json_t *man = NULL;
    int r = a ? build_manifest(rc, m, &man) : -ENOMEM;
    if (r == 0)
        r = nv_artifact_set_manifest(a, man);
    for (int i = 0; r == 0 && i < m->n_in; i++) {
        char name[32];
        snprintf(name, sizeof name, "input:%d", i);
        r = add_input(a, name, m->in[i]);
    }
    if (r == 0)
        r = nv_artifact_add_tensor(a, "output:0", m->last.out_dtype, m->last.out_ndim,
                                   m->last.out_shape, m->last.out_bytes, m->last.out_nbytes);
    if (r == 0)
        r = nv_artifact_encode(a, 0, ret_buf, ret_len, sha);
    json_decref(man);
    nv_artifact_free(a);
    return r;
}
