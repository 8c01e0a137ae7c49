/* The double-backward check of a gradient case of order 2 (gradient_internal.h
 * nvw_grad_double_backward, docs/JOBS.md "double_backward"): the backend's
 * nv_backend.double_backward (ABI version 2) against the reference second-order
 * VJP (core/ref/backward.h nv_op_vjp2) on the same inputs, cotangent and
 * directions. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "core/ref/backward.h"
#include "gradient_internal.h"

#define ERRLEN 512

/* Default tolerance: a framework composes the double backward from first-order
 * ops, each rounding its result to the tensor's (storage) dtype, so up to 8
 * storage roundings per element besides the compute-dtype chain and the sums of
 * length n (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
 * §3.1 running error bounds, §4.2 summation). */
#define DBL_ROUNDINGS 8
#define DBL_REASON                                                                                 \
    "|got - ref| <= ulp(max(|got|, |ref|))/2 + (8 u_storage + (8 + n) u_compute) * mag2: a "       \
    "double backward composed of first-order ops, each result rounded to the storage dtype (at "   \
    "most 8 per element), the chain in the compute dtype and its sums of length n in fp32 (fp64 "  \
    "for fp64 data; matmul: its acc dtype) in any order; mag2 the second-order VJP with |.| on "   \
    "every term (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1 and §4.2)"

static double unit_roundoff(nv_dtype dt)
{
    return ldexp(1, -(nv_dtype_get(dt)->mant_bits + 1));
}

/* The directions of the call: standard normal, one per differentiable input,
 * rounded to the dtype its gradient comes in (they are the cotangent of the
 * gradients), from the case's Philox stream. */
static int directions(const nvw_grad_dbl *d, nv_tensor **dir, nv_tensor_view *views, int *ret_n)
{
    const nv_op_def *op = d->s->op;
    int n = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        if (!nv_op_grad_input(op, i))
            continue;
        nv_dtype gdt = nvw_grad_dtype(d->j, d->in[i]->dtype);
        if (!(dir[i] = nv_tensor_new(gdt, d->in[i]->ndim, d->in[i]->shape)))
            return -ENOMEM;
        nv_rng rng;
        nv_rng_init(&rng, d->s->seed, (uint32_t)d->case_index, 0x400u + (uint32_t)i);
        for (int64_t e = 0; e < dir[i]->numel; e++)
            dir[i]->data[e] = nv_dtype_round(gdt, nv_rng_normal(&rng), &NV_ROUND_DEFAULT, 0);
        int r = nvw_view_from_tensor(dir[i], &views[n]);
        if (r < 0)
            return r;
        *ret_n = ++n;
    }
    return 0;
}

/* A backend error outranks a malformed result, which outranks a mismatch. */
static void fail(nvw_grad_dbl *d, const char *cls)
{
    static const char *const rank[] = {"second_order_mismatch", "bad_output", "backend_error"};
    int have = -1, want = 0;
    for (int k = 0; k < 3; k++) {
        if (d->cls && !strcmp(d->cls, rank[k]))
            have = k;
        if (!strcmp(cls, rank[k]))
            want = k;
    }
    if (want > have)
        d->cls = rank[want];
}

