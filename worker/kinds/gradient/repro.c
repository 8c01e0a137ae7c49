/* Rebuild a gradient failure from its artifact (repro_grad.h). The artifact is
 * the only source: every key and tensor the case needs must be there and agree
 * with the op; nothing is regenerated from the seed or defaulted. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "core/ref/backward.h"
#include "repro_grad.h"
#include "worker/repro/artifact.h"
#include "worker/repro/repro_util.h"

/* An -EINVAL with its message in *ret_err. */
#define fail(ret_err, ...) nvw_set_err((ret_err), -EINVAL, __VA_ARGS__)

void nvw_grepro_free(nvw_grepro *gr)
{
    if (!gr)
        return;
    for (int i = 0; i < gr->n_in; i++)
        nv_tensor_free(gr->in[i]);
    nv_tensor_free(gr->gy);
    for (int k = 0; k < gr->n_stored; k++)
        free(gr->stored[k].data);
    nv_gradspec_free(gr->gs);
    json_decref(gr->manifest);
    free(gr);
}

static const char *mstr(const json_t *m, const char *key)
{
    return json_string_value(json_object_get(m, key));
}

/* Whether the device returned gradients in this class (so they are stored). */
static bool has_grads(const char *cls)
{
    return !strcmp(cls, "gradient_mismatch") || !strcmp(cls, "nondeterminism");
}

/* spec, case index, dtype, class, check and tolerance. */
static int parse_case(nvw_grepro *gr, char **ret_err)
{
    const json_t *m = gr->manifest, *spec = json_object_get(m, "spec");
    char *ptr = NULL, *msg = NULL;
    int r = nv_gradspec_parse(spec, &gr->gs, &ptr, &msg);
    if (r < 0) {
        fail(ret_err, "artifact manifest 'spec%s' is invalid: %s", ptr ? ptr : "",
             msg ? msg : "out of memory");
        free(ptr);
        free(msg);
        return r;
    }
    const json_t *ci = json_object_get(m, "case_index");
    if (!json_is_integer(ci) || json_integer_value(ci) < 0 ||
        json_integer_value(ci) >= gr->gs->base->n_cases)
        return fail(ret_err, "artifact manifest has no 'case_index' integer within the spec's "
                             "cases");
    gr->case_index = json_integer_value(ci);
    static const char *const need[] = {"dtype", "failure_class", "check", NULL};
    for (int i = 0; need[i]; i++)
        if (!mstr(m, need[i]))
            return fail(ret_err, "artifact manifest has no '%s' string", need[i]);
    nv_job_case c;
    if (nv_jobspec_case(gr->gs->base, gr->case_index, &c) < 0 ||
        nv_dtype_from_name(mstr(m, "dtype"), &gr->dtype) < 0 || c.dtype != gr->dtype)
        return fail(ret_err, "artifact manifest 'dtype' '%s' is not case %lld's dtype",
                    mstr(m, "dtype"), (long long)gr->case_index);
    snprintf(gr->cls, sizeof gr->cls, "%s", mstr(m, "failure_class"));
    snprintf(gr->check, sizeof gr->check, "%s", mstr(m, "check"));
    if (strcmp(gr->check, "device") && strcmp(gr->check, "determinism"))
        return fail(ret_err,
                    "artifact manifest 'check' '%s' is neither 'device' nor "
                    "'determinism'",
                    mstr(m, "check"));
    const json_t *tol = json_object_get(m, "tolerance");
    if (!json_is_object(tol))
        return fail(ret_err, "artifact manifest has no 'tolerance' object (the tolerance each "
                             "gradient was judged by)");
    const nv_op_def *op = gr->gs->base->op;
    for (int i = 0; has_grads(gr->cls) && i < op->n_inputs; i++) {
        if (!nv_op_grad_input(op, i))
            continue;
        const json_t *t = json_object_get(tol, op->inputs[i].name);
        nv_dtype d;
        const char *met = mstr(t, "metric");
        if (!met || strcmp(met, "gradient_bound") ||
            nv_dtype_from_name(mstr(t, "u_storage"), &d) < 0 ||
            nv_dtype_from_name(mstr(t, "u_compute"), &d) < 0 || !mstr(t, "reason"))
            return fail(ret_err,
                        "artifact manifest 'tolerance/%s' is not a gradient_bound tolerance "
                        "with 'u_storage', 'u_compute' and 'reason'",
                        op->inputs[i].name);
    }
    return 0;
}

