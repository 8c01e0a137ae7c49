/* The artifact of an accuracy failure (docs/SERVING.md "Artifacts"): the
 * prefill_decode and long_context checks judge the device against the fp64
 * reference, so their failure is an execution that leaves its band. The
 * failing step is re-run traced (trace.c) and every op call of it judged as
 * an op job judges it: the device's output against the exact reference on
 * the inputs the device was given, under the op's shipped default tolerance
 * (the declared accumulator for a reduction or matmul), as the model kind
 * localizes its eager failures (worker/kinds/model/artifact.c). The first
 * call that fails is an op case of its own: an op artifact, which the op
 * kind's gate, minimizer, replay and `numval-worker repro` take as they take
 * an op failure. Its manifest's "serving" object says where it came from. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/compare.h"
#include "core/ops/catalog.h"
#include "core/ref/reference.h"
#include "serving_internal.h"

/* The op kind's judgement of call k (as its probe judges a case): *cls ""
 * when within the default tolerance. 0, NV_E_* or -ENOMEM. */
static int judge(const scase *c, const sv_call *k, const nv_op_def *def, const nv_op_attrs *a,
                 nv_tolerance *tol, nv_compare_result *cmp, char cls[48])
{
    const nv_tensor *got = k->out;
    const nv_tensor *const *in = (const nv_tensor *const *)k->in;
    cls[0] = 0;
    memset(tol, 0, sizeof *tol);
    if (nv_op_default_tolerance(def, a, got->dtype, tol) < 0)
        return NV_E_INVALID;
    if (!tol->source[0])
        snprintf(tol->source, sizeof tol->source, "default");
    nv_tensor *t[5];
    for (int i = 0; i < 5; i++)
        t[i] = nv_tensor_new(NV_DT_FP64, got->ndim, got->shape);
    int r = t[0] && t[1] && t[2] && t[3] && t[4] ? 0 : -ENOMEM;
    nv_ref_out ro = {.hi = t[0], .lo = t[1], .abs_sum = t[2], .abs_exp = t[3], .peak = t[4]};
    if (r == 0)
        r = nv_op_reference_ex(def, a, k->n_in, in, &ro);
    if (r == 0) {
        nv_compare_input ci = {.dtype = got->dtype,
                               .n = got->numel,
                               .got = got->data,
                               .exact = t[0]->data,
                               .exact_lo = t[1]->data,
                               .abs_sum = t[2]->data,
                               .reduction_len = nv_op_reduction_len(def, a, k->n_in, in),
                               .zero_sign = nv_op_zero_sign_judged(def),
                               .abs_exp = t[3]->data};
        if (def->kind == NV_OPK_REDUCE || def->kind == NV_OPK_MATMUL) {
            const json_t *entry = json_object_get(json_object_get(c->j->b.describe, "contract"),
                                                  nv_dtype_name(got->dtype));
            bool declared;
            nv_op_accumulator(def, a, got->dtype, entry, &ci.acc_dtype, &ci.acc_range, &declared);
            ci.peak = t[4]->data;
        }
        r = nv_compare(&ci, tol, cmp) < 0 ? NV_E_INVALID : 0;
        if (r == 0 && (cmp->failure != NV_FAIL_NONE || cmp->mismatches > 0))
            snprintf(cls, 48, "%s", nv_failure_class_name(cmp->failure));
    }
    for (int i = 0; i < 5; i++)
        nv_tensor_free(t[i]);
    return r;
}

static json_t *shape_json(const nv_tensor *t)
{
    json_t *s = json_array();
    for (int d = 0; s && d < t->ndim; d++)
        json_array_append_new(s, json_integer(t->shape[d]));
    return s;
}

/* The op job and case of call k, as the op kind writes them (the keys
 * nvw_repro_from_artifact reads), and where it came from. */
