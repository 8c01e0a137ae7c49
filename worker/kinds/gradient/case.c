/* One case of a gradient job (worker/kinds/gradient/gradient_internal.h). The case JSON holds a
 * "checks" object (contract, formula, device, determinism, double_backward,
 * second_order), each with a verdict per differentiable input and its first
 * wrong elements; "failed_check" names the first failing one. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/inputs.h"
#include "core/numerics/rng.h"
#include "core/ref/backward.h"
#include "gradient_internal.h"
#include "worker/runner/err.h"

#define ERRLEN 512

/* Device check default (docs/JOBS.md): allowed = ulp(ref)/2 + u_s sens +
 * (8 + n) u_c mag. u_s: the storage dtype's unit roundoff, times the gradient's
 * sensitivity to the saved output rounded to storage; u_c: fp32's (fp64's for
 * fp64 data), the compute and accumulation precision the default assumes, times
 * the running-error magnitude mag (Higham §3.1) with 8 roundings of the backward
 * chain plus n, the backward's accumulation length (Higham §4.2, recursive
 * summation in any order: n - 1). */
#define DEVICE_REASON                                                                              \
    "|got - ref| <= ulp(max(|got|, |ref|))/2 + u_storage * sens + (8 + n) * u_compute * mag: "     \
    "the saved output rounded to the storage dtype, at most 8 compute roundings per element, "     \
    "and a backward "                                                                              \
    "accumulation of length n in fp32 (fp64 for fp64 data; matmul: its acc dtype) in any order "   \
    "(Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1 and §4.2)"

typedef struct gcase {
    gjob *j;
    const nv_jobspec *s;
    void *ctx;
    nv_job_case c;
    json_t *cj, *checks, *failed;
    int n_in;
    nv_tensor meta[NV_JOB_MAX_TENSORS];
    nv_tensor *in[NV_JOB_MAX_TENSORS];
    nv_tensor_view views[NV_JOB_MAX_TENSORS];
    int n_views;
    int out_ndim;
    int64_t out_shape[NV_MAX_DIMS], out_n;
    nv_tensor *gy;
    nv_tensor_view gy_view;
    bool have_gy_view;
    const nvw_grad_given *given;         /* NULL in a job */
    nv_tensor *dy;                       /* device forward output (decoded) */
    nv_tensor *dgrad[NV_OP_MAX_INPUTS];  /* device gradients by op input index */
    nv_tensor *dgrad2[NV_OP_MAX_INPUTS]; /* the determinism check's second run */
    const char *dev_cls;                 /* the device check's failure class */
    nvw_grad_dbl dbl;                    /* the double-backward check (double.c) */
    bool det_failed;
    bool probe; /* nvw_grad_probe_backward: call backward even when forward fails */
} gcase;

json_t *nvw_grad_index_json(const nv_tensor *t, int64_t lin)
{
    json_t *a = json_array();
    int64_t idx[NV_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? lin % t->shape[d] : 0;
        lin = t->shape[d] ? lin / t->shape[d] : 0;
    }
    for (int d = 0; a && d < t->ndim; d++)
        json_array_append_new(a, json_integer(idx[d]));
    return a;
}

static void fail_check(gcase *g, const char *check)
{
    size_t k;
    json_t *v;
    json_array_foreach(g->failed, k, v) if (!strcmp(json_string_value(v), check)) return;
    json_array_append_new(g->failed, json_string(check));
}

/* Given tensors (repro_probe.c, minimize.c): copies of the inputs and the output gradient. */
static int given_inputs(gcase *g)
{
    const nvw_grad_given *gv = g->given;
    for (int i = 0; i < gv->n_in; i++) {
        if (!(g->in[i] = nv_tensor_contiguous(gv->in[i])))
            return -ENOMEM;
        g->n_in = i + 1;
        int r = nvw_view_from_tensor(g->in[i], &g->views[i]);
        if (r < 0)
            return r;
        g->n_views = i + 1;
    }
    char err[256];
    int r = nv_op_infer(g->s->op, &g->s->attrs, g->n_in, (const nv_tensor *const *)g->in,
                        &g->out_ndim, g->out_shape, err, sizeof err);
    if (r < 0)
        return r;
    if (gv->gy->ndim != g->out_ndim)
        return -EINVAL;
    for (int d = 0; d < g->out_ndim; d++)
        if (gv->gy->shape[d] != g->out_shape[d])
            return -EINVAL;
    if (!(g->gy = nv_tensor_contiguous(gv->gy)))
        return -ENOMEM;
    g->out_n = g->gy->numel;
    r = nvw_view_from_tensor(g->gy, &g->gy_view);
    g->have_gy_view = r == 0;
    return r;
}

