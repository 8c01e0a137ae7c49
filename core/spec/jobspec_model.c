/* Model job validation (modelspec.h, docs/JOBS.md "Model jobs"): the model's
 * expansion (model_expand.c) parsed as a graph, the task, the case axes and
 * the seed. Graph errors are reported at the model field they came from. */
#include "modelspec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static const char *const model_job_keys[] = {
    "kind",   "model",    "task",        "dtypes",    "samples", "seed",     "build", "name",
    "device", "priority", "description", "execution", "weights", "compile", "autocast", NULL};
static const char *const task_keys[] = {"type",   "label_noise", "max_gap", "alpha",
                                        "prompt", "decode",      NULL};

static int check_keys(const json_t *spec, nv_spec_err *e)
{
    const char *key = nv_spec_unknown_key(spec, model_job_keys);
    if (!key)
        return 0;
    char ptr[300];
    nv_spec_pointer(ptr, sizeof ptr, "", key);
    return nv_spec_fail(e, ptr, "unknown key '%s' for a model job (docs/JOBS.md \"Model jobs\")",
                        key);
}

static int parse_dtypes(const json_t *spec, nv_modelspec *s, nv_spec_err *e)
{
    return nv_spec_float_dtypes(e, spec, s->dtypes, &s->n_dtypes);
}

/* A language model: one int32 ids input [T] with "tokens" init, logits [T, V],
 * a prompt and the tokens decoded after it within the T positions. */
static int parse_lm(const json_t *t, nv_modelspec *s, nv_spec_err *e)
{
    const nv_graph *g = s->graph;
    s->task = NV_MTASK_LM;
    s->ids_input = -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (s->inputs[i].init == NV_MINIT_TOKENS)
            s->ids_input = i;
    if (s->ids_input < 0 || g->inputs[s->ids_input].ndim != 1)
        return nv_spec_fail(e, "/task/type",
                            "an \"lm\" model needs a 1-D model input of token ids [T] with "
                            "\"init\": {\"tokens\": V}");
    int64_t len = g->inputs[s->ids_input].shape[0];
    if (g->nodes[s->logits].shape[0] != len)
        return nv_spec_fail(e, "/model/logits",
                            "an \"lm\" model's logits need one row per position (%lld), they "
                            "have %lld",
                            (long long)len, (long long)g->nodes[s->logits].shape[0]);
    int64_t prompt = 1, decode = 1;
    int r = nv_spec_int(e, t, "/task", "prompt", 1, 1, len, &prompt);
    /* every decoded token reruns the whole model twice (reference and device) */
    int64_t most = len - prompt + 1 < NV_MODEL_MAX_DECODE ? len - prompt + 1 : NV_MODEL_MAX_DECODE;
    r = r ? r : nv_spec_int(e, t, "/task", "decode", 1, 1, most, &decode);
    s->prompt = (int)prompt;
    s->decode = (int)decode;
    return r;
}

static int parse_task(const json_t *spec, nv_modelspec *s, nv_spec_err *e)
{
    const json_t *t = json_object_get(spec, "task");
    if (!json_is_object(t))
        return nv_spec_fail_value(e, "/task", t,
                                  "must be an object: {\"type\": \"classifier\", ...}");
    const char *k = nv_spec_unknown_key(t, task_keys);
    if (k) {
        char ptr[300];
        nv_spec_pointer(ptr, sizeof ptr, "/task", k);
        return nv_spec_fail(e, ptr, "unknown key '%s' in the task", k);
    }
    const char *type = json_string_value(json_object_get(t, "type"));
    if (type && !strcmp(type, "lm"))
        return parse_lm(t, s, e);
    if (!type || strcmp(type, "classifier"))
        return nv_spec_fail_value(e, "/task/type", json_object_get(t, "type"),
                                  "must be \"classifier\" or \"lm\"");
    s->task = NV_MTASK_CLASSIFIER;
    int r = nv_spec_number(e, t, "/task", "label_noise", 0.1, 0, 0.5, &s->label_noise);
    r = r ? r : nv_spec_number(e, t, "/task", "max_gap", 0.02, 0, 1, &s->max_gap);
    r = r ? r : nv_spec_number(e, t, "/task", "alpha", 0.01, 1e-9, 0.5, &s->alpha);
    return r;
}

