/* One case of an op job: generate its inputs in their layout, run the backend,
 * check the output's count, dtype, shape and strides, compare against the exact
 * reference, and describe it all as case JSON. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/reference.h"
#include "binades.h"
#include "case_internal.h"

const char *nvw_op_code_name(int r)
{
    switch (r) {
    case NV_OK:
        return "NV_OK";
    case NV_E_INVALID:
        return "NV_E_INVALID";
    case NV_E_SHAPE:
        return "NV_E_SHAPE";
    case NV_E_DTYPE:
        return "NV_E_DTYPE";
    case NV_E_UNSUPPORTED:
        return "NV_E_UNSUPPORTED";
    case NV_E_NONDETERMINISTIC:
        return "NV_E_NONDETERMINISTIC";
    case NV_E_NOMEM:
        return "NV_E_NOMEM";
    case NV_E_DEVICE:
        return "NV_E_DEVICE";
    default:
        return "unknown code";
    }
}

/* Set verdict (and, for "error" or "failed" with a message, "error" and
 * "failure_class"). Returns 0 or -ENOMEM. */
int nvw_op_verdict(case_state *cs, const char *v, const char *cls, const char *fmt, ...)
{
    int r = json_object_set_new(cs->cj, "verdict", json_string(v));
    if (cls)
        r |= json_object_set_new(cs->cj, "failure_class", json_string(cls));
    if (fmt) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r |= json_object_set_new(cs->cj, "error", json_string(msg));
    }
    return r ? -ENOMEM : 0;
}

/* Value written into the gaps of a strided layout: a backend that reads them
 * turns its results into NaN (or the format's largest value) and fails. */
double nvw_op_poison(nv_dtype dt)
{
    const nv_dtype_info *di = nv_dtype_get(dt);
    if (di->is_float)
        return di->has_nan ? NAN : di->max_finite;
    return di->bits == 8 ? 127 : 2147483647.0;
}

/* Storage for meta in layout l: "transposed" stores the last two dims swapped
 * (the view's strides swap them back), "strided" uses every other element. */
nv_tensor *nvw_op_make_layout(const nv_tensor *meta, nv_layout l)
{
    int nd = meta->ndim;
    if (l == NV_LAYOUT_TRANSPOSED && nd >= 2) {
        int64_t sh[NV_MAX_DIMS];
        memcpy(sh, meta->shape, sizeof sh);
        sh[nd - 2] = meta->shape[nd - 1];
        sh[nd - 1] = meta->shape[nd - 2];
        nv_tensor *t = nv_tensor_new(meta->dtype, nd, sh);
        if (!t)
            return NULL;
        int64_t s = t->strides[nd - 2];
        t->strides[nd - 2] = t->strides[nd - 1];
        t->strides[nd - 1] = s;
        t->shape[nd - 2] = meta->shape[nd - 2];
        t->shape[nd - 1] = meta->shape[nd - 1];
        return t;
    }
    if (l == NV_LAYOUT_STRIDED && nd >= 1) {
        int64_t len = 2 * meta->numel;
        nv_tensor *t = nv_tensor_new(meta->dtype, 1, &len);
        if (!t)
            return NULL;
        double p = nvw_op_poison(meta->dtype);
        for (int64_t i = 0; i < len; i++)
            t->data[i] = p;
        t->ndim = nd;
        for (int d = 0; d < nd; d++) {
            t->shape[d] = meta->shape[d];
            t->strides[d] = 2 * meta->strides[d];
        }
        t->numel = meta->numel;
        return t;
    }
    return nv_tensor_new(meta->dtype, nd, meta->shape);
}

static int reduce_axis(const case_state *cs)
{
    const nv_tensor *x = &cs->meta[0];
    if (x->ndim == 0)
        return -1;
    if (cs->s->op->kind == NV_OPK_MATMUL)
        return x->ndim - 1;
    int a = cs->s->attrs.axis < 0 ? cs->s->attrs.axis + x->ndim : cs->s->attrs.axis;
    return (a < 0 || a >= x->ndim) ? x->ndim - 1 : a;
}

