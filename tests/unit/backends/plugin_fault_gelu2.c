/* A device with a wrong second derivative: the emu device (its forward,
 * backward and double backward), except that gelu's double backward drops a
 * term of gelu''(x) = phi(x) (2 - x^2): it returns gy v phi(x) (1 - x^2), the
 * derivative of x phi(x) taken as phi(x) - x^2 phi(x) alone, forgetting the
 * phi of Phi' (a slip of the product rule). Its first derivative is right, so
 * only a gradient job of order 2 that checks the device's double backward
 * sees it: the "double_backward" check must fail (second_order_mismatch) on
 * every seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "worker/backends/emu/emu.h"
#include "worker/backends/loader.h"

#define INV_SQRT_2PI 0.39894228040143267794

static nv_backend table;

/* gy v phi(x) (1 - x^2) for every element, stored in x's dtype. */
static int wrong_gelu2(void *ctx, nv_double_backward_call *c, char *err, size_t errlen)
{
    /* the emu's call checks the operands and allocates the result */
    int r = nvw_emu_backend()->double_backward(ctx, c, err, errlen);
    if (r != NV_OK)
        return r;
    nv_tensor *x = nvw_tensor_from_view(&c->inputs[0], false);
    nv_tensor *gy = nvw_tensor_from_view(c->grad_output, false);
    nv_tensor *v = nvw_tensor_from_view(&c->grad_grads[0], false);
    nv_tensor_view *out = &c->grad_inputs[0];
    for (int64_t e = 0; x && gy && v && e < x->numel; e++) {
        double xe = x->data[e], phi = INV_SQRT_2PI * exp(-0.5 * xe * xe);
        double h = gy->data[e] * v->data[e] * phi * (1 - xe * xe);
        nv_dtype dt = (nv_dtype)out->dtype;
        nv_dtype_store_bits(dt, out->data, e, nv_dtype_encode(dt, h, &NV_ROUND_DEFAULT, 0));
    }
    r = x && gy && v ? NV_OK : NV_E_NOMEM;
    if (r != NV_OK)
        nvw_emu_backend()->release_tensor(ctx, out);
    nv_tensor_free(x);
    nv_tensor_free(gy);
    nv_tensor_free(v);
    return r;
}

static int gelu2_double_backward(void *ctx, nv_double_backward_call *c, char *err, size_t errlen)
{
    if (c->op && strcmp(c->op, "gelu") == 0)
        return wrong_gelu2(ctx, c, err, errlen);
    return nvw_emu_backend()->double_backward(ctx, c, err, errlen);
}

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend(); /* the emu's context is this plugin's */
    table.name = "fault_gelu2";
    table.double_backward = gelu2_double_backward;
    return &table;
}
