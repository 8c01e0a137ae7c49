/* emu backward entry point (nv_backend.backward): checks the call against the
 * catalog and the emu's "saved" list, decodes the saved tensors and the output
 * gradient, runs the op's backward kernel and encodes one gradient per
 * differentiable input, in that input's dtype after rounding to the storage
 * dtype (describe(): "gradient_dtype": "input"); and the double-backward entry. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "emu_backward.h"
#include "worker/backends/views/views.h"

typedef struct bstate {
    json_t *attrs_json;
    nv_tensor *in[NV_OP_MAX_INPUTS];
    nv_tensor *saved[NV_OP_MAX_INPUTS + 1];
    bool saved_is_in[NV_OP_MAX_INPUTS + 1]; /* saved[k] is an in[] tensor, not owned */
    nv_tensor *gy;
    double *gx[NV_OP_MAX_INPUTS];
    int n_in, n_saved;
} bstate;

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* The catalog order the EMU_B_* ids assume. */
static int op_id(const nv_op_def *op)
{
    static const char *const names[EMU_B_COUNT] = {
        "neg",        "abs",      "add",           "sub",        "mul",     "div",
        "fma",        "sqrt",     "rsqrt",         "reciprocal", "exp",     "exp2",
        "expm1",      "log",      "log2",          "log1p",      "sin",     "cos",
        "tanh",       "sigmoid",  "erf",           "gelu",       "silu",    "relu",
        "pow",        "maximum",  "minimum",       "cast",       "sum",     "mean",
        "max",        "var",      "norm2",         "logsumexp",  "softmax", "log_softmax",
        "layer_norm", "rms_norm", "cross_entropy", "matmul",     "bmm",     "transpose",
        "embedding",  "split_heads", "merge_heads", "cache_write", "flatten", "max_pool2d",
        "conv2d",     "avg_pool2d", "argmax", "sample", "rotary_embedding"};
    size_t n;
    const nv_op_def *all = nv_op_all(&n);
    long id = op - all;
    if (id < 0 || id >= EMU_B_COUNT || strcmp(names[id], op->name) != 0)
        return -1;
    return (int)id;
}

/* nvw_tensor_from_view with the emu's bf16 decode fast path (emu_view_decode). */
static nv_tensor *from_view(const nv_tensor_view *v, bool daz)
{
    if (v->dtype != NV_DT_BF16 || v->ndim < 0 || v->ndim > NV_MAX_DIMS)
        return nvw_tensor_from_view(v, daz);
    nv_tensor *t = nv_tensor_new_uninit(NV_DT_BF16, v->ndim, v->shape);
    if (t && emu_view_decode(v, daz, t->data) < 0) { /* else every element decoded */
        nv_tensor_free(t);
        t = NULL;
    }
    return t;
}

/* The input whose view is v's very layout over the same memory, or -1: its
 * decoded tensor serves for v (decoding is a function of the view). */
static int same_input(const nv_backward_call *call, int n_in, const nv_tensor_view *v)
{
    for (int i = 0; i < n_in; i++) {
        const nv_tensor_view *u = &call->inputs[i];
        bool same = u->data == v->data && u->dtype == v->dtype && u->ndim == v->ndim;
        for (int d = 0; same && d < v->ndim; d++)
            same = u->shape[d] == v->shape[d] && u->strides[d] == v->strides[d];
        if (same)
            return i;
    }
    return -1;
}

static void free_saved(bstate *s)
{
    for (int i = 0; i < s->n_saved; i++)
        if (!s->saved_is_in[i])
            nv_tensor_free(s->saved[i]);
}

/* Decode inputs, the saved tensors (in the order of the emu's saved list) and
 * the output gradient; fill io. */
