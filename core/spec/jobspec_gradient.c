/* Gradient job validation (gradspec.h, docs/JOBS.md "Gradient jobs"). The
 * shared fields go through nv_jobspec_parse on a derived op spec; the rest is
 * checked here, every error naming the field by JSON pointer and the value in
 * quotes. */
#include "gradspec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/jacobian.h"
#include "core/ops/opmeta.h"
#include "spec_internal.h"

/* Defaults and their reasons (torch.autograd.gradcheck uses the same values). */
#define EPS_REASON                                                                                 \
    "central differences in fp64 with step h: truncation error O(h^2 |f'''|) ~ 1e-12, rounding "   \
    "error O(u |f| / h) ~ 1e-10 (u = 2^-53); h = 1e-6 is torch.autograd.gradcheck's default"
#define ATOL_REASON                                                                                \
    "absolute slack for Jacobian elements near zero, where rtol allows nothing; "                  \
    "torch.autograd.gradcheck's default"
#define RTOL_REASON                                                                                \
    "relative slack for the finite-difference error of large or steep Jacobian elements; "         \
    "torch.autograd.gradcheck's default"

static const char *const grad_keys[] = {"order", "mode", "eps", "atol", "rtol", "device_tolerance",
                                        NULL};
static const char *const refused_keys[] = {"layouts", "expect_error", "out_dtype", "tolerance",
                                           NULL};

bool nv_gradspec_is(const json_t *spec)
{
    return nv_spec_kind_of(spec) == NV_SPEC_KIND_GRADIENT;
}

/* The op-job spec the shared fields are parsed from. */
static json_t *derived_spec(const json_t *spec, nv_spec_err *e, int *ret)
{
    for (int i = 0; refused_keys[i]; i++) {
        if (!json_object_get(spec, refused_keys[i]))
            continue;
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/%s", refused_keys[i]);
        *ret = nv_spec_fail(e, ptr,
                            "'%s' does not apply to gradient jobs (inputs are contiguous, "
                            "gradients are in the input dtype; the device check's override is "
                            "\"device_tolerance\")",
                            refused_keys[i]);
        return NULL;
    }
    json_t *d = json_deep_copy(spec);
    if (!d) {
        *ret = -ENOMEM;
        return NULL;
    }
    for (int i = 0; grad_keys[i]; i++)
        json_object_del(d, grad_keys[i]);
    json_object_set_new(d, "kind", json_string("op"));
    const json_t *dt = json_object_get(spec, "device_tolerance");
    if (dt)
        json_object_set(d, "tolerance", (json_t *)dt);
    *ret = 0;
    return d;
}

/* An override {"value": x, "reason": "..."} of a formula-check parameter. */
static int parse_param(const json_t *spec, const char *key, double dflt, const char *why, double lo,
                       double hi, nv_grad_param *ret, nv_spec_err *e)
{
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/%s", key);
    const json_t *v = json_object_get(spec, key);
    ret->value = dflt;
    snprintf(ret->reason, sizeof ret->reason, "%s", why);
    ret->set = false;
    if (!v)
        return 0;
    const json_t *val = json_object_get(v, "value"), *reason = json_object_get(v, "reason");
    if (!json_is_object(v) || !json_is_number(val))
        return nv_spec_fail_value(e, ptr, v,
                                  "must be an object {\"value\": number, \"reason\": text}");
    double x = json_number_value(val);
    snprintf(ptr, sizeof ptr, "/%s/value", key);
    if (!(x > lo && x < hi))
        return nv_spec_fail(e, ptr, "'%g' is outside (%g, %g)", x, lo, hi);
    snprintf(ptr, sizeof ptr, "/%s/reason", key);
    if (!json_is_string(reason) || !json_string_value(reason)[0])
        return nv_spec_fail(e, ptr, "an override of \"%s\" needs a non-empty \"reason\"", key);
    ret->value = x;
    snprintf(ret->reason, sizeof ret->reason, "%s", json_string_value(reason));
    ret->set = true;
    return 0;
}

