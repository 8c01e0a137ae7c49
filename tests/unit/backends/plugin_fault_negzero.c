/* Fault: +0 for -0. Every result the device writes passes through a
 * "canonicalize zero" step (v == 0 ? 0 : v, as a kernel that adds +0 to its
 * output or clears the sign of zeros does): neg(+0), -0 * x, -0 + -0, sqrt(-0),
 * a -tiny product that underflows all come back as +0, where IEEE 754-2019
 * (§5.5.1, §6.3) gives -0. The value is 0 ulps off: only a sign-of-zero
 * judgement sees it. */
#include <math.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-negzero";

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    nv_tensor_view *out = &call->outputs[0];
    int64_t n = fault_numel(out);
    for (int64_t k = 0; k < n; k++) {
        double v = fault_get(out, k);
        if (v == 0 && signbit(v))
            fault_set(out, k, 0.0);
    }
    return NV_OK;
}
