/* Failure artifacts (artifact.h): the runner hands each failed case's exact
 * inputs and device outputs; they become one artifact container
 * (docs/ARTIFACTS.md). */
#include "artifact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/artifact.h"
#include "worker/backends/views/views.h"

/* Append tensor t as contiguous encoded bytes (the backend ABI storage rules). */
static int add_tensor(nv_artifact *a, const char *name, const nv_tensor *t)
{
    nv_tensor *flat = nv_tensor_contiguous(t);
    if (!flat)
        return -ENOMEM;
    nv_tensor_view v;
    int r = nvw_view_from_tensor(flat, &v);
    if (r == 0) {
        size_t n = (size_t)flat->numel * nv_artifact_dtype_size((int32_t)flat->dtype);
        r = nv_artifact_add_tensor(a, name, (int32_t)flat->dtype, flat->ndim, flat->shape,
                                   n ? v.data : NULL, n);
        nvw_view_free(&v);
    }
    nv_tensor_free(flat);
    return r;
}

/* The runner's manifest (spec, case, seed, device, builds, mode, contract,
 * tolerance, first mismatches) with the container's own keys added at the top
 * level (docs/ARTIFACTS.md "Manifest"). */
static json_t *manifest(const nvw_artifact_origin *o, const nvw_failure *f)
{
    json_t *m = f->manifest ? json_copy((json_t *)f->manifest) : json_object();
    json_t *names = json_array();
    if (!m || !names)
        goto fail;
    for (int i = 0; i < f->n_tensors; i++)
        if (json_array_append_new(names, json_string(f->names[i])) < 0)
            goto fail;
    if (json_object_set_new(m, "format", json_string("numval-artifact")) < 0 ||
        json_object_set_new(m, "version", json_integer(1)) < 0 ||
        json_object_set_new(m, "case_index", json_integer(f->case_index)) < 0 ||
        json_object_set_new(m, "tensors", names) < 0)
        goto fail_m;
    if (!json_object_get(m, "case") && f->case_json)
        json_object_set(m, "case", (json_t *)f->case_json);
    if (!json_object_get(m, "spec") && o->spec)
        json_object_set(m, "spec", (json_t *)o->spec);
    if (!json_object_get(m, "backend"))
        json_object_set_new(m, "backend", json_string(o->backend_spec ? o->backend_spec : ""));
    if (o->job_id) {
        json_object_set(m, "job_id", (json_t *)o->job_id);
        json_object_set_new(m, "attempt", json_integer(o->attempt));
    }
    return m;
fail:
    json_decref(names);
fail_m:
    json_decref(m);
    return NULL;
}

int nvw_failure_artifact(const nvw_failure *f, const nvw_artifact_origin *origin,
                         uint8_t **ret_buf, size_t *ret_len, char sha[65])
{
    const nvw_artifact_origin none = {.backend_spec = ""};
    nv_artifact *a = nv_artifact_new();
    json_t *m = manifest(origin ? origin : &none, f);
    int r = -ENOMEM;
    if (!a || !m)
        goto out;
    r = nv_artifact_set_manifest(a, m);
    for (int i = 0; r == 0 && i < f->n_tensors; i++)
        r = add_tensor(a, f->names[i], f->tensors[i]);
    if (r == 0)
        r = nv_artifact_encode(a, 0, ret_buf, ret_len, sha);
out:
    json_decref(m);
    nv_artifact_free(a);
    return r;
}

int nvw_read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return -errno;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    int r = buf ? 0 : -ENOMEM;
    while (r == 0) {
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) {
                r = -ENOMEM;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            r = ferror(f) ? -EIO : 1;
    }
    if (f != stdin)
        fclose(f);
    if (r < 0) {
        free(buf);
        return r;
    }
    *ret = buf;
    *ret_len = n;
    return 0;
}
