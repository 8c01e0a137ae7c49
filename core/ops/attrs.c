/* Op attributes: parsing from a job's JSON object (unknown keys refused, each
 * error naming the key and the offending value) and the canonical serialisation
 * (every attribute of the op, defaults included). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

enum {
    K_AXIS = 1 << 0,
    K_APPROX = 1 << 1,
    K_ALGO = 1 << 2,
    K_CORR = 1 << 3,
    K_EPS = 1 << 4,
    K_TO = 1 << 5,
    K_ACC = 1 << 6,
    K_SCALE = 1 << 7,
    K_REDUCTION = 1 << 8,
    K_HEADS = 1 << 9,
    K_STRIDE = 1 << 10,
    K_PADDING = 1 << 11,
    K_DILATION = 1 << 12,
    K_KERNEL = 1 << 13,
    K_GROUPS = 1 << 14,
    K_COUNT_PAD = 1 << 15,
    K_TEMPERATURE = 1 << 16,
    K_TOP_K = 1 << 17,
    K_TOP_P = 1 << 18,
    K_SEED = 1 << 19,
    K_OFFSET = 1 << 20,
    K_CEIL = 1 << 21,
    K_DIVISOR = 1 << 22,
    /* 1 << 23: unused */
    K_THETA = 1 << 24,
    K_INTERLEAVED = 1 << 25,
    K_HEAD_DIM = 1 << 26,
};

static const char *const key_names[] = {"axis", "approximate", "algorithm", "correction", "eps",
                                        "to",   "acc",         "scale",     "reduction",  "heads",
                                        "stride", "padding",   "dilation",  "kernel",     "groups",
                                        "count_include_pad", "temperature", "top_k", "top_p", "seed",
                                        "offset", "ceil_mode", "divisor_override", NULL, "theta",
                                        "interleaved", "head_dim"};
#define N_KEYS (sizeof key_names / sizeof key_names[0])

static unsigned op_keys(int id)
{
    switch (id) {
    case NVO_GELU:
        return K_APPROX;
    case NVO_CAST:
        return K_TO;
    case NVO_SUM:
    case NVO_MEAN:
    case NVO_MAX:
    case NVO_NORM2:
    case NVO_LOGSUMEXP:
    case NVO_SOFTMAX:
    case NVO_LOG_SOFTMAX:
        return K_AXIS;
    case NVO_VAR:
        return K_AXIS | K_ALGO | K_CORR;
    case NVO_LAYER_NORM:
    case NVO_RMS_NORM:
        return K_EPS;
    case NVO_CROSS_ENTROPY:
        return K_REDUCTION;
    case NVO_MATMUL:
    case NVO_BMM:
        return K_ACC | K_SCALE;
    case NVO_SPLIT_HEADS:
        return K_HEADS;
    case NVO_CONV2D:
        return K_STRIDE | K_PADDING | K_DILATION | K_GROUPS;
    case NVO_MAX_POOL2D:
        return K_KERNEL | K_STRIDE | K_PADDING;
    case NVO_AVG_POOL2D:
        return K_KERNEL | K_STRIDE | K_PADDING | K_COUNT_PAD | K_CEIL | K_DIVISOR;
    case NVO_SAMPLE:
        return K_TEMPERATURE | K_TOP_K | K_TOP_P | K_SEED | K_OFFSET;
    case NVO_ROTARY_EMBEDDING:
        return K_OFFSET | K_THETA | K_INTERLEAVED | K_HEAD_DIM;
    default:
        return 0;
    }
}

static void attrs_default(nv_op_attrs *a)
{
    memset(a, 0, sizeof *a);
    a->axis = -1;
    a->eps = 1e-5;
    a->cast_to = NV_DT_FP32;
    a->acc_dtype = NV_DT_FP32;
    a->scale = NV_SCALE_NONE;
    a->block = 32;
    a->tile_r = a->tile_c = 1;
    a->heads = 1;
    a->stride = 1;
    a->padding = 0;
    a->dilation = 1;
    a->kernel = 2;
    a->groups = 1;
    a->count_include_pad = true;
    a->temperature = 1;
    a->top_p = 1;
    a->theta = 10000; /* RoFormer's base (Su et al. 2021, §3.4.2) */
}

static int fail(char **ret_msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **ret_msg, const char *fmt, ...)
{
    if (ret_msg) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_msg, fmt, ap) < 0)
            *ret_msg = NULL;
        va_end(ap);
    }
    return -EINVAL;
}

