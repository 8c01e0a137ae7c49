/* emu describe(): device identity, build identity, the resolved numerical mode and
 * the dtype contract the device declares (DESIGN.md "Devices and backends"). */
#include <gnu/libc-version.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "emu_backward.h" /* emu_saved_json */
#include "emu_internal.h"

#ifndef NV_VERSION
#define NV_VERSION "unknown"
#endif

static const char *rounding_name(nv_rounding r)
{
    static const char *const names[] = {"rne", "rtz", "up", "down", "stochastic"};
    return names[r];
}

static const char *onoff(bool b)
{
    return b ? "on" : "off";
}

/* The compute dtype for a storage dtype when the mode does not set one. */
static nv_dtype compute_for(const emu_mode *m, nv_dtype storage)
{
    if (m->compute_set)
        return m->compute;
    return storage == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
}

static nv_dtype accum_for(const emu_mode *m, nv_dtype storage)
{
    if (m->accum_set)
        return m->accum;
    return compute_for(m, m->storage_set ? m->storage : storage) == NV_DT_FP64 ? NV_DT_FP64
                                                                               : NV_DT_FP32;
}

static void order_text(const emu_mode *m, char *buf, size_t len)
{
    if (m->order == EMU_ORDER_TREE || m->order == EMU_ORDER_SPLITK ||
        m->order == EMU_ORDER_RANDTREE)
        snprintf(buf, len, "%s:%d", emu_order_name(m->order), m->order_k);
    else
        snprintf(buf, len, "%s", emu_order_name(m->order));
}

static json_t *mode_json(const emu_mode *m)
{
    char order[48], scale[48];
    order_text(m, order, sizeof(order));
    switch (m->scale_set ? m->scale : NV_SCALE_NONE) {
    case NV_SCALE_TENSOR:
        snprintf(scale, sizeof(scale), "tensor");
        break;
    case NV_SCALE_CHANNEL:
        snprintf(scale, sizeof(scale), "channel");
        break;
    case NV_SCALE_BLOCK:
        snprintf(scale, sizeof(scale), "block:%d", m->block);
        break;
    case NV_SCALE_TILE:
        snprintf(scale, sizeof(scale), "tile:%dx%d", m->tile_r, m->tile_c);
        break;
    default:
        snprintf(scale, sizeof(scale), "as_requested");
        break;
    }
    const char *storage = m->storage_set ? nv_dtype_name(m->storage) : "output";
    const char *compute = m->compute_set   ? nv_dtype_name(m->compute)
                          : m->storage_set ? nv_dtype_name(compute_for(m, m->storage))
                                           : "fp32 (fp64 for fp64 outputs)";
    const char *accum = m->accum_set ? nv_dtype_name(m->accum)
                        : m->storage_set || m->compute_set
                            ? nv_dtype_name(accum_for(m, m->storage))
                            : "fp32 (fp64 for fp64 outputs; matmul: its acc_dtype)";
    static const char *const tr[] = {"exact", "libm", "fast"};
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}",
                     "storage", storage, "compute", compute, "accum", accum, "reduce", order,
                     "accum_block", m->accum_block, "accum_align",
                     m->accum_truncate ? "truncate" : "round", "fma",
                     onoff(m->fma), "ftz", onoff(m->ftz), "daz", onoff(m->daz), "rounding",
                     rounding_name(m->rounding), "saturate", onoff(m->saturate), "transcendental",
                     tr[m->transcendental], "scale", scale, "seed", (json_int_t)m->seed);
}

static json_t *transcendental_json(const emu_mode *m, nv_dtype dt)
{
    if (m->transcendental == EMU_TR_EXACT)
        return json_pack("{s:s, s:f}", "kind", "correctly_rounded", "max_ulp", 0.5);
    if (m->transcendental == EMU_TR_LIBM || compute_for(m, dt) == NV_DT_FP64)
        return json_pack("{s:s, s:s, s:s}", "kind", "host_libm", "library", "glibc", "version",
                         gnu_get_libc_version());
    json_t *b = json_object();
    int n;
    const emu_fast_bound *fb = emu_fast_bounds(&n);
    for (int i = 0; i < n; i++)
        json_object_set_new(
            b, fb[i].fn,
            json_pack("{s:f, s:s}", "max_ulp_fp32", fb[i].max_ulp, "domain", fb[i].domain));
    return json_pack("{s:s, s:s, s:o}", "kind", "fast_approximation", "evaluated_in", "fp32",
                     "bounds", b);
}

