/* The expansion of a model (docs/MODEL.md "The model format") into a graph of
 * the fused format: layers in order, repeated blocks as instances LAYER.i with
 * their own parameters, names resolved (local node, block parameter, "@in",
 * global), parameters and data inputs as graph inputs. Every expanded node and
 * input remembers the JSON pointer it came from, so the graph parser's errors
 * are reported at the model field (model_internal.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "spec_internal.h"

/* snprintf into a pointer buffer of NV_MODEL_PTR_LEN (truncation is harmless:
 * pointers are shorter than that for every model within the limits). */
static void mptr(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mptr(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, NV_MODEL_PTR_LEN, fmt, ap);
    va_end(ap);
}

static const char *const layer_keys[] = {"name", "nodes", "block", "repeat", "output", NULL};
static const char *const block_keys[] = {"params", "nodes", "output", NULL};
static const char *const param_keys[] = {"name", "shape", "dtype", "init", NULL};
static const char *const init_keys[] = {"dist", "std",    "limit",    "value", "fill",
                                        "base", "tokens", "head_dim", NULL};
static const char *const input_keys[] = {"name", "shape", "dtype", "init", NULL};
static const char *const node_keys[] = {"name", "op", "inputs", "attrs", "dtype", NULL};
static const char *const model_keys[] = {"inputs", "params", "blocks", "layers", "logits", NULL};

static int unknown_key(nv_spec_err *e, const json_t *o, const char *const *keys, const char *ptr,
                       const char *what)
{
    if (!json_is_object(o))
        return nv_spec_fail_value(e, ptr, o, "must be an object");
    const char *k = nv_spec_unknown_key(o, keys);
    if (!k)
        return 0;
    char p[NV_MODEL_PTR_LEN];
    nv_spec_pointer(p, sizeof p, ptr, k);
    return nv_spec_fail(e, p, "unknown key '%s' in %s (docs/JOBS.md \"Model jobs\")", k, what);
}

/* Whether name is already an input or a node of the expansion. */
static bool known(const mexp *x, const char *name)
{
    return json_object_get(x->names, name) != NULL;
}

static int add_name(mexp *x, const char *name, const char *ptr)
{
    if (strlen(name) >= NV_GRAPH_MAX_NAME)
        return nv_spec_fail(x->e, ptr, "the expanded name '%s' is longer than %d characters", name,
                            NV_GRAPH_MAX_NAME - 1);
    if (known(x, name))
        return nv_spec_fail(x->e, ptr, "the name '%s' is defined twice", name);
    return json_object_set_new(x->names, name, json_true()) ? -ENOMEM : 0;
}