static int make_inputs(gcase *g)
{
    const nv_op_def *op = g->s->op;
    if (g->given)
        return given_inputs(g);
    g->n_in = nv_jobspec_tensors(g->s, g->c.shape, g->c.dtype, -1, g->meta, NV_JOB_MAX_TENSORS);
    if (g->n_in < 0)
        return g->n_in;
    for (int i = 0; i < g->n_in; i++) {
        const nv_tensor *m = &g->meta[i];
        if (!(g->in[i] = nv_tensor_new(m->dtype, m->ndim, m->shape)))
            return -ENOMEM;
        nv_input_request rq = {
            .domain = nv_op_input_domain(op, i),
            .tensor_index = i,
            .dtype = m->dtype,
            .target = g->c.dtype,
            .cls = g->c.cls,
            .seed = g->s->seed,
            .case_index = (uint32_t)g->c.index,
            /* embedding's ids pick rows of its weight [V, D]; cross_entropy's
             * targets are classes of its logits [N, C] */
            .index_range = op->kind == NV_OPK_LAYOUT && g->meta[0].ndim == 2 ? g->meta[0].shape[0]
                           : g->meta[0].ndim > 1                             ? g->meta[0].shape[1]
                                                                             : 1,
        };
        int r = nv_inputs_generate(&rq, g->in[i]->data, m->numel);
        if (r < 0)
            return r;
    }
    int r = nv_op_grad_domain(op, &g->s->attrs, g->n_in, g->in);
    for (int i = 0; r == 0 && i < g->n_in; i++) {
        if ((r = nvw_view_from_tensor(g->in[i], &g->views[i])) < 0)
            return r;
        g->n_views = i + 1;
    }
    char err[256];
    r = r ? r
          : nv_op_infer(op, &g->s->attrs, g->n_in, (const nv_tensor *const *)g->in, &g->out_ndim,
                        g->out_shape, err, sizeof err);
    if (r < 0)
        return r;
    g->gy = nv_tensor_new(g->c.dtype, g->out_ndim, g->out_shape);
    if (!g->gy)
        return -ENOMEM;
    g->out_n = g->gy->numel;
    nv_rng rng;
    nv_rng_init(&rng, g->s->seed, (uint32_t)g->c.index, 0x80u);
    for (int64_t o = 0; o < g->out_n; o++)
        g->gy->data[o] = nv_dtype_round(g->c.dtype, nv_rng_normal(&rng), &NV_ROUND_DEFAULT, 0);
    r = nvw_view_from_tensor(g->gy, &g->gy_view);
    g->have_gy_view = r == 0;
    return r;
}

/* ---- formula and second order ---- */