static int decode(const emu_ctx *ctx, const nv_op_def *op, const nv_backward_call *call, bstate *s,
                  emu_bwd_io *io, char *err, size_t errlen)
{
    bool daz = ctx->mode.daz;
    if (call->n_inputs != op->n_inputs || !call->inputs)
        return fail(err, errlen, NV_E_INVALID, "backward of '%s' takes %d forward inputs", op->name,
                    op->n_inputs);
    for (int i = 0; i < op->n_inputs; i++) {
        if (!(s->in[i] = from_view(&call->inputs[i], daz)))
            return fail(err, errlen, NV_E_INVALID,
                        "backward of '%s': input %d is not a valid "
                        "tensor view",
                        op->name, i);
        s->n_in = i + 1;
    }
    const json_t *want = json_object_get(emu_saved_json_cached(), op->name);
    if ((int)json_array_size(want) != call->n_saved || (call->n_saved > 0 && !call->saved))
        return fail(err, errlen, NV_E_INVALID,
                    "backward of '%s' needs the %ld saved tensors "
                    "describe() lists under \"saved\"",
                    op->name, (long)json_array_size(want));
    io->shape0 = s->in[0];
    for (int k = 0; k < call->n_saved; k++) {
        int same = call->saved[k].ndim >= 0 && call->saved[k].ndim <= NV_MAX_DIMS
                       ? same_input(call, op->n_inputs, &call->saved[k])
                       : -1;
        s->saved_is_in[k] = same >= 0;
        if (!(s->saved[k] = same >= 0 ? s->in[same] : from_view(&call->saved[k], daz)))
            return fail(err, errlen, NV_E_INVALID,
                        "backward of '%s': saved tensor %d is not "
                        "a valid tensor view",
                        op->name, k);
        s->n_saved = k + 1;
        const char *name = json_string_value(json_array_get(want, (size_t)k));
        if (name && strncmp(name, "input:", 6) == 0)
            io->x[atoi(name + 6)] = s->saved[k];
        else
            io->y = s->saved[k];
    }
    if (!call->grad_output || !(s->gy = from_view(call->grad_output, daz)))
        return fail(err, errlen, NV_E_INVALID,
                    "backward of '%s': grad_output is missing or "
                    "not a valid tensor view",
                    op->name);
    io->gy = s->gy;
    return NV_OK;
}

static int check_shapes(const nv_op_def *op, const nv_op_attrs *a, const bstate *s, char *err,
                        size_t errlen)
{
    int nd;
    int64_t shape[NV_MAX_DIMS];
    int r = nv_op_infer(op, a, s->n_in, (const nv_tensor *const *)s->in, &nd, shape, err, errlen);
    if (r < 0)
        return r;
    bool same = s->gy->ndim == nd;
    for (int d = 0; same && d < nd; d++)
        same = s->gy->shape[d] == shape[d];
    if (!same)
        return fail(err, errlen, NV_E_SHAPE,
                    "backward of '%s': grad_output's shape does not "
                    "match the forward output's (rank %d)",
                    op->name, nd);
    return NV_OK;
}

static int encode(emu_call *ec, const nv_tensor *like, const double *vals, nv_tensor_view *ret)
{
    nv_dtype dt = like->dtype;
    const nv_dtype_info *info = nv_dtype_get(dt);
    int64_t n = like->numel;
    unsigned char *buf = malloc((size_t)(n > 0 ? n : 1) * (size_t)info->storage_bytes);
    if (!buf)
        return NV_E_NOMEM;
    /* fp32 and bf16 gradients rounded to their storage dtype: a bit copy
     * (emu_store_exact); not under stochastic rounding, whose stream the general
     * path draws from. */
    bool exact = ec->storage == dt && ec->rm.rounding != NV_ROUND_STOCHASTIC;
    /* plain fp32: emu_round is the conversion to float and emu_store_exact
     * stores that float; a NaN takes the general path below */
    bool f32 = exact && ec->plain && dt == NV_DT_FP32;
    for (int64_t i = 0; i < n; i++) {
        float f = (float)vals[i];
        if (f32 && !isnan(f)) {
            memcpy(buf + i * 4, &f, 4);
            continue;
        }
        double v = emu_round(ec, ec->storage, vals[i]);
        if (exact && emu_store_exact(dt, buf, i, v))
            continue;
        uint32_t rnd = ec->rm.rounding == NV_ROUND_STOCHASTIC
                           ? (uint32_t)(emu_splitmix(&ec->sr_state) >> 32)
                           : 0;
        nv_dtype_store_bits(dt, buf, i, nv_dtype_encode(dt, v, &ec->rm, rnd));
    }
    memset(ret, 0, sizeof *ret);
    ret->dtype = (int32_t)dt;
    ret->ndim = like->ndim;
    int64_t stride = 1;
    for (int d = like->ndim - 1; d >= 0; d--) {
        ret->shape[d] = like->shape[d];
        ret->strides[d] = stride;
        stride *= like->shape[d];
    }
    ret->data = buf;
    return NV_OK;
}