/* "init" of a parameter into in. */
static int parse_init(mexp *x, const json_t *init, const char *ptr, nv_model_input *in)
{
    char p[NV_MODEL_PTR_LEN];
    mptr(p, "%s/init", ptr);
    if (!init)
        return nv_spec_fail(x->e, p,
                            "a parameter needs an \"init\": {\"dist\": \"normal\", \"std\": S | "
                            "\"fan_in\"}, {\"dist\": \"uniform\", \"limit\": L} or {\"value\": V}");
    int r = unknown_key(x->e, init, init_keys, p, "a parameter's init");
    if (r < 0)
        return r;
    const json_t *fill = json_object_get(init, "fill");
    if (fill) {
        static const char *const fills[] = {"causal_mask", "rope_cos", "rope_sin", "rotate_half"};
        static const nv_model_init kinds[] = {NV_MINIT_CAUSAL_MASK, NV_MINIT_ROPE_COS,
                                              NV_MINIT_ROPE_SIN, NV_MINIT_ROTATE_HALF};
        for (int i = 0; i < 4; i++)
            if (json_is_string(fill) && !strcmp(json_string_value(fill), fills[i])) {
                in->init = kinds[i];
                int r = nv_spec_number(x->e, init, p, "base", 10000, 1, 1e12, &in->a);
                return r ? r : nv_spec_int(x->e, init, p, "head_dim", 0, 0, INT32_MAX, &in->hd);
            }
        char pf[NV_MODEL_PTR_LEN];
        mptr(pf, "%s/fill", p);
        return nv_spec_fail_value(x->e, pf, fill,
                                  "must be \"causal_mask\", \"rope_cos\", \"rope_sin\" or "
                                  "\"rotate_half\"");
    }
    if (json_object_get(init, "tokens")) {
        in->init = NV_MINIT_TOKENS;
        int64_t v = 0;
        int r = nv_spec_int(x->e, init, p, "tokens", 0, 1, INT32_MAX, &v);
        in->a = (double)v;
        return r;
    }
    if (json_object_get(init, "value")) {
        in->init = NV_MINIT_VALUE;
        return nv_spec_number(x->e, init, p, "value", 0, -1e300, 1e300, &in->a);
    }
    const char *dist = json_string_value(json_object_get(init, "dist"));
    char pd[NV_MODEL_PTR_LEN];
    mptr(pd, "%s/dist", p);
    if (dist && !strcmp(dist, "normal")) {
        in->init = NV_MINIT_NORMAL;
        const json_t *sd = json_object_get(init, "std");
        if (json_is_string(sd) && !strcmp(json_string_value(sd), "fan_in")) {
            in->fan_in = true;
            return 0;
        }
        return nv_spec_number(x->e, init, p, "std", 1.0, 0, 1e6, &in->a);
    }
    if (dist && !strcmp(dist, "uniform")) {
        in->init = NV_MINIT_UNIFORM;
        return nv_spec_number(x->e, init, p, "limit", 1.0, 0, 1e6, &in->a);
    }
    return nv_spec_fail_value(x->e, pd, json_object_get(init, "dist"),
                              "must be \"normal\" or \"uniform\" (or give \"value\")");
}

/* One graph input: a model input (params false) or a parameter called name. */
static int add_input(mexp *x, const json_t *decl, const char *name, const char *ptr, bool param)
{
    if (x->n_inputs == NV_GRAPH_MAX_INPUTS)
        return nv_spec_fail(x->e, ptr, "the model has more than %d inputs and parameters",
                            NV_GRAPH_MAX_INPUTS);
    int r = add_name(x, name, ptr);
    if (r < 0)
        return r;
    nv_model_input *in = &x->inputs[x->n_inputs];
    memset(in, 0, sizeof *in);
    in->is_param = param;
    const json_t *init = json_object_get(decl, "init");
    if ((param || init) && (r = parse_init(x, init, ptr, in)) < 0)
        return r;
    json_t *gi = json_pack("{s:s, s:O*, s:O*}", "name", name, "shape",
                           json_object_get(decl, "shape"), "dtype", json_object_get(decl, "dtype"));
    if (!gi || json_array_append_new(x->ginputs, gi))
        return -ENOMEM;
    mptr(x->input_src[x->n_inputs], "%s", ptr);
    x->n_inputs++;
    return 0;
}

static int add_params(mexp *x, const json_t *arr, const char *prefix, const char *base)
{
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return nv_spec_fail_value(x->e, base, arr, "must be an array of parameters");
    size_t i;
    const json_t *p;
    json_array_foreach(arr, i, p)
    {
        char ptr[NV_MODEL_PTR_LEN], full[2 * NV_GRAPH_MAX_NAME + 2];
        mptr(ptr, "%s/%zu", base, i);
        int r = unknown_key(x->e, p, param_keys, ptr, "a parameter");
        if (r < 0)
            return r;
        const char *name = json_string_value(json_object_get(p, "name"));
        if (!name || !*name)
            return nv_spec_fail(x->e, ptr, "a parameter needs a \"name\"");
        snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", name);
        if ((r = add_input(x, p, full, ptr, true)) < 0)
            return r;
    }
    return 0;
}

/* Whether name is in the local list (a node or parameter of the layer). */
static bool in_list(const json_t *arr, const char *name)
{
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(json_object_get(v, "name"));
        if (s && !strcmp(s, name))
            return true;
    }
    return false;
}

