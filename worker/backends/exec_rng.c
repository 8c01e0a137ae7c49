/* The exec backend's "rng" request (docs/EXEC_PROTOCOL.md "Optional requests"):
 * nv_backend.rng over the harness protocol, one generator action per request.
 * Optional, so the protocol version stays 2: the worker sends it only to a
 * harness whose hello lists "rng" in describe's "requests"; for any other the
 * call is NV_E_UNSUPPORTED, "not offered: ..." naming the harness. (Protocol
 * 1's fixed "rng" request, without "action", is the harness's own older form;
 * the worker never sends it.) The generators live in the harness process: a
 * conversation failure restarts it and loses them, and the case that saw the
 * failure reports it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "exec_internal.h"

int exec_rng(void *ctx, nv_rng_call *call, char *err, size_t errlen)
{
    static const char *const actions[] = {"seed",      "uniform",   "dropout",
                                          "get_state", "set_state", "recompute"};
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (call->action < NV_RNG_SEED || call->action > NV_RNG_RECOMPUTE || call->n_inputs < 0 ||
        call->n_inputs > 1 || call->n_outputs < 0 || call->n_outputs > 3)
        return snprintf(err, errlen, "rng: bad action, input or output count"), NV_E_INVALID;
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    if (!exec_offers(c, "rng"))
        return snprintf(err, errlen,
                        "not offered: harness '%s' does not list \"rng\" in its hello's "
                        "describe.requests (RNG jobs)",
                        c->command),
               NV_E_UNSUPPORTED;
    /* seed as a JSON integer: jansson's is signed 64-bit; RNG specs keep seeds
     * below 2^53 (core/spec/jobspec_rng.c), so nothing is lost. */
    json_t *hdr = json_pack("{s:s, s:s, s:i, s:I, s:I, s:f}", "type", "rng", "action",
                            actions[call->action], "gen", (int)call->gen, "seed",
                            (json_int_t)call->seed, "n", (json_int_t)call->n, "p", call->p);
    const nv_tensor_view *ins[1];
    if (call->n_inputs == 1)
        ins[0] = &call->inputs[0];
    r = hdr ? exec_transact(c, hdr, ins, call->n_inputs, call->outputs, call->n_outputs, NULL, err,
                            errlen)
            : NV_E_NOMEM;
    json_decref(hdr);
    return r;
}
