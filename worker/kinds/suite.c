/* Suite jobs (suite.h). */
#include "suite.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/artifact.h"
#include "kinds.h"
#include "worker/backends/loader.h"
#include "worker/runner/err.h"

/* Replay one suite case into case JSON c, by the kind of its artifact. */
static void replay(const nvw_run_opts *opts, const nvw_replay_env *env, const json_t *sc, json_t *c)
{
    const char *sha = json_string_value(json_object_get(sc, "artifact"));
    char msg[512] = "";
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!sha || opts->fetch_artifact(opts->ud, sha, &buf, &len, msg, sizeof msg) < 0) {
        nvw_replay_error(c, msg[0] ? msg : "the suite case has no artifact");
        return;
    }
    nv_artifact *a = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(buf, len, &a, &err);
    free(buf);
    if (r < 0) {
        nvw_replay_error(c, err ? err : "the artifact could not be decoded");
        free(err);
        return;
    }
    const char *name = NULL;
    const nvw_kind *k = nvw_kind_of_artifact(a, &name);
    if (k && k->replay) {
        k->replay(env, a, sha, c);
    } else {
        char kinds[128];
        nvw_kind_replay_names(kinds, sizeof kinds);
        snprintf(msg, sizeof msg, "artifact '%s' is of a '%s' job; suite replay handles %s cases",
                 sha, name, kinds);
        nvw_replay_error(c, msg);
    }
    nv_artifact_free(a);
}

int nvw_run_suite(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err)
{
    /* The artifacts live in numvald: `numval-worker run` has never run a suite
     * job, and refuses it with the message the spec's validation gives there. */
    if (!opts || !opts->fetch_artifact)
        return nvw_set_err(ret_err, -EINVAL, "/kind: kind 'suite' is not supported by this build");
    const json_t *cases = json_object_get(spec, "cases");
    nvw_backend *b = NULL;
    char err[512] = "";
    if (nvw_backend_load(backend_spec, &b, err, sizeof err) < 0)
        return nvw_set_err(ret_err, -ENODEV, "%s", err[0] ? err : "cannot load the backend");
    nvw_replay_env env = {.b = b, .backend_spec = backend_spec};
    json_t *out = json_array();
    json_int_t n[3] = {0, 0, 0}; /* passed, failed, errors */
    size_t total = json_array_size(cases), i;
    json_t *sc;
    if (opts->progress)
        opts->progress(opts->ud, 0, (int64_t)total);
    json_array_foreach(cases, i, sc)
    {
        if (opts->cancel && atomic_load(opts->cancel))
            break;
        json_t *c = json_pack("{sI sO sO}", "index", (json_int_t)i, "suite_case",
                              json_object_get(sc, "suite_case"), "signature",
                              json_object_get(sc, "signature") ? json_object_get(sc, "signature")
                                                               : json_null());
        if (!c)
            continue;
        json_object_set(c, "artifact", json_object_get(sc, "artifact"));
        replay(opts, &env, sc, c);
        const char *v = json_string_value(json_object_get(c, "verdict"));
        n[!strcmp(v, "passed") ? 0 : !strcmp(v, "failed") ? 1 : 2]++;
        json_array_append_new(out, c);
        if (opts->progress)
            opts->progress(opts->ud, (int64_t)i + 1, (int64_t)total);
    }
    nvw_backend_free(b);
    const char *verdict = n[1] ? "failed" : n[2] ? "error" : "passed";
    *ret_result =
        json_pack("{ss ss ss s{sI sI sI sI} so}", "verdict", verdict, "kind", "suite", "backend",
                  backend_spec, "summary", "cases", (json_int_t)json_array_size(out), "passed",
                  n[0], "failed", n[1], "errors", n[2], "cases", out);
    return *ret_result ? 0 : -ENOMEM;
}