/* The graph name of input name of a node of layer ln (docs/MODEL.md). */
static int resolve(mexp *x, const char *ln, const json_t *nodes, const json_t *params,
                   const char *name, const char *prev, const char *ptr, char *out, size_t len)
{
    if (!strcmp(name, "@in")) {
        if (!prev)
            return nv_spec_fail(x->e, ptr, "'@in' in the first layer: there is no previous layer");
        snprintf(out, len, "%s", prev);
        return 0;
    }
    if (in_list(nodes, name) || in_list(params, name)) {
        snprintf(out, len, "%s.%s", ln, name);
        return 0;
    }
    if (known(x, name)) {
        snprintf(out, len, "%s", name);
        return 0;
    }
    return nv_spec_fail(x->e, ptr,
                        "'%s' is not a node of layer '%s', a parameter of its block, '@in', a "
                        "model input or parameter, or a node of an earlier layer",
                        name, ln);
}

static int add_node(mexp *x, const json_t *n, const char *ln, const json_t *nodes,
                    const json_t *params, const char *prev, const char *ptr)
{
    int r = unknown_key(x->e, n, node_keys, ptr, "a node");
    if (r < 0)
        return r;
    const char *name = json_string_value(json_object_get(n, "name"));
    if (!name || !*name)
        return nv_spec_fail(x->e, ptr, "a node needs a \"name\"");
    if (x->n_nodes == NV_GRAPH_MAX_NODES)
        return nv_spec_fail(x->e, ptr, "the model expands to more than %d nodes",
                            NV_GRAPH_MAX_NODES);
    const json_t *ins = json_object_get(n, "inputs");
    char pin[NV_MODEL_PTR_LEN];
    mptr(pin, "%s/inputs", ptr);
    if (!json_is_array(ins))
        return nv_spec_fail_value(x->e, pin, ins, "must be an array of names");
    json_t *gins = json_array();
    if (!gins)
        return -ENOMEM;
    size_t i;
    const json_t *v;
    json_array_foreach(ins, i, v)
    {
        char pi[NV_MODEL_PTR_LEN], gname[3 * NV_GRAPH_MAX_NAME];
        mptr(pi, "%s/%zu", pin, i);
        const char *s = json_string_value(v);
        r = s ? resolve(x, ln, nodes, params, s, prev, pi, gname, sizeof gname)
              : nv_spec_fail_value(x->e, pi, v, "must be a name");
        if (r == 0 && json_array_append_new(gins, json_string(gname)))
            r = -ENOMEM;
        if (r < 0) {
            json_decref(gins);
            return r;
        }
    }
    char full[3 * NV_GRAPH_MAX_NAME];
    snprintf(full, sizeof full, "%s.%s", ln, name);
    json_t *gn = json_pack("{s:s, s:O*, s:o, s:O*, s:O*}", "name", full, "op",
                           json_object_get(n, "op"), "inputs", gins, "attrs",
                           json_object_get(n, "attrs"), "dtype", json_object_get(n, "dtype"));
    if (!gn || json_array_append_new(x->gnodes, gn))
        return -ENOMEM;
    if ((r = add_name(x, full, ptr)) < 0)
        return r;
    mptr(x->node_src[x->n_nodes], "%s", ptr);
    x->node_layer[x->n_nodes++] = x->n_layers;
    return 0;
}

