/* Rebuild a failing case from its artifact (repro.h). The artifact is the only
 * source: every key and tensor the case needs must be there and agree with the
 * op; nothing is regenerated from the seed or defaulted. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "repro.h"
#include "worker/repro/repro_util.h"

/* An -EINVAL with its message in *ret_err. */
#define fail(ret_err, ...) nvw_set_err((ret_err), -EINVAL, __VA_ARGS__)

void nvw_repro_free(nvw_repro *rc)
{
    if (!rc)
        return;
    for (int i = 0; i < rc->n_in; i++)
        nv_tensor_free(rc->in[i]);
    nv_jobspec_free(rc->js);
    json_decref(rc->manifest);
    free(rc->out_bytes);
    free(rc);
}

static const char *mstr(const json_t *m, const char *key)
{
    return json_string_value(json_object_get(m, key));
}

/* The case's tolerance: the one stored with the case (its version and reason). */
static int parse_tolerance(nvw_repro *rc, char **ret_err)
{
    const json_t *t = json_object_get(rc->manifest, "tolerance");
    if (!json_is_object(t))
        return fail(ret_err, "artifact manifest has no 'tolerance' object (the tolerance the "
                             "case was judged by)");
    char *field = NULL, *msg = NULL;
    int r = nv_tolerance_from_json(t, &rc->tol, &field, &msg);
    if (r < 0) {
        fail(ret_err, "artifact manifest 'tolerance%s' is invalid: %s", field ? field : "",
             msg ? msg : "out of memory");
        free(field);
        free(msg);
        return r;
    }
    json_t *v = json_object_get(t, "version");
    rc->tol.version = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    snprintf(rc->tol.source, sizeof rc->tol.source, "%s",
             json_string_value(json_object_get(t, "source"))
                 ? json_string_value(json_object_get(t, "source"))
                 : "artifact");
    return 0;
}

/* Dtypes, layout, class and spec from the manifest. */
static int parse_case(nvw_repro *rc, char **ret_err)
{
    const json_t *m = rc->manifest;
    const json_t *spec = json_object_get(m, "spec");
    if (!json_is_object(spec))
        return fail(ret_err, "artifact manifest has no 'spec' object (the job spec)");
    const char *kind = mstr(spec, "kind");
    if (kind && strcmp(kind, "op") != 0)
        return fail(ret_err, "artifact is of a '%s' job; reproduction handles op cases", kind);
    char *ptr = NULL, *msg = NULL;
    int r = nv_jobspec_parse(spec, &rc->js, &ptr, &msg);
    if (r < 0) {
        fail(ret_err, "artifact manifest 'spec%s' is invalid: %s", ptr ? ptr : "",
             msg ? msg : "out of memory");
        free(ptr);
        free(msg);
        return r;
    }
    static const char *const need[] = {"dtype", "out_dtype", "layout", "failure_class", NULL};
    for (int i = 0; need[i]; i++)
        if (!mstr(m, need[i]))
            return fail(ret_err, "artifact manifest has no '%s' string", need[i]);
    if (nv_dtype_from_name(mstr(m, "dtype"), &rc->dtype) < 0)
        return fail(ret_err, "artifact manifest 'dtype' '%s' is not a dtype", mstr(m, "dtype"));
    if (nv_dtype_from_name(mstr(m, "out_dtype"), &rc->out_dt) < 0)
        return fail(ret_err, "artifact manifest 'out_dtype' '%s' is not a dtype",
                    mstr(m, "out_dtype"));
    if (nv_layout_from_name(mstr(m, "layout"), &rc->layout) < 0)
        return fail(ret_err, "artifact manifest 'layout' '%s' is not a layout", mstr(m, "layout"));
    if (nv_jobspec_out_dtype(rc->js, rc->dtype) != rc->out_dt)
        return fail(ret_err, "artifact manifest 'out_dtype' '%s' does not follow from the spec",
                    mstr(m, "out_dtype"));
    snprintf(rc->failure_class, sizeof rc->failure_class, "%s", mstr(m, "failure_class"));
    rc->repeat = strcmp(rc->failure_class, "nondeterministic") == 0
                     ? (rc->js->repeat > 1 ? rc->js->repeat : 2)
                     : 1;
    return parse_tolerance(rc, ret_err);
}

