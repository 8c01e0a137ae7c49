/* Fault: rotary_embedding with the wrong pairing. Asked for the half split
 * (GPT-NeoX / Llama's rotate_half, the catalog's default) the device rotates
 * adjacent pairs (2k, 2k+1) instead, RoFormer's and Meta's original layout:
 * the classic bug of loading weights trained with one convention into a
 * kernel of the other (Hugging Face's Llama conversion script permutes the q
 * and k projections for exactly this reason). Everything else is emu's,
 * correct; asked for interleaved = true the device is right. At position 0 the
 * rotation is the identity under either pairing, so a job whose rows all sit
 * at position 0 cannot see it. The angle and the rotation here are fp64
 * libm, rounded once to the output dtype: a pairing error, nothing else. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-rope";

static double num(const json_t *o, const char *k, double dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    if (strcmp(call->op, "rotary_embedding") != 0)
        return NV_OK;
    json_error_t je;
    json_t *a = json_loads(call->attrs_json ? call->attrs_json : "{}", 0, &je);
    bool interleaved = json_is_true(json_object_get(a, "interleaved"));
    double offset = num(a, "offset", 0), theta = num(a, "theta", 10000);
    const nv_tensor_view *x = &call->inputs[0];
    int64_t d = x->shape[x->ndim - 1], t = x->shape[x->ndim - 2];
    int64_t hd = (int64_t)num(a, "head_dim", 0);
    json_decref(a);
    if (interleaved)
        return NV_OK;
    hd = hd > 0 ? hd : d;
    nv_tensor_view *out = &call->outputs[0];
    int64_t n = fault_numel(out);
    for (int64_t base = 0; base < n; base += hd) {
        double p = offset + (double)((base / d) % t);
        for (int64_t k = 0; k < hd / 2; k++) {
            double phi = p * pow(theta, -2.0 * (double)k / (double)hd);
            double xa = fault_get(x, base + 2 * k), xb = fault_get(x, base + 2 * k + 1);
            fault_set(out, base + 2 * k, xa * cos(phi) - xb * sin(phi));
            fault_set(out, base + 2 * k + 1, xb * cos(phi) + xa * sin(phi));
        }
    }
    return NV_OK;
}
