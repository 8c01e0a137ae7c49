/* The exec backend's "configure" request (docs/EXEC_PROTOCOL.md "Optional
 * requests"): nv_backend.configure over the harness protocol. Optional, so the
 * protocol version stays 2: sent only to a harness whose hello lists
 * "configure" in describe's "requests"; for any other the call is
 * NV_E_UNSUPPORTED, "not offered: ...". The setting lives in the harness
 * process: a conversation failure restarts the harness without it, and the
 * answer given before no longer holds (a hypothesis the repeat comparison of a
 * deterministic job would catch, not a tested path). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "exec_internal.h"

int exec_configure(void *ctx, const char *config_json, char *answer, size_t answer_len, char *err,
                   size_t errlen)
{
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    if (!exec_offers(c, "configure"))
        return snprintf(err, errlen,
                        "not offered: harness '%s' does not list \"configure\" in its hello's "
                        "describe.requests",
                        c->command),
               NV_E_UNSUPPORTED;
    json_error_t jerr;
    json_t *cfg = json_loads(config_json ? config_json : "", 0, &jerr);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return snprintf(err, errlen, "configure: the config is not a JSON object"), NV_E_INVALID;
    }
    json_t *hdr = json_pack("{s:s, s:o}", "type", "configure", "config", cfg);
    r = hdr ? exec_transact(c, hdr, NULL, 0, NULL, 0, NULL, err, errlen) : NV_E_NOMEM;
    json_decref(hdr);
    if (r != NV_OK)
        return r;
    json_t *det = c->reply_info ? json_object_get(c->reply_info, "deterministic") : NULL;
    if (!json_is_boolean(det))
        return snprintf(err, errlen,
                        "harness '%s' answered configure without a boolean "
                        "info.deterministic",
                        c->command),
               NV_E_DEVICE;
    snprintf(answer, answer_len, "{\"deterministic\": %s}", json_is_true(det) ? "true" : "false");
    return NV_OK;
}