/* One layer (or block instance) ln: its parameters, nodes and output. */
static int add_layer(mexp *x, const char *ln, const json_t *owner, const char *base,
                     const char *layer_ptr, const json_t *output)
{
    if (x->n_layers == NV_MODEL_MAX_LAYERS)
        return nv_spec_fail(x->e, layer_ptr, "the model expands to more than %d layers",
                            NV_MODEL_MAX_LAYERS);
    char pp[NV_MODEL_PTR_LEN], pn[NV_MODEL_PTR_LEN];
    mptr(pp, "%s/params", base);
    mptr(pn, "%s/nodes", base);
    const json_t *params = json_object_get(owner, "params");
    const json_t *nodes = json_object_get(owner, "nodes");
    int r = add_params(x, params, ln, pp);
    if (r < 0)
        return r;
    if (!json_is_array(nodes) || json_array_size(nodes) == 0)
        return nv_spec_fail_value(x->e, pn, nodes, "must be a non-empty array of nodes");
    const char *prev = x->n_layers ? x->layers[x->n_layers - 1].out : NULL;
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        char p[NV_MODEL_PTR_LEN];
        mptr(p, "%s/%zu", pn, i);
        if ((r = add_node(x, n, ln, nodes, params, prev, p)) < 0)
            return r;
    }
    const char *out = json_string_value(output);
    if (output && (!out || !in_list(nodes, out))) {
        char po[NV_MODEL_PTR_LEN];
        mptr(po, "%s/output", layer_ptr);
        return nv_spec_fail_value(x->e, po, output, "must name a node of the layer");
    }
    if (!out)
        out = json_string_value(json_object_get(json_array_get(nodes, i - 1), "name"));
    mexp_layer *L = &x->layers[x->n_layers++];
    snprintf(L->name, sizeof L->name, "%s", ln);
    snprintf(L->out, sizeof L->out, "%s.%s", ln, out);
    return 0;
}

static int expand_layer(mexp *x, const json_t *model, const json_t *l, size_t li)
{
    char ptr[NV_MODEL_PTR_LEN];
    mptr(ptr, "/model/layers/%zu", li);
    int r = unknown_key(x->e, l, layer_keys, ptr, "a layer");
    if (r < 0)
        return r;
    const char *name = json_string_value(json_object_get(l, "name"));
    if (!name || !*name || strchr(name, '@'))
        return nv_spec_fail(x->e, ptr, "a layer needs a \"name\" (letters, digits, '_', '-')");
    const json_t *bn = json_object_get(l, "block");
    if (!bn) {
        if (json_object_get(l, "repeat"))
            return nv_spec_fail(x->e, ptr, "\"repeat\" needs a \"block\"");
        return add_layer(x, name, l, ptr, ptr, json_object_get(l, "output"));
    }
    char pb[NV_MODEL_PTR_LEN];
    mptr(pb, "%s/block", ptr);
    const json_t *blocks = json_object_get(model, "blocks");
    const json_t *b = json_is_string(bn) ? json_object_get(blocks, json_string_value(bn)) : NULL;
    if (!b)
        return nv_spec_fail_value(x->e, pb, bn, "is not a block of \"blocks\"");
    if (json_object_get(l, "nodes"))
        return nv_spec_fail(x->e, ptr, "a layer has \"nodes\" or a \"block\", not both");
    char bbase[NV_MODEL_PTR_LEN];
    nv_spec_pointer(bbase, sizeof bbase, "/model/blocks", json_string_value(bn));
    if ((r = unknown_key(x->e, b, block_keys, bbase, "a block")) < 0)
        return r;
    int64_t rep = 1;
    if ((r = nv_spec_int(x->e, l, ptr, "repeat", 1, 1, NV_MODEL_MAX_REPEAT, &rep)) < 0)
        return r;
    for (int64_t i = 0; i < rep; i++) {
        char ln[2 * NV_GRAPH_MAX_NAME];
        snprintf(ln, sizeof ln, "%s.%lld", name, (long long)i);
        if ((r = add_layer(x, ln, b, bbase, ptr, json_object_get(b, "output"))) < 0)
            return r;
    }
    return 0;
}

