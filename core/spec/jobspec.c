/* Op job spec validation and parsing: see jobspec.h and docs/JOBS.md. The
 * gradient parser reuses it on a derived spec; validation of any kind is
 * spec.c. Every error
 * names the field by JSON pointer and the offending value in quotes (the field
 * checkers and the error record: core/spec/spec_internal.h). */
#include "jobspec.h"

#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "spec_internal.h"

static const char *const layout_names[NV_LAYOUT_COUNT] = {"contiguous", "transposed", "strided"};
static const char *const expect_names[NV_EXPECT_COUNT] = {"shape_mismatch", "wrong_dtype"};

const char *nv_layout_name(nv_layout l)
{
    return ((int)l >= 0 && l < NV_LAYOUT_COUNT) ? layout_names[l] : NULL;
}

int nv_layout_from_name(const char *name, nv_layout *ret)
{
    for (int i = 0; name && i < NV_LAYOUT_COUNT; i++) {
        if (strcmp(name, layout_names[i]) == 0) {
            *ret = (nv_layout)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *nv_expect_kind_name(nv_expect_kind k)
{
    return ((int)k >= 0 && k < NV_EXPECT_COUNT) ? expect_names[k] : NULL;
}

static const char *const known_keys[] = {
    "kind",
    "op",
    "attrs",
    "dtypes",
    "shapes",
    "layouts",
    "inputs",
    "samples",
    "seed",
    "tolerance",
    "tolerance_by_dtype",
    "build",
    "deterministic",
    "repeat",
    "sweep",
    "expect_error",
    "out_dtype",
    "name",
    "description",
    "device",
    "priority",
    NULL,
};

static int check_kind_and_keys(const json_t *spec, nv_spec_err *e)
{
    if (!json_is_object(spec))
        return nv_spec_fail(e, "", "a job spec must be a JSON object");
    const json_t *kind = json_object_get(spec, "kind");
    if (!kind)
        return nv_spec_fail(e, "/kind", "missing \"kind\"; set \"kind\": \"op\"");
    if (!json_is_string(kind))
        return nv_spec_fail_value(e, "/kind", kind, "must be a string such as \"op\"");
    const char *k = json_string_value(kind);
    int kd = nv_spec_kind_of(spec);
    if (kd > NV_SPEC_KIND_OP) /* a kind of its own parser (spec.c dispatches), or suite */
        return nv_spec_fail(e, "/kind", "kind '%s' is not supported by this build", k);
    if (kd < 0) {
        char known[128];
        nv_spec_kind_list(known, sizeof known);
        return nv_spec_fail(e, "/kind", "unknown kind '%s'; known kinds: %s", k, known);
    }
    const char *key = nv_spec_unknown_key(spec, known_keys);
    if (key) {
        char ptr[300];
        nv_spec_pointer(ptr, sizeof ptr, "", key);
        return nv_spec_fail(e, ptr, "unknown key '%s' (docs/JOBS.md lists the fields)", key);
    }
    return 0;
}

static int parse_op(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    const json_t *op = json_object_get(spec, "op");
    if (!op)
        return nv_spec_fail(e, "/op", "missing \"op\" (an operator of the catalog, e.g. \"exp\")");
    if (!json_is_string(op))
        return nv_spec_fail_value(e, "/op", op, "must be a string naming a catalog op");
    s->op = nv_op_find(json_string_value(op));
    if (!s->op)
        return nv_spec_fail(e, "/op", "unknown op '%s'", json_string_value(op));
    const json_t *attrs = json_object_get(spec, "attrs");
    if (attrs && !json_is_object(attrs))
        return nv_spec_fail_value(e, "/attrs", attrs, "must be an object");
    char *msg = NULL;
    int r = nv_op_parse_attrs(s->op, attrs, &s->attrs, &msg);
    if (r < 0) {
        r = nv_spec_fail(e, "/attrs", "%s", msg ? msg : "invalid attributes");
        free(msg);
        return r;
    }
    s->attrs_json = attrs ? json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    return s->attrs_json ? 0 : -ENOMEM;
}

/* A non-empty array of unique names, each parsed by from_name into out[]. */
typedef int (*name_fn)(const char *name, int *ret);

static int parse_dtype_name(const char *n, int *ret)
{
    nv_dtype d;
    int r = nv_dtype_from_name(n, &d);
    *ret = (int)d;
    return r;
}

static int parse_layout_name(const char *n, int *ret)
{
    nv_layout l;
    int r = nv_layout_from_name(n, &l);
    *ret = (int)l;
    return r;
}

static int parse_class_name(const char *n, int *ret)
{
    nv_input_class c;
    int r = nv_input_class_from_name(n, &c);
    *ret = (int)c;
    return r;
}

static int parse_names(const json_t *spec, const char *key, const char *what, const char *dflt,
                       name_fn fn, int *out, int max, int *ret_n, nv_spec_err *e)
{
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/%s", key);
    const json_t *arr = json_object_get(spec, key);
    if (!arr) {
        if (!dflt)
            return nv_spec_fail(e, ptr, "missing \"%s\" (a non-empty array of %s names)", key,
                                what);
        *ret_n = 1;
        return fn(dflt, &out[0]) < 0 ? -EINVAL : 0;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return nv_spec_fail_value(e, ptr, arr, "must be a non-empty array of names");
    size_t i;
    const json_t *v;
    int n = 0;
    json_array_foreach(arr, i, v)
    {
        snprintf(ptr, sizeof ptr, "/%s/%zu", key, i);
        if (!json_is_string(v))
            return nv_spec_fail_value(e, ptr, v, "must be a string");
        int id;
        if (fn(json_string_value(v), &id) < 0)
            return nv_spec_fail(e, ptr, "unknown %s '%s'", what, json_string_value(v));
        for (int k = 0; k < n; k++)
            if (out[k] == id)
                return nv_spec_fail(e, ptr, "duplicate %s '%s'", what, json_string_value(v));
        if (n == max)
            return nv_spec_fail(e, ptr, "too many %s names", what);
        out[n++] = id;
    }
    *ret_n = n;
    return 0;
}

static int parse_one_shape(const json_t *arr, const char *ptr, int *ret_ndim, int64_t *dims,
                           nv_spec_err *e)
{
    if (json_array_size(arr) > NV_MAX_DIMS)
        return nv_spec_fail(e, ptr, "rank %zu exceeds the maximum of %d", json_array_size(arr),
                            NV_MAX_DIMS);
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        char p[160];
        snprintf(p, sizeof p, "%s/%zu", ptr, i);
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
            return nv_spec_fail_value(e, p, v, "must be a positive integer extent");
        if (json_integer_value(v) > NV_JOB_MAX_ELEMENTS)
            return nv_spec_fail_value(e, p, v, "exceeds the per-tensor element limit of 134217728");
        dims[i] = json_integer_value(v);
    }
    *ret_ndim = (int)json_array_size(arr);
    return 0;
}

static int parse_shapes(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    const json_t *arr = json_object_get(spec, "shapes");
    if (!arr)
        return nv_spec_fail(e, "/shapes",
                            "missing \"shapes\" (a non-empty array of shapes, e.g. [[4096]])");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return nv_spec_fail_value(e, "/shapes", arr, "must be a non-empty array of shapes");
    if (json_array_size(arr) > 1024)
        return nv_spec_fail(e, "/shapes", "more than 1024 shapes");
    s->shapes = calloc(json_array_size(arr), sizeof *s->shapes);
    if (!s->shapes)
        return -ENOMEM;
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/shapes/%zu", i);
        nv_job_shape *sh = &s->shapes[i];
        if (!json_is_array(v))
            return nv_spec_fail_value(e, ptr, v,
                                      "must be an array of extents (or of per-input shapes)");
        int r;
        if (json_array_size(v) > 0 && json_is_array(json_array_get(v, 0))) {
            if ((int)json_array_size(v) != s->op->n_inputs)
                return nv_spec_fail(e, ptr, "op '%s' takes %d inputs, the shape lists %zu",
                                    s->op->name, s->op->n_inputs, json_array_size(v));
            size_t k;
            const json_t *t;
            json_array_foreach(v, k, t)
            {
                char p[128];
                snprintf(p, sizeof p, "%s/%zu", ptr, k);
                if (!json_is_array(t))
                    return nv_spec_fail_value(e, p, t, "must be an array of extents");
                r = parse_one_shape(t, p, &sh->ndim[k], sh->dims[k], e);
                if (r < 0)
                    return r;
            }
            sh->n = (int)json_array_size(v);
        } else {
            r = parse_one_shape(v, ptr, &sh->ndim[0], sh->dims[0], e);
            if (r < 0)
                return r;
        }
        s->n_shapes++;
    }
    return 0;
}

/* A tolerance object at ptr; store: strip "version"/"source" first and record
 * them (set by numvald from its tolerance store). */
static int parse_tolerance(const json_t *obj, const char *ptr, bool store, nv_tolerance *ret,
                           nv_spec_err *e)
{
    if (!json_is_object(obj))
        return nv_spec_fail_value(e, ptr, obj,
                                  "must be a tolerance object (metric, reason_code, reason)");
    json_t *copy = json_copy((json_t *)obj);
    if (!copy)
        return -ENOMEM;
    int version = 0;
    if (store) {
        const json_t *ver = json_object_get(obj, "version");
        if (ver && (!json_is_integer(ver) || json_integer_value(ver) < 0 ||
                    json_integer_value(ver) > INT32_MAX)) {
            json_decref(copy);
            char p[160];
            snprintf(p, sizeof p, "%s/version", ptr);
            return nv_spec_fail_value(e, p, ver, "must be a non-negative integer");
        }
        version = ver ? (int)json_integer_value(ver) : 0;
        json_object_del(copy, "version");
        json_object_del(copy, "source");
    }
    char *field = NULL, *msg = NULL;
    int r = nv_tolerance_from_json(copy, ret, &field, &msg);
    json_decref(copy);
    if (r < 0) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", ptr, field ? field : "");
        r = nv_spec_fail(e, p, "%s", msg ? msg : "invalid tolerance");
        free(field);
        free(msg);
        return r;
    }
    ret->version = version;
    snprintf(ret->source, sizeof ret->source, "%s", store ? "store" : "job");
    return 0;
}

static int parse_tolerances(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    const json_t *tol = json_object_get(spec, "tolerance");
    if (tol) {
        int r = parse_tolerance(tol, "/tolerance", false, &s->tolerance, e);
        if (r < 0)
            return r;
        s->has_tolerance = true;
    }
    const json_t *by = json_object_get(spec, "tolerance_by_dtype");
    if (!by)
        return 0;
    if (!json_is_object(by))
        return nv_spec_fail_value(e, "/tolerance_by_dtype", by,
                                  "must be an object keyed by dtype name");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)by, key, v)
    {
        char ptr[200];
        nv_spec_pointer(ptr, sizeof ptr, "/tolerance_by_dtype", key);
        nv_dtype dt;
        if (nv_dtype_from_name(key, &dt) < 0)
            return nv_spec_fail(e, ptr, "unknown dtype '%s'", key);
        int r = parse_tolerance(v, ptr, true, &s->by_dtype[dt], e);
        if (r < 0)
            return r;
        s->has_by_dtype[dt] = true;
    }
    return 0;
}

