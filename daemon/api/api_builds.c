/* POST /api/v1/builds: register a build with the backend its jobs run on. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "common/buildid.h"
#include "daemon/util/util.h"

/* A backend spec at most this long: a path or a command line, not a script. */
#define BACKEND_MAX 4096

/* Why spec cannot be a build's backend, or NULL when it can. The worker loads
 * it only if its own allow-list admits it (worker/agent/build_backend.c);
 * numvald refuses what no worker could load, so the mistake shows at once. */
static const char *backend_problem(const char *spec)
{
    size_t n = strlen(spec);
    if (n == 0 || n > BACKEND_MAX)
        return "must be 1..4096 bytes";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)spec[i] < 0x20 || spec[i] == 0x7f)
            return "must not hold control characters";
    if (!strncmp(spec, "plugin:", 7))
        return spec[7] == '/' ? NULL : "a plugin needs an absolute path: \"plugin:/dir/lib.so\"";
    if (!strncmp(spec, "exec:", 5))
        return spec[5] == '/' ? NULL
                              : "an exec harness needs an absolute program path: "
                                "\"exec:/dir/harness ARGS\"";
    if (!strcmp(spec, "emu") || !strncmp(spec, "emu:", 4))
        return NULL;
    return "must start with \"plugin:/\", \"exec:/\" or \"emu\"";
}

void api_builds_register(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    char *canon = NULL, *existing = NULL;
    const json_t *b = json_object_get(body, "build");
    const char *backend = json_string_value(json_object_get(body, "backend"));
    char hash[65];
    const char *field = NULL;
    int r = nv_buildid_canonical(b, &canon, hash, &field);
    if (r == -EINVAL) {
        api_error(x, 400, "bad_request", "/build",
                  "\"build\" must be an object with at least one of name, version, commit, "
                  "compiler, runtime, driver, firmware, flags, mode");
        goto out;
    }
    if (r < 0) {
        api_errno(x, r, "build identity");
        goto out;
    }
    if (!backend) {
        api_error(x, 400, "bad_request", "/backend",
                  "\"backend\" must be a string: \"plugin:/dir/lib.so\", \"exec:/dir/harness\" "
                  "or \"emu:...\"");
        goto out;
    }
    const char *why = backend_problem(backend);
    if (why) {
        api_error(x, 400, "bad_request", "/backend", "backend '%.200s' %s", backend, why);
        goto out;
    }
    r = nvd_store_build_register(x->app->store, hash, canon, backend, nvd_now_ms(), &existing);
    if (r == -EEXIST) {
        api_error(x, 409, "conflict", "/backend",
                  "build %.12s already names backend '%.200s'; a build's backend is never "
                  "changed (register a new build version instead)",
                  hash, existing ? existing : "?");
        goto out;
    }
    if (r < 0) {
        api_errno(x, r, "register build");
        goto out;
    }
    json_t *id = json_loads(canon, 0, NULL);
    api_json(x, 200, json_pack("{s:{s:s,s:o,s:s}}", "build", "id", hash, "identity",
                               id ? id : json_null(), "backend", backend));
out:
    free(existing);
    free(canon);
    json_decref(body);
}