static json_t *manifest(scase *c, const sv_call *k, const nv_tolerance *tol,
                        const nv_compare_result *cmp, const char *cls, json_t *where)
{
    const nv_op_def *def = nv_op_find(k->op);
    nv_dtype dt = k->out->dtype;
    bool have = false;
    for (int i = 0; i < k->n_in; i++)
        if (!have && !def->inputs[i].is_index) {
            dt = k->in[i]->dtype;
            have = true;
        }
    json_t *shapes = json_array(), *one = json_array();
    for (int i = 0; one && i < k->n_in; i++)
        json_array_append_new(one, shape_json(k->in[i]));
    if (shapes && one)
        json_array_append_new(shapes, one);
    else
        json_decref(one);
    json_t *attrs = k->attrs ? json_loads(k->attrs, 0, NULL) : json_object();
    json_t *spec = json_pack("{s:s, s:s, s:O, s:[s], s:O, s:[s], s:I}", "kind", "op", "op", k->op,
                             "attrs", attrs, "dtypes", nv_dtype_name(dt), "shapes", shapes,
                             "inputs", "normal", "seed", (json_int_t)c->j->s->seed);
    json_t *tj = nv_tolerance_to_json(tol);
    if (tj && (json_object_set_new(tj, "version", json_integer(tol->version)) ||
               json_object_set_new(tj, "source", json_string(tol->source)))) {
        json_decref(tj);
        tj = NULL;
    }
    json_t *cs = tj ? json_pack("{s:i, s:s, s:s, s:s, s:o*, s:s, s:s, s:i, s:I, s:O, s:s, s:I, "
                                "s:o}",
                                "index", 0, "op", k->op, "dtype", nv_dtype_name(dt), "out_dtype",
                                nv_dtype_name(k->out->dtype), "shape", shape_json(k->out), "layout",
                                "contiguous", "input", "normal", "sample", 0, "seed",
                                (json_int_t)c->j->s->seed, "tolerance", tj, "failure_class", cls,
                                "mismatches", (json_int_t)cmp->mismatches, "max_ulp",
                                nvw_json_num(cmp->max_ulp))
                    : NULL;
    const json_t *d = c->j->b.describe, *build = json_object_get(c->j->b.spec_json, "build");
    json_t *m = spec && cs
                    ? json_pack("{s:O, s:O, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O}", "spec", spec,
                                "case", cs, "backend", c->j->b.backend_spec, "device",
                                json_object_get(d, "device"), "mode", json_object_get(d, "mode"),
                                "contract", json_object_get(d, "contract"), "backend_build",
                                json_object_get(d, "build"), "build",
                                build ? build : json_object_get(d, "build"), "attrs", attrs)
                    : NULL;
    static const char *const from_case[] = {
        "index",  "op",   "dtype",     "out_dtype", "shape",      "layout",        "input",
        "sample", "seed", "tolerance", "max_ulp",   "mismatches", "failure_class", NULL};
    for (int i = 0; m && from_case[i]; i++)
        json_object_set(m, from_case[i], json_object_get(cs, from_case[i]));
    if (m && json_object_set_new(m, "serving", where)) {
        json_decref(m);
        m = NULL;
    } else if (!m)
        json_decref(where);
    json_decref(attrs);
    json_decref(shapes);
    json_decref(spec);
    json_decref(tj);
    json_decref(cs);
    return m;
}

int sv_localize_op(scase *c, const sv_trace *const *tr, int nt, json_t *where)
{
    if (!sv_keeps_failures(c)) {
        json_decref(where);
        return 0;
    }
    const char *why = NULL;
    if (c->steps)
        why = "the harness ran the device's steps (serve request): no op call to localize to";
    for (int w = 0; !why && w < nt; w++)
        if (tr[w]->full)
            why = "the step's tensors exceed the trace's limit (2^23 values): not localized";
    for (int w = 0; !why && w < nt; w++)
        for (int q = 0; q < tr[w]->n; q++) {
            const sv_call *k = &tr[w]->calls[q];
            const nv_op_def *def = nv_op_find(k->op);
            json_t *aj = k->attrs ? json_loads(k->attrs, 0, NULL) : NULL;
            nv_op_attrs a;
            char *msg = NULL, cls[48];
            int r = def ? nv_op_parse_attrs(def, aj, &a, &msg) : NV_E_INVALID;
            json_decref(aj);
            free(msg);
            nv_tolerance tol;
            nv_compare_result cmp;
            if (r == 0)
                r = judge(c, k, def, &a, &tol, &cmp, cls);
            if (r == -ENOMEM || r == NV_E_NOMEM) {
                json_decref(where);
                return -ENOMEM;
            }
            if (r < 0 || !cls[0])
                continue; /* no default tolerance, or within it: not this one */
            json_object_set_new(where, "node", json_string(k->site));
            json_object_set_new(where, "trace", json_integer(w));
            json_t *m = manifest(c, k, &tol, &cmp, cls, where);
            if (!m)
                return -ENOMEM;
            const char *names[3];
            const nv_tensor *ts[3];
            char buf[2][24];
            for (int i = 0; i < k->n_in; i++) {
                snprintf(buf[i], sizeof buf[i], "input:%d", i);
                names[i] = buf[i];
                ts[i] = k->in[i];
            }
            names[k->n_in] = "output:0";
            ts[k->n_in] = k->out;
            r = nvw_store_failure(&c->j->b, c->cj, (int)c->index, m, k->n_in + 1, names, ts);
            json_decref(m);
            if (r <= 0)
                return r;
            char reason[300];
            snprintf(reason, sizeof reason,
                     "node %s (op %s) is the first op call of the step that fails its default "
                     "tolerance on the inputs the device gave it: an op case of its own",
                     k->site, k->op);
            return sv_localized(c, "op_case", reason);
        }
    json_decref(where);
    return sv_localized(
        c, "none",
        why ? why
            : "every op call of the step is within its default tolerance on the inputs the "
              "device gave it: the error comes from the composition, which no single op "
              "reproduces");
}
