/* Helpers of the gate and of suite replay (gate.h). */
#include "gate.h"

void nvw_gate_annotate(json_t *c, json_t *sig, int runs, int failed, int bits, bool flaky)
{
    if (!c) {
        json_decref(sig);
        return;
    }
    json_object_set_new(c, "signature", sig ? sig : json_null());
    json_object_set_new(
        c, "repro_rate",
        json_pack("{si si si}", "runs", runs, "failed", failed, "bit_identical", bits));
    json_object_set_new(c, "flaky", json_boolean(flaky));
}

void nvw_replay_error(json_t *c, const char *msg)
{
    json_object_set_new(c, "verdict", json_string("error"));
    json_object_set_new(c, "error", json_string(msg));
}
