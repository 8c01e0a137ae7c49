/* A model job's weights from a safetensors checkpoint (docs/MODEL.md
 * "Checkpoints"): the file is read on the worker host, its SHA-256 checked
 * when the job gives one, every weight found with its exact shape, and the
 * dtype scheme checked three ways: the dtype the checkpoint stores, the dtype
 * the job declares for the weight in each case, and what the device declares
 * (describe()'s contract and storage) must be one dtype. A checkpoint is never
 * cast: a BF16 checkpoint in an fp32 job is refused, naming the tensor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/sha256.h"
#include "model_internal.h"
#include "worker/runner/err.h"

static const struct {
    nv_st_dtype st;
    nv_dtype dt;
} dtype_map[] = {{NV_ST_F64, NV_DT_FP64},         {NV_ST_F32, NV_DT_FP32},
                 {NV_ST_F16, NV_DT_FP16},         {NV_ST_BF16, NV_DT_BF16},
                 {NV_ST_F8_E5M2, NV_DT_FP8_E5M2}, {NV_ST_F8_E4M3, NV_DT_FP8_E4M3},
                 {NV_ST_F8_E8M0, NV_DT_E8M0},     {NV_ST_I32, NV_DT_INT32}};

int model_dtype_of_st(int st, nv_dtype *ret)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
        if ((int)dtype_map[i].st == st) {
            *ret = dtype_map[i].dt;
            return 0;
        }
    return -1;
}

int model_st_of_dtype(nv_dtype dt, int *ret)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
        if (dtype_map[i].dt == dt) {
            *ret = (int)dtype_map[i].st;
            return 0;
        }
    return -1;
}

static int dtype_of(nv_st_dtype d, nv_dtype *ret)
{
    return model_dtype_of_st((int)d, ret);
}

/* What the device declares for job dtype dt: NULL when it declares dt (its
 * contract lists it and its storage, if it fixes one, is dt), else why not,
 * in *why. */
static const char *device_scheme(const json_t *describe, nv_dtype dt, char *why, size_t len)
{
    const char *name = nv_dtype_name(dt);
    const json_t *contract = json_object_get(describe, "contract");
    const json_t *dts = json_object_get(contract, "dtypes");
    const char *storage = json_string_value(json_object_get(json_object_get(describe, "mode"),
                                                            "storage"));
    nv_dtype sd;
    if (!json_is_object(contract)) {
        snprintf(why, len, "the device declares no dtype contract (describe() has no "
                           "\"contract\")");
        return why;
    }
    bool listed = false;
    if (json_is_array(dts)) { /* the exec harness form: {"dtypes": [...]} */
        size_t i;
        const json_t *v;
        json_array_foreach(dts, i, v)
        {
            listed |= json_is_string(v) && !strcmp(json_string_value(v), name);
        }
    } else {
        listed = json_object_get(contract, name) != NULL;
    }
    if (!listed) {
        snprintf(why, len, "the device's contract (describe()) has no entry for %s", name);
        return why;
    }
    if (storage && nv_dtype_from_name(storage, &sd) == 0 && sd != dt) {
        snprintf(why, len, "the device declares storage %s (describe() mode)", storage);
        return why;
    }
    snprintf(why, len, "the device declares %s%s%s", name, storage ? ", storage " : "",
             storage ? storage : "");
    return NULL;
}

static int shape_str(char *out, size_t len, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(out, len, "[");
    for (int d = 0; d < ndim && at < len; d++)
        at += (size_t)snprintf(out + at, len - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    return snprintf(out + (at < len ? at : len - 1), len - (at < len ? at : len - 1), "]");
}

/* Weight input i against tensor t: shape, and the scheme in every case dtype. */
static int check_weight(mjob *j, int i, const nv_st_tensor *t, char **ret_err)
{
    const nv_modelspec *s = j->s;
    const nv_graph_input *gi = &s->graph->inputs[i];
    const char *path = s->weights.path, *tn = s->weights.tensor[i];
    bool same = t->ndim == gi->ndim;
    for (int d = 0; same && d < gi->ndim; d++)
        same = t->shape[d] == gi->shape[d];
    if (!same) {
        char a[128], b[128];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, gi->ndim, gi->shape);
        return nvw_set_err(ret_err, -EINVAL,
                           "checkpoint '%s': tensor '%s' (parameter '%s') has shape %s, the "
                           "model's parameter is %s",
                           path, tn, gi->name, a, b);
    }
    nv_dtype stored;
    bool known = dtype_of(t->dtype, &stored) == 0;
    for (int k = 0; k < s->n_dtypes; k++) {
        nv_dtype job = gi->dtype_set ? gi->dtype : s->dtypes[k];
        char why[256];
        const char *dev = device_scheme(j->b.describe, job, why, sizeof why);
        if (known && stored == job && !dev)
            continue;
        char jp[64];
        if (gi->dtype_set)
            snprintf(jp, sizeof jp, "the parameter's \"dtype\"");
        else
            snprintf(jp, sizeof jp, "/dtypes/%d", k);
        return nvw_set_err(ret_err, -EINVAL,
                           "checkpoint '%s': tensor '%s' (parameter '%s'): dtype scheme mismatch: "
                           "the checkpoint stores %s (%s), the job declares %s (%s), %s; the "
                           "three must be one dtype (numval never casts a checkpoint)",
                           path, tn, gi->name, nv_st_dtype_name(t->dtype),
                           known ? nv_dtype_name(stored) : "no numval dtype",
                           nv_dtype_name(job), jp, why);
    }
    return 0;
}