static json_t *report_json(const gcase *g, int i, const nvw_grad_report *r, bool second)
{
    json_t *o = json_pack("{s:b, s:s, s:I, s:I, s:o, s:o, s:I, s:I}", "passed", r->passed, "method",
                          r->what, "checked", (json_int_t)r->checked, "mismatches",
                          (json_int_t)r->mismatches, "max_abs_error", nvw_json_num(r->max_abs_err),
                          "worst_ratio", nvw_json_num(r->worst_ratio), "forward_calls",
                          (json_int_t)r->forward_calls, "vjp_calls", (json_int_t)r->vjp_calls);
    json_t *bad = json_array();
    for (int k = 0; o && bad && k < r->n_bad; k++) {
        const nvw_grad_bad *b = &r->bad[k];
        json_t *e = json_pack("{s:o, s:o}", "analytic", nvw_json_num(b->analytic), "numeric",
                              nvw_json_num(b->numeric));
        if (e && b->allowed > 0)
            json_object_set_new(e, "allowed", nvw_json_num(b->allowed));
        if (b->in_index >= 0)
            json_object_set_new(e, "input_index", nvw_grad_index_json(g->in[i], b->in_index));
        if (b->out_index >= 0)
            json_object_set_new(e, second ? "gradient_index" : "output_index",
                                second ? nvw_grad_index_json(g->in[i], b->out_index)
                                       : nvw_grad_index_json(g->gy, b->out_index));
        json_array_append_new(bad, e);
    }
    if (o && second) { /* the error model's choices (checks.c "second order") */
        json_object_set_new(o, "vjp2_calls", json_integer((json_int_t)r->vjp2_calls));
        json_object_set_new(o, "step",
                            json_pack("{s:o, s:o}", "min", nvw_json_num(r->step_min), "max",
                                      nvw_json_num(r->step_max)));
        json_object_set_new(o, "eval_len", json_integer((json_int_t)r->eval_len));
    }
    if (o && bad && r->n_bad)
        json_object_set_new(o, "first_mismatches", bad);
    else
        json_decref(bad);
    return o;
}

/* The formula check (first order) or second order, per differentiable input,
 * on fp64 copies of the case's inputs. */
static int fp64_checks(gcase *g, bool second)
{
    const nv_gradspec *gs = g->j->g;
    nv_tensor *cp[NV_JOB_MAX_TENSORS] = {0};
    int r = 0;
    for (int i = 0; i < g->n_in; i++)
        if (!(cp[i] = nv_tensor_contiguous(g->in[i])))
            r = -ENOMEM;
    nvw_grad_problem p = {
        .op = g->s->op,
        .attrs = &g->s->attrs,
        .n_in = g->n_in,
        .in = cp,
        .gy = g->gy->data,
        .eps = gs->eps.value,
        .atol = gs->atol.value,
        .rtol = gs->rtol.value,
        .seed = g->s->seed,
        .case_index = (uint32_t)g->c.index,
    };
    json_t *per = json_object();
    const char *check = second ? "second_order" : "formula";
    json_object_set_new(g->checks, check, per);
    nvw_grad_report reps[NV_OP_MAX_INPUTS], sts[NV_OP_MAX_INPUTS];
    if (r == 0 && !second)
        r = nvw_grad_formula_all(&p, gs->fast, reps, sts);
    for (int i = 0; r == 0 && i < g->s->op->n_inputs; i++) {
        if (!nv_op_grad_input(g->s->op, i))
            continue;
        nvw_grad_report rep = reps[i], st = sts[i];
        if (second && (r = nvw_grad_second(&p, i, gs->fast, &rep)) < 0)
            break;
        json_t *o = report_json(g, i, &rep, second);
        if (!second && o)
            json_object_set_new(o, "structure", report_json(g, i, &st, false));
        json_object_set_new(per, g->s->op->inputs[i].name, o);
        if (!rep.passed || (!second && !st.passed))
            fail_check(g, check);
    }
    if (second) {
        json_object_set_new(per, "device_double_backward",
                            json_string(g->dbl.offer ? g->dbl.offer : "not checked"));
        json_object_set_new(per, "error_model", json_string(NVW_GRAD_SECOND_MODEL));
    }
    for (int i = 0; i < g->n_in; i++)
        nv_tensor_free(cp[i]);
    return r;
}

/* ---- device ---- */

typedef struct dev_run {
    nv_tensor_view y;
    nv_tensor_view grads[NV_OP_MAX_INPUTS];
    int n_grads;
    bool have_y;
    nv_tensor_view saved[NV_JOB_MAX_TENSORS + 1]; /* views of the case's inputs and y */
    int n_saved;
} dev_run;

static void dev_release(gcase *g, dev_run *d)
{
    const nv_backend *t = g->j->b.table;
    if (d->have_y && t->release_tensor)
        t->release_tensor(g->ctx, &d->y);
    for (int k = 0; k < d->n_grads; k++)
        if (d->grads[k].data && t->release_tensor)
            t->release_tensor(g->ctx, &d->grads[k]);
    memset(d, 0, sizeof *d);
}

/* Forward (for the saved output), then backward with the saved tensors the
 * backend's describe() lists for the op. */
