/* emu: the backend table of the emulated accelerator. open() parses the mode,
 * forward() decodes the inputs (with DAZ), checks them against the catalog, runs
 * the op's kernel and encodes the result, rounded to the storage dtype, into a
 * contiguous output it allocates. */
#include "emu.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_backward.h" /* emu_backward (gradient jobs) */
#include "emu_internal.h"
#include "worker/backends/views/views.h"

/* Calls across all contexts of the process, so that reduce=random differs between
 * two runs of the same case even on fresh contexts. */
static atomic_uint_fast64_t call_counter;

static int emu_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    emu_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    int r = emu_mode_parse(options, &c->mode, err, errlen);
    if (r < 0) {
        free(c);
        return r;
    }
    c->describe = emu_describe_json(&c->mode);
    if (!c->describe) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    *ret_ctx = c;
    return NV_OK;
}

static void emu_close(void *ctx)
{
    emu_ctx *c = ctx;
    if (!c)
        return;
    for (int i = 0; i <= EMU_MAX_INPUTS; i++)
        free(c->scratch[i]);
    free(c->describe);
    emu_train_free(c->train);
    free(c->rng);
    free(c);
}

static const char *emu_describe(void *ctx)
{
    return ((emu_ctx *)ctx)->describe;
}

static void emu_release(void *ctx, nv_tensor_view *t)
{
    (void)ctx;
    if (!t)
        return;
    free(t->data);
    t->data = NULL;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Resolve the call's dtypes (DESIGN.md "Devices and backends"; docs/BACKEND_ABI.md). */
void emu_call_init(emu_call *ec, emu_ctx *ctx, const nv_op_def *op, const nv_op_attrs *a,
                   nv_dtype out, int64_t numel, const char *node)
{
    const emu_mode *m = &ctx->mode;
    memset(ec, 0, sizeof(*ec));
    ec->m = m;
    ec->out = out;
    ec->storage = m->storage_set ? m->storage : out;
    if (m->kv_cache_set && !strcmp(op->name, "cache_write"))
        ec->storage = m->kv_cache;
    ec->compute =
        m->compute_set ? m->compute : (ec->storage == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32);
    if (m->accum_set)
        ec->accum = m->accum;
    else if (op->kind == NV_OPK_MATMUL)
        ec->accum = a->acc_dtype;
    else
        ec->accum = ec->compute == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    if (m->accum_node_set && node && !strcmp(node, m->accum_node))
        ec->accum = m->accum_node_dtype;
    ec->rm.rounding = m->rounding;
    ec->rm.saturate = m->saturate;
    ec->rm.ftz = m->ftz;
    ec->plain = m->rounding == NV_ROUND_NEAREST_EVEN && !m->saturate && !m->ftz;
    /* Stochastic rounding: reproducible for a seed and call shape. */
    ec->sr_state = m->seed ^ fnv1a(op->name) ^ ((uint64_t)numel * 0x9E3779B97F4A7C15ull);
    /* Random order: a fresh stream per call. */
    uint64_t k = atomic_fetch_add(&call_counter, 1) + (++ctx->calls << 32);
    ec->order_state = m->seed ^ (k * 0xD1B54A32D192ED03ull);
}

static int check_out_dtype(const nv_op_def *op, const nv_op_attrs *a, int32_t out, nv_dtype *ret,
                           char *err, size_t errlen)
{
    nv_dtype dt = op->kind == NV_OPK_CAST ? a->cast_to : (nv_dtype)out;
    const nv_dtype_info *info = nv_dtype_get(dt);
    if (!info) {
        snprintf(err, errlen, "output dtype '%d' is not a numval dtype", (int)out);
        return NV_E_DTYPE;
    }
    if (op->kind == NV_OPK_SELECT) {
        if (dt == NV_DT_INT32)
            return *ret = dt, NV_OK;
        snprintf(err, errlen, "op '%s' returns int32 indices, not dtype '%s'", op->name, info->name);
        return NV_E_DTYPE;
    }
    if (op->kind != NV_OPK_CAST && (!info->is_float || dt == NV_DT_E8M0)) {
        snprintf(err, errlen, "op '%s' cannot produce dtype '%s' on emu", op->name, info->name);
        return NV_E_DTYPE;
    }
    *ret = dt;
    return NV_OK;
}

static int run_kernel(emu_call *ec, const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, double *out, char *err, size_t errlen)
{
    switch (op->kind) {
    case NV_OPK_UNARY:
    case NV_OPK_BINARY:
    case NV_OPK_TERNARY:
    case NV_OPK_CAST:
        return emu_elementwise(ec, op, a, n_in, in, out, err, errlen);
    case NV_OPK_REDUCE:
        return emu_reduce_op(ec, op, a, n_in, in, out, err, errlen);
    case NV_OPK_MATMUL:
        return emu_matmul(ec, op, a, n_in, in, out, err, errlen);
    case NV_OPK_LAYOUT: /* moved values: the storage rounding is encode_output's */
        return nv_op_layout_eval(op, a, n_in, in, out, err, errlen);
    case NV_OPK_CONV:
        return emu_conv2d(ec, op, a, in, out, err, errlen);
    case NV_OPK_ROTARY:
        return emu_rotary(ec, a, in, out, err, errlen);
    case NV_OPK_SELECT: /* emu_forward calls emu_select with the context's draw count */
        break;
    }
    snprintf(err, errlen, "emu has no kernel for op '%s'", op->name);
    return NV_E_UNSUPPORTED;
}

/* Round to storage, then encode in the output dtype, into a new contiguous view. */
static int encode_output(emu_call *ec, bool cast, int ndim, const int64_t *shape,
                         const double *vals, int64_t numel, nv_tensor_view *ret)
{
    const nv_dtype_info *info = nv_dtype_get(ec->out);
    unsigned char *buf = malloc((size_t)(numel > 0 ? numel : 1) * (size_t)info->storage_bytes);
    if (!buf)
        return NV_E_NOMEM;
    bool direct = !cast && ec->storage == ec->out && ec->out == NV_DT_FP32;
    for (int64_t i = 0; direct && i < numel; i++) {
        /* Rounded to fp32 storage already: the conversion is exact. */
        float f = (float)emu_round(ec, ec->storage, vals[i]);
        memcpy(buf + i * 4, &f, 4);
    }
    /* bf16 outputs rounded to bf16 storage: a bit copy (emu_store_exact); not
     * under stochastic rounding, whose stream the general path draws from. */
    bool exact = !cast && ec->storage == ec->out && ec->rm.rounding != NV_ROUND_STOCHASTIC;
    for (int64_t i = 0; !direct && i < numel; i++) {
        double v = cast ? vals[i] : emu_round(ec, ec->storage, vals[i]);
        if (exact && emu_store_exact(ec->out, buf, i, v))
            continue;
        uint32_t rnd = ec->rm.rounding == NV_ROUND_STOCHASTIC
                           ? (uint32_t)(emu_splitmix(&ec->sr_state) >> 32)
                           : 0;
        nv_dtype_store_bits(ec->out, buf, i, nv_dtype_encode(ec->out, v, &ec->rm, rnd));
    }
    memset(ret, 0, sizeof(*ret));
    ret->dtype = (int32_t)ec->out;
    ret->ndim = ndim;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        ret->shape[d] = shape[d];
        ret->strides[d] = stride;
        stride *= shape[d];
    }
    ret->data = buf;
    return NV_OK;
}

