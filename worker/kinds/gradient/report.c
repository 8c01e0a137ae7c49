/* The failure artifact material of a gradient case (worker/kinds/gradient/gradient_internal.h,
 * docs/ARTIFACTS.md "Gradient reproducers"): a manifest with everything the
 * case needs to run again without random data (job spec, case, seed, dtype,
 * gradient mode, the tolerance each gradient was judged by with its reason,
 * failure class, the failing check, first mismatching values), and the exact
 * inputs, the output gradient, the device's forward output and gradients. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "gradient_internal.h"

json_t *nvw_grad_shape_json(const nv_tensor *t)
{
    json_t *a = json_array();
    for (int d = 0; a && d < t->ndim; d++)
        json_array_append_new(a, json_integer(t->shape[d]));
    return a;
}

static json_t *field(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v ? v : json_null();
}

/* Per differentiable input: its device tolerance and first mismatches. */
static int per_input(const gjob *j, const json_t *cj, json_t *m)
{
    const nv_op_def *op = j->g->base->op;
    const json_t *dev = json_object_get(json_object_get(cj, "checks"), "device");
    json_t *tol = json_object(), *first = json_object(), *names = json_array();
    int e = !tol || !first || !names;
    for (int i = 0; !e && i < op->n_inputs; i++) {
        if (!nv_op_grad_input(op, i))
            continue;
        const json_t *o = json_object_get(dev, op->inputs[i].name);
        e |= json_array_append_new(names, json_string(op->inputs[i].name));
        if (json_object_get(o, "tolerance"))
            e |= json_object_set(tol, op->inputs[i].name, json_object_get(o, "tolerance"));
        if (json_object_get(o, "first_mismatches"))
            e |= json_object_set(first, op->inputs[i].name, json_object_get(o, "first_mismatches"));
    }
    e |= json_object_set_new(m, "tolerance", tol);
    e |= json_object_set_new(m, "first_mismatches", first);
    e |= json_object_set_new(m, "grad_inputs", names);
    return e ? -ENOMEM : 0;
}

static json_t *manifest(const gjob *j, const json_t *cj, const nvw_grad_material *mt)
{
    const json_t *spec = j->b.spec_json, *d = j->b.describe;
    json_t *empty = json_object();
    json_t *attrs = json_object_get(spec, "attrs");
    json_t *build = json_object_get(spec, "build");
    json_t *det = json_object_get(json_object_get(cj, "checks"), "determinism");
    json_t *m =
        empty
            ? json_pack("{s:O, s:O, s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, "
                        "s:O, s:O, s:O, s:O, s:O, s:O, s:s?, s:s?, s:O, s:O, s:b, s:o}",
                        "spec", spec, "case", cj, "kind", "gradient", "backend", j->b.backend_spec,
                        "device", field(d, "device"), "mode", field(d, "mode"), "contract",
                        field(d, "contract"), "backend_build", field(d, "build"), "build",
                        build ? build : field(d, "build"), "attrs", attrs ? attrs : empty, "index",
                        field(cj, "index"), "op", field(cj, "op"), "dtype", field(cj, "dtype"),
                        "shape", field(cj, "shape"), "input", field(cj, "input"), "sample",
                        field(cj, "sample"), "seed", field(cj, "seed"), "order", field(cj, "order"),
                        "grad_mode", field(cj, "mode"), "check", mt->check, "failure_class",
                        mt->cls, "first_difference", field(det, "first_difference"), "saved",
                        j->saved ? (json_t *)j->saved : json_null(), "declared_nondeterministic",
                        j->nondeterministic, "gradient", nvw_grad_settings(j))
            : NULL;
    json_decref(empty);
    if (m && json_object_get(cj, "input_shapes"))
        json_object_set(m, "input_shapes", json_object_get(cj, "input_shapes"));
    if (m && per_input(j, cj, m) < 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

#define MAX_NAMES (NV_JOB_MAX_TENSORS + 2 + 2 * NV_OP_MAX_INPUTS)

/* The tensors in artifact order: inputs, output gradient, device output,
 * device gradients, second-run gradients. */
static int tensor_list(const gjob *j, const nvw_grad_material *mt, char (*buf)[40],
                       const char **names, const nv_tensor **ts)
{
    const nv_op_def *op = j->g->base->op;
    int n = 0;
    for (int i = 0; i < mt->n_in; i++, n++) {
        snprintf(buf[n], sizeof buf[n], "input:%d", i);
        ts[n] = mt->in[i];
    }
    snprintf(buf[n], sizeof buf[n], "grad_output:0");
    ts[n++] = mt->gy;
    if (mt->dy) {
        snprintf(buf[n], sizeof buf[n], "output:0");
        ts[n++] = mt->dy;
    }
    for (int pass = 0; pass < 2; pass++) {
        nv_tensor *const *g = pass ? mt->grad2 : mt->grad;
        for (int i = 0; i < op->n_inputs; i++) {
            if (!g[i])
                continue;
            snprintf(buf[n], sizeof buf[n], pass ? "grad_input_rerun:%d" : "grad_input:%d", i);
            ts[n++] = g[i];
        }
    }
    for (int k = 0; k < n; k++)
        names[k] = buf[k];
    return n;
}

int nvw_grad_hand_over(gjob *j, json_t *cj, const nvw_grad_material *mt, const nvw_grad_given *gv)
{
    nvw_failure_fn fn = gv ? gv->report : j->b.opts ? j->b.opts->on_failure : NULL;
    void *ud = gv ? gv->ud : j->b.opts ? j->b.opts->ud : NULL;
    if (!fn)
        return 0;
    char buf[MAX_NAMES][40];
    const char *names[MAX_NAMES];
    const nv_tensor *ts[MAX_NAMES];
    int n = tensor_list(j, mt, buf, names, ts);
    json_t *m = manifest(j, cj, mt);
    if (!m)
        return -ENOMEM;
    nvw_failure f = {.case_index = (int)json_integer_value(json_object_get(cj, "index")),
                     .case_json = cj,
                     .manifest = m,
                     .n_tensors = n,
                     .names = names,
                     .tensors = ts};
    char *id = NULL;
    if (!gv)
        pthread_mutex_lock(&j->b.lock);
    int r = fn(ud, &f, &id);
    if (!gv)
        pthread_mutex_unlock(&j->b.lock);
    if (r >= 0 && id)
        json_object_set_new(cj, "artifact", json_string(id));
    free(id);
    json_decref(m);
    return 0;
}