static int parse_int_range(const char *s, long lo, long hi, int *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

/* "none" | "tensor" | "channel" | "block:N" | "tile:RxC" */
static int parse_scale(const char *s, nv_op_attrs *a)
{
    if (strcmp(s, "none") == 0)
        a->scale = NV_SCALE_NONE;
    else if (strcmp(s, "tensor") == 0)
        a->scale = NV_SCALE_TENSOR;
    else if (strcmp(s, "channel") == 0)
        a->scale = NV_SCALE_CHANNEL;
    else if (strncmp(s, "block:", 6) == 0) {
        if (parse_int_range(s + 6, 1, 1 << 20, &a->block) < 0)
            return -EINVAL;
        a->scale = NV_SCALE_BLOCK;
    } else if (strncmp(s, "tile:", 5) == 0) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", s + 5);
        char *x = strchr(buf, 'x');
        if (!x)
            return -EINVAL;
        *x = 0;
        if (parse_int_range(buf, 1, 1 << 20, &a->tile_r) < 0 ||
            parse_int_range(x + 1, 1, 1 << 20, &a->tile_c) < 0)
            return -EINVAL;
        a->scale = NV_SCALE_TILE;
    } else
        return -EINVAL;
    return 0;
}

static int parse_dtype_attr(const char *key, const json_t *v, bool acc, nv_dtype *ret,
                            char **ret_msg)
{
    nv_dtype dt;
    if (!json_is_string(v) || nv_dtype_from_name(json_string_value(v), &dt) < 0)
        return fail(ret_msg, "attribute '%s' must be a dtype name, got '%s'", key,
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    bool ok = acc ? (dt == NV_DT_FP64 || dt == NV_DT_FP32 || dt == NV_DT_BF16 || dt == NV_DT_FP16)
                  : nvo_is_float_dt(dt);
    if (!ok)
        return fail(ret_msg, "attribute '%s': dtype '%s' is not allowed here (%s)", key,
                    json_string_value(v),
                    acc ? "fp64, fp32, bf16 or fp16" : "a floating-point format");
    *ret = dt;
    return 0;
}

static int parse_string_choice(const char *key, const json_t *v, const char *a, const char *b,
                               bool *ret_second, char **ret_msg)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (s && strcmp(s, a) == 0)
        *ret_second = false;
    else if (s && strcmp(s, b) == 0)
        *ret_second = true;
    else
        return fail(ret_msg, "attribute '%s' must be \"%s\" or \"%s\", got '%s'", key, a, b,
                    s ? s : "(not a string)");
    return 0;
}