typedef struct fwd_state {
    json_t *attrs_json;
    nv_tensor in[EMU_MAX_INPUTS]; /* data in the context's scratch */
    const nv_tensor *inp[EMU_MAX_INPUTS];
    int n_in;
    const nv_tensor_view *view; /* the input read in place (in[0] without data), or NULL */
} fwd_state;

/* Scratch buffer k of the context with room for n doubles, or NULL on ENOMEM. */
static double *scratch(emu_ctx *ctx, int k, int64_t n)
{
    size_t need = (size_t)(n > 0 ? n : 1);
    if (ctx->scratch_cap[k] < need) {
        double *p = realloc(ctx->scratch[k], need * sizeof(double));
        if (!p)
            return NULL;
        ctx->scratch[k] = p;
        ctx->scratch_cap[k] = need;
    }
    return ctx->scratch[k];
}

/* t with the shape of view v, contiguous row-major, without data. */
static int tensor_of(const nv_tensor_view *v, nv_tensor *t)
{
    if (!nv_dtype_get((nv_dtype)v->dtype) || v->ndim < 0 || v->ndim > NV_MAX_DIMS)
        return NV_E_INVALID;
    memset(t, 0, sizeof(*t));
    t->dtype = (nv_dtype)v->dtype;
    t->ndim = v->ndim;
    t->numel = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] < 0 || (v->shape[d] > 0 && t->numel > INT64_MAX / 8 / v->shape[d]))
            return NV_E_INVALID;
        t->shape[d] = v->shape[d];
        t->strides[d] = t->numel;
        t->numel *= v->shape[d];
    }
    t->storage_len = t->numel;
    return NV_OK;
}

