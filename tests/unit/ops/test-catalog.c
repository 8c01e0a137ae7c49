/* Catalog: op table, attribute parsing and serialisation, shape and dtype
 * inference with their error messages, reduction lengths, default tolerances. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "tests/unit/tap.h"
#include "core/ops/catalog.h"

static const char *const v1_names[] = {
    "neg",         "abs",        "add",        "sub",           "mul",     "div",       "fma",
    "sqrt",        "rsqrt",      "reciprocal", "exp",           "exp2",    "expm1",     "log",
    "log2",        "log1p",      "sin",        "cos",           "tanh",    "sigmoid",   "erf",
    "gelu",        "silu",       "relu",       "pow",           "maximum", "minimum",   "cast",
    "sum",         "mean",       "max",        "var",           "norm2",   "logsumexp", "softmax",
    "log_softmax", "layer_norm", "rms_norm",   "cross_entropy", "matmul",  "bmm",
    "transpose",   "embedding",  "split_heads", "merge_heads", "cache_write",
    "flatten",     "max_pool2d", "conv2d",     "avg_pool2d",    "argmax",
    "sample",      "rotary_embedding"};
#define N_V1 (sizeof v1_names / sizeof v1_names[0])

static int parse(const char *op, const char *json, nv_op_attrs *a, char **msg)
{
    json_error_t je;
    json_t *o = json ? json_loads(json, 0, &je) : NULL;
    *msg = NULL;
    int r = nv_op_parse_attrs(nv_op_find(op), o, a, msg);
    json_decref(o);
    return r;
}

static void test_table(void)
{
    size_t n;
    const nv_op_def *all = nv_op_all(&n);
    tap_ok(n == N_V1, "catalog holds the %zu v1 ops (got %zu)", N_V1, n);
    int found = 0;
    for (size_t i = 0; i < N_V1; i++) {
        const nv_op_def *op = nv_op_find(v1_names[i]);
        found += op && strcmp(op->name, v1_names[i]) == 0 && op >= all && op < all + n &&
                 op->edges != NULL && op->n_inputs >= 1;
    }
    tap_ok(found == (int)N_V1, "every v1 name is found, with edges and inputs (%d)", found);
    tap_ok(nv_op_find("expp") == NULL && nv_op_find(NULL) == NULL, "unknown names give NULL");
    const nv_op_def *ce = nv_op_find("cross_entropy");
    tap_ok(ce->n_inputs == 2 && ce->inputs[1].is_index && !ce->inputs[0].is_index,
           "cross_entropy: logits + int32 class-index target");
    const nv_op_def *lg = nv_op_find("log");
    tap_ok(lg->inputs[0].lo == 0 && isinf(lg->inputs[0].hi) && nv_op_find("exp")->transcendental,
           "log's domain is [0, inf), exp is transcendental");
}

/* transpose and embedding: shapes, moved values checked by hand, and an
 * embedding id outside the weight's rows refused with its value. */