static int parse_one(int key, const json_t *v, nv_op_attrs *a, char **ret_msg)
{
    const char *name = key_names[key];
    switch (1 << key) {
    case K_AXIS:
        if (!json_is_integer(v) || json_integer_value(v) < -NV_MAX_DIMS ||
            json_integer_value(v) >= NV_MAX_DIMS)
            return fail(ret_msg, "attribute 'axis' must be an integer in [-%d, %d)", NV_MAX_DIMS,
                        NV_MAX_DIMS);
        a->axis = (int)json_integer_value(v);
        return 0;
    case K_APPROX:
        return parse_string_choice(name, v, "none", "tanh", &a->gelu_tanh, ret_msg);
    case K_ALGO:
        return parse_string_choice(name, v, "two_pass", "welford", &a->welford, ret_msg);
    case K_REDUCTION:
        return parse_string_choice(name, v, "none", "mean", &a->reduction_mean, ret_msg);
    case K_CORR:
        if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1))
            return fail(ret_msg, "attribute 'correction' must be 0 or 1");
        a->correction = (int)json_integer_value(v);
        return 0;
    case K_EPS:
        if (!json_is_number(v) || !(json_number_value(v) >= 0) || !isfinite(json_number_value(v)))
            return fail(ret_msg, "attribute 'eps' must be a finite number >= 0");
        a->eps = json_number_value(v);
        return 0;
    case K_HEADS:
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536)
            return fail(ret_msg, "attribute 'heads' must be an integer in 1..65536");
        a->heads = (int)json_integer_value(v);
        return 0;
    case K_COUNT_PAD:
        if (!json_is_boolean(v))
            return fail(ret_msg, "attribute 'count_include_pad' must be true or false");
        a->count_include_pad = json_is_true(v);
        return 0;
    case K_CEIL:
        if (!json_is_boolean(v))
            return fail(ret_msg, "attribute 'ceil_mode' must be true or false");
        a->ceil_mode = json_is_true(v);
        return 0;
    case K_DIVISOR:
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 20)
            return fail(ret_msg, "attribute 'divisor_override' must be an integer in 1..%d (every "
                                 "window's sum is divided by it)", 1 << 20);
        a->divisor_override = (int)json_integer_value(v);
        return 0;
    case K_GROUPS:
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536)
            return fail(ret_msg, "attribute 'groups' must be an integer in 1..65536 (it must "
                                 "divide the input and output channels)");
        a->groups = (int)json_integer_value(v);
        return 0;
    case K_STRIDE:
    case K_DILATION:
    case K_KERNEL:
    case K_PADDING: {
        long lo = (1 << key) == K_PADDING ? 0 : 1;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 4096)
            return fail(ret_msg, "attribute '%s' must be an integer in %ld..4096", name, lo);
        int iv = (int)json_integer_value(v);
        *((1 << key) == K_STRIDE     ? &a->stride
          : (1 << key) == K_DILATION ? &a->dilation
          : (1 << key) == K_KERNEL   ? &a->kernel
                                     : &a->padding) = iv;
        return 0;
    }
    case K_TEMPERATURE:
        /* below 2^-126 x / T overflows fp32 for logits of order 1: greedy
         * decoding is argmax's, not a temperature of 0 */
        if (!json_is_number(v) || !(json_number_value(v) >= 0x1p-20) ||
            !(json_number_value(v) <= 1e6))
            return fail(ret_msg, "attribute 'temperature' must be a number in [2^-20, 1e6] "
                                 "(greedy decoding is op 'argmax')");
        a->temperature = json_number_value(v);
        return 0;
    case K_TOP_K:
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > INT32_MAX)
            return fail(ret_msg, "attribute 'top_k' must be an integer >= 0 (0: no top-k)");
        a->top_k = (int)json_integer_value(v);
        return 0;
    case K_TOP_P:
        if (!json_is_number(v) || !(json_number_value(v) > 0) || !(json_number_value(v) <= 1))
            return fail(ret_msg, "attribute 'top_p' must be a number in (0, 1] (1: no top-p)");
        a->top_p = json_number_value(v);
        return 0;
    case K_SEED:
    case K_OFFSET:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return fail(ret_msg, "attribute '%s' must be an integer >= 0", name);
        *((1 << key) == K_SEED ? &a->seed : &a->offset) = (uint64_t)json_integer_value(v);
        return 0;
    case K_THETA:
        if (!json_is_number(v) || !(json_number_value(v) >= 2) || !(json_number_value(v) <= 1e9))
            return fail(ret_msg, "attribute 'theta' must be a number in [2, 1e9] (the rotary "
                                 "frequency base)");
        a->theta = json_number_value(v);
        return 0;
    case K_INTERLEAVED:
        if (!json_is_boolean(v))
            return fail(ret_msg, "attribute 'interleaved' must be true (pairs 2k, 2k+1) or false "
                                 "(pairs k, k + head_dim/2)");
        a->interleaved = json_is_true(v);
        return 0;
    case K_HEAD_DIM:
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65536)
            return fail(ret_msg, "attribute 'head_dim' must be an integer in 0..65536 (0: the "
                                 "last dimension)");
        a->head_dim = (int)json_integer_value(v);
        return 0;
    case K_TO:
        return parse_dtype_attr(name, v, false, &a->cast_to, ret_msg);
    case K_ACC:
        return parse_dtype_attr(name, v, true, &a->acc_dtype, ret_msg);
    case K_SCALE:
        if (!json_is_string(v) || parse_scale(json_string_value(v), a) < 0)
            return fail(ret_msg,
                        "attribute 'scale' must be \"none\", \"tensor\", \"channel\", "
                        "\"block:N\" or \"tile:RxC\", got '%s'",
                        json_is_string(v) ? json_string_value(v) : "(not a string)");
        return 0;
    }
    return -EINVAL;
}

static void accepted_list(unsigned keys, char *buf, size_t len)
{
    buf[0] = 0;
    size_t used = 0;
    for (size_t k = 0; k < N_KEYS; k++)
        if ((keys & (1u << k)) && key_names[k])
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
                                     used ? ", " : "", key_names[k]);
    if (!buf[0])
        snprintf(buf, len, "none");
}

int nv_op_parse_attrs(const nv_op_def *op, const json_t *obj, nv_op_attrs *ret, char **ret_msg)
{
    int id = nvo_op_id(op);
    if (id < 0)
        return fail(ret_msg, "unknown op");
    nv_op_attrs a;
    attrs_default(&a);
    if (obj && !json_is_object(obj))
        return fail(ret_msg, "attributes of op '%s' must be a JSON object", op->name);
    unsigned keys = op_keys(id);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        size_t ki = 0;
        while (ki < N_KEYS &&
               !((keys & (1u << ki)) && key_names[ki] && strcmp(key_names[ki], k) == 0))
            ki++;
        if (ki == N_KEYS) {
            char acc[160];
            accepted_list(keys, acc, sizeof acc);
            return fail(ret_msg, "unknown attribute '%s' for op '%s' (accepted: %s)", k, op->name,
                        acc);
        }
        int r = parse_one((int)ki, v, &a, ret_msg);
        if (r < 0)
            return r;
    }
    /* pooling's stride defaults to its kernel, its padding is at most half of
     * it (PyTorch's max_pool2d and avg_pool2d) */
    bool pool = id == NVO_MAX_POOL2D || id == NVO_AVG_POOL2D;
    if (pool && !(obj && json_object_get(obj, "stride")))
        a.stride = a.kernel;
    if (pool && 2 * a.padding > a.kernel)
        return fail(ret_msg, "attribute 'padding' (%d) of op '%s' must be at most half "
                             "of 'kernel' (%d)", a.padding, op->name, a.kernel);
    if (id == NVO_CAST && !(obj && json_object_get(obj, "to")))
        return fail(ret_msg, "op 'cast' needs the attribute 'to' (the target dtype)");
    *ret = a;
    return 0;
}

