/* Fault: maximum(x, NaN) = x. The kernel selects with (x < y) ? y : x, so a NaN
 * second operand loses the comparison and x comes back, while a NaN first
 * operand still propagates: IEEE 754-2019 §9.6 maximum returns NaN for either
 * (it is maximumNumber that drops a NaN). "specials" that meet only as equal
 * pairs (NaN, NaN) never show it; the ordered pairs (x, NaN) do. */
#include <math.h>
#include <string.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-maxnan";

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    if (strcmp(call->op, "maximum") != 0 || call->n_inputs != 2)
        return NV_OK;
    nv_tensor_view *out = &call->outputs[0];
    int64_t n = fault_numel(out);
    for (int64_t k = 0; k < n; k++) {
        double x = fault_get(&call->inputs[0], k), y = fault_get(&call->inputs[1], k);
        if (isnan(y) && !isnan(x))
            fault_set(out, k, x);
    }
    return NV_OK;
}