static int parse_order_mode(const json_t *spec, nv_gradspec *g, nv_spec_err *e)
{
    const json_t *o = json_object_get(spec, "order");
    g->order = 1;
    if (o) {
        if (!json_is_integer(o) || (json_integer_value(o) != 1 && json_integer_value(o) != 2))
            return nv_spec_fail_value(e, "/order", o, "is not a derivative order: use 1 or 2");
        g->order = (int)json_integer_value(o);
    }
    const json_t *m = json_object_get(spec, "mode");
    if (m && (!json_is_string(m) ||
              (strcmp(json_string_value(m), "full") && strcmp(json_string_value(m), "fast"))))
        return nv_spec_fail(e, "/mode", "'%s' is not a mode: use \"full\" or \"fast\"",
                            json_is_string(m) ? json_string_value(m) : "(not a string)");
    g->fast = m && strcmp(json_string_value(m), "fast") == 0;
    return 0;
}

/* Finite differences need values where the op is smooth: the random classes,
 * moved into the differentiable domain (nv_op_grad_domain). Specials (NaN,
 * Inf), near_zero (crosses relu/abs kinks at the step size), large (overflow),
 * midpoints and edges (chosen for rounding, not smoothness) are refused. */
static int check_classes(const nv_jobspec *b, nv_spec_err *e)
{
    for (int i = 0; i < b->n_classes; i++) {
        if (b->classes[i] == NV_IN_NORMAL || b->classes[i] == NV_IN_UNIFORM)
            continue;
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/inputs/%d", i);
        return nv_spec_fail(e, ptr,
                            "input class '%s' is not usable for gradients (finite differences "
                            "need a smooth neighbourhood): use \"normal\" or \"uniform\"",
                            nv_input_class_name(b->classes[i]));
    }
    return 0;
}

static int check_op_dtypes(const nv_jobspec *b, nv_spec_err *e)
{
    if (!nv_op_has_backward(b->op, &b->attrs))
        return nv_spec_fail(e, b->op->kind == NV_OPK_MATMUL ? "/attrs/scale" : "/op",
                            "op '%s' has no backward the gradient job checks%s", b->op->name,
                            b->op->kind == NV_OPK_MATMUL ? " with scales (use \"scale\": \"none\")"
                                                         : " (not differentiable)");
    for (int i = 0; i < b->n_dtypes; i++) {
        nv_dtype d = b->dtypes[i];
        if (d == NV_DT_FP64 || d == NV_DT_FP32 || d == NV_DT_BF16 || d == NV_DT_FP16)
            continue;
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/dtypes/%d", i);
        return nv_spec_fail(e, ptr,
                            "dtype '%s' is not a gradient dtype: use fp64, fp32, bf16 or fp16",
                            nv_dtype_name(d));
    }
    return 0;
}

int nv_gradspec_jacobian_entries(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                                 const nv_tensor *const *in, int i, int64_t *ret)
{
    if (!nv_op_has_backward(op, a) || !nv_op_grad_input(op, i) || i >= n_in)
        return -EINVAL;
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    if (nv_op_infer(op, a, n_in, in, &nd, shape, err, sizeof err) != 0)
        return -EINVAL;
    int64_t n_out = 1, n_pos = 1;
    for (int d = 0; d < nd; d++)
        if (__builtin_mul_overflow(n_out, shape[d], &n_out))
            n_out = INT64_MAX;
    /* n_pos of nv_jac_map_new (jacobian.c), kind by kind. */
    const nv_tensor *x = in[0];
    switch (nv_op_jac_kind(op, a)) {
    case NV_JAC_DIAGONAL:
    case NV_JAC_GATHER:
        break;
    case NV_JAC_DENSE:
        n_pos = in[i]->numel;
        break;
    case NV_JAC_BILINEAR:
        n_pos = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
        break;
    case NV_JAC_ROW_BLOCK: {
        if (i > 0)
            break; /* weight and bias: one position per element */
        int ax = nvo_norm_axis(op, a, x->ndim);
        if (ax < 0)
            return -EINVAL;
        n_pos = x->shape[ax];
        break;
    }
    }
    if (n_out == INT64_MAX || __builtin_mul_overflow(n_out, n_pos, ret))
        *ret = INT64_MAX;
    return 0;
}