/* A decoded contiguous copy of view v in scratch buffer k. */
static int decode_input(emu_ctx *ctx, int k, const nv_tensor_view *v, nv_tensor *t)
{
    int r = tensor_of(v, t);
    if (r < 0)
        return r;
    t->data = scratch(ctx, k, t->numel);
    if (!t->data)
        return NV_E_NOMEM;
    return emu_view_decode(v, ctx->mode.daz, t->data) < 0 ? NV_E_INVALID : NV_OK;
}

int64_t emu_view_min = 1 << 16;

/* The one input of a reduction emu_reduce_view reads in place, when it has more
 * than emu_view_min elements: t its shape without data. A copy that small costs
 * little, and small calls keep the decoded path. */
static bool reads_in_place(const nv_op_def *op, const nv_op_call *call, nv_tensor *t)
{
    const nv_tensor_view *v = &call->inputs[0];
    return call->n_inputs == 1 && emu_reduce_reads_view(op) && v->data &&
           tensor_of(v, t) == NV_OK && t->numel > emu_view_min;
}

int emu_view_decode(const nv_tensor_view *v, bool daz, double *dst)
{
    bool contiguous = v->dtype == NV_DT_BF16 && v->data && v->ndim >= 0 && v->ndim <= NV_MAX_DIMS;
    int64_t n = 1;
    for (int d = v->ndim - 1; contiguous && d >= 0; d--) {
        contiguous = v->shape[d] >= 0 && (v->shape[d] <= 1 || v->strides[d] == n);
        n *= v->shape[d];
    }
    if (!contiguous)
        return nvw_view_decode(v, daz, dst);
    for (int64_t i = 0; i < n; i++)
        dst[i] = emu_decode_at(NV_DT_BF16, v->data, i, daz);
    return 0;
}

static int decode_call(emu_ctx *ctx, nv_op_call *call, const nv_op_def **ret_op,
                       nv_op_attrs *ret_attrs, fwd_state *s, char *err, size_t errlen)
{
    const nv_op_def *op = call->op ? nv_op_find(call->op) : NULL;
    if (!op) {
        snprintf(err, errlen, "unknown op '%s'", call->op ? call->op : "(null)");
        return NV_E_UNSUPPORTED;
    }
    json_error_t jerr;
    s->attrs_json = json_loads(call->attrs_json ? call->attrs_json : "{}", 0, &jerr);
    if (!json_is_object(s->attrs_json)) {
        snprintf(err, errlen, "attrs of op '%s' are not a JSON object: '%s'", op->name,
                 call->attrs_json ? call->attrs_json : "(null)");
        return NV_E_INVALID;
    }
    char *msg = NULL;
    if (nv_op_parse_attrs(op, s->attrs_json, ret_attrs, &msg) < 0) {
        snprintf(err, errlen, "%s", msg ? msg : "bad attrs");
        free(msg);
        return NV_E_INVALID;
    }
    if (call->n_inputs < 0 || call->n_inputs > EMU_MAX_INPUTS ||
        (call->n_inputs > 0 && !call->inputs)) {
        snprintf(err, errlen, "op '%s' called with '%d' inputs", op->name, call->n_inputs);
        return NV_E_INVALID;
    }
    if (call->n_inputs > 0 && reads_in_place(op, call, &s->in[0])) {
        s->view = &call->inputs[0];
        s->inp[0] = &s->in[0];
        s->n_in = 1;
    }
    for (int i = s->n_in; i < call->n_inputs; i++) {
        int r = decode_input(ctx, i, &call->inputs[i], &s->in[i]);
        if (r == NV_E_NOMEM) {
            snprintf(err, errlen, "out of memory");
            return r;
        }
        if (r < 0) {
            snprintf(err, errlen, "input %d of op '%s' is not a valid tensor view (dtype '%d')", i,
                     op->name, (int)call->inputs[i].dtype);
            return r;
        }
        s->inp[i] = &s->in[i];
        s->n_in = i + 1;
    }
    *ret_op = op;
    return NV_OK;
}