static void test_layout(void)
{
    int64_t xs[2] = {2, 3}, ws[2] = {4, 2}, is[1] = {3};
    nv_tensor *x = nv_tensor_new(NV_DT_FP32, 2, xs), *w = nv_tensor_new(NV_DT_BF16, 2, ws);
    nv_tensor *ids = nv_tensor_new(NV_DT_INT32, 1, is);
    for (int i = 0; i < 6; i++)
        x->data[i] = i + 1; /* [[1 2 3] [4 5 6]] */
    for (int i = 0; i < 8; i++)
        w->data[i] = 10 * (i / 2) + i % 2; /* row r: [10r, 10r + 1] */
    ids->data[0] = 3;
    ids->data[1] = 0;
    ids->data[2] = 3;
    nv_op_attrs a;
    char *msg = NULL;
    parse("transpose", NULL, &a, &msg);
    const nv_tensor *in1[1] = {x}, *in2[2] = {w, ids};
    int nd;
    int64_t sh[NV_MAX_DIMS];
    char err[200];
    double out[6];
    int r = nv_op_infer(nv_op_find("transpose"), &a, 1, in1, &nd, sh, err, sizeof err);
    r = r ? r : nv_op_layout_eval(nv_op_find("transpose"), &a, 1, in1, out, err, sizeof err);
    tap_ok(r == 0 && nd == 2 && sh[0] == 3 && sh[1] == 2 && out[0] == 1 && out[1] == 4 &&
               out[2] == 2 && out[5] == 6,
           "transpose [2, 3] -> [3, 2] = [[1 4] [2 5] [3 6]]");
    r = nv_op_infer(nv_op_find("embedding"), &a, 2, in2, &nd, sh, err, sizeof err);
    r = r ? r : nv_op_layout_eval(nv_op_find("embedding"), &a, 2, in2, out, err, sizeof err);
    tap_ok(r == 0 && nd == 2 && sh[0] == 3 && sh[1] == 2 && out[0] == 30 && out[1] == 31 &&
               out[2] == 0 && out[3] == 1 && out[4] == 30,
           "embedding of ids [3 0 3] picks rows 3, 0, 3");
    ids->data[1] = 4;
    r = nv_op_layout_eval(nv_op_find("embedding"), &a, 2, in2, out, err, sizeof err);
    tap_ok(r == NV_E_INVALID && strstr(err, "'4'") && strstr(err, "[0, 4)"),
           "an id outside [0, V) is refused naming it: %s", err);
    ids->dtype = NV_DT_FP32;
    r = nv_op_infer(nv_op_find("embedding"), &a, 2, in2, &nd, sh, err, sizeof err);
    tap_ok(r == NV_E_DTYPE, "embedding ids must be int32");
    /* heads: x [[1 2 3 4] [5 6 7 8]] in 2 heads is [[[1 2] [5 6]] [[3 4] [7 8]]] */
    int64_t xs2[2] = {2, 4};
    nv_tensor *x2 = nv_tensor_new(NV_DT_FP32, 2, xs2);
    for (int i = 0; i < 8; i++)
        x2->data[i] = i + 1;
    nv_op_attrs ha;
    json_t *hj = json_pack("{s:i}", "heads", 2);
    int hr = nv_op_parse_attrs(nv_op_find("split_heads"), hj, &ha, &msg);
    json_decref(hj);
    const nv_tensor *in3[1] = {x2};
    double split[8], merged[8];
    r = hr ? hr : nv_op_infer(nv_op_find("split_heads"), &ha, 1, in3, &nd, sh, err, sizeof err);
    r = r ? r : nv_op_layout_eval(nv_op_find("split_heads"), &ha, 1, in3, split, err, sizeof err);
    static const double want[8] = {1, 2, 5, 6, 3, 4, 7, 8};
    tap_ok(r == 0 && nd == 3 && sh[0] == 2 && sh[1] == 2 && sh[2] == 2 &&
               !memcmp(split, want, sizeof want),
           "split_heads [2, 4] in 2 heads -> [2, 2, 2] by hand");
    int64_t hs[3] = {2, 2, 2};
    nv_tensor *h3 = nv_tensor_new(NV_DT_FP32, 3, hs);
    memcpy(h3->data, split, sizeof split);
    const nv_tensor *in4[1] = {h3};
    r = nv_op_infer(nv_op_find("merge_heads"), &a, 1, in4, &nd, sh, err, sizeof err);
    r = r ? r : nv_op_layout_eval(nv_op_find("merge_heads"), &a, 1, in4, merged, err, sizeof err);
    tap_ok(r == 0 && nd == 2 && sh[0] == 2 && sh[1] == 4 && !memcmp(merged, x2->data, sizeof merged),
           "merge_heads undoes split_heads");
    x2->shape[1] = 3; /* shape only: infer reads no data */
    tap_ok(nv_op_infer(nv_op_find("split_heads"), &ha, 1, in3, &nd, sh, err, sizeof err) ==
               NV_E_SHAPE,
           "split_heads refuses a width the heads do not divide");
    nv_tensor_free(h3);
    nv_tensor_free(x2);
    nv_tolerance t;
    tap_ok(nv_op_default_tolerance(nv_op_find("transpose"), &a, NV_DT_FP8_E5M2, &t) == 0 &&
               t.metric == NV_TOL_ULP && t.max_ulp == 0,
           "transpose's default is 0 ulp, also in fp8");
    nv_tensor_free(x);
    nv_tensor_free(w);
    nv_tensor_free(ids);
}

