/* Routes of daemon-side bisections (daemon/bisect.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "daemon/bisect.h"

void api_bisect_post(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    const json_t *sc = json_object_get(body, "suite_case");
    const char *good = json_string_value(json_object_get(body, "good"));
    const char *bad = json_string_value(json_object_get(body, "bad"));
    const json_t *dev = json_object_get(body, "device");
    const char *device = json_string_value(dev);
    if (!json_is_integer(sc) || json_integer_value(sc) <= 0) {
        api_error(x, 400, "bad_request", "/suite_case", "\"suite_case\" must be a suite case id");
        goto out;
    }
    if (!good || !bad) {
        api_error(x, 400, "bad_request", good ? "/bad" : "/good",
                  "\"good\" and \"bad\" must be builds (a hash, name or version)");
        goto out;
    }
    if (dev && !json_is_null(dev) && (!device || !api_name_ok(device))) {
        api_error(x, 400, "bad_request", "/device", "\"device\" must be a device name");
        goto out;
    }
    char field[32], msg[512];
    int64_t id = 0;
    int r = nvd_bisect_start(x->app, json_integer_value(sc), good, bad, device, x->token_name,
                             &id, field, sizeof field, msg, sizeof msg);
    if (r == -ENOENT)
        api_error(x, 404, "not_found", field[0] ? field : NULL, "%s", msg);
    else if (r == -EINVAL)
        api_error(x, 400, "bad_request", field[0] ? field : NULL, "%s", msg);
    else if (r == -E2BIG)
        api_error(x, 413, "too_large", NULL, "%s", msg);
    else if (r == -EBUSY)
        api_error(x, 503, "unavailable", NULL, "%s", msg);
    else if (r < 0)
        api_errno(x, r, "bisection");
    if (r < 0)
        goto out;
    json_t *v = NULL;
    r = nvd_bisect_get(x->app, id, &v);
    if (r < 0)
        api_errno(x, r, "bisection");
    else
        api_json(x, 201, json_pack("{s:o}", "bisection", v));
out:
    json_decref(body);
}

void api_bisect_get(api_ctx *x, int64_t id)
{
    json_t *v = NULL;
    int r = nvd_bisect_get(x->app, id, &v);
    if (r == -ENOENT)
        api_error(x, 404, "not_found", NULL, "no bisection %lld", (long long)id);
    else if (r < 0)
        api_errno(x, r, "bisection");
    else
        api_json(x, 200, json_pack("{s:o}", "bisection", v));
}