static int make_meta(case_state *cs)
{
    int bad = cs->c.expect_error ? (int)cs->c.expect : -1;
    cs->n_in =
        nv_jobspec_tensors(cs->s, cs->c.shape, cs->c.dtype, bad, cs->meta, NV_JOB_MAX_TENSORS);
    return cs->n_in < 0 ? cs->n_in : 0;
}

void nvw_op_scatter(nv_tensor *t, const double *v)
{
    int64_t st = 1;
    bool contiguous = t->offset == 0;
    for (int d = t->ndim - 1; d >= 0 && contiguous; d--) {
        contiguous = t->shape[d] == 1 || t->strides[d] == st;
        st *= t->shape[d];
    }
    if (contiguous) {
        memcpy(t->data, v, (size_t)t->numel * sizeof *v);
        return;
    }
    for (int64_t k = 0; k < t->numel; k++)
        t->data[nv_tensor_offset_linear(t, k)] = v[k];
}

void nvw_op_input_request(const case_state *cs, int i, nv_input_request *ret)
{
    const nv_op_def *op = cs->s->op;
    int ax = reduce_axis(cs);
    bool reduce = op->kind == NV_OPK_REDUCE || op->kind == NV_OPK_MATMUL;
    *ret = (nv_input_request){
        .domain = nv_op_input_domain(op, i),
        .tensor_index = i,
        .dtype = cs->meta[i].dtype,
        .target = cs->out_dt,
        .cls = cs->c.cls,
        .seed = cs->s->seed,
        .case_index = (uint32_t)cs->c.index,
        /* embedding's ids pick rows of its weight [V, D]; other index
         * inputs are classes along the reduced axis */
        .index_range = !strcmp(op->name, "embedding") && cs->meta[0].ndim == 2
                           ? cs->meta[0].shape[0]
                       : ax >= 0 ? cs->meta[0].shape[ax]
                                 : 1,
        .reduction_len = reduce && ax >= 0 ? cs->meta[0].shape[ax] : 0,
        .sweep = cs->s->sweep,
    };
}

int nvw_op_make_inputs(case_state *cs)
{
    const nv_op_def *op = cs->s->op;
    for (int i = 0; i < cs->n_in; i++) {
        const nv_tensor *m = &cs->meta[i];
        bool plain = i < op->n_inputs && !op->inputs[i].is_index;
        cs->in[i] = nvw_op_make_layout(m, plain ? cs->c.layout : NV_LAYOUT_CONTIGUOUS);
        double *v = malloc((size_t)(m->numel > 0 ? m->numel : 1) * sizeof *v);
        if (!cs->in[i] || !v) {
            free(v);
            return -ENOMEM;
        }
        nv_input_request rq;
        nvw_op_input_request(cs, i, &rq);
        int r = nv_inputs_generate(&rq, v, m->numel);
        if (r == 0)
            nvw_op_scatter(cs->in[i], v);
        free(v);
        if (r < 0)
            return r;
        r = nvw_view_from_tensor(cs->in[i], &cs->views[i]);
        if (r < 0)
            return r;
        cs->n_views = i + 1;
    }
    return 0;
}

/* One forward call; the output lands in *out (caller releases it). */
int nvw_op_forward(case_state *cs, nv_tensor_view *out, int32_t *ret_n_out, int32_t *ret_fb,
                   char *err)
{
    memset(out, 0, sizeof *out);
    nv_op_call call = {
        .op = cs->s->op->name,
        .attrs_json = cs->s->attrs_json,
        .out_dtype = (int32_t)cs->out_dt,
        .n_inputs = cs->n_in,
        .inputs = cs->views,
        .n_outputs = 1,
        .outputs = out,
        .fell_back = 0,
    };
    err[0] = 0;
    int r = cs->job->b.table->forward(cs->ctx, &call, err, ERRLEN);
    *ret_n_out = call.n_outputs;
    *ret_fb = call.fell_back;
    return r;
}