static void test_attrs(void)
{
    nv_op_attrs a;
    char *msg;
    int r = parse("sum", NULL, &a, &msg);
    tap_ok(r == 0 && a.axis == -1 && a.eps == 1e-5 && a.acc_dtype == NV_DT_FP32 &&
               a.scale == NV_SCALE_NONE && !a.reduction_mean,
           "defaults: axis -1, eps 1e-5, acc fp32, no scale");
    r = parse("sum", "{\"axs\": 1}", &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'axs'") && strstr(msg, "axis"),
           "unknown key refused naming it and the accepted ones: %s", msg ? msg : "");
    free(msg);
    r = parse("exp", "{\"axis\": 0}", &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'axis'"), "exp takes no axis: %s", msg ? msg : "");
    free(msg);
    r = parse("gelu", "{\"approximate\": \"tanh\"}", &a, &msg);
    tap_ok(r == 0 && a.gelu_tanh, "gelu approximate tanh");
    r = parse("gelu", "{\"approximate\": \"fast\"}", &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'fast'"), "bad choice named: %s", msg ? msg : "");
    free(msg);
    r = parse("var", "{\"algorithm\": \"welford\", \"correction\": 1, \"axis\": 0}", &a, &msg);
    tap_ok(r == 0 && a.welford && a.correction == 1 && a.axis == 0, "var attrs");
    r = parse("var", "{\"correction\": 2}", &a, &msg);
    tap_ok(r == -EINVAL, "correction 2 refused");
    free(msg);
    r = parse("cast", NULL, &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'to'"), "cast needs 'to': %s", msg ? msg : "");
    free(msg);
    r = parse("cast", "{\"to\": \"e4m3fn\"}", &a, &msg);
    tap_ok(r == 0 && a.cast_to == NV_DT_FP8_E4M3, "cast to e4m3fn alias");
    r = parse("cast", "{\"to\": \"fp33\"}", &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'fp33'"), "bad dtype named: %s", msg ? msg : "");
    free(msg);
    r = parse("matmul", "{\"scale\": \"block:32\", \"acc\": \"bf16\"}", &a, &msg);
    tap_ok(r == 0 && a.scale == NV_SCALE_BLOCK && a.block == 32 && a.acc_dtype == NV_DT_BF16,
           "matmul block:32, acc bf16");
    r = parse("matmul", "{\"scale\": \"tile:128x64\"}", &a, &msg);
    tap_ok(r == 0 && a.scale == NV_SCALE_TILE && a.tile_r == 128 && a.tile_c == 64, "tile:128x64");
    r = parse("matmul", "{\"scale\": \"block:0\"}", &a, &msg);
    tap_ok(r == -EINVAL && msg && strstr(msg, "'block:0'"), "block:0 refused");
    free(msg);
    r = parse("matmul", "{\"acc\": \"int8\"}", &a, &msg);
    tap_ok(r == -EINVAL, "acc int8 refused");
    free(msg);
    r = parse("cross_entropy", "{\"reduction\": \"mean\"}", &a, &msg);
    tap_ok(r == 0 && a.reduction_mean, "cross_entropy reduction mean");
    r = parse("layer_norm", "{\"eps\": -1}", &a, &msg);
    tap_ok(r == -EINVAL, "negative eps refused");
    free(msg);
    r = parse("sum", "[1]", &a, &msg);
    tap_ok(r == -EINVAL, "attrs must be an object");
    free(msg);
}

static void test_attrs_json(void)
{
    nv_op_attrs a, b;
    char *msg;
    parse("matmul", "{\"scale\": \"tile:4x8\", \"acc\": \"fp16\"}", &a, &msg);
    json_t *j = nv_op_attrs_to_json(nv_op_find("matmul"), &a);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    tap_ok(s && strcmp(s, "{\"acc\":\"fp16\",\"scale\":\"tile:4x8\"}") == 0, "matmul json %s", s);
    int r = nv_op_parse_attrs(nv_op_find("matmul"), j, &b, &msg);
    tap_ok(r == 0 && b.scale == a.scale && b.tile_r == 4 && b.tile_c == 8 &&
               b.acc_dtype == a.acc_dtype,
           "round trip");
    free(s);
    json_decref(j);
    parse("var", "{\"algorithm\": \"welford\"}", &a, &msg);
    j = nv_op_attrs_to_json(nv_op_find("var"), &a);
    s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    tap_ok(s && strcmp(s, "{\"algorithm\":\"welford\",\"axis\":-1,\"correction\":0}") == 0,
           "var json %s", s);
    free(s);
    json_decref(j);
    j = nv_op_attrs_to_json(nv_op_find("exp"), &a);
    tap_ok(j && json_object_size(j) == 0, "exp has no attrs");
    json_decref(j);
}

static nv_tensor *T(nv_dtype dt, int nd, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t s[3] = {d0, d1, d2};
    return nv_tensor_new(dt, nd, s);
}

static int infer(const char *op, const char *attrs, int n, nv_tensor **in, int *nd, int64_t *shape,
                 char *err)
{
    nv_op_attrs a;
    char *msg;
    int r = parse(op, attrs, &a, &msg);
    free(msg);
    if (r < 0)
        return 99;
    return nv_op_infer(nv_op_find(op), &a, n, (const nv_tensor *const *)in, nd, shape, err, 256);
}

static void free_all(nv_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        nv_tensor_free(t[i]);
}

static void test_infer_elementwise(void)
{
    char err[256];
    int nd;
    int64_t sh[8];
    nv_tensor *in[3] = {T(NV_DT_FP32, 2, 4, 5, 0), T(NV_DT_FP32, 2, 5, 4, 0), NULL};
    int r = infer("add", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "[4, 5]") && strstr(err, "[5, 4]"),
           "mismatched shapes name both: %s", err);
    nv_tensor_free(in[1]);
    in[1] = T(NV_DT_BF16, 2, 4, 5, 0);
    r = infer("add", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_DTYPE && strstr(err, "'fp32'") && strstr(err, "'bf16'"), "mixed dtypes: %s",
           err);
    r = infer("exp", NULL, 1, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 2 && sh[0] == 4 && sh[1] == 5, "exp keeps the shape");
    r = infer("exp", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_INVALID, "wrong input count");
    free_all(in, 2);
    in[0] = T(NV_DT_FP8_E4M3, 1, 8, 0, 0);
    r = infer("exp", NULL, 1, in, &nd, sh, err);
    tap_ok(r == NV_E_DTYPE && strstr(err, "'fp8_e4m3'"), "exp on fp8 refused: %s", err);
    r = infer("neg", NULL, 1, in, &nd, sh, err);
    tap_ok(r == 0, "neg on fp8 accepted");
    r = infer("cast", "{\"to\": \"bf16\"}", 1, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 1 && sh[0] == 8, "cast fp8 -> bf16");
    nv_tensor_free(in[0]);
}

static void test_infer_reduce(void)
{
    char err[256];
    int nd;
    int64_t sh[8];
    nv_tensor *in[3] = {T(NV_DT_FP32, 2, 3, 4, 0), NULL, NULL};
    int r = infer("sum", NULL, 1, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 1 && sh[0] == 3, "sum axis -1 of [3, 4] -> [3]");
    r = infer("mean", "{\"axis\": 0}", 1, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 1 && sh[0] == 4, "mean axis 0 -> [4]");
    r = infer("sum", "{\"axis\": 2}", 1, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "'2'") && strstr(err, "[3, 4]"), "axis out of range: %s",
           err);
    r = infer("softmax", NULL, 1, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 2 && sh[0] == 3 && sh[1] == 4, "softmax keeps the shape");
    in[1] = T(NV_DT_FP32, 1, 3, 0, 0);
    in[2] = T(NV_DT_FP32, 1, 4, 0, 0);
    r = infer("layer_norm", NULL, 3, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "'weight'") && strstr(err, "[3]"),
           "layer_norm weight of the wrong length: %s", err);
    nv_tensor_free(in[1]);
    in[1] = T(NV_DT_FP32, 1, 4, 0, 0);
    r = infer("layer_norm", NULL, 3, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 2 && sh[1] == 4, "layer_norm [3, 4] with weight/bias [4]");
    free_all(in, 3);
    in[0] = T(NV_DT_FP32, 2, 2, 5, 0);
    in[1] = T(NV_DT_FP32, 1, 2, 0, 0);
    r = infer("cross_entropy", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_DTYPE && strstr(err, "int32"), "fp32 target refused: %s", err);
    nv_tensor_free(in[1]);
    in[1] = T(NV_DT_INT32, 1, 3, 0, 0);
    r = infer("cross_entropy", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "[3]") && strstr(err, "[2, 5]"), "target length: %s",
           err);
    nv_tensor_free(in[1]);
    in[1] = T(NV_DT_INT32, 1, 2, 0, 0);
    r = infer("cross_entropy", NULL, 2, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 1 && sh[0] == 2, "cross_entropy -> [N]");
    r = infer("cross_entropy", "{\"reduction\": \"mean\"}", 2, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 0, "cross_entropy mean -> scalar");
    free_all(in, 2);
}

