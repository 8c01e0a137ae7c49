/* Graph specs (core/ops/graph.h) and fused job specs (fusedspec.h): parse and
 * validation errors name the node and the JSON pointer, topological order,
 * cycle detection, shape and dtype inference, and the graph reference on
 * hand-computed values. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/spec/fusedspec.h"
#include "core/ops/graph.h"
#include "core/ref/reference.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"

/* Attention with the nodes listed out of order (o, p, s, z). */
static const char *attention =
    "{\"inputs\": [{\"name\": \"q\", \"shape\": [8, 4]}, {\"name\": \"kT\", \"shape\": [4, 8]},"
    " {\"name\": \"v\", \"shape\": [8, 4]}, {\"name\": \"c\", \"shape\": [8, 8], \"value\": 0.5}],"
    " \"nodes\": [{\"name\": \"o\", \"op\": \"matmul\", \"inputs\": [\"p\", \"v\"]},"
    " {\"name\": \"p\", \"op\": \"softmax\", \"inputs\": [\"z\"]},"
    " {\"name\": \"s\", \"op\": \"matmul\", \"inputs\": [\"q\", \"kT\"]},"
    " {\"name\": \"z\", \"op\": \"mul\", \"inputs\": [\"s\", \"c\"]}],"
    " \"outputs\": [\"o\"]}";

static nv_graph *parse(const char *text, char **ptr, char **msg)
{
    json_t *j = json_loads(text, 0, NULL);
    nv_graph *g = NULL;
    *ptr = *msg = NULL;
    int r = j ? nv_graph_parse(j, "/graph", &g, ptr, msg) : -EINVAL;
    json_decref(j);
    return r == 0 ? g : NULL;
}