void nvw_op_release(case_state *cs, nv_tensor_view *v)
{
    if (v->data && cs->job->b.table->release_tensor)
        cs->job->b.table->release_tensor(cs->ctx, v);
    memset(v, 0, sizeof *v);
}

/* The backend must refuse invalid inputs with the code the catalog gives them. */
static int run_expect_error(case_state *cs)
{
    int want = cs->c.expect == NV_EXPECT_SHAPE_MISMATCH ? NV_E_SHAPE : NV_E_DTYPE;
    char err[ERRLEN];
    nv_tensor_view out;
    int32_t n_out, fb;
    int r = nvw_op_forward(cs, &out, &n_out, &fb, err);
    nvw_op_release(cs, &out);
    if (json_object_set_new(cs->cj, "expected_code", json_string(nvw_op_code_name(want))) ||
        json_object_set_new(cs->cj, "returned_code", json_string(nvw_op_code_name(r))))
        return -ENOMEM;
    if (r == want)
        return nvw_op_verdict(cs, "passed", NULL, NULL);
    if (r == NV_OK)
        return nvw_op_verdict(cs, "failed", "unexpected_success",
                       "the backend computed a result for invalid inputs (%s) instead of "
                       "returning %s",
                       nv_expect_kind_name(cs->c.expect), nvw_op_code_name(want));
    return nvw_op_verdict(cs, "failed", "wrong_error",
                   "the backend returned %s ('%s') for %s, "
                   "expected %s",
                   nvw_op_code_name(r), err, nv_expect_kind_name(cs->c.expect), nvw_op_code_name(want));
}

/* Output count, dtype, shape (against nv_op_infer) and strides (no negative
 * stride, no two elements sharing storage). Returns 1 when acceptable. */
int nvw_op_check_output(case_state *cs, int32_t n_out)
{
    const nv_tensor_view *o = &cs->out;
    if (n_out != 1 || !o->data)
        return nvw_op_verdict(cs, "failed", "bad_output",
                       "the backend returned %d outputs%s, "
                       "expected 1",
                       (int)n_out, o->data ? "" : " (no data)") < 0
                   ? -ENOMEM
                   : 0;
    if (o->dtype != (int32_t)cs->out_dt) {
        const char *name = nv_dtype_name((nv_dtype)o->dtype);
        return nvw_op_verdict(cs, "failed", "bad_output_dtype", "output dtype '%s', expected '%s'",
                       name ? name : "?", nv_dtype_name(cs->out_dt)) < 0
                   ? -ENOMEM
                   : 0;
    }
    bool same = o->ndim == cs->out_ndim;
    for (int d = 0; same && d < cs->out_ndim; d++)
        same = o->shape[d] == cs->out_shape[d];
    if (!same) {
        char got[200] = "", want[200] = "";
        for (int d = 0; d < o->ndim && d < NV_MAX_DIMS; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "",
                     (long long)o->shape[d]);
        for (int d = 0; d < cs->out_ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "",
                     (long long)cs->out_shape[d]);
        return nvw_op_verdict(cs, "failed", "bad_output_shape", "output shape [%s], expected [%s]", got,
                       want) < 0
                   ? -ENOMEM
                   : 0;
    }
    /* Non-overlap: sorted by stride, each dim must step past the whole extent of
     * the dims below it. */
    int order[NV_MAX_DIMS], n = 0;
    for (int d = 0; d < o->ndim; d++) {
        if (o->strides[d] < 0)
            return nvw_op_verdict(cs, "failed", "bad_output_strides",
                           "output stride %lld of dim %d "
                           "is negative",
                           (long long)o->strides[d], d) < 0
                       ? -ENOMEM
                       : 0;
        if (o->shape[d] > 1)
            order[n++] = d;
    }
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && o->strides[order[b]] < o->strides[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    int64_t span = 1;
    for (int k = 0; k < n; k++) {
        int d = order[k];
        if (o->strides[d] < span)
            return nvw_op_verdict(cs, "failed", "bad_output_strides",
                           "output strides overlap: dim %d "
                           "has stride %lld inside the %lld elements of the faster dims",
                           d, (long long)o->strides[d], (long long)span) < 0
                       ? -ENOMEM
                       : 0;
        span = o->strides[d] * o->shape[d];
    }
    return 1;
}

/* Bitwise equality of two outputs of the same shape and dtype. */
static bool same_bits(const nv_tensor_view *a, const nv_tensor_view *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d])
            return false;
        n *= a->shape[d];
    }
    int64_t idx[NV_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < a->ndim; d++) {
            oa += idx[d] * a->strides[d];
            ob += idx[d] * b->strides[d];
        }
        if (nv_dtype_load_bits((nv_dtype)a->dtype, a->data, oa) !=
            nv_dtype_load_bits((nv_dtype)b->dtype, b->data, ob))
            return false;
        for (int d = a->ndim - 1; d >= 0 && ++idx[d] == a->shape[d]; d--)
            idx[d] = 0;
    }
    return true;
}

