/* The reference functions' names, as job specs and results spell them. */
#include <stddef.h>

#include "refmath_internal.h"

static const char *const fn_names[NV_FN_COUNT] = {
    [NV_FN_EXP] = "exp",
    [NV_FN_EXP2] = "exp2",
    [NV_FN_EXPM1] = "expm1",
    [NV_FN_LOG] = "log",
    [NV_FN_LOG2] = "log2",
    [NV_FN_LOG1P] = "log1p",
    [NV_FN_SIN] = "sin",
    [NV_FN_COS] = "cos",
    [NV_FN_TANH] = "tanh",
    [NV_FN_SIGMOID] = "sigmoid",
    [NV_FN_ERF] = "erf",
    [NV_FN_GELU_ERF] = "gelu_erf",
    [NV_FN_GELU_TANH] = "gelu_tanh",
    [NV_FN_SILU] = "silu",
    [NV_FN_SQRT] = "sqrt",
    [NV_FN_RSQRT] = "rsqrt",
    [NV_FN_RECIP] = "reciprocal",
};

const char *nv_fn_name(nv_fn f)
{
    return (unsigned)f < NV_FN_COUNT ? fn_names[f] : NULL;
}