static int dev_call(gcase *g, dev_run *d, char *err)
{
    const nv_op_def *op = g->s->op;
    memset(d, 0, sizeof *d);
    nv_op_call fc = {.op = op->name,
                     .attrs_json = g->s->attrs_json,
                     .out_dtype = (int32_t)g->c.dtype,
                     .n_inputs = g->n_in,
                     .inputs = g->views,
                     .n_outputs = 1,
                     .outputs = &d->y};
    err[0] = 0;
    int r = g->j->b.table->forward(g->ctx, &fc, err, ERRLEN);
    d->have_y = r == NV_OK;
    if (r != NV_OK && !g->probe)
        return r;
    nv_tensor_view *saved = d->saved;
    int n_saved = 0;
    size_t k;
    json_t *v;
    json_array_foreach(g->j->saved, k, v)
    {
        const char *name = json_string_value(v);
        if (n_saved > NV_JOB_MAX_TENSORS || !name)
            break;
        if (!strncmp(name, "input:", 6) && atoi(name + 6) < g->n_in)
            saved[n_saved++] = g->views[atoi(name + 6)];
        else if (!strcmp(name, "output:0") && d->have_y)
            saved[n_saved++] = d->y;
    }
    d->n_saved = n_saved;
    for (int i = 0; i < op->n_inputs; i++)
        d->n_grads += nv_op_grad_input(op, i);
    err[0] = 0;
    nv_backward_call bc = {.op = op->name,
                           .attrs_json = g->s->attrs_json,
                           .n_inputs = op->n_inputs,
                           .inputs = g->views,
                           .n_saved = n_saved,
                           .saved = saved,
                           .grad_output = &g->gy_view,
                           .n_grads = d->n_grads,
                           .grad_inputs = d->grads};
    return g->j->b.table->backward(g->ctx, &bc, err, ERRLEN);
}

/* The device check's class: a backend error outranks a malformed gradient,
 * which outranks a gradient outside its tolerance. */
static void dev_fail(gcase *g, const char *cls)
{
    static const char *const rank[] = {"gradient_mismatch", "bad_output", "backend_error"};
    int have = -1, want = 0;
    for (int k = 0; k < 3; k++) {
        if (g->dev_cls && !strcmp(g->dev_cls, rank[k]))
            have = k;
        if (!strcmp(cls, rank[k]))
            want = k;
    }
    if (want > have)
        g->dev_cls = rank[want];
    fail_check(g, "device");
}

/* The tolerance's dtypes to judge by: stored ones (given cases) or defaults. */
static void judge_dtypes(const gcase *g, const char *name, nv_dtype *us, nv_dtype *uc)
{
    const json_t *t = g->given ? json_object_get(g->given->tolerance, name) : NULL;
    nv_dtype d;
    if (t && nv_dtype_from_name(json_string_value(json_object_get(t, "u_storage")), &d) == 0)
        *us = d;
    if (t && nv_dtype_from_name(json_string_value(json_object_get(t, "u_compute")), &d) == 0)
        *uc = d;
}

static double unit_roundoff(nv_dtype dt)
{
    return ldexp(1, -(nv_dtype_get(dt)->mant_bits + 1));
}

const char *nvw_grad_dtype_label(const gjob *j)
{
    return j->grad_dtype_name ? j->grad_dtype_name : "input";
}

nv_dtype nvw_grad_dtype(const gjob *j, nv_dtype input_dtype)
{
    /* not parsed (a job state built by hand): the ABI's default, "input" */
    return !j->grad_dtype_name || j->grad_dtype_input ? input_dtype : j->grad_dtype;
}

json_t *nvw_grad_malformed(const gjob *j, const nv_tensor *in, const nv_tensor_view *gv)
{
    nv_dtype want = nvw_grad_dtype(j, in->dtype);
    if (gv->dtype == (int32_t)want && gv->ndim == in->ndim)
        return NULL;
    const char *got = nv_dtype_name((nv_dtype)gv->dtype);
    json_t *o = gv->dtype != (int32_t)want
                    ? json_sprintf("gradient dtype '%s' is not the declared one: '%s' (describe: "
                                   "\"gradient_dtype\": \"%s\")",
                                   got ? got : "?", nv_dtype_name(want), nvw_grad_dtype_label(j))
                    : json_string("gradient rank differs");
    return json_pack("{s:b, s:o, s:s}", "passed", 0, "error", o, "got_dtype", got ? got : "?");
}