/* Full mode holds n_out x n_pos entries per input (nv_jac_map). Counted from
 * the shapes (nv_gradspec_jacobian_entries), never by building the map: that
 * is O(numel) memory and time, gigabytes for a spec at the element limit. */
static int check_sizes(const nv_gradspec *g, nv_spec_err *e)
{
    const nv_jobspec *b = g->base;
    nv_tensor t[NV_JOB_MAX_TENSORS];
    if (g->fast)
        return 0; /* projections: no Jacobian is stored */
    for (int j = 0; j < b->n_shapes; j++) {
        int n = nv_jobspec_tensors(b, &b->shapes[j], b->dtypes[0], -1, t, NV_JOB_MAX_TENSORS);
        const nv_tensor *in[NV_JOB_MAX_TENSORS];
        for (int i = 0; i < n; i++)
            in[i] = &t[i];
        for (int i = 0; i < n && i < b->op->n_inputs; i++) {
            int64_t entries;
            if (nv_gradspec_jacobian_entries(b->op, &b->attrs, n, in, i, &entries) < 0 ||
                entries <= NV_GRAD_MAX_JACOBIAN)
                continue;
            char ptr[32];
            snprintf(ptr, sizeof ptr, "/shapes/%d", j);
            char count[32];
            if (entries == INT64_MAX)
                snprintf(count, sizeof count, "more than 2^63");
            else
                snprintf(count, sizeof count, "%lld", (long long)entries);
            return nv_spec_fail(e, ptr,
                                "the structured Jacobian of input '%s' has %s entries, "
                                "more than %lld for \"mode\": \"full\"; use \"mode\": \"fast\" or "
                                "a smaller shape",
                                b->op->inputs[i].name, count, (long long)NV_GRAD_MAX_JACOBIAN);
        }
    }
    return 0;
}

static int parse_all(const json_t *spec, nv_gradspec *g, nv_spec_err *e)
{
    int r;
    json_t *d = derived_spec(spec, e, &r);
    if (!d)
        return r;
    char *ptr = NULL, *msg = NULL;
    r = nv_jobspec_parse(d, &g->base, &ptr, &msg);
    json_decref(d);
    if (r < 0) {
        /* "tolerance" of the derived spec is the job's "device_tolerance" */
        char p[300];
        bool tol = ptr && (strcmp(ptr, "/tolerance") == 0 || strncmp(ptr, "/tolerance/", 11) == 0);
        snprintf(p, sizeof p, "%s%s", tol ? "/device_tolerance" : "",
                 ptr ? ptr + (tol ? 10 : 0) : "");
        r = nv_spec_fail_from(e, r, p, msg);
        free(ptr);
        free(msg);
        return r;
    }
    g->has_device_tolerance = g->base->has_tolerance;
    if ((r = check_op_dtypes(g->base, e)) < 0 || (r = check_classes(g->base, e)) < 0)
        return r;
    if ((r = parse_order_mode(spec, g, e)) < 0)
        return r;
    if ((r = parse_param(spec, "eps", 1e-6, EPS_REASON, 0, 1, &g->eps, e)) < 0 ||
        (r = parse_param(spec, "atol", 1e-5, ATOL_REASON, 0, 1e6, &g->atol, e)) < 0 ||
        (r = parse_param(spec, "rtol", 1e-3, RTOL_REASON, 0, 1, &g->rtol, e)) < 0)
        return r;
    return check_sizes(g, e);
}

int nv_gradspec_parse(const json_t *spec, nv_gradspec **ret, char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    nv_gradspec *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    int r = nv_gradspec_is(spec) ? parse_all(spec, g, &e)
                                 : nv_spec_fail(&e, "/kind",
                                                "not a gradient job: \"kind\" must be "
                                                "\"gradient\"");
    r = nv_spec_err_finish(&e, r, ret_pointer, ret_msg);
    if (r < 0) {
        nv_gradspec_free(g);
        return r;
    }
    *ret = g;
    return 0;
}

void nv_gradspec_free(nv_gradspec *s)
{
    if (!s)
        return;
    nv_jobspec_free(s->base);
    free(s);
}

int nv_gradspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_gradspec *g = NULL;
    int r = nv_gradspec_parse(spec, &g, ret_pointer, ret_msg);
    nv_gradspec_free(g);
    return r;
}
