/* Fault: PyTorch 1.13's CPU sigmoid and silu (docs/TORCH_FINDINGS.md, measured
 * on every fp32 input). sigmoid behaves as 1 / (1 + exp(-x)) in fp32: for
 * x < -88.7228 (where expf(-x) overflows) it returns 0, in fp32 and in bf16
 * (computed in fp32), and fp32 silu = x sigmoid(x) returns -0, although the
 * exact results are normal or subnormal values down to x = -103.97 (sigmoid)
 * and -91.86 (silu): errors up to 2^21 ulps. Every other input, dtype and op is
 * computed correctly. The catalog's domain edges (sigmoid's underflow to
 * subnormal at -87.3 and to zero at -103.97) miss the interval; the fp32 sweep
 * and the bf16 exhaustive class do not. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-sigmoid";

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    int dt = call->inputs[0].dtype;
    bool sig = strcmp(call->op, "sigmoid") == 0 && (dt == NV_DT_FP32 || dt == NV_DT_BF16);
    bool silu = strcmp(call->op, "silu") == 0 && dt == NV_DT_FP32;
    if (!sig && !silu)
        return NV_OK;
    nv_tensor_view *out = &call->outputs[0];
    int64_t n = fault_numel(out);
    for (int64_t k = 0; k < n; k++) {
        float x = (float)fault_get(&call->inputs[0], k);
        if (x < 0 && isinf(expf(-x))) /* exp(-x) overflowed: 1 / (1 + inf) = 0 */
            fault_set(out, k, sig ? 0.0 : (double)(x * 0.0f));
    }
    return NV_OK;
}