static int parse_build(const json_t *spec, nv_spec_err *e)
{
    const json_t *b = json_object_get(spec, "build");
    if (!b)
        return 0;
    if (!json_is_object(b))
        return nv_spec_fail_value(
            e, "/build", b,
            "must be an object such as {\"name\": ..., \"version\": ..., \"commit\": ...}");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)b, key, v)
    {
        if (!json_is_string(v)) {
            char ptr[200];
            nv_spec_pointer(ptr, sizeof ptr, "/build", key);
            return nv_spec_fail_value(e, ptr, v, "must be a string");
        }
    }
    return 0;
}

/* "sweep": {"stride": K, "from": X, "to": Y} for the "sweep" class (classes
 * are parsed first). Absent: stride 0, the default sweep. */
static int parse_sweep(nv_spec_err *e, const json_t *spec, const nv_jobspec *js, nv_sweep *ret)
{
    static const char *const keys[] = {"stride", "from", "to", NULL};
    const json_t *o = json_object_get(spec, "sweep");
    *ret = (nv_sweep){0};
    if (!o)
        return 0;
    if (!json_is_object(o))
        return nv_spec_fail_value(e, "/sweep", o, "must be an object {\"stride\", \"from\", \"to\"}");
    const char *key = nv_spec_unknown_key(o, keys);
    if (key)
        return nv_spec_fail(e, "/sweep", "unknown key '%s'; expected \"stride\", \"from\" or \"to\"",
                            key);
    bool has = false;
    for (int i = 0; i < js->n_classes; i++)
        has |= js->classes[i] == NV_IN_SWEEP;
    if (!has)
        return nv_spec_fail(e, "/sweep", "applies to the 'sweep' input class, which /inputs does "
                                         "not list");
    if (!json_object_get(o, "stride"))
        return nv_spec_fail(e, "/sweep/stride", "missing: every how many encodings to take");
    int r = nv_spec_int(e, o, "/sweep", "stride", 1, 1, NV_SWEEP_MAX_STRIDE, &ret->stride);
    if (r == 0)
        r = nv_spec_number(e, o, "/sweep", "from", -DBL_MAX, -DBL_MAX, DBL_MAX, &ret->from);
    if (r == 0)
        r = nv_spec_number(e, o, "/sweep", "to", DBL_MAX, -DBL_MAX, DBL_MAX, &ret->to);
    if (r == 0 && ret->from > ret->to)
        return nv_spec_fail(e, "/sweep", "'from' (%g) is above 'to' (%g)", ret->from, ret->to);
    return r;
}

