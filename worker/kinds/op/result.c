/* Result JSON of the runner (CONTRACT.md "Result JSON"): case metrics, the
 * tolerance with its reason, first mismatches with multi-indices and inputs,
 * the failure manifest and the job summary. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_internal.h"

int nvw_case_tolerance(const nvw_op_job *job, nv_dtype dt, nv_dtype out_dt, nv_tolerance *ret)
{
    const nv_jobspec *s = job->spec;
    if (s->has_tolerance) {
        *ret = s->tolerance;
        return 0;
    }
    if (s->has_by_dtype[dt]) {
        *ret = s->by_dtype[dt];
        return 0;
    }
    nv_tolerance t;
    memset(&t, 0, sizeof t);
    int r = nv_op_default_tolerance(s->op, &s->attrs, out_dt, &t);
    if (r < 0)
        return r;
    if (!t.source[0])
        snprintf(t.source, sizeof t.source, "default");
    *ret = t;
    return 0;
}

static json_t *tolerance_json(const nv_tolerance *tol)
{
    json_t *t = nv_tolerance_to_json(tol);
    if (!t)
        return NULL;
    if (json_object_set_new(t, "version", json_integer(tol->version)) ||
        json_object_set_new(t, "source", json_string(tol->source))) {
        json_decref(t);
        return NULL;
    }
    return t;
}

static bool elementwise(const nv_op_def *op)
{
    return op->kind == NV_OPK_UNARY || op->kind == NV_OPK_BINARY || op->kind == NV_OPK_TERNARY ||
           op->kind == NV_OPK_CAST;
}

static json_t *mismatch_json(const nvw_op_job *job, const nv_mismatch *m, int n_in,
                             nv_tensor *const *in, int out_ndim, const int64_t *out_shape,
                             const double *first_in)
{
    int64_t idx[NV_MAX_DIMS];
    int64_t rest = m->index;
    for (int d = out_ndim - 1; d >= 0; d--) {
        idx[d] = out_shape[d] > 0 ? rest % out_shape[d] : 0;
        rest = out_shape[d] > 0 ? rest / out_shape[d] : 0;
    }
    json_t *ji = json_array();
    json_t *o = json_object();
    if (!ji || !o)
        goto fail;
    for (int d = 0; d < out_ndim; d++)
        if (json_array_append_new(ji, json_integer(idx[d])))
            goto fail;
    if (json_object_set_new(o, "index", ji) < 0) {
        ji = NULL;
        goto fail;
    }
    ji = NULL;
    if (elementwise(job->spec->op)) {
        /* Elementwise inputs share the output's shape: the inputs at idx. */
        json_t *xs = json_array();
        if (!xs || json_object_set_new(o, "inputs", xs))
            goto fail;
        for (int i = 0; i < n_in && i < job->spec->op->n_inputs; i++)
            if (first_in ? json_array_append_new(xs, nvw_json_num(first_in[i]))
                         : in[i]->ndim == out_ndim &&
                               json_array_append_new(
                                   xs, nvw_json_num(in[i]->data[nv_tensor_offset(in[i], idx)])))
                goto fail;
    }
    if (json_object_set_new(o, "got", nvw_json_num(m->got)) ||
        json_object_set_new(o, "exact", nvw_json_num(m->exact)) ||
        json_object_set_new(o, "ulp_error", nvw_json_num(m->ulp_err)) ||
        json_object_set_new(o, "abs_error", nvw_json_num(m->abs_err)) ||
        json_object_set_new(o, "allowed", nvw_json_num(m->allowed)) ||
        json_object_set_new(o, "kind", json_string(nv_failure_class_name(m->kind))))
        goto fail;
    return o;
fail:
    json_decref(ji);
    json_decref(o);
    return NULL;
}

/* The element-wise distribution of the case (compare.h's fixed edges, the same
 * for every case so that a job's cases add up bucket by bucket). */
static json_t *ulp_histogram_json(const nv_compare_result *cmp)
{
    json_t *h = json_object(), *edges = json_array(), *counts = json_array();
    int bad = !h || !edges || !counts;
    for (int k = 0; !bad && k < NV_ULP_HIST_EDGES; k++)
        bad = json_array_append_new(edges, json_real(nv_ulp_hist_edge(k)));
    for (int k = 0; !bad && k < NV_ULP_HIST_BUCKETS; k++)
        bad = json_array_append_new(counts, json_integer(cmp->ulp_hist[k]));
    if (!bad)
        bad = json_object_set_new(h, "edges", edges) | json_object_set_new(h, "counts", counts) |
              json_object_set_new(h, "nonfinite", json_integer(cmp->nonfinite));
    else {
        json_decref(edges);
        json_decref(counts);
    }
    if (bad) {
        json_decref(h);
        return NULL;
    }
    return h;
}