static const char *subnormal_text(const emu_mode *m, const nv_dtype_info *info)
{
    if (!info->has_subnormals)
        return "none in this format";
    if (m->ftz && m->daz)
        return "flushed: read as zero (daz) and results flushed to zero (ftz)";
    if (m->ftz)
        return "results flushed to zero (ftz)";
    if (m->daz)
        return "inputs read as zero (daz)";
    return "kept (gradual underflow)";
}

static const char *overflow_text(const emu_mode *m, const nv_dtype_info *info)
{
    if (m->saturate)
        return "saturate to max finite";
    if (info->has_inf)
        return "overflow to infinity (IEEE 754-2019 §7.4)";
    if (info->has_nan)
        return "overflow to NaN (OFP8 e4m3fn, no infinity)";
    return "saturate to max finite (MX v1.0 §5.3, no inf or NaN)";
}

/* The accumulators, with their range: what the intermediate-overflow rule judges
 * an overflowing reduction by (docs/TOLERANCES.md "Intermediate overflow"). Every
 * partial sum is rounded to the accumulate dtype, so the range is that dtype's.
 * Matmul follows the op's "acc" attribute unless the mode fixes the accumulator. */
static json_t *accumulator_json(const emu_mode *m, json_t *e, nv_dtype d)
{
    if (!e)
        return NULL;
    const char *acc = nv_dtype_name(accum_for(m, d));
    json_object_set_new(e, "accumulator", json_pack("{s:s, s:s}", "dtype", acc, "range", acc));
    if (m->accum_set)
        json_object_set_new(e, "matmul_accumulator",
                            json_pack("{s:s, s:s}", "dtype", acc, "range", acc));
    return e;
}

/* The randtree order's tree over [lo, lo + n) as the contract kind writes
 * trees (docs/CONTRACT.md "Summation tree"): leaves by index, children in
 * parentheses, the left part first (it holds the smaller leaves). */
static void randtree_text(uint64_t seed, int64_t lo, int64_t n, char *buf, size_t len, size_t *pos)
{
    if (*pos >= len)
        return;
    if (n == 1) {
        *pos += (size_t)snprintf(buf + *pos, len - *pos, "%lld", (long long)lo);
        return;
    }
    int64_t h = emu_randtree_split(seed, lo, n);
    *pos += (size_t)snprintf(buf + *pos, len - *pos, "(");
    randtree_text(seed, lo, h, buf, len, pos);
    if (*pos < len)
        *pos += (size_t)snprintf(buf + *pos, len - *pos, ",");
    randtree_text(seed, lo + h, n - h, buf, len, pos);
    if (*pos < len)
        *pos += (size_t)snprintf(buf + *pos, len - *pos, ")");
}

/* The declared tree at the contract kind's 32 terms, for the order that no
 * family names. */
static json_t *declared_tree(const emu_mode *m)
{
    char buf[512];
    size_t pos = 0;
    randtree_text((uint64_t)m->order_k, 0, 32, buf, sizeof buf, &pos);
    return json_pack("{s:i, s:s}", "n", 32, "tree", buf);
}

static json_t *contract_json(const emu_mode *m)
{
    json_t *c = json_object();
    char order[48];
    order_text(m, order, sizeof(order));
    for (int d = 0; d < NV_DT_COUNT; d++) {
        const nv_dtype_info *info = nv_dtype_get((nv_dtype)d);
        if (!info || !info->is_float || d == NV_DT_E8M0)
            continue;
        json_t *e = json_pack(
            "{s:{s:f, s:f, s:f}, s:{s:b, s:b, s:b}, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b}",
            "range", "max_finite", info->max_finite, "min_normal", info->min_normal,
            "min_subnormal", info->min_subnormal, "specials", "inf", info->has_inf, "nan",
            info->has_nan, "signed_zero", 1, "subnormals", subnormal_text(m, info),
            "conversion_rounding", rounding_name(m->rounding), "compute",
            nv_dtype_name(compute_for(m, (nv_dtype)d)), "accumulation",
            nv_dtype_name(accum_for(m, (nv_dtype)d)), "saturation", overflow_text(m, info),
            "reduction_order", order, "transcendental_error", transcendental_json(m, (nv_dtype)d),
            "fast_math",
            /* fp64 compute runs the host libm in fast mode too (transcendental_json) */
            (m->transcendental == EMU_TR_FAST && compute_for(m, (nv_dtype)d) != NV_DT_FP64) ||
                m->ftz || m->daz);
        /* the adder of every accumulation (emu_sum.c): terms per rounding,
         * and whether alignment truncates (blocksum.h) */
        if (e) {
            if (m->order == EMU_ORDER_RANDTREE)
                json_object_set_new(e, "reduction_tree", declared_tree(m));
            /* blocks are of sequential runs: pairwise, randtree and random have none */
            bool runs = m->order == EMU_ORDER_SEQUENTIAL || m->order == EMU_ORDER_TREE ||
                        m->order == EMU_ORDER_SPLITK;
            json_object_set_new(e, "block_width", json_integer(runs ? m->accum_block : 1));
            json_object_set_new(e, "alignment",
                                json_string(m->accum_truncate ? "truncate" : "round"));
            json_object_set_new(c, info->name, accumulator_json(m, e, (nv_dtype)d));
        }
    }
    return c;
}