static int parse_misc(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    static const char *const strs[] = {"name", "description", "device", NULL};
    for (int i = 0; strs[i]; i++) {
        const json_t *v = json_object_get(spec, strs[i]);
        char ptr[32];
        nv_spec_pointer(ptr, sizeof ptr, "", strs[i]);
        if (v && !json_is_string(v))
            return nv_spec_fail_value(e, ptr, v, "must be a string");
    }
    int64_t x;
    int r = nv_spec_int(e, spec, "", "priority", 0, -1000000, 1000000, &x);
    if (r < 0)
        return r;
    r = nv_spec_int(e, spec, "", "samples", 1, 1, NV_JOB_MAX_SAMPLES, &x);
    if (r < 0)
        return r;
    s->samples = (int)x;
    r = nv_spec_int(e, spec, "", "repeat", 1, 1, NV_JOB_MAX_REPEAT, &x);
    if (r < 0)
        return r;
    s->repeat = (int)x;
    r = nv_spec_int(e, spec, "", "seed", 0, 0, INT64_MAX, &x);
    if (r < 0)
        return r;
    s->seed = (uint64_t)x;
    r = nv_spec_bool(e, spec, "", "deterministic", false, &s->deterministic);
    if (r < 0)
        return r;
    if ((r = parse_sweep(e, spec, s, &s->sweep)) < 0)
        return r;
    const json_t *od = json_object_get(spec, "out_dtype");
    if (od) {
        if (!json_is_string(od) || nv_dtype_from_name(json_string_value(od), &s->out_dtype) < 0)
            return nv_spec_fail_value(e, "/out_dtype", od, "is not a dtype name");
        s->has_out_dtype = true;
    }
    r = parse_build(spec, e);
    if (r < 0)
        return r;
    return parse_tolerances(spec, s, e);
}