nv_dtype nvw_grad_compute_dtype(const nv_jobspec *s, nv_dtype dt)
{
    return s->op->kind == NV_OPK_MATMUL ? s->attrs.acc_dtype
           : dt == NV_DT_FP64           ? NV_DT_FP64
                                        : NV_DT_FP32;
}

/* Compare gradient i of the device with the reference; add to per. */
static int compare_grad(gcase *g, int i, const nv_tensor_view *gv, json_t *per)
{
    const nv_op_def *op = g->s->op;
    const char *name = op->inputs[i].name;
    nv_dtype dt = g->in[i]->dtype, gdt = nvw_grad_dtype(g->j, dt);
    json_t *bad_out = nvw_grad_malformed(g->j, g->in[i], gv);
    if (bad_out) {
        json_object_set_new(per, name, bad_out);
        dev_fail(g, "bad_output");
        return 0;
    }
    nv_tensor *got = nvw_tensor_from_view(gv, false);
    int64_t n = g->in[i]->numel;
    double *ref = malloc(sizeof(double) * (size_t)(n + 1));
    double *mag = malloc(sizeof(double) * (size_t)(n + 1));
    double *sens = calloc((size_t)(n + 1), sizeof(double));
    double *gx[NV_OP_MAX_INPUTS] = {0}, *mg[NV_OP_MAX_INPUTS] = {0};
    int r = got && ref && mag && sens ? 0 : -ENOMEM;
    gx[i] = ref, mg[i] = mag;
    if (r == 0)
        r = nv_op_vjp(op, &g->s->attrs, g->n_in, (const nv_tensor *const *)g->in, g->gy->data, gx,
                      mg);
    if (r == 0 && i == 0)
        r = nv_op_vjp_sens(op, &g->s->attrs, g->n_in, (const nv_tensor *const *)g->in, g->gy->data,
                           sens);
    int64_t nred =
        nv_op_vjp_reduction_len(op, &g->s->attrs, g->n_in, (const nv_tensor *const *)g->in, i);
    nv_dtype cdt = nvw_grad_compute_dtype(g->s, dt), sdt = dt;
    judge_dtypes(g, name, &sdt, &cdt);
    double us = unit_roundoff(sdt), uc = unit_roundoff(cdt);
    int64_t bad = 0;
    double worst = 0, max_abs = 0;
    json_t *first = json_array();
    for (int64_t e = 0; r == 0 && e < n; e++) {
        double gotv = got->data[e], err = fabs(gotv - ref[e]);
        /* the final store rounds the computed value to the gradient's dtype: half
         * an ulp of its binade */
        double ulp = fmax(nv_dtype_ulp(gdt, ref[e]), nv_dtype_ulp(gdt, gotv));
        double allowed = ulp / 2 + us * sens[e] + (8 + (double)nred) * uc * mag[e];
        if (isnan(err))
            err = INFINITY;
        max_abs = fmax(max_abs, err);
        worst = fmax(worst, err / allowed);
        if (err <= allowed)
            continue;
        if (bad++ < 8)
            json_array_append_new(
                first,
                json_pack("{s:o, s:o, s:o, s:o, s:o}", "index", nvw_grad_index_json(g->in[i], e),
                          "got", nvw_json_num(gotv), "expected", nvw_json_num(ref[e]), "abs_error",
                          nvw_json_num(err), "allowed", nvw_json_num(allowed)));
    }
    json_t *o = json_pack(
        "{s:b, s:s, s:s, s:I, s:I, s:o, s:o, s:{s:s, s:s, s:s, s:I, s:s, s:s}}", "passed", bad == 0,
        "dtype", nv_dtype_name(gdt), "gradient_dtype", nvw_grad_dtype_label(g->j), "compared",
        (json_int_t)n, "mismatches", (json_int_t)bad, "max_abs_error", nvw_json_num(max_abs),
        "headroom", nvw_json_num(worst), "tolerance", "metric", "gradient_bound", "u_storage",
        nv_dtype_name(sdt), "u_compute", nv_dtype_name(cdt), "reduction_len", (json_int_t)nred,
        "reason_code", nred > 1 ? "reduction_length" : "dtype_precision", "reason", DEVICE_REASON);
    if (o && bad)
        json_object_set_new(o, "first_mismatches", first);
    else
        json_decref(first);
    json_object_set_new(per, name, o);
    if (bad)
        dev_fail(g, "gradient_mismatch");
    nv_tensor_free(got);
    free(ref);
    free(mag);
    free(sens);
    return r;
}