/* Runs 2..repeat; returns 1 when every run matched the first bit for bit. */
int nvw_op_repeat_runs(case_state *cs)
{
    for (int k = 1; k < cs->s->repeat; k++) {
        char err[ERRLEN];
        nv_tensor_view again;
        int32_t n_out, fb;
        int r = nvw_op_forward(cs, &again, &n_out, &fb, err);
        bool same = r == NV_OK && same_bits(&cs->out, &again);
        nvw_op_release(cs, &again);
        if (!same)
            return 0;
    }
    return 1;
}

int nvw_op_reference(case_state *cs, char *err)
{
    nv_tensor *cin[NV_JOB_MAX_TENSORS] = {0};
    int r = -ENOMEM;
    cs->hi = nv_tensor_new(cs->out_dt, cs->out_ndim, cs->out_shape);
    cs->lo = nv_tensor_new(cs->out_dt, cs->out_ndim, cs->out_shape);
    cs->abs = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    cs->abs_exp = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    cs->peak = nv_tensor_new(NV_DT_FP64, cs->out_ndim, cs->out_shape);
    if (!cs->hi || !cs->lo || !cs->abs || !cs->abs_exp || !cs->peak)
        goto out;
    /* The reference sees plain row-major copies: layouts test the device. */
    for (int i = 0; i < cs->n_in; i++)
        if (!(cin[i] = nv_tensor_contiguous(cs->in[i])))
            goto out;
    nv_ref_out ro = {
        .hi = cs->hi, .lo = cs->lo, .abs_sum = cs->abs, .abs_exp = cs->abs_exp, .peak = cs->peak};
    r = nv_op_reference_ex(cs->s->op, &cs->s->attrs, cs->n_in, (const nv_tensor *const *)cin, &ro);
    if (r < 0)
        snprintf(err, ERRLEN, "the reference of '%s' failed (%s)", cs->s->op->name, nvw_op_code_name(r));
out:
    for (int i = 0; i < cs->n_in; i++)
        nv_tensor_free(cin[i]);
    return r;
}

int nvw_op_judge(case_state *cs, const nv_tolerance *tol, const nv_compare_result *cmp,
                 const nvw_accumulator *acc, bool deterministic,
                 const double (*first_in)[NV_JOB_MAX_TENSORS])
{
    int r = nvw_case_metrics(cs->cj, cs->job, cmp, tol, cs->n_in, cs->in, cs->out_ndim,
                             cs->out_shape, first_in);
    if (r == 0 && cmp->intermediate_overflows > 0)
        r = nvw_case_overflow(cs->cj, cmp, acc, cs->out_ndim, cs->out_shape);
    if (r < 0)
        return r;
    if (cs->s->repeat > 1 &&
        json_object_set_new(cs->cj, "deterministic", json_boolean(deterministic)))
        return -ENOMEM;
    if (cmp->failure != NV_FAIL_NONE || cmp->mismatches > 0)
        return nvw_op_verdict(cs, "failed", nv_failure_class_name(cmp->failure), NULL);
    if (!deterministic && cs->s->deterministic)
        return nvw_op_verdict(cs, "failed", "nondeterministic",
                              "repeated runs of the case gave "
                              "different bits and the job requires \"deterministic\": true");
    return nvw_op_verdict(cs, "passed", NULL, NULL);
}