/* A graph text must be refused with pointer want_ptr and a message holding want. */
static void refused(const char *what, const char *text, bool infer, const char *want_ptr,
                    const char *want)
{
    char *ptr = NULL, *msg = NULL;
    nv_graph *g = parse(text, &ptr, &msg);
    int r = g ? 0 : -EINVAL;
    if (g && infer) {
        r = nv_graph_infer(g, NV_DT_FP32, "/graph", &ptr, &msg);
    } else if (g) {
        r = 0;
    }
    bool ok = r == -EINVAL && ptr && !strcmp(ptr, want_ptr) && msg && strstr(msg, want);
    tap_ok(ok, "%s: refused at %s with \"%s\"", what, want_ptr, want);
    if (!ok)
        tap_diag("got r=%d ptr='%s' msg='%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
    nv_graph_free(g);
    free(ptr);
    free(msg);
}

static void test_topo_and_shapes(void)
{
    char *ptr, *msg;
    nv_graph *g = parse(attention, &ptr, &msg);
    tap_ok(g != NULL, "attention graph with nodes out of order parses");
    if (!g)
        return;
    /* Kahn's order, ties by spec order: s is the only node without node inputs,
     * then z, p, o. */
    const char *want[] = {"s", "z", "p", "o"};
    bool order = g->n_nodes == 4;
    for (int k = 0; order && k < 4; k++)
        order = !strcmp(g->nodes[k].name, want[k]);
    tap_ok(order, "topological order s, z, p, o");
    int r = nv_graph_infer(g, NV_DT_BF16, "/graph", &ptr, &msg);
    tap_ok(r == 0, "attention infers for bf16");
    /* Q [8,4] K^T [4,8] -> S [8,8]; P V [8,8] x [8,4] -> O [8,4]. */
    tap_ok(r == 0 && g->nodes[0].ndim == 2 && g->nodes[0].shape[0] == 8 &&
               g->nodes[0].shape[1] == 8 && g->nodes[3].shape[0] == 8 &&
               g->nodes[3].shape[1] == 4 && g->nodes[3].numel == 32,
           "shapes: s [8, 8], o [8, 4]");
    tap_ok(r == 0 && g->nodes[2].dtype == NV_DT_BF16 && g->nodes[3].is_output &&
               g->nodes[0].n_consumers == 1 && g->nodes[3].n_consumers == 0,
           "dtypes follow the case dtype; o is the output, s has one consumer");
    tap_ok(nv_graph_lookup(g, "kT") == -2 && nv_graph_lookup(g, "p") == 2 &&
               nv_graph_lookup(g, "nope") == INT32_MIN,
           "lookup: inputs negative, nodes by topological index");
    nv_graph_free(g);
}

static void test_node_dtypes(void)
{
    const char *text =
        "{\"inputs\": [{\"name\": \"a\", \"shape\": [4, 64], \"dtype\": \"fp8_e4m3\"},"
        " {\"name\": \"b\", \"shape\": [64, 2], \"dtype\": \"fp8_e4m3\"},"
        " {\"name\": \"sa\", \"shape\": [4, 2], \"dtype\": \"e8m0\"},"
        " {\"name\": \"sb\", \"shape\": [2, 2], \"dtype\": \"e8m0\"}],"
        " \"nodes\": [{\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"a\", \"b\", \"sa\","
        " \"sb\"], \"attrs\": {\"scale\": \"block:32\"}},"
        " {\"name\": \"c\", \"op\": \"cast\", \"inputs\": [\"mm\"], \"attrs\": {\"to\": \"bf16\"}},"
        " {\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"c\"], \"dtype\": \"fp32\"}],"
        " \"outputs\": [\"e\"]}";
    char *ptr, *msg;
    nv_graph *g = parse(text, &ptr, &msg);
    int r = g ? nv_graph_infer(g, NV_DT_FP32, "/graph", &ptr, &msg) : -1;
    /* fp8 x fp8 -> the acc dtype (fp32 by default); cast -> its target; an
     * explicit "dtype" wins. */
    tap_ok(r == 0 && g->nodes[0].dtype == NV_DT_FP32 && g->nodes[1].dtype == NV_DT_BF16 &&
               g->nodes[2].dtype == NV_DT_FP32 && !g->any_dtype_unset,
           "node dtypes: fp8 matmul -> fp32, cast -> bf16, explicit dtype -> fp32");
    if (r != 0)
        tap_diag("%s: %s", ptr ? ptr : "", msg ? msg : "");
    nv_graph_free(g);
}

static void test_refusals(void)
{
    refused("cycle",
            "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
            "{\"name\": \"a\", \"op\": \"exp\", \"inputs\": [\"b\"]},"
            "{\"name\": \"b\", \"op\": \"log\", \"inputs\": [\"a\"]},"
            "{\"name\": \"c\", \"op\": \"neg\", \"inputs\": [\"x\"]}], \"outputs\": [\"c\"]}",
            false, "/graph/nodes/0", "node 'a' is on a cycle");
    refused(
        "self loop",
        "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
        "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\", \"a\"]}], \"outputs\": [\"a\"]}",
        false, "/graph/nodes/0/inputs/1", "reads its own output");
    refused("unknown op",
            "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
            "{\"name\": \"a\", \"op\": \"exp\", \"inputs\": [\"x\"]},"
            "{\"name\": \"b\", \"op\": \"transposed\", \"inputs\": [\"a\"]}], \"outputs\": [\"b\"]}",
            false, "/graph/nodes/1/op", "node 'b': unknown op 'transposed'");
    refused(
        "missing input",
        "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
        "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\", \"y\"]}], \"outputs\": [\"a\"]}",
        false, "/graph/nodes/0/inputs/1", "input 'y' is neither");
    refused("input count",
            "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
            "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\"]}], \"outputs\": [\"a\"]}",
            false, "/graph/nodes/0/inputs", "op 'add' takes 2 inputs");
    refused("duplicate name",
            "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
            "{\"name\": \"x\", \"op\": \"exp\", \"inputs\": [\"x\"]}], \"outputs\": [\"x\"]}",
            false, "/graph/nodes/0/name", "'x' is used twice");
    refused("output is an input",
            "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
            "{\"name\": \"a\", \"op\": \"exp\", \"inputs\": [\"x\"]}], \"outputs\": [\"x\"]}",
            false, "/graph/outputs/0", "it is a graph input");
    refused(
        "bad attrs",
        "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}], \"nodes\": ["
        "{\"name\": \"a\", \"op\": \"softmax\", \"inputs\": [\"x\"], \"attrs\": {\"axes\": 1}}],"
        " \"outputs\": [\"a\"]}",
        false, "/graph/nodes/0/attrs", "node 'a'");
    refused(
        "shapes do not fit",
        "{\"inputs\": [{\"name\": \"a\", \"shape\": [4, 3]},"
        " {\"name\": \"b\", \"shape\": [4, 5]}], \"nodes\": ["
        "{\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"a\"]},"
        "{\"name\": \"s\", \"op\": \"matmul\", \"inputs\": [\"e\", \"b\"]}], \"outputs\": [\"s\"]}",
        true, "/graph/nodes/1", "node 's' (op 'matmul')");
    refused(
        "elementwise shapes",
        "{\"inputs\": [{\"name\": \"a\", \"shape\": [4]},"
        " {\"name\": \"b\", \"shape\": [5]}], \"nodes\": ["
        "{\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]}], \"outputs\": [\"s\"]}",
        true, "/graph/nodes/0", "node 's' (op 'add')");
}

/* A fused job: validation through nv_jobspec_validate (the kind switch). */
static void fused_refused(const char *what, const char *spec, const char *want_ptr,
                          const char *want)
{
    json_t *j = json_loads(spec, 0, NULL);
    char *ptr = NULL, *msg = NULL;
    int r = j ? nv_jobspec_validate(j, &ptr, &msg) : -1;
    bool ok = want_ptr ? r == -EINVAL && ptr && !strcmp(ptr, want_ptr) && msg && strstr(msg, want)
                       : r == 0;
    tap_ok(ok, "fused job %s: %s", what, want_ptr ? want_ptr : "valid");
    if (!ok)
        tap_diag("got r=%d ptr='%s' msg='%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
    free(ptr);
    free(msg);
    json_decref(j);
}

static void test_fusedspec(void)
{
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\", "
             "\"fp16\"], \"inputs\": [\"normal\", \"uniform\"], \"samples\": 2, \"seed\": 3}",
             attention);
    fused_refused("attention", spec, NULL, NULL);
    json_t *j = json_loads(spec, 0, NULL);
    nv_fusedspec *s = NULL;
    int r = nv_fusedspec_parse(j, &s, NULL, NULL);
    nv_dtype dt;
    nv_input_class cls;
    int sample;
    if (r == 0)
        nv_fusedspec_case(s, 5, &dt, &cls, &sample);
    /* 2 dtypes x 2 classes x 2 samples; case 5 = dtype 1, class 0, sample 1. */
    tap_ok(r == 0 && s->n_cases == 8 && dt == NV_DT_FP16 && cls == NV_IN_NORMAL && sample == 1 &&
               s->intermediate == NV_DT_FP32,
           "8 cases in dtype, class, sample order; intermediate dtype defaults to fp32");
    nv_fusedspec_free(s);
    json_decref(j);
    snprintf(spec, sizeof spec, "{\"kind\": \"fused\", \"graph\": %s}", attention);
    fused_refused("without dtypes", spec, "/dtypes", "no \"dtype\"");
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
             "\"node_tolerances\": {\"zz\": {\"metric\": \"ulp\", \"max_ulp\": 1, "
             "\"reason_code\": \"dtype_precision\", \"reason\": \"r\"}}}",
             attention);
    fused_refused("tolerance for an unknown node", spec, "/node_tolerances/zz",
                  "'zz' is not a node");
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
             "\"op\": \"exp\"}",
             attention);
    fused_refused("op key", spec, "/op", "unknown key 'op'");
    fused_refused("graph missing", "{\"kind\": \"fused\"}", "/graph", "missing \"graph\"");
    /* The composition criterion (docs/JOBS.md "Fused jobs", "composition"). */
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
             "\"composition\": {\"execution\": \"unfused\", \"band_factor\": 8}}",
             attention);
    j = json_loads(spec, 0, NULL);
    s = NULL;
    r = nv_fusedspec_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && s->composition && !s->composition_fused && s->band_factor == 8,
           "composition: the unfused execution, band factor 8");
    nv_fusedspec_free(s);
    json_decref(j);
    snprintf(spec, sizeof spec, "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"]}",
             attention);
    j = json_loads(spec, 0, NULL);
    s = NULL;
    r = nv_fusedspec_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && !s->composition && s->band_factor == 4,
           "no composition: none judged, the factor defaults to the model's 4");
    nv_fusedspec_free(s);
    json_decref(j);
    /* "deterministic" (docs/JOBS.md "Determinism demanded"): a boolean, default false. */
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
             "\"deterministic\": true}",
             attention);
    j = json_loads(spec, 0, NULL);
    s = NULL;
    r = nv_fusedspec_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && s->deterministic, "deterministic: true is parsed");
    nv_fusedspec_free(s);
    json_decref(j);
    snprintf(spec, sizeof spec, "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"]}",
             attention);
    j = json_loads(spec, 0, NULL);
    s = NULL;
    r = nv_fusedspec_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && !s->deterministic, "deterministic defaults to false");
    nv_fusedspec_free(s);
    json_decref(j);
    snprintf(spec, sizeof spec,
             "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
             "\"deterministic\": \"yes\"}",
             attention);
    fused_refused("deterministic not a boolean", spec, "/deterministic", "true or false");
    static const struct {
        const char *what, *comp, *ptr, *msg;
    } bad[] = {
        {"composition not an object", "true", "/composition", "must be an object"},
        {"composition without execution", "{}", "/composition/execution", "must be \"unfused\""},
        {"composition execution unknown", "{\"execution\": \"eager\"}",
         "/composition/execution", "'eager' must be"},
        {"composition unknown key", "{\"execution\": \"fused\", \"band\": 2}", "/composition",
         "unknown key 'band'"},
        {"composition band factor below 1", "{\"execution\": \"fused\", \"band_factor\": 0.5}",
         "/composition/band_factor", "must be a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(spec, sizeof spec,
                 "{\"kind\": \"fused\", \"graph\": %s, \"dtypes\": [\"bf16\"], "
                 "\"composition\": %s}",
                 attention, bad[i].comp);
        fused_refused(bad[i].what, spec, bad[i].ptr, bad[i].msg);
    }
}

