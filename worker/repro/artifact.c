/* Failure artifacts from agent mode: the runner hands each failed case's exact
 * inputs and device outputs; they become one artifact container (docs/ARTIFACTS.md)
 * uploaded to numvald under its sha256. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "worker/agent/agent_internal.h"
#include "worker/backends/loader.h"
#include "common/artifact.h"
#include "common/log.h"

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
static json_t *manifest(const nvw_agent_job *j, const nvw_failure *f)
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
    if (!json_object_get(m, "spec") && j->spec)
        json_object_set(m, "spec", (json_t *)j->spec);
    if (!json_object_get(m, "backend"))
        json_object_set_new(m, "backend", json_string(j->backend_spec));
    if (j->job_id) {
        json_object_set(m, "job_id", j->job_id_json);
        json_object_set_new(m, "attempt", json_integer(j->attempt));
    }
    return m;
fail:
    json_decref(names);
fail_m:
    json_decref(m);
    return NULL;
}

int nvw_agent_build_artifact(const nvw_agent_job *j, const nvw_failure *f, uint8_t **ret_buf,
                             size_t *ret_len, char sha[65])
{
    nv_artifact *a = nv_artifact_new();
    json_t *m = manifest(j, f);
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

/* PUT with a few retries: the daemon may be restarting. */
static int upload(nvw_agent_job *j, const uint8_t *buf, size_t len, const char *sha)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/worker/artifacts/%s", sha);
    long pause = 250;
    for (int attempt = 0; attempt < 6; attempt++) {
        nvw_http_resp resp = {0};
        char *err = NULL;
        int r = nvw_http_request(j->http, "PUT", path, "application/zstd", buf, len, 120000, &resp,
                                 &err);
        if (r == -ECANCELED) {
            free(err);
            return r;
        }
        if (r == 0 && (resp.status == 200 || resp.status == 201)) {
            nvw_http_resp_done(&resp);
            return 0;
        }
        if (r == 0 && resp.status < 500) {
            nv_log_warn("artifact '%s' (%zu bytes) refused by the server: HTTP %ld %.300s", sha,
                        len, resp.status, resp.body);
            nvw_http_resp_done(&resp);
            return -EPROTO;
        }
        nv_log_warn("artifact upload failed (%s), retrying", r < 0 && err ? err : "server error");
        free(err);
        nvw_http_resp_done(&resp);
        nvw_agent_sleep(pause, &j->cancel);
        pause *= 2;
    }
    return -EIO;
}

int nvw_agent_on_failure(void *ud, const nvw_failure *f, char **ret_artifact_id)
{
    nvw_agent_job *j = ud;
    if (atomic_load(&j->n_artifacts) >= j->max_artifacts)
        return -ENOSPC;
    uint8_t *buf = NULL;
    size_t len = 0;
    char sha[65];
    int r = nvw_agent_build_artifact(j, f, &buf, &len, sha);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot build its artifact: %s", j->job_id, f->case_index,
                    strerror(-r));
        return r;
    }
    r = upload(j, buf, len, sha);
    free(buf);
    if (r < 0)
        return r;
    char *id = strdup(sha);
    if (!id)
        return -ENOMEM;
    atomic_fetch_add(&j->n_artifacts, 1);
    *ret_artifact_id = id;
    return 0;
}