static int emu_forward(void *vctx, nv_op_call *call, char *err, size_t errlen)
{
    emu_ctx *ctx = vctx;
    fwd_state s;
    memset(&s, 0, sizeof(s));
    const nv_op_def *op = NULL;
    nv_op_attrs a;
    int r = decode_call(ctx, call, &op, &a, &s, err, errlen);
    if (r < 0)
        goto out;
    int ndim;
    int64_t shape[NV_MAX_DIMS];
    r = nv_op_infer(op, &a, s.n_in, s.inp, &ndim, shape, err, errlen);
    if (r < 0)
        goto out;
    if (call->n_outputs != 1 || !call->outputs) {
        snprintf(err, errlen, "op '%s' produces 1 output, the call asks for '%d'", op->name,
                 call->n_outputs);
        r = NV_E_INVALID;
        goto out;
    }
    nv_dtype out_dt;
    r = check_out_dtype(op, &a, call->out_dtype, &out_dt, err, errlen);
    if (r < 0)
        goto out;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    double *vals = scratch(ctx, EMU_MAX_INPUTS, numel);
    if (!vals) {
        snprintf(err, errlen, "out of memory");
        r = NV_E_NOMEM;
        goto out;
    }
    emu_call ec;
    emu_call_init(&ec, ctx, op, &a, out_dt, numel, call->node);
    if (op->kind == NV_OPK_SELECT)
        r = emu_select(&ctx->mode, op, &a, s.inp, vals, &ctx->draws, err, errlen);
    else if (s.view)
        r = emu_reduce_view(&ec, op, &a, s.view, ctx->mode.daz, vals, err, errlen);
    else
        r = run_kernel(&ec, op, &a, s.n_in, s.inp, vals, err, errlen);
    if (r < 0)
        goto out;
    /* indices (select) are encoded as they are, like a cast's converted values */
    r = encode_output(&ec, op->kind == NV_OPK_CAST || op->kind == NV_OPK_SELECT, ndim, shape, vals,
                      numel, &call->outputs[0]);
    if (r < 0)
        snprintf(err, errlen, "out of memory");
out:
    json_decref(s.attrs_json);
    return r;
}

static const nv_backend emu_table = {
    .abi_version = NV_BACKEND_ABI_VERSION,
    .struct_size = sizeof(nv_backend),
    .name = "emu",
    .open = emu_open,
    .close = emu_close,
    .describe = emu_describe,
    .forward = emu_forward,
    .backward = emu_backward,
    .graph = emu_graph, /* emu_graph.c (fused jobs) */
    .release_tensor = emu_release,
    .double_backward = emu_double_backward, /* emu_backward_call.c */
    .train = emu_train_call,                /* emu_train.c */
    .rng = emu_rng_call,                    /* emu_rng.c */
    .configure = emu_configure,             /* emu_describe.c */
};

const nv_backend *nvw_emu_backend(void)
{
    return &emu_table;
}