/* Inputs "input:0".."input:k-1" with the dtypes the op takes, and "output:0". */
static int load_tensors(nvw_repro *rc, const nv_artifact *a, char **ret_err)
{
    nv_tensor meta[NV_JOB_MAX_TENSORS];
    int n = nv_jobspec_tensors(rc->js, &rc->js->shapes[0], rc->dtype, -1, meta, NV_JOB_MAX_TENSORS);
    if (n < 0)
        return fail(ret_err, "the spec's op '%s' has no input list for dtype '%s'",
                    rc->js->op->name, nv_dtype_name(rc->dtype));
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "input:%d", i);
        const nv_artifact_tensor *at = nv_artifact_find(a, name);
        if (!at)
            return fail(ret_err, "artifact has no tensor '%s' (op '%s' takes %d input tensors)",
                        name, rc->js->op->name, n);
        int r = nvw_artifact_tensor(at, meta[i].dtype, &rc->in[i], ret_err);
        if (r < 0)
            return r;
        rc->n_in = i + 1;
    }
    const nv_artifact_tensor *o = nv_artifact_find(a, "output:0");
    if (!o)
        return fail(ret_err, "artifact has no tensor 'output:0' (the device output)");
    rc->out_dtype = o->dtype;
    rc->out_ndim = o->ndim;
    memcpy(rc->out_shape, o->shape, sizeof rc->out_shape);
    rc->out_nbytes = o->nbytes;
    rc->out_bytes = malloc(o->nbytes ? o->nbytes : 1);
    if (!rc->out_bytes)
        return -ENOMEM;
    memcpy(rc->out_bytes, o->data, o->nbytes);
    char err[256] = "";
    int od;
    int64_t os[NV_MAX_DIMS];
    if (nv_op_infer(rc->js->op, &rc->js->attrs, rc->n_in, (const nv_tensor *const *)rc->in, &od, os,
                    err, sizeof err) != 0)
        return fail(ret_err, "artifact inputs do not fit op '%s': %s", rc->js->op->name, err);
    return 0;
}

int nvw_repro_from_artifact(const nv_artifact *a, nvw_repro **ret, char **ret_err)
{
    nvw_repro *rc = calloc(1, sizeof *rc);
    if (!rc)
        return -ENOMEM;
    int r = -EINVAL;
    if (!json_is_object(a->manifest)) {
        fail(ret_err, "artifact has no manifest object");
        goto out;
    }
    const char *fmt = mstr(a->manifest, "format");
    if (fmt && strcmp(fmt, "numval-artifact") != 0) {
        fail(ret_err, "artifact manifest 'format' is '%s', not 'numval-artifact'", fmt);
        goto out;
    }
    rc->manifest = json_deep_copy(a->manifest);
    if (!rc->manifest) {
        r = -ENOMEM;
        goto out;
    }
    r = parse_case(rc, ret_err);
    if (r == 0)
        r = load_tensors(rc, a, ret_err);
out:
    if (r < 0) {
        nvw_repro_free(rc);
        return r;
    }
    *ret = rc;
    return 0;
}

/* Canonical JSON (sorted keys, compact) hashed with SHA-256. */
json_t *nvw_repro_signature(const nvw_repro *rc, const char *cls)
{
    const json_t *m = rc->manifest;
    const json_t *attrs = json_object_get(json_object_get(m, "spec"), "attrs");
    const json_t *mode = json_object_get(m, "mode");
    json_t *empty = json_object();
    if (!empty)
        return NULL;
    json_t *s =
        json_pack("{ss ss sO ss ss sO ss}", "kind", "op", "op", rc->js->op->name, "attrs",
                  attrs ? (json_t *)attrs : empty, "dtype", nv_dtype_name(rc->dtype), "out_dtype",
                  nv_dtype_name(rc->out_dt), "mode", mode ? (json_t *)mode : json_null(),
                  "failure_class", cls ? cls : rc->failure_class);
    json_decref(empty);
    return nvw_signature_id(s);
}
