/* Graph specs (graph.h): parsing, name resolution, topological order (Kahn's
 * algorithm, stable in spec order), dtype and shape inference. Every error names
 * the node and the JSON pointer of the offending field. */
#include "graph.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

typedef struct gerr {
    char *ptr, *msg;
    bool oom;
} gerr;

static int fail(gerr *e, const char *fmt_ptr, int a, int b, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Record the first error: the pointer is fmt_ptr formatted with a and b. */
static int fail(gerr *e, const char *fmt_ptr, int a, int b, const char *fmt, ...)
{
    if (e->msg || e->oom)
        return e->oom ? -ENOMEM : -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&e->msg, fmt, ap);
    va_end(ap);
    int r2 = asprintf(&e->ptr, fmt_ptr, a, b);
    if (r < 0 || r2 < 0) {
        if (r >= 0)
            free(e->msg);
        if (r2 >= 0)
            free(e->ptr);
        e->msg = e->ptr = NULL;
        e->oom = true;
        return -ENOMEM;
    }
    return -EINVAL;
}

static int finish(gerr *e, int r, char **ret_pointer, char **ret_msg)
{
    if (r == -ENOMEM || e->oom) {
        free(e->ptr);
        free(e->msg);
        return -ENOMEM;
    }
    if (ret_pointer)
        *ret_pointer = e->ptr;
    else
        free(e->ptr);
    if (ret_msg)
        *ret_msg = e->msg;
    else
        free(e->msg);
    return r;
}

static const char *const input_keys[] = {"name", "shape", "dtype", "value", NULL};
static const char *const node_keys[] = {"name", "op", "inputs", "attrs", "dtype", NULL};
static const char *const graph_keys[] = {"inputs", "nodes", "outputs", NULL};

static int check_keys(const json_t *o, const char *const *keys, gerr *e, const char *base,
                      const char *what, int idx)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        bool known = false;
        for (int i = 0; keys[i]; i++)
            known = known || strcmp(key, keys[i]) == 0;
        if (!known) {
            char fp[400];
            snprintf(fp, sizeof fp, "%s%s%s", base, what, idx >= 0 ? "/%d" : "%.0d");
            return fail(e, fp, idx, 0, "unknown key '%s' in %s (docs/JOBS.md \"Fused jobs\")", key,
                        what[0] ? what + 1 : "the graph");
        }
    }
    return 0;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NV_GRAPH_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* Name lookup over the inputs and the first n_nodes nodes (spec order while parsing). */
static int find_name(const nv_graph *g, int n_nodes, const char *name)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (strcmp(g->inputs[i].name, name) == 0)
            return -1 - i;
    for (int k = 0; k < n_nodes; k++)
        if (strcmp(g->nodes[k].name, name) == 0)
            return k;
    return INT32_MIN;
}

int nv_graph_lookup(const nv_graph *g, const char *name)
{
    return find_name(g, g->n_nodes, name);
}