/* Bit equality of two gradient views (contiguous, same shape). */
static int64_t first_diff(const nv_tensor_view *a, const nv_tensor_view *b, int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        if (nv_dtype_load_bits((nv_dtype)a->dtype, a->data, e) !=
            nv_dtype_load_bits((nv_dtype)b->dtype, b->data, e))
            return e;
    return -1;
}

static int determinism(gcase *g, const dev_run *d1, char *err)
{
    dev_run d2;
    int r = dev_call(g, &d2, err);
    json_t *o = json_object();
    json_object_set_new(g->checks, "determinism", o);
    json_object_set_new(o, "declared_nondeterministic", json_boolean(g->j->nondeterministic));
    bool same = r == NV_OK;
    for (int k = 0; same && k < d1->n_grads; k++) {
        int64_t e = first_diff(&d1->grads[k], &d2.grads[k], g->in[k]->numel);
        if (e < 0)
            continue;
        same = false;
        nv_tensor *a = nvw_tensor_from_view(&d1->grads[k], false);
        nv_tensor *b = nvw_tensor_from_view(&d2.grads[k], false);
        if (a && b)
            json_object_set_new(o, "first_difference",
                                json_pack("{s:s, s:o, s:o, s:o}", "input", g->s->op->inputs[k].name,
                                          "index", nvw_grad_index_json(g->in[k], e), "run_1",
                                          nvw_json_num(a->data[e]), "run_2",
                                          nvw_json_num(b->data[e])));
        nv_tensor_free(a);
        nv_tensor_free(b);
    }
    json_object_set_new(o, "passed", json_boolean(same || g->j->nondeterministic));
    json_object_set_new(o, "bitwise_equal", json_boolean(same));
    if (!same && !g->j->nondeterministic) {
        fail_check(g, "determinism");
        g->det_failed = true;
    }
    for (int k = 0, i = 0; r == NV_OK && i < g->s->op->n_inputs; i++) {
        if (!nv_op_grad_input(g->s->op, i))
            continue;
        if (d2.grads[k].data)
            g->dgrad2[i] = nvw_tensor_from_view(&d2.grads[k], false);
        k++;
    }
    dev_release(g, &d2);
    return 0;
}

/* Order 2: the backend's double backward with the device check's operands. */
static int double_backward(gcase *g, const dev_run *d)
{
    nvw_grad_dbl *b = &g->dbl;
    *b = (nvw_grad_dbl){.j = g->j,
                        .ctx = g->ctx,
                        .s = g->s,
                        .case_index = g->c.index,
                        .n_in = g->n_in,
                        .in = g->in,
                        .views = g->views,
                        .gy = g->gy,
                        .gy_view = &g->gy_view,
                        .saved = d->saved,
                        .n_saved = d->n_saved,
                        .checks = g->checks};
    int r = nvw_grad_double_backward(b);
    if (b->cls)
        fail_check(g, "double_backward");
    return r;
}

