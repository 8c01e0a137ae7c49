/* Artifacts downloaded in agent mode, for suite jobs (worker/kinds/suite.h):
 * the stored artifact of a suite case, its content id checked. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent_internal.h"
#include "common/sha256.h"

/* GET the artifact and check its content id; the body in *ret (malloc'd). */
int nvw_agent_fetch(void *ud, const char *sha, uint8_t **ret, size_t *ret_len, char *msg,
                    size_t msglen)
{
    nvw_agent_job *j = ud;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/artifacts/%s", sha);
    long pause = 250;
    for (int attempt = 0; attempt < 5; attempt++) {
        nvw_http_resp resp = {0};
        int r = nvw_http_request(j->http, "GET", path, NULL, NULL, 0, 120000, &resp, NULL);
        if (r == 0 && resp.status == 200) {
            char got[65];
            nv_sha256_hex(resp.body, resp.len, got);
            if (strcmp(got, sha) != 0) {
                snprintf(msg, msglen, "artifact '%s' arrived with SHA-256 '%s'", sha, got);
                nvw_http_resp_done(&resp);
                return -EBADMSG;
            }
            *ret = (uint8_t *)resp.body; /* ownership moves to the caller */
            *ret_len = resp.len;
            return 0;
        }
        long st = r == 0 ? resp.status : 0;
        nvw_http_resp_done(&resp);
        if (st >= 400 && st < 500) {
            snprintf(msg, msglen, "artifact '%s': HTTP %ld", sha, st);
            return -ENOENT;
        }
        nvw_agent_sleep(pause, &j->cancel);
        pause *= 2;
    }
    snprintf(msg, msglen, "artifact '%s' could not be downloaded", sha);
    return -EIO;
}