int nvw_case_metrics(json_t *cj, const nvw_op_job *job, const nv_compare_result *cmp,
                     const nv_tolerance *tol, int n_in, nv_tensor *const *in, int out_ndim,
                     const int64_t *out_shape, const double (*first_in)[NV_JOB_MAX_TENSORS])
{
    json_t *t = tolerance_json(tol);
    if (!t || json_object_set_new(cj, "tolerance", t))
        return -ENOMEM;
    int r =
        json_object_set_new(cj, "compared", json_integer(cmp->compared)) |
        json_object_set_new(cj, "max_ulp", nvw_json_num(cmp->max_ulp)) |
        json_object_set_new(cj, "mean_ulp", nvw_json_num(cmp->mean_ulp)) |
        json_object_set_new(cj, "p99_ulp", nvw_json_num(cmp->p99_ulp)) |
        json_object_set_new(cj, "max_abs", nvw_json_num(cmp->max_abs)) |
        json_object_set_new(cj, "max_rel", nvw_json_num(cmp->max_rel)) |
        json_object_set_new(cj, "mismatches", json_integer(cmp->mismatches)) |
        json_object_set_new(cj, "nan_mismatches", json_integer(cmp->nan_mismatches)) |
        json_object_set_new(cj, "inf_mismatches", json_integer(cmp->inf_mismatches)) |
        json_object_set_new(cj, "zero_sign_mismatches", json_integer(cmp->zero_sign_mismatches)) |
        json_object_set_new(cj, "headroom", nvw_json_num(cmp->headroom));
    /* The probabilistic default: its lambda and probability, and the headroom
     * under the deterministic worst case beside it (docs/TOLERANCES.md). */
    if (tol->metric == NV_TOL_BOUND && tol->growth == NV_GROWTH_PROBABILISTIC)
        r |=
            json_object_set_new(cj, "headroom_worst_case", nvw_json_num(cmp->headroom_worst_case)) |
            json_object_set_new(
                cj, "probabilistic",
                json_pack("{s:f, s:f}", "lambda", cmp->lambda, "p_fail", cmp->p_fail));
    if (r || (cmp->has_ulp_hist && json_object_set_new(cj, "ulp_histogram", ulp_histogram_json(cmp))))
        return -ENOMEM;
    if (cmp->mismatches == 0 && cmp->failure == NV_FAIL_NONE)
        return 0;
    json_t *first = json_array();
    if (!first || json_object_set_new(cj, "first_mismatches", first))
        return -ENOMEM;
    for (int k = 0; k < cmp->n_first && k < NV_COMPARE_FIRST; k++) {
        json_t *m = mismatch_json(job, &cmp->first[k], n_in, in, out_ndim, out_shape,
                                  first_in ? first_in[k] : NULL);
        if (!m || json_array_append_new(first, m))
            return -ENOMEM;
    }
    return 0;
}

static json_t *describe_field(const nvw_op_job *job, const char *key)
{
    json_t *v = json_object_get(job->b.describe, key);
    return v ? v : json_null();
}

void nvw_case_accumulator(const json_t *contract, const nv_jobspec *s, nv_dtype dt, nv_dtype out_dt,
                          nvw_accumulator *ret)
{
    const json_t *entry = json_object_get(contract, nv_dtype_name(dt));
    if (!entry)
        entry = json_object_get(contract, nv_dtype_name(out_dt));
    nv_op_accumulator(s->op, &s->attrs, out_dt, entry, &ret->dtype, &ret->range, &ret->declared);
}

