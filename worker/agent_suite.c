/* Suite jobs in agent mode (agent_suite.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_suite.h"
#include "common/log.h"
#include "common/sha256.h"
#include "repro.h"

bool nvw_suite_is(const json_t *spec)
{
    const char *k = json_string_value(json_object_get(spec, "kind"));
    return k && !strcmp(k, "suite");
}

/* GET the artifact and check its content id; the body in *ret (malloc'd). */
static int fetch(nvw_agent_job *j, const char *sha, uint8_t **ret, size_t *ret_len, char *msg,
                 size_t msglen)
{
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

static void set_error(json_t *c, const char *msg)
{
    json_object_set_new(c, "verdict", json_string("error"));
    json_object_set_new(c, "error", json_string(msg));
}

/* Replay one suite case into case JSON c. */
static void replay(nvw_agent_job *j, const nvw_backend *b, const json_t *sc, json_t *c)
{
    const char *sha = json_string_value(json_object_get(sc, "artifact"));
    char msg[512] = "";
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!sha || fetch(j, sha, &buf, &len, msg, sizeof msg) < 0) {
        set_error(c, msg[0] ? msg : "the suite case has no artifact");
        return;
    }
    nv_artifact *a = NULL;
    nvw_repro *rc = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(buf, len, &a, &err);
    free(buf);
    if (r == 0)
        r = nvw_repro_from_artifact(a, &rc, &err);
    nv_artifact_free(a);
    if (r < 0) {
        set_error(c, err ? err : "the artifact could not be rebuilt");
        free(err);
        return;
    }
    nvw_probe_env env = {.rc = rc,
                         .table = nvw_backend_table(b),
                         .options = nvw_backend_options(b),
                         .timeout_ms = 60000,
                         .isolate = true};
    nvw_probe_out p;
    r = nvw_probe(&env, rc->in, &p);
    if (r < 0) {
        set_error(c, "could not start a probe");
    } else {
        json_object_set_new(c, "verdict", json_string(p.cls[0] ? "failed" : "passed"));
        json_object_set_new(c, "op", json_string(rc->js->op->name));
        json_object_set_new(c, "dtype", json_string(nv_dtype_name(rc->dtype)));
        json_object_set(c, "shape", json_object_get(rc->manifest, "shape"));
        json_object_set_new(c, "stored_class", json_string(rc->failure_class));
        if (p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "max_ulp", json_real(p.max_ulp));
        json_object_set_new(c, "mismatches", json_integer(p.mismatches));
        json_object_set_new(c, "bit_identical", json_boolean(nvw_probe_same_output(rc, &p)));
        nvw_probe_out_done(&p);
    }
    nvw_repro_free(rc);
}

int nvw_agent_run_suite(nvw_agent_job *j, json_t **ret_result, char **ret_err)
{
    const json_t *cases = json_object_get(j->spec, "cases");
    nvw_backend *b = NULL;
    char err[512] = "";
    if (nvw_backend_load(j->backend_spec, &b, err, sizeof err) < 0) {
        if (asprintf(ret_err, "%s", err[0] ? err : "cannot load the backend") < 0)
            *ret_err = NULL;
        return -ENODEV;
    }
    json_t *out = json_array();
    json_int_t n[3] = {0, 0, 0}; /* passed, failed, errors */
    size_t total = json_array_size(cases), i;
    json_t *sc;
    atomic_store(&j->total, (long long)total);
    json_array_foreach(cases, i, sc)
    {
        if (j->cancel)
            break;
        json_t *c = json_pack("{sI sO sO}", "index", (json_int_t)i, "suite_case",
                              json_object_get(sc, "suite_case"), "signature",
                              json_object_get(sc, "signature") ? json_object_get(sc, "signature")
                                                               : json_null());
        if (!c)
            continue;
        json_object_set(c, "artifact", json_object_get(sc, "artifact"));
        replay(j, b, sc, c);
        const char *v = json_string_value(json_object_get(c, "verdict"));
        n[!strcmp(v, "passed") ? 0 : !strcmp(v, "failed") ? 1 : 2]++;
        json_array_append_new(out, c);
        atomic_store(&j->done, (long long)i + 1);
    }
    nvw_backend_free(b);
    const char *verdict = n[1] ? "failed" : n[2] ? "error" : "passed";
    *ret_result =
        json_pack("{ss ss ss s{sI sI sI sI} so}", "verdict", verdict, "kind", "suite", "backend",
                  j->backend_spec, "summary", "cases", (json_int_t)json_array_size(out), "passed",
                  n[0], "failed", n[1], "errors", n[2], "cases", out);
    return *ret_result ? 0 : -ENOMEM;
}