static int run(emu_ctx *ctx, const nv_op_def *op, int id, const nv_op_attrs *a,
               nv_backward_call *call, bstate *s, char *err, size_t errlen)
{
    emu_bwd_io io;
    memset(&io, 0, sizeof io);
    int r = decode(ctx, op, call, s, &io, err, errlen);
    if (r < 0 || (r = check_shapes(op, a, s, err, errlen)) < 0)
        return r;
    int n_grads = 0;
    for (int i = 0; i < op->n_inputs; i++)
        n_grads += nv_op_grad_input(op, i);
    if (call->n_grads != n_grads || !call->grad_inputs)
        return fail(err, errlen, NV_E_INVALID, "backward of '%s' produces %d gradients", op->name,
                    n_grads);
    for (int i = 0; i < n_grads; i++) {
        s->gx[i] = calloc((size_t)(s->in[i]->numel > 0 ? s->in[i]->numel : 1), sizeof(double));
        if (!s->gx[i])
            return fail(err, errlen, NV_E_NOMEM, "out of memory");
        io.gx[i] = s->gx[i];
    }
    emu_call ec;
    emu_bwd_call_init(&ec, &ctx->mode, op, a, s->in[0]->dtype);
    if (op->kind == NV_OPK_MATMUL)
        r = emu_bwd_matmul(&ec, &io);
    else if (op->kind == NV_OPK_LAYOUT)
        r = emu_bwd_layout(&ec, op, a, &io, err, errlen);
    else if (op->kind == NV_OPK_CONV)
        r = emu_bwd_conv(&ec, op, a, &io, err, errlen);
    else if (op->kind == NV_OPK_REDUCE)
        r = emu_bwd_rows(&ec, id, op, a, &io, err, errlen);
    else if (op->kind == NV_OPK_ROTARY)
        r = emu_bwd_rotary(&ec, a, &io, err, errlen);
    else
        r = emu_bwd_elementwise(&ec, id, op, a, &io);
    for (int i = 0; r == NV_OK && i < n_grads; i++) {
        r = encode(&ec, s->in[i], s->gx[i], &call->grad_inputs[i]);
        if (r < 0) {
            for (int k = 0; k < i; k++) {
                free(call->grad_inputs[k].data);
                call->grad_inputs[k].data = NULL;
            }
            snprintf(err, errlen, "out of memory");
        }
    }
    return r;
}

/* The op of a backward or double-backward call, refused as the emu refuses
 * it: inference-only mode, unknown ops, ops without a backward. */
static int find_op(const emu_ctx *ctx, const char *name, const char *what, const nv_op_def **ret,
                   int *ret_id, char *err, size_t errlen)
{
    if (ctx->mode.inference_only)
        return fail(err, errlen, NV_E_UNSUPPORTED,
                    "this emu device is inference-only "
                    "(mode 'inference_only=on'): it offers no %s for '%s'",
                    what, name ? name : "(null)");
    const nv_op_def *op = name ? nv_op_find(name) : NULL;
    int id = op ? op_id(op) : -1;
    if (id < 0)
        return fail(err, errlen, NV_E_UNSUPPORTED, "unknown op '%s'", name ? name : "(null)");
    if (!op->differentiable || op->kind == NV_OPK_CAST)
        return fail(err, errlen, NV_E_UNSUPPORTED, "op '%s' has no %s on emu", op->name, what);
    *ret = op;
    *ret_id = id;
    return NV_OK;
}

int emu_backward(void *vctx, nv_backward_call *call, char *err, size_t errlen)
{
    emu_ctx *ctx = vctx;
    const nv_op_def *op;
    int id;
    int r0 = find_op(ctx, call->op, "backward", &op, &id, err, errlen);
    if (r0 < 0)
        return r0;
    bstate s;
    memset(&s, 0, sizeof s);
    nv_op_attrs a;
    char *msg = NULL;
    int r;
    json_error_t jerr;
    s.attrs_json = json_loads(call->attrs_json ? call->attrs_json : "{}", 0, &jerr);
    if (!json_is_object(s.attrs_json) || nv_op_parse_attrs(op, s.attrs_json, &a, &msg) < 0) {
        r = NV_E_INVALID;
        snprintf(err, errlen, "bad attrs for the backward of '%s': %s", op->name,
                 msg ? msg : "not a JSON object");
        goto out;
    }
    if (!nv_op_has_backward(op, &a)) {
        r = fail(err, errlen, NV_E_UNSUPPORTED,
                 "op '%s' has no backward on emu with "
                 "matmul scales",
                 op->name);
        goto out;
    }
    r = run(ctx, op, id, &a, call, &s, err, errlen);
out:
    free(msg);
    for (int i = 0; i < s.n_in; i++)
        nv_tensor_free(s.in[i]);
    free_saved(&s);
    nv_tensor_free(s.gy);
    for (int i = 0; i < NV_OP_MAX_INPUTS; i++)
        free(s.gx[i]);
    json_decref(s.attrs_json);
    return r;
}

/* ---- double backward ---- */