int nvw_case_overflow(json_t *cj, const nv_compare_result *cmp, const nvw_accumulator *acc,
                      int out_ndim, const int64_t *out_shape)
{
    const nv_mismatch *m = &cmp->first_overflow;
    json_t *idx = json_array();
    int64_t rest = m->index, k[NV_MAX_DIMS];
    for (int d = out_ndim - 1; d >= 0; d--) {
        k[d] = out_shape[d] > 0 ? rest % out_shape[d] : 0;
        rest = out_shape[d] > 0 ? rest / out_shape[d] : 0;
    }
    for (int d = 0; idx && d < out_ndim; d++)
        json_array_append_new(idx, json_integer(k[d]));
    json_t *o =
        json_pack("{s:I, s:{s:s, s:s, s:b}, s:{s:o, s:o, s:o, s:o}}", "outputs",
                  (json_int_t)cmp->intermediate_overflows, "accumulator", "dtype",
                  nv_dtype_name(acc->dtype), "range", nv_dtype_name(acc->range), "declared",
                  acc->declared, "first", "index", idx, "got", nvw_json_num(m->got), "exact",
                  nvw_json_num(m->exact), "peak", nvw_json_num(cmp->first_overflow_peak));
    return o && json_object_set_new(cj, "intermediate_overflow", o) == 0 ? 0 : -ENOMEM;
}

json_t *nvw_case_manifest(const nvw_op_job *job, const json_t *cj)
{
    static const char *const from_case[] = {
        "index",   "op",         "dtype", "out_dtype", "shape",         "layout",
        "input",   "sample",     "seed",  "tolerance", "failure_class", "first_mismatches",
        "max_ulp", "mismatches", NULL};
    json_t *empty = json_object();
    if (!empty)
        return NULL;
    json_t *m = json_pack(
        "{sO sO ss sO sO sO sO sO}", "spec", job->b.spec_json, "case", cj, "backend",
        job->b.backend_spec, "device", describe_field(job, "device"), "mode",
        describe_field(job, "mode"), "contract", describe_field(job, "contract"), "backend_build",
        describe_field(job, "build"), "attrs",
        json_object_get(job->b.spec_json, "attrs") ? json_object_get(job->b.spec_json, "attrs")
                                                   : empty);
    json_decref(empty);
    if (!m)
        return NULL;
    for (int i = 0; from_case[i]; i++) {
        json_t *v = json_object_get(cj, from_case[i]);
        if (v && json_object_set(m, from_case[i], v)) {
            json_decref(m);
            return NULL;
        }
    }
    json_t *build = json_object_get(job->b.spec_json, "build");
    if (json_object_set(m, "build", build ? build : describe_field(job, "build"))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

json_t *nvw_job_result(const nvw_op_job *job)
{
    const nv_jobspec *s = job->spec;
    int64_t passed = 0, failed = 0, errors = 0;
    bool deterministic = true;
    json_t *cases = json_array();
    if (!cases)
        return NULL;
    for (int64_t i = 0; i < s->n_total; i++) {
        json_t *c = job->b.cases[i];
        const char *v = json_string_value(json_object_get(c, "verdict"));
        if (v && strcmp(v, "passed") == 0)
            passed++;
        else if (v && strcmp(v, "failed") == 0)
            failed++;
        else
            errors++;
        if (json_is_false(json_object_get(c, "deterministic")))
            deterministic = false;
        if (json_array_append(cases, c)) {
            json_decref(cases);
            return NULL;
        }
    }
    const char *verdict = failed ? "failed" : errors ? "error" : "passed";
    json_t *attrs = json_object_get(job->b.spec_json, "attrs");
    json_t *build = json_object_get(job->b.spec_json, "build");
    json_t *empty = json_object();
    if (!empty) {
        json_decref(cases);
        return NULL;
    }
    json_t *r = json_pack(
        "{ss ss ss sO ss sO sO sO sO sO sI s{sI sI sI sI}}", "verdict", verdict, "kind", "op", "op",
        s->op->name, "attrs", attrs ? attrs : empty, "backend", job->b.backend_spec, "device",
        describe_field(job, "device"), "mode", describe_field(job, "mode"), "contract",
        describe_field(job, "contract"), "backend_build", describe_field(job, "build"), "build",
        build ? build : describe_field(job, "build"), "seed", (json_int_t)s->seed, "summary",
        "cases", (json_int_t)s->n_total, "passed", (json_int_t)passed, "failed", (json_int_t)failed,
        "errors", (json_int_t)errors);
    json_decref(empty);
    if (!r) {
        json_decref(cases);
        return NULL;
    }
    const char *name = json_string_value(json_object_get(job->b.spec_json, "name"));
    if ((name && json_object_set_new(r, "name", json_string(name))) ||
        (s->repeat > 1 && json_object_set_new(r, "deterministic", json_boolean(deterministic))) ||
        json_object_set_new(r, "cases", cases)) {
        json_decref(r);
        return NULL;
    }
    return r;
}