static int parse_expect(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    const json_t *ex = json_object_get(spec, "expect_error");
    if (!ex)
        return 0;
    if (!json_is_object(ex))
        return nv_spec_fail_value(e, "/expect_error", ex,
                                  "must be an object {\"case\": \"shape_mismatch\"}");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)ex, key, v)
    {
        if (strcmp(key, "case") != 0)
            return nv_spec_fail(e, "/expect_error", "unknown key '%s'; expected \"case\"", key);
    }
    const json_t *c = json_object_get(ex, "case");
    if (!c)
        return nv_spec_fail(e, "/expect_error/case",
                            "missing \"case\" (\"shape_mismatch\" or \"wrong_dtype\")");
    json_t *one = json_is_string(c) ? json_pack("[O]", c) : json_incref((json_t *)c);
    if (!one)
        return -ENOMEM;
    int r = 0;
    if (!json_is_array(one) || json_array_size(one) == 0) {
        r = nv_spec_fail_value(e, "/expect_error/case", c, "must be a name or an array of names");
        goto out;
    }
    size_t i;
    json_array_foreach(one, i, v)
    {
        char ptr[64];
        if (json_is_string(c))
            snprintf(ptr, sizeof ptr, "/expect_error/case");
        else
            snprintf(ptr, sizeof ptr, "/expect_error/case/%zu", i);
        int k = -1;
        for (int j = 0; j < NV_EXPECT_COUNT && json_is_string(v); j++)
            if (strcmp(json_string_value(v), expect_names[j]) == 0)
                k = j;
        if (k < 0) {
            r = nv_spec_fail_value(
                e, ptr, v, "is not an expected error; use \"shape_mismatch\" or \"wrong_dtype\"");
            goto out;
        }
        for (int j = 0; j < s->n_expect; j++) {
            if ((int)s->expect[j] == k) {
                r = nv_spec_fail_value(e, ptr, v, "is listed twice");
                goto out;
            }
        }
        s->expect[s->n_expect++] = (nv_expect_kind)k;
    }