int nvw_op_tolerance(case_state *cs, nv_tolerance *tol)
{
    if (nvw_case_tolerance(cs->job, cs->c.dtype, cs->out_dt, tol) < 0) {
        int r = nvw_op_verdict(cs, "error", "no_tolerance", "no tolerance for op '%s' and dtype '%s'",
                               cs->s->op->name, nv_dtype_name(cs->out_dt));
        return r < 0 ? r : 1;
    }
    return 0;
}

int nvw_op_bad_tolerance(case_state *cs, const nv_tolerance *tol)
{
    json_object_set_new(cs->cj, "tolerance", nv_tolerance_to_json(tol));
    return nvw_op_verdict(cs, "error", "bad_tolerance",
                          "the tolerance does not apply to op '%s' "
                          "(a 'bound' tolerance needs a reduction or matmul)",
                          cs->s->op->name);
}

/* The binades of a case run whole: its input in element order, as a blocked
 * case has it (blocks.c). */
static int whole_binades(case_state *cs, const nv_compare_input *ci, const nv_tolerance *tol)
{
    nv_tensor *x = nv_tensor_contiguous(cs->in[0]);
    nvw_binades *bd = malloc(sizeof *bd);
    int r = x && bd ? 0 : -ENOMEM;
    if (r == 0) {
        nvw_binades_init(bd, x->dtype);
        r = nvw_binades_add(bd, ci, tol, NULL, x->data, 0);
        r = r == 0 ? nvw_binades_json(bd, cs->cj) : -ENOMEM;
    }
    nv_tensor_free(x);
    free(bd);
    return r;
}

static int compare_case(case_state *cs, bool deterministic)
{
    const nvw_op_job *job = cs->job;
    nv_tolerance tol;
    int r = nvw_op_tolerance(cs, &tol);
    if (r != 0)
        return r < 0 ? r : 0;
    /* A selection's lo is the index a correct device may return instead of hi
     * (core/ref/ref_select.c: sample's CDF boundaries within delta); such an
     * output is judged as hi and counted. */
    const nv_tensor *in[NV_JOB_MAX_TENSORS]; /* shapes; a streamed case has only its meta */
    for (int i = 0; i < cs->n_in; i++)
        in[i] = cs->in[i] ? cs->in[i] : &cs->meta[i];
    bool select = cs->s->op->kind == NV_OPK_SELECT;
    if (select &&
        json_object_set_new(cs->cj, "justified",
                            json_integer(nv_select_justify(cs->got->data, cs->hi->data,
                                                           cs->lo->data, cs->got->numel))))
        return -ENOMEM;
    nv_compare_input ci = {
        .dtype = cs->out_dt,
        .n = cs->got->numel,
        .got = cs->got->data,
        .exact = cs->hi->data,
        .exact_lo = select ? NULL : cs->lo->data,
        .abs_sum = cs->abs->data,
        .reduction_len = nv_op_reduction_len(cs->s->op, &cs->s->attrs, cs->n_in, in),
        .zero_sign = nv_op_zero_sign_judged(cs->s->op),
        .abs_exp = cs->abs_exp->data,
    };
    nvw_accumulator acc;
    nvw_case_accumulator(json_object_get(job->b.describe, "contract"), cs->s, cs->c.dtype,
                         cs->out_dt, &acc);
    if (nv_op_accumulates(cs->s->op)) {
        ci.peak = cs->peak->data;
        ci.acc_dtype = acc.dtype;
        ci.acc_range = acc.range;
    }
    nv_compare_result cmp;
    if (nv_compare(&ci, &tol, &cmp) < 0)
        return nvw_op_bad_tolerance(cs, &tol);
    r = nvw_op_judge(cs, &tol, &cmp, &acc, deterministic, NULL);
    if (r == 0 && cs->in[0] && nvw_binades_wanted(cs->s->op->kind, cs->n_in, cs->c.cls,
                                                  cs->in[0]->dtype))
        r = whole_binades(cs, &ci, &tol);
    return r;
}