static void test_infer_matmul(void)
{
    char err[256];
    int nd;
    int64_t sh[8];
    nv_tensor *in[4] = {T(NV_DT_FP32, 2, 2, 3, 0), T(NV_DT_FP32, 2, 4, 5, 0), NULL, NULL};
    int r = infer("matmul", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "[2, 3]") && strstr(err, "[4, 5]"),
           "inner dims differ: %s", err);
    free_all(in, 2);
    in[0] = T(NV_DT_BF16, 3, 2, 3, 64);
    in[1] = T(NV_DT_BF16, 3, 2, 64, 5);
    r = infer("matmul", NULL, 2, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 3 && sh[0] == 2 && sh[1] == 3 && sh[2] == 5, "bmm [2,3,64]x[2,64,5]");
    r = infer("matmul", "{\"scale\": \"block:32\"}", 2, in, &nd, sh, err);
    tap_ok(r == NV_E_INVALID, "block scale without scale operands: %s", err);
    in[2] = T(NV_DT_E8M0, 3, 2, 3, 2);
    in[3] = T(NV_DT_E8M0, 3, 2, 2, 5);
    r = infer("matmul", "{\"scale\": \"block:32\"}", 4, in, &nd, sh, err);
    tap_ok(r == 0 && nd == 3 && sh[2] == 5, "block:32 scales [2,3,2] and [2,2,5]");
    r = infer("matmul", "{\"scale\": \"block:16\"}", 4, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE && strstr(err, "'scale_a'") && strstr(err, "[2, 3, 4]"),
           "block:16 wants 4 blocks: %s", err);
    r = infer("matmul", "{\"scale\": \"block:48\"}", 4, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE, "K not divisible by the block: %s", err);
    r = infer("matmul", "{\"scale\": \"tensor\"}", 4, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE, "tensor scale must have one element: %s", err);
    free_all(in + 2, 2);
    in[2] = T(NV_DT_FP32, 3, 2, 3, 2);
    in[3] = T(NV_DT_FP32, 3, 2, 2, 5);
    r = infer("matmul", "{\"scale\": \"block:32\"}", 4, in, &nd, sh, err);
    tap_ok(r == NV_E_DTYPE && strstr(err, "e8m0"), "block scales must be e8m0: %s", err);
    free_all(in, 4);
    in[0] = T(NV_DT_FP32, 3, 2, 3, 4);
    in[1] = T(NV_DT_FP32, 3, 3, 4, 5);
    r = infer("matmul", NULL, 2, in, &nd, sh, err);
    tap_ok(r == NV_E_SHAPE, "batch dims must be equal: %s", err);
    free_all(in, 2);
}

