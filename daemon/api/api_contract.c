/* GET /api/v1/devices/{name}/contract?build=B: the measured contract of a
 * device beside its declared one, from the newest finished contract job
 * (docs/CONTRACT.md, docs/API.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon/store/store_contract.h"

/* A build names a hash (64 hex), a name or a version: longer is no build. */
#define CONTRACT_BUILD_MAX 256

typedef struct contract_arg {
    const char *device, *build; /* into text; build may be NULL */
    int missing;                /* on -ENOENT: NVD_CONTRACT_NO_* */
    char text[];
} contract_arg;

/* On a read connection of the threadpool, like the other reads of stored
 * results: the result column is parsed by SQLite's JSON functions. */
static int contract_run(nvd_store *s, void *arg, json_t **ret)
{
    contract_arg *a = arg;
    return nvd_store_device_contract(s, a->device, a->build, ret, &a->missing);
}

static void contract_err(api_ctx *x, int r, void *arg)
{
    const contract_arg *a = arg;
    if (r == -ENOENT && a->missing == NVD_CONTRACT_NO_DEVICE)
        api_error(x, 404, "not_found", NULL, "device '%s' not found (see GET /api/v1/devices)",
                  a->device);
    else if (r == -ENOENT && a->missing == NVD_CONTRACT_NO_BUILD)
        api_error(x, 404, "not_found", "/build",
                  "no build '%s' (a build hash, name or version; see GET /api/v1/builds)",
                  a->build);
    else if (r == -ENOENT && a->build)
        api_error(x, 404, "not_found", NULL,
                  "device '%s' has no finished contract job of build '%s' yet (submit "
                  "{\"kind\": \"contract\"} with that build)",
                  a->device, a->build);
    else if (r == -ENOENT)
        api_error(x, 404, "not_found", NULL,
                  "device '%s' has no finished contract job yet (submit {\"kind\": "
                  "\"contract\"} to it)",
                  a->device);
    else
        api_errno(x, r, "device contract");
}

void api_device_contract(api_ctx *x, const char *device)
{
    if (!api_name_ok(device)) {
        api_error(x, 400, "bad_request", NULL,
                  "device name must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
        return;
    }
    const char *build = api_query(x, "build");
    if (build && !*build)
        build = NULL;
    if (build && strlen(build) > CONTRACT_BUILD_MAX) {
        api_error(x, 400, "bad_request", "/build", "build is longer than %d bytes",
                  CONTRACT_BUILD_MAX);
        return;
    }
    size_t n = strlen(device) + (build ? strlen(build) : 0) + 2;
    contract_arg *a = calloc(1, sizeof(*a) + n);
    if (!a) {
        api_errno(x, -ENOMEM, "device contract");
        return;
    }
    a->device = strcpy(a->text, device);
    if (build)
        a->build = strcpy(a->text + strlen(device) + 1, build);
    api_read_run_err(x, contract_run, a, "device contract", contract_err);
}