static int device_checks(gcase *g)
{
    char err[ERRLEN];
    dev_run d;
    int r = dev_call(g, &d, err);
    json_t *per = json_object();
    json_object_set_new(g->checks, "device", per);
    if (d.have_y && d.y.data)
        g->dy = nvw_tensor_from_view(&d.y, false);
    if (r != NV_OK) {
        json_object_set_new(per, "error", json_sprintf("the backend returned %d: '%s'", r, err));
        dev_fail(g, "backend_error");
        dev_release(g, &d);
        g->dbl.offer = "not checked: the device check's backward failed";
        return 0;
    }
    for (int k = 0, i = 0; i < g->s->op->n_inputs; i++) {
        if (!nv_op_grad_input(g->s->op, i))
            continue;
        if (d.grads[k].data)
            g->dgrad[i] = nvw_tensor_from_view(&d.grads[k], false);
        k++;
    }
    int k = 0;
    for (int i = 0; r == 0 && i < g->s->op->n_inputs; i++)
        if (nv_op_grad_input(g->s->op, i))
            r = compare_grad(g, i, &d.grads[k++], per);
    if (r == 0 && (g->s->repeat > 1 || g->s->deterministic || (g->given && g->given->determinism)))
        r = determinism(g, &d, err);
    if (r == 0 && !g->given && g->j->g->order == 2)
        r = double_backward(g, &d);
    dev_release(g, &d);
    return r;
}

static json_t *header(const gcase *g)
{
    json_t *shape =
        json_array_get(json_object_get(g->j->b.spec_json, "shapes"), (size_t)g->c.shape_index);
    return json_pack(
        "{s:I, s:s, s:s, s:O?, s:s, s:I, s:I, s:i, s:s}", "index", (json_int_t)g->c.index, "op",
        g->s->op->name, "dtype", nv_dtype_name(g->c.dtype), "shape", shape, "input",
        nv_input_class_name(g->c.cls), "sample", (json_int_t)g->c.sample, "seed",
        (json_int_t)g->s->seed, "order", g->j->g->order, "mode", g->j->g->fast ? "fast" : "full");
}

static int body(gcase *g)
{
    if (g->j->contract) { /* the device contradicts its describe() (run.c) */
        json_object_set_new(g->checks, "contract", json_deep_copy(g->j->contract));
        fail_check(g, "contract");
    }
    int r = make_inputs(g);
    if (r < 0)
        return r;
    if (g->given)
        return device_checks(g);
    if ((r = fp64_checks(g, false)) < 0)
        return r;
    if (g->j->contract_refused) /* it refuses backward: the contract check says how */
        g->dbl.offer = "not checked: the device refuses backward";
    else if ((r = device_checks(g)) < 0)
        return r;
    if (g->j->g->order == 2 && (r = fp64_checks(g, true)) < 0)
        return r;
    return 0;
}

/* The failure class and the check that found it, for the reproducer: the
 * device check's class, else "nondeterminism" from the determinism check; NULL
 * when the device passed both (a formula or second-order failure is the
 * reference's, not the device's, and has no reproducer). */
static const char *failure_class(const gcase *g, const char **ret_check)
{
    *ret_check = g->dev_cls ? "device" : g->det_failed ? "determinism" : NULL;
    return g->dev_cls ? g->dev_cls : g->det_failed ? "nondeterminism" : NULL;
}

/* The device failures without a reproducer (the replay runs the device and
 * determinism checks only): the double-backward check's class, else
 * "contract_mismatch". */
static const char *unreproduced_class(const gcase *g)
{
    return g->dbl.cls ? g->dbl.cls : g->j->contract ? "contract_mismatch" : NULL;
}

static void case_done(gcase *g)
{
    for (int k = 0; k < g->n_views; k++)
        nvw_view_free(&g->views[k]);
    if (g->have_gy_view)
        nvw_view_free(&g->gy_view);
    for (int k = 0; k < g->n_in; k++)
        nv_tensor_free(g->in[k]);
    for (int k = 0; k < NV_OP_MAX_INPUTS; k++) {
        nv_tensor_free(g->dgrad[k]);
        nv_tensor_free(g->dgrad2[k]);
    }
    nv_tensor_free(g->dy);
    nv_tensor_free(g->gy);
}