static int keep_stored(nvw_grepro *gr, const nv_artifact_tensor *at)
{
    nvw_gstored *s = &gr->stored[gr->n_stored];
    snprintf(s->name, sizeof s->name, "%s", at->name);
    s->dtype = at->dtype;
    s->ndim = at->ndim;
    memcpy(s->shape, at->shape, sizeof(int64_t) * (size_t)at->ndim);
    s->nbytes = at->nbytes;
    if (!(s->data = malloc(at->nbytes ? at->nbytes : 1)))
        return -ENOMEM;
    memcpy(s->data, at->data, at->nbytes);
    gr->n_stored++;
    return 0;
}

/* The device gradients: required where the class implies the device gave them. */
static int load_grads(nvw_grepro *gr, const nv_artifact *a, char **ret_err)
{
    const nv_op_def *op = gr->gs->base->op;
    bool need = has_grads(gr->cls), rerun = !strcmp(gr->cls, "nondeterminism");
    for (int i = 0; i < op->n_inputs; i++) {
        if (!nv_op_grad_input(op, i))
            continue;
        char name[40];
        snprintf(name, sizeof name, "grad_input:%d", i);
        const nv_artifact_tensor *at = nv_artifact_find(a, name);
        if (!at && need)
            return fail(ret_err, "artifact has no tensor '%s' (the device's gradient of '%s')",
                        name, op->inputs[i].name);
        int r = at ? keep_stored(gr, at) : 0;
        if (r < 0)
            return r;
        snprintf(name, sizeof name, "grad_input_rerun:%d", i);
        if (rerun && !nv_artifact_find(a, name))
            return fail(ret_err, "artifact has no tensor '%s' (the second run's gradient of '%s')",
                        name, op->inputs[i].name);
    }
    return 0;
}

/* Inputs "input:K" with the dtypes the op takes, "grad_output:0" shaped like
 * the output, and the device gradients. */
static int load_tensors(nvw_grepro *gr, const nv_artifact *a, char **ret_err)
{
    const nv_jobspec *js = gr->gs->base;
    nv_job_case c;
    nv_tensor meta[NV_JOB_MAX_TENSORS];
    int n = nv_jobspec_case(js, gr->case_index, &c) < 0
                ? -1
                : nv_jobspec_tensors(js, c.shape, gr->dtype, -1, meta, NV_JOB_MAX_TENSORS);
    if (n < 0)
        return fail(ret_err, "the spec's op '%s' has no input list for dtype '%s'", js->op->name,
                    nv_dtype_name(gr->dtype));
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "input:%d", i);
        const nv_artifact_tensor *at = nv_artifact_find(a, name);
        if (!at)
            return fail(ret_err, "artifact has no tensor '%s' (op '%s' takes %d input tensors)",
                        name, js->op->name, n);
        int r = nvw_artifact_tensor(at, meta[i].dtype, &gr->in[i], ret_err);
        if (r < 0)
            return r;
        gr->n_in = i + 1;
    }
    char err[256] = "";
    int od;
    int64_t os[NV_MAX_DIMS];
    if (nv_op_infer(js->op, &js->attrs, gr->n_in, (const nv_tensor *const *)gr->in, &od, os, err,
                    sizeof err) != 0)
        return fail(ret_err, "artifact inputs do not fit op '%s': %s", js->op->name, err);
    const nv_artifact_tensor *at = nv_artifact_find(a, "grad_output:0");
    if (!at)
        return fail(ret_err, "artifact has no tensor 'grad_output:0' (the output gradient, "
                             "the cotangent the backward was given)");
    bool fits = at->ndim == od;
    for (int d = 0; fits && d < od; d++)
        fits = at->shape[d] == os[d];
    if (!fits)
        return fail(ret_err,
                    "artifact tensor 'grad_output:0' is not shaped like op '%s''s "
                    "output",
                    js->op->name);
    int r = nvw_artifact_tensor(at, gr->dtype, &gr->gy, ret_err);
    return r < 0 ? r : load_grads(gr, a, ret_err);
}

