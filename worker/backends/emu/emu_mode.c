/* emu numerical mode: parsing the option text and describing the device. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_internal.h"

void emu_mode_default(emu_mode *m)
{
    memset(m, 0, sizeof(*m));
    m->order = EMU_ORDER_SEQUENTIAL;
    m->fma = true;
    m->rounding = NV_ROUND_NEAREST_EVEN;
    m->transcendental = EMU_TR_EXACT;
    m->scale = NV_SCALE_NONE;
    m->block = 32;
    m->accum_block = 1;
}

static const char *const order_names[] = {"sequential", "pairwise", "tree",
                                          "splitk",     "random",   "randtree"};
static const char *const tr_names[] = {"exact", "libm", "fast"};
static const char *const rounding_names[] = {"rne", "rtz", "up", "down", "stochastic"};

const char *emu_order_name(emu_order o)
{
    return order_names[o];
}

static int parse_posint(const char *s, int *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > (1 << 24))
        return -1;
    *ret = (int)v;
    return 0;
}

static int parse_bool(const char *v, bool *ret)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1"))
        *ret = true;
    else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0"))
        *ret = false;
    else
        return -1;
    return 0;
}

static int parse_float_dtype(const char *v, nv_dtype *ret)
{
    nv_dtype dt;
    if (nv_dtype_from_name(v, &dt) < 0)
        return -1;
    const nv_dtype_info *info = nv_dtype_get(dt);
    if (!info || !info->is_float || dt == NV_DT_E8M0)
        return -1;
    *ret = dt;
    return 0;
}

static int parse_reduce(const char *v, emu_mode *m)
{
    for (int o = 0; o < 6; o++) {
        size_t len = strlen(order_names[o]);
        if (strncmp(v, order_names[o], len))
            continue;
        bool takes_k = o == EMU_ORDER_TREE || o == EMU_ORDER_SPLITK || o == EMU_ORDER_RANDTREE;
        if (!takes_k && v[len] == 0) {
            m->order = (emu_order)o;
            m->order_k = 0;
            return 0;
        }
        if (takes_k && v[len] == ':' && parse_posint(v + len + 1, &m->order_k) == 0) {
            m->order = (emu_order)o;
            return 0;
        }
    }
    return -1;
}

static int parse_scale(const char *v, emu_mode *m)
{
    if (!strcmp(v, "tensor"))
        m->scale = NV_SCALE_TENSOR;
    else if (!strcmp(v, "channel"))
        m->scale = NV_SCALE_CHANNEL;
    else if (!strncmp(v, "block:", 6) && parse_posint(v + 6, &m->block) == 0)
        m->scale = NV_SCALE_BLOCK;
    else if (!strncmp(v, "tile:", 5)) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%s", v + 5);
        char *x = strchr(buf, 'x');
        if (!x)
            return -1;
        *x = 0;
        if (parse_posint(buf, &m->tile_r) < 0 || parse_posint(x + 1, &m->tile_c) < 0)
            return -1;
        m->scale = NV_SCALE_TILE;
    } else
        return -1;
    m->scale_set = true;
    return 0;
}

static int parse_name(const char *v, const char *const *names, int n, int *ret)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            *ret = i;
            return 0;
        }
    return -1;
}

/* One key=value pair; returns the expectation text on a bad value, NULL if good. */
/* v must be a or b: *ret says it is b; NULL, or `expect` (the words "A or B"). */
static const char *choice(const char *v, const char *a, const char *b, bool *ret,
                          const char *expect)
{
    if (!strcmp(v, a) || !strcmp(v, b))
        return *ret = !strcmp(v, b), NULL;
    return expect;
}

