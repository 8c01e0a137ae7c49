/* The kind table (worker/kinds/kinds.h): a spec or an artifact finds its kind by
 * its "kind" (op when it has none, no row for a kind numval does not know),
 * every kind a job can name has a runner, the kinds with artifacts have their
 * commands, gate and replay, and nvw_run_job gives the messages users have
 * always seen: an unknown kind or a bad field named by its JSON pointer, a
 * backend that does not load, a suite job outside agent mode. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"

/* The row of spec text; the name given back is copied into name (may be NULL). */
static const nvw_kind *named(const char *text, char *name)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *n = NULL;
    const nvw_kind *k = nvw_kind_named(j, &n);
    if (name)
        snprintf(name, 32, "%s", n ? n : "");
    json_decref(j);
    return k;
}

static void test_lookup(void)
{
    char name[32];
    const nvw_kind *op = named("{\"kind\": \"op\"}", name);
    tap_ok(op && !strcmp(op->name, "op") && !strcmp(name, "op"), "\"kind\": \"op\" is the op row");
    tap_ok(named("{\"op\": \"exp\"}", name) == op && !strcmp(name, "op"),
           "a spec without \"kind\" is op");
    tap_ok(nvw_kind_named(NULL, NULL) == op, "no spec at all is op");
    tap_ok(named("{\"kind\": 3}", NULL) == op, "a \"kind\" that is not a string is op");
    tap_ok(!named("{\"kind\": \"warp\"}", name) && !strcmp(name, "warp"),
           "an unknown kind has no row, and its name is given back");
    const char *kinds[] = {"op", "fused", "gradient", "longrun", "suite", "contract", "model"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "{\"kind\": \"%s\"}", kinds[i]);
        const nvw_kind *k = named(text, NULL);
        tap_ok(k && !strcmp(k->name, kinds[i]) && k->run, "kind '%s' has a row with a runner",
               kinds[i]);
    }
    const char *with_artifacts[] = {"op", "fused", "gradient", "serving"};
    for (size_t i = 0; i < 4; i++) {
        char text[64];
        snprintf(text, sizeof text, "{\"kind\": \"%s\"}", with_artifacts[i]);
        const nvw_kind *k = named(text, NULL);
        tap_ok(k && k->repro_main && k->minimize_main && k->failure_key && k->gate && k->replay,
               "kind '%s' has repro, minimize, a signature key, a gate and a replay",
               with_artifacts[i]);
    }
    const nvw_kind *lr = named("{\"kind\": \"longrun\"}", NULL);
    tap_ok(lr && !lr->repro_main && !lr->gate && !lr->replay, "longrun leaves no artifacts");
    char buf[128];
    nvw_kind_replay_names(buf, sizeof buf);
    tap_ok(!strcmp(buf, "op, fused, gradient and serving"), "replayable kinds: '%s'", buf);
    nvw_kind_replay_names(buf, 6);
    tap_ok(strlen(buf) < 6, "replayable kinds truncated to fit: '%s'", buf);
}

static void test_artifact(void)
{
    nv_artifact a = {0};
    a.manifest = json_loads("{\"spec\": {\"kind\": \"gradient\", \"op\": \"tanh\"}}", 0, NULL);
    const char *name = NULL;
    const nvw_kind *k = nvw_kind_of_artifact(&a, &name);
    tap_ok(k && !strcmp(k->name, "gradient"), "an artifact's kind is its manifest spec's");
    json_decref(a.manifest);
    a.manifest = json_loads("{\"format\": \"numval-artifact\"}", 0, NULL);
    k = nvw_kind_of_artifact(&a, &name);
    tap_ok(k && !strcmp(k->name, "op"), "an artifact without a spec is op");
    json_decref(a.manifest);
}

/* nvw_run_job's return code and message for spec (JSON text). */
static int run(const char *text, const char *backend, char **ret_err)
{
    json_t *spec = json_loads(text, 0, NULL);
    json_t *res = NULL;
    *ret_err = NULL;
    nvw_run_opts o = {.threads = 1};
    int r = nvw_run_job(spec, backend, &o, &res, ret_err);
    json_decref(res);
    json_decref(spec);
    return r;
}

static void test_run_errors(void)
{
    char *err = NULL;
    int r = run("{\"kind\": \"warp\"}", "emu", &err);
    tap_ok(r == -EINVAL && err && !strncmp(err, "/kind: unknown kind 'warp'", 26),
           "an unknown kind goes to the op parser, which names it: %s", err ? err : "(none)");
    free(err);
    r = run("{\"kind\": \"op\", \"op\": \"nosuchop\", \"dtypes\": [\"fp32\"], \"shapes\": [[4]]}",
            "emu", &err);
    tap_ok(r == -EINVAL && err && !strncmp(err, "/op: ", 5), "a bad field is named: %s",
           err ? err : "(none)");
    free(err);
    r = run("{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[4]]}",
            "warp", &err);
    tap_ok(r == -ENODEV && err && strstr(err, "unknown backend kind 'warp'"),
           "a backend that does not load: -ENODEV with the loader's message: %s",
           err ? err : "(none)");
    free(err);
    r = run("{\"kind\": \"longrun\"}", "warp", &err);
    tap_ok(r == -ENODEV,
           "a long-run job goes to its own runner (the op parser would refuse it): %s",
           err ? err : "(none)");
    free(err);
    r = run("{\"kind\": \"suite\", \"cases\": []}", "emu", &err);
    tap_ok(r == -EINVAL && err &&
               !strcmp(err, "/kind: kind 'suite' is not supported by this build"),
           "a suite job outside agent mode is refused as before: %s", err ? err : "(none)");
    free(err);
}

int main(void)
{
    test_lookup();
    test_artifact();
    test_run_errors();
    return tap_done();
}