/* on_failure, serially: the exact inputs and the device output. */
int nvw_op_report_failure(case_state *cs)
{
    nvw_op_job *job = cs->job;
    if (!job->b.opts || !job->b.opts->on_failure)
        return 0;
    if (cs->n_in > 0 && !cs->in[0]) { /* streamed: the whole inputs, as the whole case has them */
        for (int k = 0; k < cs->n_views; k++)
            nvw_view_free(&cs->views[k]);
        cs->n_views = 0;
        int r = nvw_op_make_inputs(cs);
        if (r < 0)
            return r == -ENOMEM ? r : 0;
    }
    const char *names[NV_JOB_MAX_TENSORS + 1];
    const nv_tensor *tensors[NV_JOB_MAX_TENSORS + 1];
    char name_buf[NV_JOB_MAX_TENSORS][24]; /* "input:" + any int */
    for (int i = 0; i < cs->n_in; i++) {
        snprintf(name_buf[i], sizeof name_buf[i], "input:%d", i);
        names[i] = name_buf[i];
        tensors[i] = cs->in[i];
    }
    names[cs->n_in] = "output:0";
    tensors[cs->n_in] = cs->got;
    json_t *manifest = nvw_case_manifest(job, cs->cj);
    if (!manifest)
        return -ENOMEM;
    nvw_failure f = {
        .case_index = (int)cs->c.index,
        .case_json = cs->cj,
        .manifest = manifest,
        .n_tensors = cs->n_in + 1,
        .names = names,
        .tensors = tensors,
    };
    char *id = NULL;
    pthread_mutex_lock(&job->b.lock);
    int r = job->b.opts->on_failure(job->b.opts->ud, &f, &id);
    pthread_mutex_unlock(&job->b.lock);
    json_decref(manifest);
    if (r >= 0 && id)
        json_object_set_new(cs->cj, "artifact", json_string(id));
    free(id);
    return 0;
}

/* A large elementwise case in blocks (blocks.c): the output shape from the
 * catalog first, as the whole case would infer it. */
static int run_blocked(case_state *cs)
{
    const nv_jobspec *s = cs->s;
    char err[ERRLEN] = "";
    const nv_tensor *m[NV_JOB_MAX_TENSORS];
    for (int i = 0; i < cs->n_in; i++)
        m[i] = &cs->meta[i];
    int r = nv_op_infer(s->op, &s->attrs, cs->n_in, m, &cs->out_ndim, cs->out_shape, err,
                        sizeof err);
    if (r != 0)
        return nvw_op_verdict(cs, "error", "inputs", "the catalog refuses the case's inputs: %s",
                              err);
    return nvw_op_run_blocked(cs);
}

