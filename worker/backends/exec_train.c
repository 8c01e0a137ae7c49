/* The exec backend's "train" request (docs/EXEC_PROTOCOL.md "Optional
 * requests"): nv_backend.train over the harness protocol. It is optional and
 * does not change the protocol version: the worker sends it only to a harness
 * whose hello lists "train" in describe's "requests"; for any other the call
 * is NV_E_UNSUPPORTED, "not offered: ..." naming the harness. A LOAD restarts
 * the harness first, so a checkpoint is always restored in a fresh process. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

int exec_train(void *ctx, nv_train_call *call, char *err, size_t errlen)
{
    static const char *const actions[] = {"init", "step", "save", "load"};
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (call->action < 0 || call->action > 3 || call->n_inputs < 0 || call->n_inputs > 64)
        return snprintf(err, errlen, "train: bad action or input count"), NV_E_INVALID;
    if (call->action == NV_TRAIN_LOAD)
        exec_harness_kill(c);
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    if (!exec_offers(c, "train"))
        return snprintf(err, errlen,
                        "not offered: harness '%s' does not list \"train\" in its hello's "
                        "describe.requests (device-driven training)",
                        c->command),
               NV_E_UNSUPPORTED;
    json_error_t je;
    json_t *cfg = json_loads(call->config_json ? call->config_json : "{}", 0, &je);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return snprintf(err, errlen, "train config is not a JSON object"), NV_E_INVALID;
    }
    json_t *hdr = json_pack("{s:s, s:s, s:o}", "type", "train", "action", actions[call->action],
                            "config", cfg);
    const nv_tensor_view *ins[64];
    for (int i = 0; i < call->n_inputs; i++)
        ins[i] = &call->inputs[i];
    json_decref(c->reply_info);
    c->reply_info = NULL;
    r = hdr ? exec_transact(c, hdr, ins, call->n_inputs, call->outputs, call->n_outputs, NULL,
                            err, errlen)
            : NV_E_NOMEM;
    json_decref(hdr);
    if (r != NV_OK)
        return r;
    char *info = c->reply_info ? json_dumps(c->reply_info, JSON_COMPACT) : strdup("{}");
    if (!info || strlen(info) >= call->info_len) {
        r = info ? NV_E_DEVICE : NV_E_NOMEM;
        snprintf(err, errlen, "train reply: %s",
                 info ? "the info object is larger than the caller's buffer" : "out of memory");
        for (int i = 0; i < call->n_outputs; i++) { /* exec's outputs are malloc'd */
            free(call->outputs[i].data);
            call->outputs[i].data = NULL;
        }
    } else
        memcpy(call->info, info, strlen(info) + 1);
    free(info);
    return r;
}