static const char *apply(emu_mode *m, const char *k, const char *v, bool *known)
{
    int i;
    *known = true;
    if (!strcmp(k, "storage"))
        return parse_float_dtype(v, &m->storage) ? "a float dtype (fp32, bf16, ...)"
                                                 : (m->storage_set = true, NULL);
    if (!strcmp(k, "compute"))
        return parse_float_dtype(v, &m->compute) ? "a float dtype (fp32, bf16, ...)"
                                                 : (m->compute_set = true, NULL);
    if (!strcmp(k, "accum"))
        return parse_float_dtype(v, &m->accum) ? "a float dtype (fp32, bf16, ...)"
                                               : (m->accum_set = true, NULL);
    if (!strcmp(k, "reduce"))
        return parse_reduce(v, m) ? "sequential, pairwise, tree:K, splitk:K, random or "
                                    "randtree:SEED"
                                  : NULL;
    if (!strcmp(k, "accum_block")) {
        if (parse_posint(v, &m->accum_block) || m->accum_block > EMU_MAX_BLOCK)
            return "an integer from 1 to 256 (terms added with one rounding)";
        return NULL;
    }
    if (!strcmp(k, "accum_align")) {
        if (strcmp(v, "round") && strcmp(v, "truncate"))
            return "round or truncate";
        m->accum_truncate = !strcmp(v, "truncate");
        return NULL;
    }
    if (!strcmp(k, "fma"))
        return parse_bool(v, &m->fma) ? "on or off" : NULL;
    if (!strcmp(k, "ftz"))
        return parse_bool(v, &m->ftz) ? "on or off" : NULL;
    if (!strcmp(k, "daz"))
        return parse_bool(v, &m->daz) ? "on or off" : NULL;
    if (!strcmp(k, "saturate"))
        return parse_bool(v, &m->saturate) ? "on or off" : NULL;
    if (!strcmp(k, "rounding")) {
        if (parse_name(v, rounding_names, 5, &i))
            return "rne, rtz, up, down or stochastic";
        m->rounding = (nv_rounding)i;
        return NULL;
    }
    if (!strcmp(k, "transcendental")) {
        if (parse_name(v, tr_names, 3, &i))
            return "exact, libm or fast";
        m->transcendental = (emu_transcendental)i;
        return NULL;
    }
    if (!strcmp(k, "scale"))
        return parse_scale(v, m) ? "tensor, channel, block:N or tile:RxC" : NULL;
    if (!strcmp(k, "inference_only"))
        return parse_bool(v, &m->inference_only) ? "on or off" : NULL;
    if (!strcmp(k, "seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end || *v == '-')
            return "a non-negative integer";
        m->seed = s;
        return NULL;
    }
    if (!strcmp(k, "batch_splitk"))
        return parse_bool(v, &m->batch_splitk) ? "on or off" : NULL;
    if (!strcmp(k, "kv_cache"))
        return parse_float_dtype(v, &m->kv_cache) ? "a float dtype (fp32, bf16, ...)"
                                                  : (m->kv_cache_set = true, NULL);
    if (!strcmp(k, "sample_stream")) {
        static const char *const n[] = {"counter", "reuse", "per_call"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, n[i]))
                return m->sample_stream = i, NULL;
        return "counter, reuse or per_call";
    }
    if (!strcmp(k, "sample_topp")) {
        if (!strcmp(v, "after_temperature") || !strcmp(v, "before_temperature"))
            return m->sample_topp_first = v[0] == 'b', NULL;
        return "after_temperature or before_temperature";
    }
    if (!strcmp(k, "sample_draw")) {
        if (!strcmp(v, "tempered") || !strcmp(v, "untempered"))
            return m->sample_untempered = v[0] == 'u', NULL;
        return "tempered or untempered";
    }
    if (!strcmp(k, "train_fault")) {
        static const char *const n[] = {"none", "skip_unscale", "update_skipped",
                                        "ignore_deterministic"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(v, n[i]))
                return m->train_fault = i, NULL;
        return "none, skip_unscale, update_skipped or ignore_deterministic";
    }
    if (!strcmp(k, "ckpt_drop")) {
        static const char *const n[] = {"none", "scaler", "rng", "weights"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(v, n[i]))
                return m->ckpt_drop = i, NULL;
        return "none, scaler, rng or weights";
    }
    if (!strcmp(k, "allreduce")) {
        static const char *const n[] = {"declared", "bf16", "arrival"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, n[i]))
                return m->allreduce = i, NULL;
        return "declared, bf16 or arrival";
    }
    if (!strcmp(k, "rng_restore"))
        return choice(v, "exact", "reuse", &m->rng_restore_reuse, "exact or reuse");
    if (!strcmp(k, "rng_streams"))
        return choice(v, "independent", "overlap", &m->rng_streams_overlap,
                      "independent or overlap");
    if (!strcmp(k, "rng_recompute"))
        return choice(v, "replay", "fresh", &m->rng_recompute_fresh, "replay or fresh");
    if (!strcmp(k, "rng_threshold"))
        return parse_float_dtype(v, &m->rng_threshold) ? "a float dtype (bf16, fp8_e4m3, ...)"
                                                       : (m->rng_threshold_set = true, NULL);
    if (!strcmp(k, "accum_node")) {
        /* the fused_accum_node parser on a scratch mode: both take the same text */
        emu_mode tmp;
        bool kn;
        const char *bad = emu_graph_mode_apply(&tmp, "fused_accum_node", v, &kn);
        if (bad)
            return bad;
        memcpy(m->accum_node, tmp.fused.accum_node, sizeof m->accum_node);
        m->accum_node_dtype = tmp.fused.accum_node_dtype;
        m->accum_node_set = true;
        return NULL;
    }
    if (!strncmp(k, "fused_", 6)) /* fused graph knobs: emu_graph.c */
        return emu_graph_mode_apply(m, k, v, known);
    *known = false;
    return NULL;
}

int emu_mode_parse(const char *opts, emu_mode *m, char *err, size_t errlen)
{
    emu_mode_default(m);
    if (!opts || !*opts)
        return 0;
    char *copy = strdup(opts);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return NV_E_NOMEM;
    }
    int r = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errlen, "emu mode item '%s' is not key=value (in '%s')", item, opts);
            r = NV_E_INVALID;
            goto out;
        }
        *eq = 0;
        bool known;
        const char *expect = apply(m, item, eq + 1, &known);
        if (!known) {
            snprintf(err, errlen,
                     "unknown emu mode key '%s' (value '%s'): expected storage, compute, accum, "
                     "reduce, accum_block, accum_align, fma, ftz, daz, rounding, saturate, "
                     "transcendental, scale, seed, inference_only, batch_splitk, kv_cache, "
                     "sample_stream, sample_topp, sample_draw, train_fault, ckpt_drop, "
                     "allreduce, rng_restore, rng_streams, rng_recompute, rng_threshold, "
                     "accum_node or fused_*",
                     item, eq + 1);
            r = NV_E_INVALID;
            goto out;
        }
        if (expect) {
            snprintf(err, errlen, "bad value '%s' for emu mode key '%s': expected %s", eq + 1, item,
                     expect);
            r = NV_E_INVALID;
            goto out;
        }
    }
out:
    free(copy);
    return r;
}