static int expand_all(mexp *x, const json_t *model)
{
    int r = unknown_key(x->e, model, model_keys, "/model", "the model");
    if (r < 0)
        return r;
    const json_t *ins = json_object_get(model, "inputs");
    if (!json_is_array(ins) || json_array_size(ins) == 0)
        return nv_spec_fail_value(x->e, "/model/inputs", ins,
                                  "must be a non-empty array of {\"name\", \"shape\", \"dtype\"?}");
    size_t i;
    const json_t *v;
    json_array_foreach(ins, i, v)
    {
        char ptr[NV_MODEL_PTR_LEN];
        mptr(ptr, "/model/inputs/%zu", i);
        const char *name = json_string_value(json_object_get(v, "name"));
        if (!json_is_object(v) || !name)
            return nv_spec_fail(x->e, ptr, "a model input needs a \"name\" and a \"shape\"");
        if ((r = unknown_key(x->e, v, input_keys, ptr, "a model input")) < 0)
            return r;
        if ((r = add_input(x, v, name, ptr, false)) < 0)
            return r;
    }
    if ((r = add_params(x, json_object_get(model, "params"), "", "/model/params")) < 0)
        return r;
    const json_t *blocks = json_object_get(model, "blocks");
    if (blocks && !json_is_object(blocks))
        return nv_spec_fail_value(x->e, "/model/blocks", blocks, "must be an object of blocks");
    const json_t *layers = json_object_get(model, "layers");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return nv_spec_fail_value(x->e, "/model/layers", layers, "must be a non-empty array");
    json_array_foreach(layers, i, v)
    {
        if ((r = expand_layer(x, model, v, i)) < 0)
            return r;
    }
    const json_t *lg = json_object_get(model, "logits");
    const char *ls = json_string_value(lg);
    if (!ls || !known(x, ls) || json_object_get(x->names, ls) == NULL)
        return nv_spec_fail_value(x->e, "/model/logits", lg,
                                  "must name a node of the model (LAYER.NODE)");
    json_t *outs = json_pack("[s]", ls);
    if (!outs)
        return -ENOMEM;
    x->graph = json_pack("{s:O, s:O, s:o}", "inputs", x->ginputs, "nodes", x->gnodes, "outputs",
                         outs);
    return x->graph ? 0 : -ENOMEM;
}

int nv_model_expand(const json_t *model, nv_spec_err *e, mexp *x)
{
    memset(x, 0, sizeof *x);
    x->e = e;
    x->ginputs = json_array();
    x->gnodes = json_array();
    x->names = json_object();
    x->layers = calloc(NV_MODEL_MAX_LAYERS, sizeof *x->layers);
    x->node_src = calloc(NV_GRAPH_MAX_NODES, sizeof *x->node_src);
    x->node_layer = calloc(NV_GRAPH_MAX_NODES, sizeof *x->node_layer);
    if (!x->ginputs || !x->gnodes || !x->names || !x->layers || !x->node_src || !x->node_layer)
        return -ENOMEM;
    if (!model)
        return nv_spec_fail(e, "/model",
                            "missing \"model\" ({\"inputs\", \"params\", \"blocks\", \"layers\", "
                            "\"logits\"}, docs/MODEL.md)");
    return expand_all(x, model);
}

void nv_model_expand_done(mexp *x)
{
    json_decref(x->ginputs);
    json_decref(x->gnodes);
    json_decref(x->names);
    json_decref(x->graph);
    free(x->layers);
    free(x->node_src);
    free(x->node_layer);
}

/* "/graph/nodes/N/rest" -> the model field node N came from, + "/rest". */
void nv_model_map_pointer(const mexp *x, const char *gptr, char *out, size_t len)
{
    int idx = -1, off = 0;
    const char *src = NULL;
    if (gptr && sscanf(gptr, "/graph/nodes/%d%n", &idx, &off) == 1 && idx >= 0 &&
        idx < x->n_nodes)
        src = x->node_src[idx];
    else if (gptr && sscanf(gptr, "/graph/inputs/%d%n", &idx, &off) == 1 && idx >= 0 &&
             idx < x->n_inputs)
        src = x->input_src[idx];
    if (src)
        snprintf(out, len, "%s%s", src, gptr + off);
    else
        snprintf(out, len, "/model%s", gptr && !strncmp(gptr, "/graph", 6) ? gptr + 6 : "");
}