static json_t *nondeterministic_json(const emu_mode *m)
{
    json_t *a = json_array();
    if (m->order != EMU_ORDER_RANDOM)
        return a;
    size_t n;
    const nv_op_def *ops = nv_op_all(&n);
    for (size_t i = 0; i < n; i++) {
        /* max is order-independent; every other reduction, matmul, conv2d and
         * avg_pool2d is not. */
        if ((ops[i].kind == NV_OPK_REDUCE && strcmp(ops[i].name, "max")) ||
            ops[i].kind == NV_OPK_MATMUL || ops[i].kind == NV_OPK_CONV)
            json_array_append_new(a, json_string(ops[i].name));
    }
    return a;
}

char *emu_describe_json(const emu_mode *m)
{
    json_t *d =
        json_pack("{s:s, s:{s:s, s:s, s:s}, s:o, s:o, s:b, s:o, s:o, s:s}", "device", "emu",
                  "build", "name", "numval-emu", "version", NV_VERSION, "compiler", __VERSION__,
                  "mode", mode_json(m), "contract", contract_json(m), "inference_only",
                  m->inference_only, "nondeterministic_ops", nondeterministic_json(m), "saved",
                  m->inference_only ? json_object() : emu_saved_json(), "gradient_dtype", "input");
    if (!d)
        return NULL;
    json_object_set_new(json_object_get(d, "mode"), "fused", emu_graph_mode_json(m));
    if (m->batch_splitk || m->kv_cache_set) /* only when set: other results stay as they were */
        json_object_set_new(json_object_get(d, "mode"), "serving",
                            json_pack("{s:b, s:s}", "batch_splitk", m->batch_splitk, "kv_cache",
                                      m->kv_cache_set ? nv_dtype_name(m->kv_cache) : "output"));
    if (m->sample_stream != EMU_SS_COUNTER || m->sample_topp_first || m->sample_untempered) {
        static const char *const ss[] = {"counter", "reuse", "per_call"};
        json_object_set_new(json_object_get(d, "mode"), "sampling",
                            json_pack("{s:s, s:s, s:s}", "sample_stream",
                                      ss[m->sample_stream], "sample_topp",
                                      m->sample_topp_first ? "before_temperature"
                                                           : "after_temperature",
                                      "sample_draw",
                                      m->sample_untempered ? "untempered" : "tempered"));
    }
    if (m->accum_node_set) /* only when set, as above */
        json_object_set_new(json_object_get(d, "mode"), "accum_node",
                            json_pack("{s:s, s:s}", "node", m->accum_node, "accum",
                                      nv_dtype_name(m->accum_node_dtype)));
    char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    return s;
}

int emu_configure(void *ctx, const char *config_json, char *answer, size_t answer_len, char *err,
                  size_t errlen)
{
    const emu_mode *m = &((emu_ctx *)ctx)->mode;
    json_error_t jerr;
    json_t *c = json_loads(config_json ? config_json : "", 0, &jerr);
    json_t *want = json_object_get(c, "deterministic");
    if (!json_is_object(c) || (want && !json_is_boolean(want))) {
        json_decref(c);
        snprintf(err, errlen, "configure: expected a JSON object {\"deterministic\": bool}");
        return NV_E_INVALID;
    }
    /* What emu does whatever was asked: a random order is drawn afresh per call
     * (atomics) and no setting makes it repeat; every other knob is a fixed
     * function of the inputs. */
    bool random = m->order == EMU_ORDER_RANDOM ||
                  (m->fused.order_set && m->fused.order == (int)EMU_ORDER_RANDOM);
    json_decref(c);
    snprintf(answer, answer_len, "{\"deterministic\": %s}", random ? "false" : "true");
    return NV_OK;
}