int nvw_grepro_from_artifact(const nv_artifact *a, nvw_grepro **ret, char **ret_err)
{
    const json_t *spec = json_object_get(a->manifest, "spec");
    const char *kind = mstr(spec, "kind");
    if (!json_is_object(a->manifest) || !kind || strcmp(kind, "gradient"))
        return -ENOTSUP;
    const char *fmt = mstr(a->manifest, "format");
    if (fmt && strcmp(fmt, "numval-artifact") != 0)
        return fail(ret_err, "artifact manifest 'format' is '%s', not 'numval-artifact'", fmt);
    nvw_grepro *gr = calloc(1, sizeof *gr);
    if (!gr)
        return -ENOMEM;
    int r = (gr->manifest = json_deep_copy(a->manifest)) ? parse_case(gr, ret_err) : -ENOMEM;
    if (r == 0)
        r = load_tensors(gr, a, ret_err);
    if (r < 0) {
        nvw_grepro_free(gr);
        return r;
    }
    *ret = gr;
    return 0;
}

int nvw_grepro_from_buffer(const uint8_t *buf, size_t len, nvw_grepro **ret, char **ret_err)
{
    nv_artifact *a = NULL;
    char *derr = NULL;
    int r = nv_artifact_decode(buf, len, &a, &derr);
    if (r < 0) {
        fail(ret_err, "not a valid artifact: %s", derr ? derr : strerror(-r));
        free(derr);
        return r == -ENOMEM ? r : -EINVAL;
    }
    r = nvw_grepro_from_artifact(a, ret, ret_err);
    nv_artifact_free(a);
    if (r == 0)
        nv_sha256_hex(buf, len, (*ret)->sha);
    return r;
}

int nvw_grepro_load(const char *path, nvw_grepro **ret, char **ret_err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = nvw_read_file(path, &buf, &len);
    if (r < 0) {
        fail(ret_err, "cannot read '%s': %s", path, strerror(-r));
        return r == -ENOMEM ? r : -EINVAL;
    }
    char *e = NULL;
    r = nvw_grepro_from_buffer(buf, len, ret, &e);
    free(buf);
    if (r == -EINVAL)
        fail(ret_err, "'%s': %s", path, e ? e : "invalid artifact");
    free(e);
    return r;
}

json_t *nvw_grepro_signature(const nvw_grepro *gr, const char *cls)
{
    const json_t *m = gr->manifest;
    const json_t *attrs = json_object_get(json_object_get(m, "spec"), "attrs");
    const json_t *mode = json_object_get(m, "mode");
    json_t *empty = json_object();
    json_t *s =
        empty ? json_pack("{ss ss sO ss sO ss ss}", "kind", "gradient", "op",
                          gr->gs->base->op->name, "attrs", attrs ? (json_t *)attrs : empty, "dtype",
                          nv_dtype_name(gr->dtype), "mode", mode ? (json_t *)mode : json_null(),
                          "check", gr->check, "failure_class", cls ? cls : gr->cls)
              : NULL;
    json_decref(empty);
    return nvw_signature_id(s);
}

double nvw_grad_neutral_value(const nvw_grepro *gr, int i)
{
    const nv_op_def *op = gr->gs->base->op;
    if (i == gr->n_in)
        return 0.0; /* the cotangent: a zero element contributes to no gradient */
    if (i >= op->n_inputs || op->inputs[i].is_index)
        return NAN;
    const char *n = op->name;
    /* Inputs stay in the differentiable domain nv_op_grad_domain keeps
     * (docs/JOBS.md): max and maximum/minimum have kinks at ties. */
    if (!strcmp(n, "max") || !strcmp(n, "maximum") || !strcmp(n, "minimum"))
        return NAN;
    /* 0 is a kink (abs, relu), a pole (reciprocal, div's divisor) or outside
     * the domain [0.25, 8] (sqrt, rsqrt, log, log2, pow's base), and norm2
     * needs lines that are not zero. */
    if (!strcmp(n, "abs") || !strcmp(n, "relu") || !strcmp(n, "reciprocal") || !strcmp(n, "sqrt") ||
        !strcmp(n, "rsqrt") || !strcmp(n, "log") || !strcmp(n, "log2") || !strcmp(n, "norm2") ||
        (!strcmp(n, "pow") && i == 0) || (!strcmp(n, "div") && i == 1))
        return 1.0;
    return 0.0;
}