static void test_reduction_len(void)
{
    nv_op_attrs a;
    char *msg;
    nv_tensor *x = T(NV_DT_FP32, 2, 3, 7, 0);
    const nv_tensor *in[1] = {x};
    parse("sum", NULL, &a, &msg);
    tap_ok(nv_op_reduction_len(nv_op_find("sum"), &a, 1, in) == 7, "sum over 7");
    tap_ok(nv_op_reduction_len(nv_op_find("softmax"), &a, 1, in) == 7 + 4,
           "softmax: 7 terms + exp, division steps");
    tap_ok(nv_op_reduction_len(nv_op_find("exp"), &a, 1, in) == 1, "elementwise 1");
    parse("matmul", NULL, &a, &msg);
    tap_ok(nv_op_reduction_len(nv_op_find("matmul"), &a, 1, in) == 8, "matmul K=7: gamma_K");
    nv_tensor_free(x);
}

static void test_tolerances(void)
{
    size_t n;
    const nv_op_def *all = nv_op_all(&n);
    static const nv_dtype dts[] = {NV_DT_FP64,     NV_DT_FP32,     NV_DT_TF32,     NV_DT_BF16,
                                   NV_DT_FP16,     NV_DT_FP8_E4M3, NV_DT_FP8_E5M2, NV_DT_FP6_E2M3,
                                   NV_DT_FP6_E3M2, NV_DT_FP4_E2M1};
    int ok = 0, total = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        nv_op_attrs a;
        char *msg;
        parse(all[i].name, strcmp(all[i].name, "cast") == 0 ? "{\"to\": \"fp32\"}" : NULL, &a,
              &msg);
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            nv_tolerance t;
            int r = nv_op_default_tolerance(&all[i], &a, dts[d], &t);
            if (r == NV_E_DTYPE) {
                refused++;
                continue;
            }
            total++;
            ok += r == 0 && strlen(t.reason) > 20 && t.reason_code < NV_REASON_COUNT &&
                  strcmp(t.source, "default") == 0 && (t.metric != NV_TOL_ULP || t.max_ulp >= 0) &&
                  (t.metric != NV_TOL_BOUND || (t.c > 0 && t.has_u_dtype));
        }
    }
    tap_ok(ok == total && total > 150, "%d op x dtype defaults, all with reasons (%d refused)",
           total, refused);
    nv_op_attrs a;
    char *msg;
    nv_tolerance t;
    parse("add", NULL, &a, &msg);
    nv_op_default_tolerance(nv_op_find("add"), &a, NV_DT_BF16, &t);
    tap_ok(t.metric == NV_TOL_ULP && t.max_ulp == 0.5 && t.reason_code == NV_REASON_DTYPE_PRECISION,
           "add bf16: 0.5 ulp, dtype_precision");
    nv_op_default_tolerance(nv_op_find("exp"), &a, NV_DT_FP32, &t);
    tap_ok(t.metric == NV_TOL_ULP && t.max_ulp == 1 &&
               t.reason_code == NV_REASON_APPROXIMATION_ERROR,
           "exp fp32: 1 ulp, approximation_error");
    tap_ok(nv_op_default_tolerance(nv_op_find("exp"), &a, NV_DT_FP8_E4M3, &t) == NV_E_DTYPE,
           "exp has no fp8 default");
    parse("sum", NULL, &a, &msg);
    nv_op_default_tolerance(nv_op_find("sum"), &a, NV_DT_BF16, &t);
    tap_ok(t.metric == NV_TOL_BOUND && t.growth == NV_GROWTH_PROBABILISTIC && t.c == 1 &&
               t.u_dtype == NV_DT_FP32 && t.reason_code == NV_REASON_REDUCTION_LENGTH &&
               strstr(t.reason, "1e-9") && strstr(t.reason, "Higham & Mary"),
           "sum bf16: Higham & Mary's probabilistic bound with fp32 accumulation, its "
           "probability in the reason");
    parse("softmax", NULL, &a, &msg);
    nv_op_default_tolerance(nv_op_find("softmax"), &a, NV_DT_FP32, &t);
    tap_ok(t.metric == NV_TOL_BOUND && t.growth == NV_GROWTH_N && t.c == 2,
           "softmax fp32: the deterministic first-order bound (composed ops)");
    parse("matmul", "{\"acc\": \"bf16\"}", &a, &msg);
    nv_op_default_tolerance(nv_op_find("matmul"), &a, NV_DT_FP32, &t);
    tap_ok(t.metric == NV_TOL_BOUND && t.u_dtype == NV_DT_BF16, "matmul bound uses the acc dtype");
    parse("max", NULL, &a, &msg);
    nv_op_default_tolerance(nv_op_find("max"), &a, NV_DT_FP16, &t);
    tap_ok(t.metric == NV_TOL_ULP && t.max_ulp == 0, "max is exact: 0 ulp");
}