/* The values of t, exact: each element decoded from its little-endian bits. */
static int decode(mjob *j, int i, const nv_st_tensor *t)
{
    nv_dtype dt;
    dtype_of(t->dtype, &dt);
    size_t sz = nv_st_dtype_size(t->dtype);
    double *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (int64_t k = 0; k < t->numel; k++) {
        uint64_t bits = 0;
        for (size_t b = sz; b-- > 0;)
            bits = bits << 8 | t->data[(size_t)k * sz + b];
        v[k] = dt == NV_DT_INT32 ? (double)(int32_t)(uint32_t)bits : nv_dtype_decode(dt, bits, false);
    }
    j->wval[i] = v;
    return 0;
}

/* The tensors no weight reads: reported, not silently ignored. */
static json_t *extra_json(const mjob *j, const nv_st_file *f, size_t *n_extra)
{
    json_t *a = json_array();
    *n_extra = 0;
    for (size_t t = 0; a && t < f->n; t++) {
        bool used = false;
        for (int i = 0; !used && i < j->s->graph->n_inputs; i++)
            used = j->s->weights.tensor[i] && j->wval[i] &&
                   !strcmp(j->s->weights.tensor[i], f->tensors[t].name);
        if (used)
            continue;
        if (*n_extra < 64)
            json_array_append_new(a, json_string(f->tensors[t].name));
        (*n_extra)++;
    }
    return a;
}

static int load(mjob *j, nv_st_file *f, char **ret_err)
{
    const nv_modelspec *s = j->s;
    char sha[65];
    nv_sha256_hex(f->buf, f->len, sha);
    if (s->weights.sha256[0] && strcmp(sha, s->weights.sha256))
        return nvw_set_err(ret_err, -EINVAL,
                           "checkpoint '%s': its SHA-256 is %s, the job's \"weights.sha256\" "
                           "says %s",
                           s->weights.path, sha, s->weights.sha256);
    int n_read = 0, r;
    for (int i = 0; i < s->graph->n_inputs; i++) {
        const char *tn = s->weights.tensor[i];
        if (!tn || !nv_model_input_is_weight(&s->inputs[i]))
            continue;
        const nv_st_tensor *t = nv_st_find(f, tn);
        if (!t)
            return nvw_set_err(ret_err, -EINVAL,
                               "checkpoint '%s': no tensor '%s' for the parameter '%s' (every "
                               "weight must be in the checkpoint; \"weights.names\" maps "
                               "parameters to tensors)",
                               s->weights.path, tn, s->graph->inputs[i].name);
        if ((r = check_weight(j, i, t, ret_err)) < 0 || (r = decode(j, i, t)) < 0)
            return r;
        n_read++;
    }
    size_t n_extra;
    json_t *extra = extra_json(j, f, &n_extra);
    json_t *warn = json_array();
    if (n_extra && warn) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "%zu tensor%s of the checkpoint %s read by no parameter (listed in \"extra\", "
                 "at most 64)",
                 n_extra, n_extra == 1 ? "" : "s", n_extra == 1 ? "is" : "are");
        json_array_append_new(warn, json_string(msg));
    }
    j->weights_json = json_pack("{s:s, s:s, s:s, s:b, s:i, s:I, s:I, s:o*, s:o*, s:O*}", "source",
                                "safetensors", "path", s->weights.path, "sha256", sha,
                                "sha256_checked", s->weights.sha256[0] != 0, "tensors_read",
                                n_read, "tensors_in_file", (json_int_t)f->n, "extra_count",
                                (json_int_t)n_extra, "extra", extra, "warnings", warn, "metadata",
                                f->metadata);
    return j->weights_json ? 0 : -ENOMEM;
}

int model_weights_load(mjob *j, char **ret_err)
{
    const nv_modelspec *s = j->s;
    if (!s->weights.path) {
        j->weights_json = json_pack("{s:s}", "source", "seed");
        return j->weights_json ? 0 : -ENOMEM;
    }
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_read(s->weights.path, NULL, &f, &err);
    if (r < 0) {
        if (r == -ENOMEM && !err)
            return r;
        nvw_set_err(ret_err, r == -ENOMEM ? r : -EINVAL, "%s", err ? err : "cannot read");
        free(err);
        return r == -ENOMEM ? r : -EINVAL;
    }
    r = load(j, f, ret_err);
    nv_st_free(f);
    return r;
}

void model_weights_free(mjob *j)
{
    for (int i = 0; i < NV_GRAPH_MAX_INPUTS; i++) {
        free(j->wval[i]);
        j->wval[i] = NULL;
    }
    json_decref(j->weights_json);
    j->weights_json = NULL;
}
