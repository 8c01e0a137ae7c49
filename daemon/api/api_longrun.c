/* AMP policy and schedule routes (api_longrun.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_longrun.h"
#include "daemon/scheduler.h"
#include "daemon/store/store_longrun.h"
#include "daemon/util/util.h"
#include "core/ops/catalog.h"

void api_amp_list(api_ctx *x)
{
    const char *name = api_query(x, "name");
    json_t *list = NULL;
    int r = nvd_store_amp_list(x->app->store, name, &list);
    if (r < 0) {
        api_errno(x, r, "AMP policies");
        return;
    }
    api_json(x, 200, json_pack("{s:o}", "amp_policies", list));
}

/* Each list holds catalog op names; an op in two lists is refused. */
static int check_policy(api_ctx *x, const json_t *p)
{
    static const char *const lists[] = {"low_precision", "fp32", "promote"};
    for (int i = 0; i < 3; i++) {
        const json_t *l = json_object_get(p, lists[i]);
        char field[64];
        snprintf(field, sizeof field, "/policy/%s", lists[i]);
        if (!json_is_array(l)) {
            api_error(x, 400, "bad_request", field, "\"%s\" must be an array of op names",
                      lists[i]);
            return -1;
        }
        size_t k;
        const json_t *v;
        json_array_foreach(l, k, v)
        {
            const char *op = json_string_value(v);
            if (!op || !nv_op_find(op)) {
                api_error(x, 400, "bad_request", field, "'%s' is not a catalog op",
                          op ? op : "(not a string)");
                return -1;
            }
            for (int j = 0; j < i; j++) {
                size_t m;
                const json_t *w;
                json_array_foreach(json_object_get(p, lists[j]), m, w) if (json_equal(v, w))
                {
                    api_error(x, 400, "bad_request", field,
                              "op '%s' is in both \"%s\" and "
                              "\"%s\"",
                              op, lists[j], lists[i]);
                    return -1;
                }
            }
        }
    }
    const json_t *mwj = json_object_get(p, "master_weights");
    const char *mw = json_string_value(mwj);
    if (mwj && (!mw || (strcmp(mw, "fp32") && strcmp(mw, "bf16") && strcmp(mw, "fp16")))) {
        api_error(x, 400, "bad_request", "/policy/master_weights",
                  "'%s' is not fp32, bf16 or fp16 (the dtype the device keeps weights in)",
                  mw ? mw : "(not a string)");
        return -1;
    }
    return 0;
}

void api_amp_post(api_ctx *x)
{
    json_t *body = api_body_object(x);
    if (!body)
        return;
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *reason = json_string_value(json_object_get(body, "reason"));
    const json_t *policy = json_object_get(body, "policy");
    if (!name || !api_name_ok(name))
        api_error(x, 400, "bad_request", "/name",
                  "\"name\" must be a policy name "
                  "([A-Za-z0-9._-])");
    else if (!reason || !reason[0])
        api_error(x, 400, "bad_request", "/reason", "an AMP policy change needs a \"reason\"");
    else if (!json_is_object(policy))
        api_error(x, 400, "bad_request", "/policy",
                  "\"policy\" must be an object with "
                  "low_precision, fp32 and promote lists");
    else if (check_policy(x, policy) == 0) {
        int64_t version = 0;
        const char *author = x->token_name ? x->token_name : "anonymous";
        int r =
            nvd_store_amp_add(x->app->store, name, policy, author, reason, nvd_now_ms(), &version);
        json_t *got = NULL;
        if (r == 0)
            r = nvd_store_amp_get(x->app->store, name, version, &got);
        if (r < 0)
            api_errno(x, r, "AMP policy");
        else
            api_json(x, 201, json_pack("{s:o}", "amp_policy", got));
    }
    json_decref(body);
}

void api_schedules(api_ctx *x)
{
    api_json(x, 200, json_pack("{s:o}", "schedules", nvd_scheduler_list(x->app)));
}

int api_longrun_resolve(api_ctx *x, json_t *body)
{
    const json_t *kind = json_object_get(body, "kind");
    json_t *amp = json_object_get(body, "amp");
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "longrun") || !json_is_object(amp))
        return 0;
    if (json_object_get(amp, "policy"))
        return 0; /* inline in the job: it runs as given (version 0 unless named) */
    json_t *v = json_object_get(amp, "policy_version");
    const char *name = json_string_value(json_object_get(amp, "policy_name"));
    int64_t version = json_is_integer(v) ? json_integer_value(v) : 0;
    json_t *got = NULL;
    int r = nvd_store_amp_get(x->app->store, name ? name : "default", version, &got);
    if (r == -ENOENT && version == 0 && !name)
        return 0; /* no stored policy: the worker's shipped default */
    if (r < 0) {
        if (r == -ENOENT)
            api_error(x, 400, "bad_request", "/amp/policy_version",
                      "AMP policy '%s' version "
                      "'%lld' is not in the store",
                      name ? name : "default", (long long)version);
        else
            api_errno(x, r, "AMP policy");
        return -1;
    }
    json_object_set(amp, "policy", json_object_get(got, "policy"));
    json_object_set(amp, "policy_version", json_object_get(got, "version"));
    /* The name stays with the version, so readers of the job can find the
     * version's author and reason (GET /api/v1/amp-policies?name=). */
    json_object_set(amp, "policy_name", json_object_get(got, "name"));
    json_decref(got);
    return 0;
}
