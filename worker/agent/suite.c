/* Suite jobs in agent mode (worker/agent/suite.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"
#include "common/log.h"
#include "common/sha256.h"
#include "worker/kinds/op/repro.h"
#include "worker/kinds/fused/repro_fused.h"
#include "worker/kinds/gradient/repro_grad.h"

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

/* The kinds of artifact a suite case replays (one branch each in replay). */
typedef enum replay_kind { REPLAY_OP, REPLAY_FUSED, REPLAY_GRAD } replay_kind;

/* The job kind the artifact's case came from, or -1 (*ret_name: the kind). */
static int kind_of(const nv_artifact *a, const char **ret_name)
{
    const char *kind =
        json_string_value(json_object_get(json_object_get(a->manifest, "spec"), "kind"));
    *ret_name = kind ? kind : "op";
    if (!kind || !strcmp(kind, "op"))
        return REPLAY_OP;
    if (!strcmp(kind, "fused"))
        return REPLAY_FUSED;
    if (!strcmp(kind, "gradient"))
        return REPLAY_GRAD;
    return -1;
}

/* An op case: the probe of repro.h on the stored inputs. */
static void replay_op(const nvw_backend *b, const nv_artifact *a, json_t *c)
{
    nvw_repro *rc = NULL;
    char *err = NULL;
    int r = nvw_repro_from_artifact(a, &rc, &err);
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

static json_t *node_names(const nv_graph *g)
{
    json_t *a = json_array();
    for (int k = 0; a && k < g->n_nodes; k++)
        json_array_append_new(a, json_string(g->nodes[k].name));
    return a;
}

/* A fused case: the fused probe (repro_fused.h) of the stored (minimized)
 * graph on its stored inputs. It fails when the graph fails in any way (the
 * stored signature or another, a crash, a timeout); "same_signature" says
 * whether it is the stored one. */
static void replay_fused(nvw_agent_job *j, const nvw_backend *b, const nv_artifact *a,
                         const char *sha, json_t *c)
{
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_from_artifact(a, sha, &fr, &err);
    if (r < 0) {
        set_error(c, err ? err : "the fused artifact could not be rebuilt");
        free(err);
        return;
    }
    snprintf(fr->backend, sizeof fr->backend, "%s", j->backend_spec);
    nvw_fprobe p;
    r = nvw_fprobe_run(fr, b, fr->spec, fr->in, fr->g->n_inputs, 60000, true, NULL, NULL, &p);
    if (r < 0 || !strcmp(p.cls, "probe_error")) {
        set_error(c, r < 0 ? "could not start a probe" : p.msg[0] ? p.msg : "the probe failed");
    } else {
        bool passed = !strcmp(p.verdict, "passed");
        json_object_set_new(c, "verdict", json_string(passed ? "passed" : "failed"));
        json_object_set_new(c, "kind", json_string("fused"));
        json_object_set_new(c, "op", json_string(fr->op));
        json_object_set_new(c, "dtype", json_string(fr->judge));
        json_object_set_new(c, "case_dtype", json_string(nv_dtype_name(fr->dt)));
        json_object_set_new(c, "nodes", node_names(fr->g));
        json_object_set_new(c, "stored_class", json_string(fr->cls));
        if (!passed && p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        if (p.node[0])
            json_object_set_new(
                c, "first_divergent",
                json_pack("{ss ss ss}", "node", p.node, "op", p.op, "dtype", p.judge));
        json_object_set_new(c, "same_signature", json_boolean(nvw_fprobe_same(fr, &p)));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "max_ulp", json_real(p.max_ulp));
        json_object_set_new(c, "bit_identical", json_boolean(p.bits == 1));
    }
    nvw_frepro_free(fr);
}

/* A gradient case: the gradient probe (repro_grad.h), the device check of the
 * stored (minimized) case on its inputs and cotangent. It fails when the case
 * fails in any way; "same_signature" says whether it is the stored one. */
static void replay_grad(nvw_agent_job *j, const nvw_backend *b, const nv_artifact *a,
                        const char *sha, json_t *c)
{
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_artifact(a, &gr, &err);
    if (r < 0) {
        set_error(c, err ? err : "the gradient artifact could not be rebuilt");
        free(err);
        return;
    }
    snprintf(gr->sha, sizeof gr->sha, "%s", sha);
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = j->backend_spec, .timeout_ms = 60000};
    nvw_gprobe_out p;
    r = nvw_gprobe(&env, gr->in, gr->gy, &p);
    if (r < 0 || !strcmp(p.cls, "probe_error")) {
        set_error(c, r < 0 ? "could not start a probe" : p.msg[0] ? p.msg : "the probe failed");
    } else {
        bool passed = !strcmp(p.verdict, "passed");
        json_object_set_new(c, "verdict", json_string(passed ? "passed" : "failed"));
        json_object_set_new(c, "kind", json_string("gradient"));
        json_object_set_new(c, "op", json_string(gr->gs->base->op->name));
        json_object_set_new(c, "dtype", json_string(nv_dtype_name(gr->dtype)));
        json_object_set_new(c, "check", json_string(gr->check));
        json_object_set_new(c, "stored_class", json_string(gr->cls));
        if (!passed && p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        json_object_set_new(c, "same_signature", json_boolean(nvw_gprobe_same(gr, &p)));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "mismatches", json_integer(p.mismatches));
        json_object_set_new(c, "bit_identical", json_boolean(p.bits == 1));
    }
    if (r == 0)
        nvw_gprobe_out_done(&p);
    nvw_grepro_free(gr);
}

/* Replay one suite case into case JSON c, by the kind of its artifact. */
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
    char *err = NULL;
    int r = nv_artifact_decode(buf, len, &a, &err);
    free(buf);
    if (r < 0) {
        set_error(c, err ? err : "the artifact could not be decoded");
        free(err);
        return;
    }
    const char *name = NULL;
    switch (kind_of(a, &name)) {
    case REPLAY_OP:
        replay_op(b, a, c);
        break;
    case REPLAY_FUSED:
        replay_fused(j, b, a, sha, c);
        break;
    case REPLAY_GRAD:
        replay_grad(j, b, a, sha, c);
        break;
    default:
        snprintf(msg, sizeof msg,
                 "artifact '%s' is of a '%s' job; suite replay handles op, "
                 "fused and gradient cases",
                 sha, name);
        set_error(c, msg);
        break;
    }
    nv_artifact_free(a);
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
        if (atomic_load(&j->cancel))

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