static int parse_dtype_field(const json_t *o, bool *set, nv_dtype *dt, gerr *e, const char *fp,
                             int idx)
{
    const json_t *v = json_object_get(o, "dtype");
    if (!v)
        return 0;
    if (!json_is_string(v) || nv_dtype_from_name(json_string_value(v), dt) < 0)
        return fail(e, fp, idx, 0, "'%s' is not a dtype (fp32, bf16, fp8_e4m3, int32 ...)",
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    *set = true;
    return 0;
}

static int parse_input(nv_graph *g, const json_t *o, int i, const char *base, gerr *e)
{
    char fp[400];
    snprintf(fp, sizeof fp, "%s/inputs/%%d", base);
    if (!json_is_object(o))
        return fail(e, fp, i, 0, "graph input %d must be an object {\"name\", \"shape\", ...}", i);
    int r = check_keys(o, input_keys, e, base, "/inputs", i);
    if (r < 0)
        return r;
    nv_graph_input *in = &g->inputs[i];
    const char *name = json_string_value(json_object_get(o, "name"));
    snprintf(fp, sizeof fp, "%s/inputs/%%d/name", base);
    if (!name || !valid_name(name))
        return fail(e, fp, i, 0,
                    "graph input %d needs a \"name\" of 1-63 letters, digits, '_', "
                    "'.' or '-', got '%s'",
                    i, name ? name : "(none)");
    if (find_name(g, 0, name) != INT32_MIN)
        return fail(e, fp, i, 0, "graph input name '%s' is used twice", name);
    snprintf(in->name, sizeof in->name, "%s", name);
    const json_t *sh = json_object_get(o, "shape");
    snprintf(fp, sizeof fp, "%s/inputs/%%d/shape", base);
    if (!json_is_array(sh) || json_array_size(sh) > NV_MAX_DIMS)
        return fail(e, fp, i, 0,
                    "graph input '%s' needs a \"shape\": an array of at most %d "
                    "extents",
                    name, NV_MAX_DIMS);
    in->ndim = (int)json_array_size(sh);
    in->numel = 1;
    for (int d = 0; d < in->ndim; d++) {
        const json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 1 ||
            json_integer_value(x) > NV_GRAPH_MAX_EXTENT ||
            in->numel * json_integer_value(x) > NV_GRAPH_MAX_EXTENT) {
            snprintf(fp, sizeof fp, "%s/inputs/%%d/shape/%%d", base);
            return fail(e, fp, i, d,
                        "extent %d of graph input '%s' must be an integer >= 1 "
                        "(at most 2^27 elements per tensor)",
                        d, name);
        }
        in->shape[d] = json_integer_value(x);
        in->numel *= in->shape[d];
    }
    snprintf(fp, sizeof fp, "%s/inputs/%%d/dtype", base);
    r = parse_dtype_field(o, &in->dtype_set, &in->dtype, e, fp, i);
    if (r < 0)
        return r;
    const json_t *v = json_object_get(o, "value");
    if (v) {
        snprintf(fp, sizeof fp, "%s/inputs/%%d/value", base);
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return fail(e, fp, i, 0, "\"value\" of graph input '%s' must be a finite number", name);
        in->has_value = true;
        in->value = json_number_value(v);
    }
    g->any_dtype_unset = g->any_dtype_unset || !in->dtype_set;
    return 0;
}

static int parse_node(nv_graph *g, const json_t *o, int k, const char *base, gerr *e)
{
    char fp[400];
    snprintf(fp, sizeof fp, "%s/nodes/%%d", base);
    if (!json_is_object(o))
        return fail(e, fp, k, 0, "node %d must be an object {\"name\", \"op\", \"inputs\"}", k);
    int r = check_keys(o, node_keys, e, base, "/nodes", k);
    if (r < 0)
        return r;
    nv_graph_node *n = &g->nodes[k];
    n->json_index = k;
    const char *name = json_string_value(json_object_get(o, "name"));
    snprintf(fp, sizeof fp, "%s/nodes/%%d/name", base);
    if (!name || !valid_name(name))
        return fail(e, fp, k, 0,
                    "node %d needs a \"name\" of 1-63 letters, digits, '_', '.' or "
                    "'-', got '%s'",
                    k, name ? name : "(none)");
    if (find_name(g, k, name) != INT32_MIN)
        return fail(e, fp, k, 0,
                    "node name '%s' is used twice (graph inputs and nodes share "
                    "one namespace)",
                    name);
    snprintf(n->name, sizeof n->name, "%s", name);
    const char *op = json_string_value(json_object_get(o, "op"));
    snprintf(fp, sizeof fp, "%s/nodes/%%d/op", base);
    n->op = op ? nv_op_find(op) : NULL;
    if (!n->op)
        return fail(e, fp, k, 0, "node '%s': unknown op '%s' (not in the catalog)", name,
                    op ? op : "(none)");
    const json_t *attrs = json_object_get(o, "attrs");
    snprintf(fp, sizeof fp, "%s/nodes/%%d/attrs", base);
    if (attrs && !json_is_object(attrs))
        return fail(e, fp, k, 0, "node '%s': \"attrs\" must be an object", name);
    char *msg = NULL;
    if (nv_op_parse_attrs(n->op, attrs, &n->attrs, &msg) < 0) {
        r = fail(e, fp, k, 0, "node '%s': %s", name, msg ? msg : "invalid attributes");
        free(msg);
        return r;
    }
    n->attrs_json = attrs ? json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    if (!n->attrs_json)
        return -ENOMEM;
    snprintf(fp, sizeof fp, "%s/nodes/%%d/dtype", base);
    return parse_dtype_field(o, &n->dtype_set, &n->dtype, e, fp, k);
}