/* A graph error at the model field it came from. */
static int graph_fail(nv_spec_err *e, const mexp *x, int r, char *ptr, char *msg)
{
    char p[NV_MODEL_PTR_LEN + 100];
    nv_model_map_pointer(x, ptr, p, sizeof p);
    r = nv_spec_fail_from(e, r, p, msg);
    free(ptr);
    free(msg);
    return r;
}

/* An init that fits its input's shape and dtype (model_expand.c parsed it). */
static int check_init(const nv_model_input *mi, const nv_graph_input *gi, const char *ptr,
                      nv_spec_err *e)
{
    bool ints = gi->dtype_set && gi->dtype == NV_DT_INT32;
    int nd = gi->ndim;
    bool square = nd >= 2 && gi->shape[nd - 2] == gi->shape[nd - 1];
    int64_t hd = mi->hd ? mi->hd : nd >= 1 ? gi->shape[nd - 1] : 0;
    bool even = nd == 2 && hd % 2 == 0 && gi->shape[1] % hd == 0;
    const char *want = NULL;
    if (ints != (mi->init == NV_MINIT_TOKENS))
        want = "token ids: \"dtype\": \"int32\" with \"init\": {\"tokens\": V}, together";
    else if (mi->init == NV_MINIT_CAUSAL_MASK && !square)
        want = "a causal mask is [.., T, T]";
    else if ((mi->init == NV_MINIT_ROPE_COS || mi->init == NV_MINIT_ROPE_SIN) && !even)
        want = "a rotary table is [T, D] with an even head_dim that divides D";
    else if (mi->init == NV_MINIT_ROTATE_HALF && !(square && even))
        want = "rotate_half is [D, D] with an even head_dim that divides D";
    if (want)
        return nv_spec_fail(e, ptr, "input '%s': %s", gi->name, want);
    return 0;
}

/* After the graph parsed: the layer of every node, layer outputs, the logits
 * (a 2-D node: rows are samples), fan-in stds. */