/* Reference: x = [1, 3], y = [2^-30, 0.5] (fp32). h = x + y, d = h - x, e = d * d.
 * The exact d is [2^-30, 0.5] (an fp32 h would lose 2^-30), so e = [2^-60, 0.25]:
 * intermediates are not rounded to the node dtype. softmax([0, 0]) = [1/2, 1/2]. */
static void test_reference(void)
{
    const char *text =
        "{\"inputs\": [{\"name\": \"x\", \"shape\": [2]}, {\"name\": \"y\", \"shape\": [2]},"
        " {\"name\": \"zero\", \"shape\": [1, 2], \"value\": 0}],"
        " \"nodes\": [{\"name\": \"h\", \"op\": \"add\", \"inputs\": [\"x\", \"y\"]},"
        " {\"name\": \"d\", \"op\": \"sub\", \"inputs\": [\"h\", \"x\"]},"
        " {\"name\": \"e\", \"op\": \"mul\", \"inputs\": [\"d\", \"d\"]},"
        " {\"name\": \"p\", \"op\": \"softmax\", \"inputs\": [\"zero\"]}],"
        " \"outputs\": [\"e\", \"p\"]}";
    char *ptr, *msg;
    nv_graph *g = parse(text, &ptr, &msg);
    int r = g ? nv_graph_infer(g, NV_DT_FP32, "/graph", &ptr, &msg) : -1;
    int64_t two = 2, one_two[2] = {1, 2};
    nv_tensor *x = nv_tensor_new(NV_DT_FP32, 1, &two), *y = nv_tensor_new(NV_DT_FP32, 1, &two);
    nv_tensor *z = nv_tensor_new(NV_DT_FP32, 2, one_two);
    x->data[0] = 1;
    x->data[1] = 3;
    y->data[0] = 0x1p-30;
    y->data[1] = 0.5;
    const nv_tensor *in[3] = {x, y, z};
    nv_tensor *hi[4] = {0}, *abs[4] = {0};
    char err[256] = "";
    if (r == 0)
        r = nv_graph_reference(g, in, hi, abs, err, sizeof err);
    tap_ok(r == 0, "graph reference runs%s%s", err[0] ? ": " : "", err);
    tap_ok(r == 0 && hi[1]->data[0] == 0x1p-30 && hi[1]->data[1] == 0.5 &&
               hi[2]->data[0] == 0x1p-60 && hi[2]->data[1] == 0.25,
           "intermediates exact: d = [2^-30, 0.5], e = [2^-60, 0.25]");
    tap_ok(r == 0 && hi[3]->data[0] == 0.5 && hi[3]->data[1] == 0.5 && abs[3] != NULL &&
               abs[2] == NULL && hi[2]->dtype == NV_DT_FP32,
           "softmax of zeros is 1/2 each; abs_sum only for the reduction; tagged fp32");
    for (int k = 0; k < 4; k++) {
        nv_tensor_free(hi[k]);
        nv_tensor_free(abs[k]);
    }
    nv_tensor_free(x);
    nv_tensor_free(y);
    nv_tensor_free(z);
    nv_graph_free(g);
}

int main(void)
{
    test_topo_and_shapes();
    test_node_dtypes();
    test_refusals();
    test_fusedspec();
    test_reference();
    return tap_done();
}