out:
    json_decref(one);
    return r;
}

/* The refusal of a tensor over the element limit: what ("input 1", "the
 * output") and its count, numel INT64_MAX standing for a count past int64_t
 * (the extents' product, checked, overflowed). */
static int fail_elements(nv_spec_err *e, const char *ptr, const char *what, int64_t numel)
{
    if (numel == INT64_MAX)
        return nv_spec_fail(e, ptr,
                            "%s would hold more than 2^63 elements (the product of its extents "
                            "overflows), more than the limit of %lld per tensor",
                            what, (long long)NV_JOB_MAX_ELEMENTS);
    return nv_spec_fail(e, ptr,
                        "%s would hold %lld elements, more than the limit of %lld per tensor", what,
                        (long long)numel, (long long)NV_JOB_MAX_ELEMENTS);
}

/* The element count of an inferred shape, checked: INT64_MAX when it overflows. */
static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(n, shape[d], &n))
            return INT64_MAX;
    return n;
}

/* A tensor the element limit does not hold: the fp32 input of a unary op whose
 * every class is "exhaustive" (all 2^32 encodings, NV_JOB_MAX_STREAMED), with
 * no invalid-input cases. The worker runs such a case in blocks of rows
 * (worker/kinds/op/blocks.c), so its memory does not grow with it. */
static bool streamed(const nv_jobspec *s, const nv_tensor *t)
{
    if (s->op->kind != NV_OPK_UNARY || s->n_expect > 0 || t->dtype != NV_DT_FP32 ||
        t->numel != NV_JOB_MAX_STREAMED || t->numel / t->shape[0] > 65536)
        return false;
    for (int k = 0; k < s->n_classes; k++)
        if (s->classes[k] != NV_IN_EXHAUSTIVE)
            return false;
    return true;
}

/* Every (dtype, shape) must make inputs the catalog accepts and an output, all
 * within the element limit; every expect_error kind must make inputs it refuses
 * with its code. Metadata only: nothing here is proportional to a tensor's size. */