/* The device's second-order VJP of input i against nv_op_vjp2; add to per. */
static int compare(nvw_grad_dbl *d, int i, nv_tensor *const *dir, const nv_tensor_view *hv,
                   json_t *per)
{
    const nv_op_def *op = d->s->op;
    const char *name = op->inputs[i].name;
    json_t *bad_out = nvw_grad_malformed(d->j, d->in[i], hv);
    if (bad_out) {
        json_object_set_new(per, name, bad_out);
        fail(d, "bad_output");
        return 0;
    }
    nv_dtype dt = d->in[i]->dtype, gdt = nvw_grad_dtype(d->j, dt);
    nv_dtype cdt = nvw_grad_compute_dtype(d->s, dt);
    nv_tensor *got = nvw_tensor_from_view(hv, false);
    int64_t n = d->in[i]->numel;
    double *ref = malloc(sizeof(double) * (size_t)(n + 1));
    double *mag = malloc(sizeof(double) * (size_t)(n + 1));
    const double *v[NV_OP_MAX_INPUTS] = {0};
    double *hx[NV_OP_MAX_INPUTS] = {0}, *mg[NV_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < op->n_inputs; k++)
        v[k] = dir[k] ? dir[k]->data : NULL;
    hx[i] = ref, mg[i] = mag;
    int r = got && ref && mag ? 0 : -ENOMEM;
    if (r == 0)
        r = nv_op_vjp2(op, &d->s->attrs, d->n_in, (const nv_tensor *const *)d->in, d->gy->data, v,
                       hx, mg);
    int64_t nred =
        nv_op_grad_eval_len(op, &d->s->attrs, d->n_in, (const nv_tensor *const *)d->in, i);
    double k_mag =
        DBL_ROUNDINGS * unit_roundoff(dt) + (DBL_ROUNDINGS + (double)nred) * unit_roundoff(cdt);
    int64_t bad = 0;
    double worst = 0, max_abs = 0;
    json_t *first = json_array();
    for (int64_t e = 0; r == 0 && e < n; e++) {
        double gotv = got->data[e], err = fabs(gotv - ref[e]);
        /* the final store rounds to the gradient's dtype: half an ulp */
        double ulp = fmax(nv_dtype_ulp(gdt, ref[e]), nv_dtype_ulp(gdt, gotv));
        double allowed = ulp / 2 + k_mag * mag[e];
        if (isnan(err))
            err = INFINITY;
        max_abs = fmax(max_abs, err);
        worst = fmax(worst, err / allowed);
        if (err <= allowed)
            continue;
        if (bad++ < 8)
            json_array_append_new(
                first,
                json_pack("{s:o, s:o, s:o, s:o, s:o}", "index", nvw_grad_index_json(d->in[i], e),
                          "got", nvw_json_num(gotv), "expected", nvw_json_num(ref[e]), "abs_error",
                          nvw_json_num(err), "allowed", nvw_json_num(allowed)));
    }
    json_t *o = json_pack(
        "{s:b, s:s, s:s, s:I, s:I, s:o, s:o, s:{s:s, s:s, s:s, s:I, s:s, s:s}}", "passed", bad == 0,
        "dtype", nv_dtype_name(gdt), "gradient_dtype", nvw_grad_dtype_label(d->j), "compared",
        (json_int_t)n, "mismatches", (json_int_t)bad, "max_abs_error", nvw_json_num(max_abs),
        "headroom", nvw_json_num(worst), "tolerance", "metric", "second_order_bound", "u_storage",
        nv_dtype_name(dt), "u_compute", nv_dtype_name(cdt), "reduction_len", (json_int_t)nred,
        "reason_code", nred > 1 ? "reduction_length" : "dtype_precision", "reason", DBL_REASON);
    if (o && bad)
        json_object_set_new(o, "first_mismatches", first);
    else
        json_decref(first);
    json_object_set_new(per, name, o);
    if (bad)
        fail(d, "second_order_mismatch");
    nv_tensor_free(got);
    free(ref);
    free(mag);
    return r;
}

int nvw_grad_double_backward(nvw_grad_dbl *d)
{
    const nv_backend *t = d->j->b.table;
    const nv_op_def *op = d->s->op;
    if (!t->double_backward) {
        d->offer = "not offered: the backend has no double-backward entry (backend ABI "
                   "version 1, or a NULL double_backward)";
        return 0;
    }
    nv_tensor *dir[NV_OP_MAX_INPUTS] = {0};
    nv_tensor_view dv[NV_OP_MAX_INPUTS], out[NV_OP_MAX_INPUTS];
    memset(out, 0, sizeof out);
    int n_dirs = 0;
    int r = directions(d, dir, dv, &n_dirs);
    nv_double_backward_call c = {.op = op->name,
                                 .attrs_json = d->s->attrs_json,
                                 .n_inputs = op->n_inputs,
                                 .inputs = d->views,
                                 .n_saved = d->n_saved,
                                 .saved = d->saved,
                                 .grad_output = d->gy_view,
                                 .n_grads = n_dirs,
                                 .grad_grads = dv,
                                 .grad_inputs = out};
    char err[ERRLEN] = "";
    int dr = r == 0 ? t->double_backward(d->ctx, &c, err, ERRLEN) : NV_OK;
    json_t *per = NULL;
    if (r == 0 && dr == NV_E_UNSUPPORTED) {
        snprintf(d->why, sizeof d->why, "not offered for '%.40s': %.400s", op->name, err);
        d->offer = d->why;
    } else if (r == 0) {
        d->offer = "offered: checked against the reference (checks.double_backward)";
        per = json_object();
        json_object_set_new(d->checks, "double_backward", per);
    }
    if (per && dr != NV_OK) {
        json_object_set_new(per, "error", json_sprintf("the backend returned %d: '%s'", dr, err));
        fail(d, "backend_error");
    }
    for (int k = 0, i = 0; per && dr == NV_OK && r == 0 && i < op->n_inputs; i++)
        if (nv_op_grad_input(op, i))
            r = compare(d, i, dir, &out[k++], per);
    for (int k = 0; k < n_dirs; k++) {
        nvw_view_free(&dv[k]);
        if (dr == NV_OK && out[k].data && t->release_tensor)
            t->release_tensor(d->ctx, &out[k]);
    }
    for (int k = 0; k < NV_OP_MAX_INPUTS; k++)
        nv_tensor_free(dir[k]);
    return r;
}
