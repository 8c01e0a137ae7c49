/* Failure artifacts in agent mode: each failed case's artifact (built by
 * worker/repro/artifact.h from the job's origin) uploaded to numvald under its
 * sha256. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "common/log.h"
#include "worker/repro/artifact.h"

int nvw_agent_artifact(const nvw_agent_job *j, const nvw_failure *f, uint8_t **ret_buf,
                       size_t *ret_len, char sha[65])
{
    nvw_artifact_origin o = {.backend_spec = j->backend_spec,
                             .spec = j->spec,
                             .job_id = j->job_id ? j->job_id_json : NULL,
                             .attempt = j->attempt};
    return nvw_failure_artifact(f, &o, ret_buf, ret_len, sha);
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
    int r = nvw_agent_artifact(j, f, &buf, &len, sha);
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
