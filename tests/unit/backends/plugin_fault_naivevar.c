/* Fault: the textbook one-pass variance E[x^2] - E[x]^2, accumulated in fp32,
 * in var and in layer_norm (whose normalisation then divides by the square root
 * of that variance, clamped at 0). On centred data it is accurate; with a
 * common offset c >> sigma the two terms are about c^2 and cancel, leaving
 * about c^2 2^-24 sqrt(n) of rounding error (Chan, Golub & LeVeque, "Algorithms
 * for computing the sample variance", 1983): the shipped "offset" rows (c =
 * 10^4 sigma in fp32) lose the variance entirely, with x^2 far from overflow.
 * Inputs of fp64, or reduced along another axis than the last, run emu's
 * correct kernels. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "plugin_fault.h"

const char *const fault_name = "fault-naivevar";

typedef struct params {
    double eps;
    int correction;
    bool last_axis;
} params;

static params parse(const nv_op_call *call)
{
    params p = {.eps = 1e-5, .correction = 0, .last_axis = true};
    json_error_t je;
    json_t *a = json_loads(call->attrs_json ? call->attrs_json : "{}", 0, &je);
    json_t *ax = json_object_get(a, "axis"), *eps = json_object_get(a, "eps");
    json_t *corr = json_object_get(a, "correction");
    int nd = call->inputs[0].ndim;
    if (json_is_integer(ax)) {
        json_int_t v = json_integer_value(ax);
        p.last_axis = v == -1 || v == nd - 1;
    }
    if (json_is_number(eps))
        p.eps = json_number_value(eps);
    if (json_is_integer(corr))
        p.correction = (int)json_integer_value(corr);
    json_decref(a);
    return p;
}

/* Mean and E[x^2] - E[x]^2 of row r (length n) in fp32, recursive summation. */
static void naive_row(const nv_tensor_view *x, int64_t r, int64_t n, float *ret_mean,
                      float *ret_var)
{
    float s1 = 0, s2 = 0;
    for (int64_t j = 0; j < n; j++) {
        float f = (float)fault_get(x, r * n + j);
        s1 += f;
        s2 += f * f;
    }
    float mean = s1 / (float)n;
    *ret_mean = mean;
    *ret_var = s2 / (float)n - mean * mean;
}

int fault_apply(nv_op_call *call, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    bool var = strcmp(call->op, "var") == 0, ln = strcmp(call->op, "layer_norm") == 0;
    const nv_tensor_view *x = &call->inputs[0];
    if ((!var && !ln) || x->ndim < 1 || x->dtype == NV_DT_FP64)
        return NV_OK;
    params p = parse(call);
    if (!p.last_axis)
        return NV_OK;
    int64_t n = x->shape[x->ndim - 1], rows = fault_numel(x) / n;
    nv_tensor_view *out = &call->outputs[0];
    for (int64_t r = 0; r < rows; r++) {
        float mean, v;
        naive_row(x, r, n, &mean, &v);
        if (var) {
            if (p.correction)
                v = v * (float)n / (float)(n - p.correction);
            fault_set(out, r, v);
            continue;
        }
        float rstd = 1.0f / sqrtf(fmaxf(v, 0) + (float)p.eps);
        for (int64_t j = 0; j < n; j++) {
            float w = (float)fault_get(&call->inputs[1], j);
            float b = (float)fault_get(&call->inputs[2], j);
            float xv = (float)fault_get(x, r * n + j);
            fault_set(out, r * n + j, (double)((xv - mean) * rstd * w + b));
        }
    }
    return NV_OK;
}