/* Resolve node k's input names (any node of the spec, or a graph input). */
static int resolve_inputs(nv_graph *g, const json_t *o, int k, const char *base, gerr *e)
{
    nv_graph_node *n = &g->nodes[k];
    const json_t *ins = json_object_get(o, "inputs");
    char fp[400];
    snprintf(fp, sizeof fp, "%s/nodes/%%d/inputs", base);
    int want = n->op->n_inputs;
    if (n->op->kind == NV_OPK_MATMUL && n->attrs.scale != NV_SCALE_NONE)
        want += 2;
    if (!json_is_array(ins) || (int)json_array_size(ins) != want)
        return fail(e, fp, k, 0, "node '%s': op '%s' takes %d inputs%s, \"inputs\" has %d", n->name,
                    n->op->name, want, want > n->op->n_inputs ? " (a, b and two scales)" : "",
                    json_is_array(ins) ? (int)json_array_size(ins) : 0);
    n->n_in = want;
    snprintf(fp, sizeof fp, "%s/nodes/%%d/inputs/%%d", base);
    for (int i = 0; i < want; i++) {
        const char *nm = json_string_value(json_array_get(ins, (size_t)i));
        int id = nm ? find_name(g, g->n_nodes, nm) : INT32_MIN;
        if (id == INT32_MIN)
            return fail(e, fp, k, i, "node '%s': input '%s' is neither a graph input nor a node",
                        n->name, nm ? nm : "(not a string)");
        if (id == k)
            return fail(e, fp, k, i, "node '%s' reads its own output (a cycle)", n->name);
        n->in[i] = id;
    }
    return 0;
}