static int run_body(case_state *cs)
{
    const nv_jobspec *s = cs->s;
    if (s->deterministic && cs->job->op_nondeterministic && !cs->c.expect_error)
        return nvw_op_verdict(cs, "error", "nondeterministic_op",
                       "op '%s' is listed in the backend's "
                       "\"nondeterministic_ops\" and the job requires \"deterministic\": true",
                       s->op->name);
    int r = make_meta(cs);
    if (r == 0 && !cs->c.expect_error && nvw_op_blocked(cs))
        return run_blocked(cs);
    bool streamed = r == 0 && !cs->c.expect_error && nvw_op_streamed(cs);
    if (r == 0)
        r = streamed ? nvw_op_make_inputs_streamed(cs) : nvw_op_make_inputs(cs);
    if (r < 0)
        return r == -ENOMEM ? r
                            : nvw_op_verdict(cs, "error", "inputs",
                                      "could not make the inputs "
                                      "of this case (%d)",
                                      r);
    if (cs->c.expect_error)
        return run_expect_error(cs);
    char err[ERRLEN] = "";
    const nv_tensor *in[NV_JOB_MAX_TENSORS];
    for (int i = 0; i < cs->n_in; i++)
        in[i] = streamed ? &cs->meta[i] : cs->in[i];
    r = nv_op_infer(s->op, &s->attrs, cs->n_in, in, &cs->out_ndim, cs->out_shape, err, sizeof err);
    if (r != 0)
        return nvw_op_verdict(cs, "error", "inputs", "the catalog refuses the case's inputs: %s", err);
    int32_t n_out, fb;
    r = nvw_op_forward(cs, &cs->out, &n_out, &fb, err);
    cs->have_out = true;
    if (fb && json_object_set_new(cs->cj, "fell_back", json_true()))
        return -ENOMEM;
    if (r != NV_OK)
        return nvw_op_verdict(cs, "error", "backend_error", "the backend returned %s: '%s'", nvw_op_code_name(r),
                       err);
    r = nvw_op_check_output(cs, n_out);
    if (r <= 0)
        return r;
    cs->got = nvw_tensor_from_view(&cs->out, false);
    if (!cs->got)
        return nvw_op_verdict(cs, "failed", "bad_output", "the output view could not be decoded");
    bool det = s->repeat > 1 ? nvw_op_repeat_runs(cs) == 1 : true;
    r = streamed ? nvw_op_reference_streamed(cs, err) : nvw_op_reference(cs, err);
    if (r == -ENOMEM || r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0)
        return nvw_op_verdict(cs, "error", "reference", "%s", err);
    r = compare_case(cs, det);
    if (r < 0)
        return r;
    const char *v = json_string_value(json_object_get(cs->cj, "verdict"));
    if (v && strcmp(v, "failed") == 0)
        return nvw_op_report_failure(cs);
    return 0;
}

static json_t *case_header(const case_state *cs)
{
    const nv_jobspec *s = cs->s;
    json_t *shape =
        json_array_get(json_object_get(cs->job->b.spec_json, "shapes"), (size_t)cs->c.shape_index);
    json_t *cj =
        json_pack("{sI ss ss ss sO ss ss sI}", "index", (json_int_t)cs->c.index, "op", s->op->name,
                  "dtype", nv_dtype_name(cs->c.dtype), "out_dtype", nv_dtype_name(cs->out_dt),
                  "shape", shape ? shape : json_null(), "layout", nv_layout_name(cs->c.layout),
                  "input", nv_input_class_name(cs->c.cls), "sample", (json_int_t)cs->c.sample);
    if (!cj)
        return NULL;
    if (json_object_set_new(cj, "seed", json_integer((json_int_t)s->seed)) ||
        (cs->c.expect_error &&
         json_object_set_new(cj, "expect_error", json_string(nv_expect_kind_name(cs->c.expect))))) {
        json_decref(cj);
        return NULL;
    }
    return cj;
}

json_t *nvw_case_run(nvw_op_job *job, void *ctx, int64_t i)
{
    case_state cs = {.job = job, .s = job->spec, .ctx = ctx};
    if (nv_jobspec_case(cs.s, i, &cs.c) < 0)
        return NULL;
    cs.out_dt = nv_jobspec_out_dtype(cs.s, cs.c.dtype);
    cs.cj = case_header(&cs);
    if (!cs.cj)
        return NULL;
    int r = run_body(&cs);
    if (r == -ENOMEM && nvw_op_verdict(&cs, "error", "out_of_memory", "out of memory") < 0) {
        json_decref(cs.cj);
        cs.cj = NULL;
    }
    if (cs.have_out)
        nvw_op_release(&cs, &cs.out);
    for (int k = 0; k < cs.n_views; k++)
        nvw_view_free(&cs.views[k]);
    for (int k = 0; k < cs.n_in; k++)
        nv_tensor_free(cs.in[k]);
    nv_tensor_free(cs.got);
    nv_tensor_free(cs.hi);
    nv_tensor_free(cs.lo);
    nv_tensor_free(cs.abs);
    nv_tensor_free(cs.abs_exp);
    nv_tensor_free(cs.peak);
    return cs.cj;
}