static int finish_model(nv_modelspec *s, const mexp *x, nv_spec_err *e)
{
    const nv_graph *g = s->graph;
    s->n_layers = x->n_layers;
    s->layers = calloc((size_t)x->n_layers, sizeof *s->layers);
    s->node_layer = calloc((size_t)g->n_nodes, sizeof *s->node_layer);
    if (!s->layers || !s->node_layer)
        return -ENOMEM;
    for (int k = 0; k < g->n_nodes; k++)
        s->node_layer[k] = x->node_layer[g->nodes[k].json_index];
    for (int l = 0; l < x->n_layers; l++) {
        snprintf(s->layers[l].name, sizeof s->layers[l].name, "%s", x->layers[l].name);
        s->layers[l].output = nv_graph_lookup(g, x->layers[l].out);
    }
    s->logits = g->outputs[0];
    if (g->nodes[s->logits].ndim != 2)
        return nv_spec_fail(e, "/model/logits",
                            "the logits node '%s' must be 2-D [rows, classes], it has %d dims",
                            g->nodes[s->logits].name, g->nodes[s->logits].ndim);
    for (int i = 0; i < g->n_inputs; i++) {
        s->inputs[i] = x->inputs[i];
        if (s->inputs[i].fan_in)
            s->inputs[i].a = 1.0 / sqrt((double)g->inputs[i].shape[0]);
        int r = check_init(&s->inputs[i], &g->inputs[i], x->input_src[i], e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* "compile" and "autocast": how a framework harness runs the model through
 * its graph request (docs/EXEC_PROTOCOL.md "Optional requests"), so only with
 * "execution": "graph". */
static int parse_framework(const json_t *spec, nv_modelspec *s, nv_spec_err *e)
{
    static const char *const compiles[] = {"none", "script", "trace", NULL};
    static const char *const autocasts[] = {"none", "bf16", "fp16", NULL};
    const char *const *lists[2] = {compiles, autocasts};
    const char *keys[2] = {"compile", "autocast"};
    const char **dst[2] = {&s->compile, &s->autocast};
    for (int k = 0; k < 2; k++) {
        const json_t *v = json_object_get(spec, keys[k]);
        *dst[k] = lists[k][0];
        if (!v)
            continue;
        const char *name = json_string_value(v);
        for (int i = 0; name && lists[k][i]; i++)
            if (!strcmp(name, lists[k][i]))
                *dst[k] = lists[k][i];
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/%s", keys[k]);
        if (!name || strcmp(name, *dst[k]))
            return nv_spec_fail_value(e, ptr, v,
                                      k == 0 ? "must be \"none\" or \"script\" (TorchScript)"
                                             : "must be \"none\", \"bf16\" or \"fp16\"");
        if (strcmp(name, "none") && !s->graph_exec)
            return nv_spec_fail(e, ptr,
                                "'%s' is how a harness runs the whole model: it needs "
                                "\"execution\": \"graph\"",
                                name);
    }
    return 0;
}

static int parse_all(const json_t *spec, nv_modelspec *s, nv_spec_err *e)
{
    if (!json_is_object(spec))
        return nv_spec_fail(e, "", "a job spec must be a JSON object");
    int r = check_keys(spec, e);
    if (r < 0)
        return r;
    mexp x;
    r = nv_model_expand(json_object_get(spec, "model"), e, &x);
    char *ptr = NULL, *msg = NULL;
    if (r == 0) {
        r = nv_graph_parse(x.graph, "/graph", &s->graph, &ptr, &msg);
        if (r < 0)
            r = graph_fail(e, &x, r, ptr, msg);
    }
    if (r == 0 && !(s->graph_text = nv_graph_canonical(x.graph)))
        r = -ENOMEM;
    r = r ? r : parse_dtypes(spec, s, e);
    for (int d = 0; r == 0 && d < s->n_dtypes; d++) {
        r = nv_graph_infer(s->graph, s->dtypes[d], "/graph", &ptr, &msg);
        if (r < 0)
            r = graph_fail(e, &x, r, ptr, msg);
    }
    r = r ? r : finish_model(s, &x, e);
    nv_model_expand_done(&x);
    if (r < 0)
        return r;
    if ((r = parse_task(spec, s, e)) < 0)
        return r;
    int64_t samples = 1, seed = 0;
    r = nv_spec_int(e, spec, "", "samples", 1, 1, 100, &samples);
    r = r ? r : nv_spec_int(e, spec, "", "seed", 0, 0, INT64_MAX, &seed);
    if (r < 0)
        return r;
    s->samples = (int)samples;
    s->seed = (uint64_t)seed;
    if ((r = nv_spec_choice(e, spec, "", "execution", "eager", "graph", &s->graph_exec)) < 0)
        return r;
    if ((r = nv_model_weights_parse(spec, s, e)) < 0)
        return r;
    if ((r = parse_framework(spec, s, e)) < 0)
        return r;
    s->n_cases = (int64_t)s->n_dtypes * s->samples;
    if (s->n_cases > NV_MODEL_MAX_CASES)
        return nv_spec_fail(e, "", "the job expands to %lld cases (dtypes x samples), more than %d",
                            (long long)s->n_cases, NV_MODEL_MAX_CASES);
    return 0;
}

int nv_modelspec_parse(const json_t *spec, nv_modelspec **ret, char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    nv_modelspec *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int r = nv_spec_err_finish(&e, parse_all(spec, s, &e), ret_pointer, ret_msg);
    if (r < 0) {
        nv_modelspec_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void nv_modelspec_free(nv_modelspec *s)
{
    if (!s)
        return;
    nv_graph_free(s->graph);
    free(s->graph_text);
    free(s->layers);
    free(s->node_layer);
    nv_model_weights_free(&s->weights);
    free(s);
}

int nv_modelspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_modelspec *s = NULL;
    int r = nv_modelspec_parse(spec, &s, ret_pointer, ret_msg);
    nv_modelspec_free(s);
    return r;
}

void nv_modelspec_case(const nv_modelspec *s, int64_t i, nv_dtype *ret_dt, int *ret_sample)
{
    *ret_sample = (int)(i % s->samples);
    *ret_dt = s->dtypes[i / s->samples];
}
