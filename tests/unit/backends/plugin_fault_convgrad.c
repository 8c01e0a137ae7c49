/* A device with the two classic conv2d backward bugs: the emu device, except
 * that conv2d's input gradient correlates gy with the kernel un-flipped (tap
 * (i, j) of the transposed convolution reads w[.., kh-1-i, kw-1-j]: the
 * kernel used as it is stored, where the transposed convolution needs it
 * rotated by 180 degrees relative to the forward's taps) and its weight
 * gradient drops the padding term of the input index (x[.., oh s + i d, ..]
 * instead of x[.., oh s - p + i d, ..]). A kernel that is symmetric under the
 * rotation (1x1) hides the first, padding 0 the second, so gradient jobs of
 * exactly those shapes pass and the others fail the device check
 * (tests/integration/test_conv_grad.py). Groups, stride and dilation are
 * honoured, so nothing else differs from the emu. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/catalog.h"
#include "numval/backend.h"
#include "worker/backends/emu/emu.h"
#include "worker/backends/loader.h"

static nv_backend table;

static void put(nv_tensor_view *v, int64_t e, double x)
{
    nv_dtype dt = (nv_dtype)v->dtype;
    nv_dtype_store_bits(dt, v->data, e, nv_dtype_encode(dt, x, &NV_ROUND_DEFAULT, 0));
}

static int wrong_grads(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    /* the emu's call checks the operands and allocates the result */
    int r = nvw_emu_backend()->backward(ctx, c, err, errlen);
    if (r != NV_OK)
        return r;
    nv_tensor *x = nvw_tensor_from_view(&c->inputs[0], false);
    nv_tensor *w = nvw_tensor_from_view(&c->inputs[1], false);
    nv_tensor *gy = nvw_tensor_from_view(c->grad_output, false);
    json_t *aj = json_loads(c->attrs_json ? c->attrs_json : "{}", 0, NULL);
    nv_op_attrs a;
    nv_conv_geom g;
    r = x && w && gy && aj ? NV_OK : NV_E_NOMEM;
    if (r == NV_OK && (nv_op_parse_attrs(nv_op_find("conv2d"), aj, &a, NULL) < 0 ||
                       nv_conv_geom_of(&a, x, w, &g) < 0))
        r = NV_E_INVALID;
    double *gx = r == NV_OK ? calloc((size_t)x->numel, sizeof(double)) : NULL;
    double *gw = r == NV_OK ? calloc((size_t)w->numel, sizeof(double)) : NULL;
    if (r == NV_OK && (!gx || !gw))
        r = NV_E_NOMEM;
    for (int64_t n = 0; r == NV_OK && n < g.n; n++)
        for (int64_t co = 0; co < g.co; co++)
            for (int64_t oh = 0; oh < g.oh; oh++)
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    int64_t q = co / g.cog;
                    double gv = gy->data[((n * g.co + co) * g.oh + oh) * g.ow + ow];
                    for (int64_t kk = 0; kk < g.k; kk++) {
                        int64_t c_ = kk / (g.kh * g.kw), i = (kk / g.kw) % g.kh, j = kk % g.kw;
                        int64_t e = nv_conv_x_index(&g, n, q, oh, ow, kk);
                        int64_t flip = (c_ * g.kh + (g.kh - 1 - i)) * g.kw + (g.kw - 1 - j);
                        if (e >= 0)
                            gx[e] += gv * w->data[co * g.k + flip];
                        int64_t ih = oh * g.stride + i * g.dilation;
                        int64_t iw = ow * g.stride + j * g.dilation;
                        if (ih < g.h && iw < g.w)
                            gw[co * g.k + kk] +=
                                gv * x->data[((n * g.c + q * g.cg + c_) * g.h + ih) * g.w + iw];
                    }
                }
    for (int64_t e = 0; r == NV_OK && e < x->numel; e++)
        put(&c->grad_inputs[0], e, gx[e]);
    for (int64_t e = 0; r == NV_OK && e < w->numel; e++)
        put(&c->grad_inputs[1], e, gw[e]);
    if (r != NV_OK) {
        nvw_emu_backend()->release_tensor(ctx, &c->grad_inputs[0]);
        nvw_emu_backend()->release_tensor(ctx, &c->grad_inputs[1]);
        snprintf(err, errlen, "fault_convgrad: could not recompute the gradients");
    }
    free(gx);
    free(gw);
    json_decref(aj);
    nv_tensor_free(x);
    nv_tensor_free(w);
    nv_tensor_free(gy);
    return r;
}

static int convgrad_backward(void *ctx, nv_backward_call *c, char *err, size_t errlen)
{
    if (c->op && strcmp(c->op, "conv2d") == 0)
        return wrong_grads(ctx, c, err, errlen);
    return nvw_emu_backend()->backward(ctx, c, err, errlen);
}

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend(); /* the emu's context is this plugin's */
    table.name = "fault_convgrad";
    table.backward = convgrad_backward;
    return &table;
}