static int check_cases(nv_jobspec *s, nv_spec_err *e)
{
    nv_tensor t[NV_JOB_MAX_TENSORS];
    char err[512];
    for (int j = 0; j < s->n_shapes; j++) {
        for (int d = 0; d < s->n_dtypes; d++) {
            char ptr[64], what[32];
            snprintf(ptr, sizeof ptr, "/shapes/%d", j);
            memset(t, 0, sizeof t);
            int n = nv_jobspec_tensors(s, &s->shapes[j], s->dtypes[d], -1, t, NV_JOB_MAX_TENSORS);
            if (n == -EOVERFLOW) {
                int i = 0;
                while (i < NV_JOB_MAX_TENSORS - 1 && t[i].numel != INT64_MAX)
                    i++;
                snprintf(what, sizeof what, "input %d", i);
                return fail_elements(e, ptr, what, INT64_MAX);
            }
            if (n < 0)
                return nv_spec_fail(e, ptr,
                                    "%s shapes are [..batch, M, K, N] or [[..,M,K], [..,K,N]]",
                                    s->op->name);
            for (int i = 0; i < n; i++) {
                if (t[i].numel > NV_JOB_MAX_ELEMENTS && !streamed(s, &t[i])) {
                    snprintf(what, sizeof what, "input %d", i);
                    return fail_elements(e, ptr, what, t[i].numel);
                }
            }
            const nv_tensor *in[NV_JOB_MAX_TENSORS];
            for (int i = 0; i < n; i++)
                in[i] = &t[i];
            int ndim;
            int64_t shape[NV_MAX_DIMS];
            err[0] = 0;
            int r = nv_op_infer(s->op, &s->attrs, n, in, &ndim, shape, err, sizeof err);
            if (r == NV_E_DTYPE) {
                snprintf(ptr, sizeof ptr, "/dtypes/%d", d);
                return nv_spec_fail(e, ptr, "op '%s' does not take dtype '%s': %s", s->op->name,
                                    nv_dtype_name(s->dtypes[d]), err);
            }
            if (r != 0)
                return nv_spec_fail(e, ptr, "op '%s' does not take this shape: %s", s->op->name,
                                    err);
            /* A matmul's output can outgrow both operands ([M, 1] x [1, N]). */
            int64_t out = shape_numel(ndim, shape);
            if (out > NV_JOB_MAX_ELEMENTS && !(n == 1 && streamed(s, &t[0])))
                return fail_elements(e, ptr, "the output", out);
        }
    }
    for (int x = 0; x < s->n_expect; x++) {
        for (int d = 0; d < s->n_dtypes; d++) {
            int n = nv_jobspec_tensors(s, &s->shapes[0], s->dtypes[d], (int)s->expect[x], t,
                                       NV_JOB_MAX_TENSORS);
            const nv_tensor *in[NV_JOB_MAX_TENSORS];
            for (int i = 0; n > 0 && i < n; i++)
                in[i] = &t[i];
            int ndim;
            int64_t shape[NV_MAX_DIMS];
            int want = s->expect[x] == NV_EXPECT_SHAPE_MISMATCH ? NV_E_SHAPE : NV_E_DTYPE;
            if (n < 0 ||
                nv_op_infer(s->op, &s->attrs, n, in, &ndim, shape, err, sizeof err) != want)
                return nv_spec_fail(e, "/expect_error/case",
                                    "'%s' does not apply to op '%s' with dtype "
                                    "'%s': the catalog has no such invalid input for it",
                                    nv_expect_kind_name(s->expect[x]), s->op->name,
                                    nv_dtype_name(s->dtypes[d]));
        }
    }
    return 0;
}

/* Every input class must be able to fill every value tensor of every case
 * (nv_input_class_check: "exhaustive" takes dtypes of at most 16 bits and one
 * element per encoding); refused at /inputs/N naming the input and shape.
 * Metadata only, like check_cases. */