/* What each op asks of the input generators (nv_op_input_domain), against the
 * catalog's documented domains (catalog.c: log takes [0, inf), cross_entropy's
 * target is an index, matmul's inputs after a and b are scales). */
static void test_input_domain(void)
{
    nv_input_domain d = nv_op_input_domain(nv_op_find("log"), 0);
    tap_ok(d.role == NV_INPUT_VALUES && d.bounded && d.lo == 0 && d.hi == INFINITY && d.edges &&
               !d.tie_partner,
           "log x: [0, inf) with domain edges");
    d = nv_op_input_domain(nv_op_find("add"), 1);
    tap_ok(d.bounded && d.lo == -INFINITY && d.hi == INFINITY && !d.edges && d.tie_partner,
           "add y: the whole line, no edges, x's tie partner");
    d = nv_op_input_domain(nv_op_find("sub"), 0);
    tap_ok(!d.tie_partner && d.edges, "sub x: edges, not a tie partner");
    d = nv_op_input_domain(nv_op_find("mul"), 1);
    tap_ok(!d.tie_partner, "mul y: not a tie partner");
    d = nv_op_input_domain(nv_op_find("cross_entropy"), 1);
    tap_ok(d.role == NV_INPUT_INDEX, "cross_entropy target: class indices");
    d = nv_op_input_domain(nv_op_find("matmul"), 2);
    tap_ok(d.role == NV_INPUT_SCALE, "matmul input 2: a scale");
    d = nv_op_input_domain(NULL, 0);
    tap_ok(d.role == NV_INPUT_VALUES && !d.bounded && !d.edges && !d.tie_partner,
           "no op: plain values on the whole line");
}

int main(void)
{
    test_table();
    test_layout();
    test_attrs();
    test_attrs_json();
    test_infer_elementwise();
    test_infer_reduce();
    test_infer_matmul();
    test_reduction_len();
    test_tolerances();
    test_input_domain();
    return tap_done();
}
