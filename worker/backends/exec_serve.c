/* The exec backend's "serve" request (docs/EXEC_PROTOCOL.md "Optional
 * requests"): the serving kind's decoder run step by step by the harness,
 * which holds the KV cache. Optional, outside the protocol's version: sent
 * only to a harness whose hello lists "serve" in describe's "requests"; to any
 * other the call is NV_E_UNSUPPORTED with "not offered: ..." naming it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "exec_internal.h"

bool nvw_exec_offers(void *ctx, const char *request)
{
    exec_ctx *c = ctx;
    char err[64];
    if (c->pid < 0 && exec_harness_start(c, err, sizeof err) != NV_OK)
        return false;
    return exec_offers(c, request);
}

int nvw_exec_serve(void *ctx, const char *request_json, const nv_tensor_view *ins, int n_ins,
                   nv_tensor_view *outs, int n_outs, char *err, size_t errlen)
{
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (n_ins < 0 || n_ins > 1024 || n_outs < 0 || n_outs > 1)
        return snprintf(err, errlen, "serve: %d inputs, %d outputs", n_ins, n_outs), NV_E_INVALID;
    json_error_t je;
    json_t *hdr = json_loads(request_json ? request_json : "", 0, &je);
    if (!json_is_object(hdr)) {
        json_decref(hdr);
        return snprintf(err, errlen, "serve request is not a JSON object"), NV_E_INVALID;
    }
    /* A free needs no harness: with none running (it died, or was replaced)
     * its models are gone already, and starting one to free nothing costs
     * seconds. */
    const char *action = json_string_value(json_object_get(hdr, "action"));
    if (c->pid < 0 && action && !strcmp(action, "free")) {
        json_decref(hdr);
        return NV_OK;
    }
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK) {
        json_decref(hdr);
        return r;
    }
    if (!exec_offers(c, "serve")) {
        json_decref(hdr);
        return snprintf(err, errlen,
                        "not offered: harness '%s' does not list \"serve\" in its hello's "
                        "describe.requests (harness-run serving steps)",
                        c->command),
               NV_E_UNSUPPORTED;
    }
    const nv_tensor_view *in[1024];
    for (int i = 0; i < n_ins; i++)
        in[i] = &ins[i];
    r = json_object_set_new(hdr, "type", json_string("serve")) ? NV_E_NOMEM : NV_OK;
    if (r == NV_OK)
        r = exec_transact(c, hdr, in, n_ins, outs, n_outs, NULL, err, errlen);
    json_decref(hdr);
    return r;
}