static json_t *run_case(gcase *g, int64_t i)
{
    if (nv_jobspec_case(g->s, i, &g->c) < 0 || !(g->cj = header(g)))
        return NULL;
    g->checks = json_object();
    g->failed = json_array();
    json_object_set_new(g->cj, "checks", g->checks);
    json_object_set_new(g->cj, "failed_checks", g->failed);
    int r = body(g);
    const char *fc = json_string_value(json_array_get(g->failed, 0)), *check = NULL;
    const char *cls = failure_class(g, &check);
    json_object_set_new(g->cj, "verdict", json_string(r < 0 ? "error" : fc ? "failed" : "passed"));
    if (fc)
        json_object_set_new(g->cj, "failed_check", json_string(fc));
    const char *cls_json = cls ? cls : unreproduced_class(g);
    if (r == 0 && cls_json)
        json_object_set_new(g->cj, "failure_class", json_string(cls_json));
    if (r < 0)
        json_object_set_new(g->cj, "error", json_sprintf("the case could not run (%d)", r));
    if (g->given) { /* "shape" stays the job case's; the given tensors' own shapes */
        json_t *sh = json_array();
        for (int k = 0; sh && k < g->n_in; k++)
            json_array_append_new(sh, nvw_grad_shape_json(g->in[k]));
        json_object_set_new(g->cj, "input_shapes", sh);
    }
    nvw_grad_material m = {.n_in = g->n_in,
                           .in = g->in,
                           .gy = g->gy,
                           .dy = g->dy,
                           .grad = g->dgrad,
                           .grad2 = g->dgrad2,
                           .cls = cls,
                           .check = check};
    if (r == 0 && (g->given || cls) && nvw_grad_hand_over(g->j, g->cj, &m, g->given) < 0) {
        json_decref(g->cj);
        g->cj = NULL;
    }
    case_done(g);
    return g->cj;
}

json_t *nvw_grad_case(gjob *j, void *ctx, int64_t i)
{
    gcase g = {.j = j, .s = j->g->base, .ctx = ctx};
    return run_case(&g, i);
}

json_t *nvw_grad_case_given(gjob *j, void *ctx, int64_t index, const nvw_grad_given *gv)
{
    gcase g = {.j = j, .s = j->g->base, .ctx = ctx, .given = gv};
    return run_case(&g, index);
}

json_t *nvw_grad_settings(const gjob *j)
{
    const nv_gradspec *g = j->g;
    return json_pack("{s:i, s:s, s:{s:f, s:s, s:b}, s:{s:f, s:s, s:b}, s:{s:f, s:s, s:b}}", "order",
                     g->order, "mode", g->fast ? "fast" : "full", "eps", "value", g->eps.value,
                     "reason", g->eps.reason, "from_job", g->eps.set, "atol", "value",
                     g->atol.value, "reason", g->atol.reason, "from_job", g->atol.set, "rtol",
                     "value", g->rtol.value, "reason", g->rtol.reason, "from_job", g->rtol.set);
}

int nvw_grad_probe_backward(gjob *j, void *ctx, int *ret_code, char *msg, size_t msglen)
{
    gcase g = {.j = j, .s = j->g->base, .ctx = ctx, .probe = true};
    int r = nv_jobspec_case(g.s, 0, &g.c);
    if (r == 0)
        r = make_inputs(&g);
    if (r == 0) {
        char err[ERRLEN];
        dev_run d;
        *ret_code = dev_call(&g, &d, err);
        snprintf(msg, msglen, "%s", err);
        dev_release(&g, &d);
    }
    case_done(&g);
    return r < 0 ? r : 0;
}

int nvw_grad_dtype_parse(gjob *j, const json_t *describe, char **ret_err)
{
    const json_t *v = json_object_get(describe, "gradient_dtype");
    const char *name = v ? json_string_value(v) : "input";
    nv_dtype dt = NV_DT_FP32;
    bool input = name && !strcmp(name, "input");
    bool ok = input || (name && nv_dtype_from_name(name, &dt) == 0 &&
                        (dt == NV_DT_FP64 || dt == NV_DT_FP32 || dt == NV_DT_TF32 ||
                         dt == NV_DT_BF16 || dt == NV_DT_FP16));
    if (!ok)
        return nvw_set_err(ret_err, -EPROTO,
                           "backend '%s' declares describe \"gradient_dtype\": '%s': expected "
                           "\"input\" or one of fp64, fp32, tf32, bf16, fp16 "
                           "(docs/BACKEND_ABI.md \"describe()\")",
                           j->b.backend_spec, name ? name : "(not a string)");
    j->grad_dtype_name = name;
    j->grad_dtype_input = input;
    j->grad_dtype = dt;
    return 0;
}