static json_t *scale_json(const nv_op_attrs *a)
{
    char buf[64];
    switch (a->scale) {
    case NV_SCALE_TENSOR:
        return json_string("tensor");
    case NV_SCALE_CHANNEL:
        return json_string("channel");
    case NV_SCALE_BLOCK:
        snprintf(buf, sizeof buf, "block:%d", a->block);
        return json_string(buf);
    case NV_SCALE_TILE:
        snprintf(buf, sizeof buf, "tile:%dx%d", a->tile_r, a->tile_c);
        return json_string(buf);
    default:
        return json_string("none");
    }
}

json_t *nv_op_attrs_to_json(const nv_op_def *op, const nv_op_attrs *a)
{
    int id = nvo_op_id(op);
    json_t *o = json_object();
    if (!o || id < 0 || !a)
        return o;
    unsigned keys = op_keys(id);
    int r = 0;
    if (keys & K_AXIS)
        r |= json_object_set_new(o, "axis", json_integer(a->axis));
    if (keys & K_APPROX)
        r |= json_object_set_new(o, "approximate", json_string(a->gelu_tanh ? "tanh" : "none"));
    if (keys & K_ALGO)
        r |= json_object_set_new(o, "algorithm", json_string(a->welford ? "welford" : "two_pass"));
    if (keys & K_CORR)
        r |= json_object_set_new(o, "correction", json_integer(a->correction));
    if (keys & K_EPS)
        r |= json_object_set_new(o, "eps", json_real(a->eps));
    if (keys & K_TO)
        r |= json_object_set_new(o, "to", json_string(nv_dtype_name(a->cast_to)));
    if (keys & K_ACC)
        r |= json_object_set_new(o, "acc", json_string(nv_dtype_name(a->acc_dtype)));
    if (keys & K_SCALE)
        r |= json_object_set_new(o, "scale", scale_json(a));
    if (keys & K_REDUCTION)
        r |= json_object_set_new(o, "reduction", json_string(a->reduction_mean ? "mean" : "none"));
    if (keys & K_HEADS)
        r |= json_object_set_new(o, "heads", json_integer(a->heads));
    if (keys & K_KERNEL)
        r |= json_object_set_new(o, "kernel", json_integer(a->kernel));
    if (keys & K_STRIDE)
        r |= json_object_set_new(o, "stride", json_integer(a->stride));
    if (keys & K_PADDING)
        r |= json_object_set_new(o, "padding", json_integer(a->padding));
    if (keys & K_DILATION)
        r |= json_object_set_new(o, "dilation", json_integer(a->dilation));
    if (keys & K_GROUPS)
        r |= json_object_set_new(o, "groups", json_integer(a->groups));
    if (keys & K_COUNT_PAD)
        r |= json_object_set_new(o, "count_include_pad", json_boolean(a->count_include_pad));
    /* Only when set: a job written before these attributes keeps its
     * canonical form (and its graph hash and signatures). */
    if ((keys & K_CEIL) && a->ceil_mode)
        r |= json_object_set_new(o, "ceil_mode", json_true());
    if ((keys & K_DIVISOR) && a->divisor_override)
        r |= json_object_set_new(o, "divisor_override", json_integer(a->divisor_override));
    if (keys & K_TEMPERATURE)
        r |= json_object_set_new(o, "temperature", json_real(a->temperature));
    if (keys & K_TOP_K)
        r |= json_object_set_new(o, "top_k", json_integer(a->top_k));
    if (keys & K_TOP_P)
        r |= json_object_set_new(o, "top_p", json_real(a->top_p));
    if (keys & K_SEED)
        r |= json_object_set_new(o, "seed", json_integer((json_int_t)a->seed));
    if (keys & K_OFFSET)
        r |= json_object_set_new(o, "offset", json_integer((json_int_t)a->offset));
    if (keys & K_THETA)
        r |= json_object_set_new(o, "theta", json_real(a->theta));
    if (keys & K_INTERLEAVED)
        r |= json_object_set_new(o, "interleaved", json_boolean(a->interleaved));
    if (keys & K_HEAD_DIM)
        r |= json_object_set_new(o, "head_dim", json_integer(a->head_dim));
    if (r) {
        json_decref(o);
        return NULL;
    }
    return o;
}