static int check_class_inputs(nv_jobspec *s, nv_spec_err *e)
{
    nv_tensor t[NV_JOB_MAX_TENSORS];
    char msg[256], ptr[32];
    for (int k = 0; k < s->n_classes; k++) {
        /* rotary_embedding's x cos - y sin from inputs in the dtype's top binade
         * lands within its bound of the overflow threshold, where a correct
         * device may round either way, and the bound metric has no overflow band
         * (the ulp metric's, compare.c): such cases would fail correct devices
         * (measured: emu, bf16 "large" and "sweep"), so they are refused. */
        nv_input_class c = s->classes[k];
        if (!strcmp(s->op->name, "rotary_embedding") &&
            (c == NV_IN_LARGE || c == NV_IN_SWEEP || c == NV_IN_EXHAUSTIVE)) {
            snprintf(ptr, sizeof ptr, "/inputs/%d", k);
            return nv_spec_fail(e, ptr,
                                "rotary_embedding does not take input class '%s': its results "
                                "reach the overflow threshold, which the bound metric does not "
                                "judge yet (docs/TOLERANCES.md \"Rotary embedding\")",
                                nv_input_class_name(c));
        }
        for (int j = 0; j < s->n_shapes; j++) {
            for (int d = 0; d < s->n_dtypes; d++) {
                memset(t, 0, sizeof t);
                int n =
                    nv_jobspec_tensors(s, &s->shapes[j], s->dtypes[d], -1, t, NV_JOB_MAX_TENSORS);
                for (int i = 0; i < n; i++) {
                    nv_input_domain dom = nv_op_input_domain(s->op, i);
                    if (dom.role != NV_INPUT_VALUES || dom.param ||
                        nv_input_class_check(s->classes[k], t[i].dtype, t[i].numel, msg,
                                             sizeof msg) == 0)
                        continue;
                    snprintf(ptr, sizeof ptr, "/inputs/%d", k);
                    return nv_spec_fail(e, ptr, "%s (input %d of /shapes/%d)", msg, i, j);
                }
            }
        }
    }
    return 0;
}

static int parse_all(const json_t *spec, nv_jobspec *s, nv_spec_err *e)
{
    int r = check_kind_and_keys(spec, e);
    if (r < 0)
        return r;
    r = parse_op(spec, s, e);
    if (r < 0)
        return r;
    int ids[(int)NV_DT_COUNT > (int)NV_IN_COUNT ? (int)NV_DT_COUNT : (int)NV_IN_COUNT];
    r = parse_names(spec, "dtypes", "dtype", NULL, parse_dtype_name, ids, NV_DT_COUNT, &s->n_dtypes,
                    e);
    if (r < 0)
        return r;
    for (int i = 0; i < s->n_dtypes; i++)
        s->dtypes[i] = (nv_dtype)ids[i];
    r = parse_shapes(spec, s, e);
    if (r < 0)
        return r;
    r = parse_names(spec, "layouts", "layout", "contiguous", parse_layout_name, ids,
                    NV_LAYOUT_COUNT, &s->n_layouts, e);
    if (r < 0)
        return r;
    for (int i = 0; i < s->n_layouts; i++)
        s->layouts[i] = (nv_layout)ids[i];
    r = parse_names(spec, "inputs", "input class", "normal", parse_class_name, ids, NV_IN_COUNT,
                    &s->n_classes, e);
    if (r < 0)
        return r;
    for (int i = 0; i < s->n_classes; i++)
        s->classes[i] = (nv_input_class)ids[i];
    r = parse_misc(spec, s, e);
    if (r < 0)
        return r;
    r = parse_expect(spec, s, e);
    if (r < 0)
        return r;
    /* Each factor is bounded by its parser (at most 1024 shapes, 1000 samples ...),
     * so the product fits; checked all the same, as every size from input is. */
    int64_t axes[] = {s->n_shapes, s->n_layouts, s->n_classes, s->samples};
    s->n_cases = s->n_dtypes;
    for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++)
        if (__builtin_mul_overflow(s->n_cases, axes[i], &s->n_cases))
            s->n_cases = INT64_MAX;
    if (s->n_cases > NV_JOB_MAX_CASES)
        return nv_spec_fail(e, "",
                            "the job expands to %lld cases (dtypes x shapes x layouts x inputs x "
                            "samples), more than the limit of %d; split it",
                            (long long)s->n_cases, NV_JOB_MAX_CASES);
    s->n_total = s->n_cases + (int64_t)s->n_dtypes * s->n_expect;
    r = check_cases(s, e);
    if (r < 0)
        return r;
    return check_class_inputs(s, e);
}

int nv_jobspec_parse(const json_t *spec, nv_jobspec **ret, char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    nv_jobspec *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int r = nv_spec_err_finish(&e, parse_all(spec, s, &e), ret_pointer, ret_msg);
    if (r < 0) {
        nv_jobspec_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void nv_jobspec_free(nv_jobspec *s)
{
    if (!s)
        return;
    free(s->shapes);
    free(s->attrs_json);
    free(s);
}