/* Kahn's algorithm; ties broken by spec order so the order is stable. */
static int topo_sort(nv_graph *g, const char *base, gerr *e)
{
    int n = g->n_nodes;
    int indeg[NV_GRAPH_MAX_NODES] = {0}, order[NV_GRAPH_MAX_NODES], pos[NV_GRAPH_MAX_NODES];
    bool done[NV_GRAPH_MAX_NODES] = {false};
    for (int k = 0; k < n; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            indeg[k] += g->nodes[k].in[i] >= 0;
    for (int step = 0; step < n; step++) {
        int pick = -1;
        for (int k = 0; k < n && pick < 0; k++)
            if (!done[k] && indeg[k] == 0)
                pick = k;
        if (pick < 0) {
            int k = 0;
            while (done[k])
                k++;
            char fp[400];
            snprintf(fp, sizeof fp, "%s/nodes/%%d", base);
            return fail(e, fp, k, 0, "node '%s' is on a cycle: the graph must be acyclic",
                        g->nodes[k].name);
        }
        done[pick] = true;
        order[step] = pick;
        pos[pick] = step;
        for (int k = 0; k < n; k++)
            for (int i = 0; i < g->nodes[k].n_in; i++)
                indeg[k] -= g->nodes[k].in[i] == pick;
    }
    nv_graph_node *sorted = calloc(n > 0 ? (size_t)n : 1, sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    for (int s = 0; s < n; s++) {
        sorted[s] = g->nodes[order[s]];
        for (int i = 0; i < sorted[s].n_in; i++)
            if (sorted[s].in[i] >= 0)
                sorted[s].in[i] = pos[sorted[s].in[i]];
    }
    free(g->nodes);
    g->nodes = sorted;
    return 0;
}

static int parse_outputs(nv_graph *g, const json_t *outs, const char *base, gerr *e)
{
    char fp[400];
    snprintf(fp, sizeof fp, "%s/outputs", base);
    if (!json_is_array(outs) || json_array_size(outs) == 0 ||
        json_array_size(outs) > NV_GRAPH_MAX_NODES)
        return fail(e, fp, 0, 0, "\"outputs\" must be a non-empty array of node names");
    snprintf(fp, sizeof fp, "%s/outputs/%%d", base);
    for (size_t i = 0; i < json_array_size(outs); i++) {
        const char *nm = json_string_value(json_array_get(outs, i));
        int id = nm ? find_name(g, g->n_nodes, nm) : INT32_MIN;
        if (id < 0)
            return fail(e, fp, (int)i, 0, "output '%s' is not a node of the graph%s",
                        nm ? nm : "(not a string)",
                        id != INT32_MIN ? " (it is a graph input)" : "");
        if (g->nodes[id].is_output)
            return fail(e, fp, (int)i, 0, "output '%s' is listed twice", nm);
        g->nodes[id].is_output = true;
        g->outputs[g->n_outputs++] = id;
    }
    return 0;
}

static int parse_all(nv_graph *g, const json_t *j, const char *base, gerr *e)
{
    char fp[400];
    snprintf(fp, sizeof fp, "%s", base);
    if (!json_is_object(j))
        return fail(e, fp, 0, 0,
                    "the graph must be an object {\"inputs\", \"nodes\", "
                    "\"outputs\"}");
    int r = check_keys(j, graph_keys, e, base, "", -1);
    if (r < 0)
        return r;
    const json_t *ins = json_object_get(j, "inputs"), *nodes = json_object_get(j, "nodes");
    snprintf(fp, sizeof fp, "%s/inputs", base);
    if (!json_is_array(ins) || json_array_size(ins) == 0 ||
        json_array_size(ins) > NV_GRAPH_MAX_INPUTS)
        return fail(e, fp, 0, 0, "\"inputs\" must be an array of 1 to %d graph inputs",
                    NV_GRAPH_MAX_INPUTS);
    snprintf(fp, sizeof fp, "%s/nodes", base);
    if (!json_is_array(nodes) || json_array_size(nodes) == 0 ||
        json_array_size(nodes) > NV_GRAPH_MAX_NODES)
        return fail(e, fp, 0, 0, "\"nodes\" must be an array of 1 to %d nodes", NV_GRAPH_MAX_NODES);
    for (size_t i = 0; i < json_array_size(ins); i++, g->n_inputs++)
        if ((r = parse_input(g, json_array_get(ins, i), (int)i, base, e)) < 0)
            return r;
    g->nodes = calloc(json_array_size(nodes), sizeof *g->nodes);
    if (!g->nodes)
        return -ENOMEM;
    for (size_t k = 0; k < json_array_size(nodes); k++, g->n_nodes++)
        if ((r = parse_node(g, json_array_get(nodes, k), (int)k, base, e)) < 0) {
            g->n_nodes++; /* so nv_graph_free releases its attrs_json */
            return r;
        }
    for (int k = 0; k < g->n_nodes; k++)
        if ((r = resolve_inputs(g, json_array_get(nodes, (size_t)k), k, base, e)) < 0)
            return r;
    if ((r = topo_sort(g, base, e)) < 0)
        return r;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            if (g->nodes[k].in[i] >= 0)
                g->nodes[g->nodes[k].in[i]].n_consumers++;
    return parse_outputs(g, json_object_get(j, "outputs"), base, e);
}

int nv_graph_parse(const json_t *j, const char *base, nv_graph **ret, char **ret_pointer,
                   char **ret_msg)
{
    gerr e = {0};
    nv_graph *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    int r = parse_all(g, j, base ? base : "", &e);
    if (r < 0 || e.msg || e.oom) {
        nv_graph_free(g);
        return finish(&e, r < 0 ? r : -EINVAL, ret_pointer, ret_msg);
    }
    *ret = g;
    return 0;
}

void nv_graph_free(nv_graph *g)
{
    if (!g)
        return;
    for (int k = 0; g->nodes && k < g->n_nodes; k++)
        free(g->nodes[k].attrs_json);
    free(g->nodes);
    free(g);
}

/* The dtype of node n whose input metas are in[]: see graph.h. */
static nv_dtype node_dtype(const nv_graph_node *n, const nv_tensor *const *in)
{
    if (n->dtype_set)
        return n->dtype;
    if (n->op->kind == NV_OPK_CAST)
        return n->attrs.cast_to;
    if (n->op->kind == NV_OPK_MATMUL && nv_dtype_get(in[0]->dtype)->bits <= 8 &&
        nv_dtype_get(in[1]->dtype)->bits <= 8)
        return n->attrs.acc_dtype;
    return in[0]->dtype;
}

int nv_graph_infer(nv_graph *g, nv_dtype dt, const char *base, char **ret_pointer, char **ret_msg)
{
    gerr e = {0};
    char fp[400];
    int r = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (!g->inputs[i].dtype_set)
            g->inputs[i].dtype = dt;
    snprintf(fp, sizeof fp, "%s/nodes/%%d", base ? base : "");
    for (int k = 0; k < g->n_nodes && r == 0; k++) {
        nv_graph_node *n = &g->nodes[k];
        nv_tensor meta[NV_GRAPH_NODE_INPUTS];
        const nv_tensor *in[NV_GRAPH_NODE_INPUTS];
        for (int i = 0; i < n->n_in; i++) {
            memset(&meta[i], 0, sizeof meta[i]);
            int id = n->in[i];
            const nv_graph_input *gi = id < 0 ? &g->inputs[-1 - id] : NULL;
            const nv_graph_node *src = id >= 0 ? &g->nodes[id] : NULL;
            meta[i].dtype = gi ? gi->dtype : src->dtype;
            meta[i].ndim = gi ? gi->ndim : src->ndim;
            memcpy(meta[i].shape, gi ? gi->shape : src->shape, sizeof meta[i].shape);
            meta[i].numel = gi ? gi->numel : src->numel;
            in[i] = &meta[i];
        }
        char err[300];
        r = nv_op_infer(n->op, &n->attrs, n->n_in, in, &n->ndim, n->shape, err, sizeof err);
        if (r != 0) {
            r = fail(&e, fp, n->json_index, 0, "node '%s' (op '%s'): %s", n->name, n->op->name,
                     err);
            break;
        }
        n->dtype = node_dtype(n, in);
        if (n->op->kind != NV_OPK_CAST && !nvo_dtype_supported(n->op, n->dtype)) {
            r = fail(&e, fp, n->json_index, 0, "node '%s': op '%s' cannot produce dtype '%s'",
                     n->name, n->op->name, nv_dtype_name(n->dtype));
            break;
        }
        /* Checked, and limited as graph inputs are: a node's extents come from
         * its inputs', and a matmul's output can outgrow both operands. */
        bool big = false;
        n->numel = 1;
        for (int d = 0; d < n->ndim && !big; d++)
            big = __builtin_mul_overflow(n->numel, n->shape[d], &n->numel) ||
                  n->numel > NV_GRAPH_MAX_EXTENT;
        if (big) {
            r = fail(&e, fp, n->json_index, 0,
                     "node '%s' (op '%s') would output more than %lld elements, the limit per "
                     "tensor",
                     n->name, n->op->name, (long long)NV_GRAPH_MAX_EXTENT);
            break;
        }
    }
    if (r < 0 || e.msg || e.oom)
        return finish(&e, r < 0 ? r : -EINVAL, ret_pointer, ret_msg);
    return 0;
}

char *nv_graph_canonical(const json_t *g)
{
    return json_dumps(g, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

int64_t nv_graph_reduction_len(const nv_graph *g, int k)
{
    const nv_graph_node *n = &g->nodes[k];
    nv_tensor meta[NV_GRAPH_NODE_INPUTS];
    const nv_tensor *in[NV_GRAPH_NODE_INPUTS];
    for (int i = 0; i < n->n_in; i++) {
        int id = n->in[i];
        memset(&meta[i], 0, sizeof meta[i]);
        if (id < 0) {
            const nv_graph_input *gi = &g->inputs[-1 - id];
            meta[i].dtype = gi->dtype;
            meta[i].ndim = gi->ndim;
            memcpy(meta[i].shape, gi->shape, sizeof meta[i].shape);
        } else {
            meta[i].dtype = g->nodes[id].dtype;
            meta[i].ndim = g->nodes[id].ndim;
            memcpy(meta[i].shape, g->nodes[id].shape, sizeof meta[i].shape);
        }
        in[i] = &meta[i];
    }
    return nv_op_reduction_len(n->op, &n->attrs, n->n_in, in);
}
