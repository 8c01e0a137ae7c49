/* Fault: tanh saturates early, returning exactly +-1 for |x| > 4 in every
 * dtype (a kernel's "fast path" threshold chosen for fp16 and used for all).
 * In fp32, 1 - tanh(4) = 6.7e-4 is 11000 ulps; the correctly rounded result
 * reaches 1 only at |x| = 9.01. Random inputs land in (4, 9) by chance; the
 * domain edges where tanh's result changes binade put points there in every
 * case. */
#include <math.h>
#include <string.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-tanh";

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    if (strcmp(call->op, "tanh") != 0)
        return NV_OK;
    nv_tensor_view *out = &call->outputs[0];
    int64_t n = fault_numel(out);
    for (int64_t k = 0; k < n; k++) {
        double x = fault_get(&call->inputs[0], k);
        if (fabs(x) > 4)
            fault_set(out, k, copysign(1.0, x));
    }
    return NV_OK;
}