/* The directions: one per differentiable input, shaped like it. */
static int decode_dirs(const emu_ctx *ctx, const nv_op_def *op, const nv_double_backward_call *call,
                       const bstate *s, nv_tensor **dirs, char *err, size_t errlen)
{
    int n_grads = 0;
    for (int i = 0; i < op->n_inputs; i++)
        n_grads += nv_op_grad_input(op, i);
    if (call->n_grads != n_grads || !call->grad_grads || !call->grad_inputs)
        return fail(err, errlen, NV_E_INVALID,
                    "double backward of '%s' takes and produces %d gradients", op->name, n_grads);
    for (int k = 0; k < n_grads; k++) {
        if (!(dirs[k] = from_view(&call->grad_grads[k], ctx->mode.daz)))
            return fail(err, errlen, NV_E_INVALID,
                        "double backward of '%s': grad_grads[%d] is not a valid tensor view",
                        op->name, k);
        bool same = dirs[k]->ndim == s->in[k]->ndim;
        for (int d = 0; same && d < dirs[k]->ndim; d++)
            same = dirs[k]->shape[d] == s->in[k]->shape[d];
        if (!same)
            return fail(err, errlen, NV_E_SHAPE,
                        "double backward of '%s': grad_grads[%d] is not shaped like input %d",
                        op->name, k, k);
    }
    return NV_OK;
}

/* The exact second-order VJP of the decoded operands (the fp64 reference,
 * core/ref/backward.h nv_op_vjp2, whose error is ~2^-53 relative), rounded
 * once to the storage dtype under the mode's rounding: a correctly rounded
 * double backward, as transcendental=exact is a correctly rounded forward. */
static int run2(emu_ctx *ctx, const nv_op_def *op, const nv_op_attrs *a,
                nv_double_backward_call *call, bstate *s, nv_tensor **dirs, char *err,
                size_t errlen)
{
    emu_bwd_io io;
    memset(&io, 0, sizeof io);
    nv_backward_call bc = {.op = call->op,
                           .attrs_json = call->attrs_json,
                           .n_inputs = call->n_inputs,
                           .inputs = call->inputs,
                           .n_saved = call->n_saved,
                           .saved = call->saved,
                           .grad_output = call->grad_output};
    int r = decode(ctx, op, &bc, s, &io, err, errlen);
    if (r < 0 || (r = check_shapes(op, a, s, err, errlen)) < 0 ||
        (r = decode_dirs(ctx, op, call, s, dirs, err, errlen)) < 0)
        return r;
    const double *v[NV_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < call->n_grads; k++) {
        v[k] = dirs[k]->data;
        s->gx[k] = calloc((size_t)(s->in[k]->numel > 0 ? s->in[k]->numel : 1), sizeof(double));
        if (!s->gx[k])
            return fail(err, errlen, NV_E_NOMEM, "out of memory");
    }
    r = nv_op_vjp2(op, a, s->n_in, (const nv_tensor *const *)s->in, s->gy->data, v, s->gx, NULL);
    if (r < 0)
        return fail(err, errlen, r, "double backward of '%s' failed (%d)", op->name, r);
    emu_call ec;
    emu_bwd_call_init(&ec, &ctx->mode, op, a, s->in[0]->dtype);
    for (int i = 0; r == NV_OK && i < call->n_grads; i++) {
        r = encode(&ec, s->in[i], s->gx[i], &call->grad_inputs[i]);
        if (r < 0) {
            for (int k = 0; k < i; k++) {
                free(call->grad_inputs[k].data);
                call->grad_inputs[k].data = NULL;
            }
            snprintf(err, errlen, "out of memory");
        }
    }
    return r;
}

int emu_double_backward(void *vctx, nv_double_backward_call *call, char *err, size_t errlen)
{
    emu_ctx *ctx = vctx;
    const nv_op_def *op;
    int id;
    int r = find_op(ctx, call->op, "double backward", &op, &id, err, errlen);
    if (r < 0)
        return r;
    bstate s;
    memset(&s, 0, sizeof s);
    nv_tensor *dirs[NV_OP_MAX_INPUTS] = {0};
    nv_op_attrs a;
    char *msg = NULL;
    json_error_t jerr;
    s.attrs_json = json_loads(call->attrs_json ? call->attrs_json : "{}", 0, &jerr);
    if (!json_is_object(s.attrs_json) || nv_op_parse_attrs(op, s.attrs_json, &a, &msg) < 0) {
        r = NV_E_INVALID;
        snprintf(err, errlen, "bad attrs for the double backward of '%s': %s", op->name,
                 msg ? msg : "not a JSON object");
    } else if (!nv_op_has_backward(op, &a)) {
        r = fail(err, errlen, NV_E_UNSUPPORTED,
                 "op '%s' has no double backward on emu with matmul scales", op->name);
    } else {
        r = run2(ctx, op, &a, call, &s, dirs, err, errlen);
    }
    free(msg);
    for (int i = 0; i < s.n_in; i++)
        nv_tensor_free(s.in[i]);
    free_saved(&s);
    nv_tensor_free(s.gy);
    for (int i = 0; i < NV_OP_MAX_INPUTS; i++) {
        free(s.gx[i]);
        nv_tensor_free(dirs[i]);
    }
    json_decref(s.attrs_json);
    return r;
}
