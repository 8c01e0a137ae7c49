/* Benchmark (bench/RESULTS.md "Model jobs"): one model forward on a backend,
 * without the references a model job computes of every node (in fp64 and in
 * the model dtype: at 512 tokens they take the job's minutes, not the
 * device). The forward is the model kind's own: eager, every node through the
 * backend's op entry with every output kept (worker/runner/graph_exec.h, the
 * loop the model and fused kinds run), or the whole model in one graph call
 * with capture (an exec harness is sent the graph request, as a model job
 * with "execution": "graph" sends it). Inputs and weights are the model
 * kind's seeded ones for case 0 (worker/runner/params.h).
 *
 * usage: model_forward_bench JOB.json BACKEND eager|graph[:script] REPS
 * Prints one JSON line: {"backend", "execution", "nodes", "seconds": [wall
 * seconds per forward]}. Wall time (the harness is another process); the
 * driver is bench/model_torch_bench.py --forward-only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/spec/modelspec.h"
#include "worker/backends/exec.h"
#include "worker/backends/loader.h"
#include "worker/backends/views/views.h"
#include "worker/runner/graph_exec.h"
#include "worker/runner/params.h"

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The graph request's options for an exec harness (worker/kinds/model/device.c). */
static char *exec_options(const nv_modelspec *s, const nv_graph *g, const char *compile)
{
    json_t *params = json_array();
    for (int i = 0; i < g->n_inputs; i++)
        if (s->inputs[i].is_param)
            json_array_append_new(params, json_string(g->inputs[i].name));
    json_t *o = json_pack("{s:s, s:s, s:o}", "compile", compile, "autocast", "none", "params",
                          params);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

static int one_graph(const nv_backend *t, void *ctx, const nv_modelspec *s, const nv_graph *g,
                     nv_tensor_view *inv, const char *opts)
{
    int nout = g->n_outputs + g->n_nodes;
    nv_tensor_view *v = calloc((size_t)nout, sizeof *v);
    if (!v)
        return -ENOMEM;
    nv_graph_call call = {.graph_json = s->graph_text,
                          .capture = 1,
                          .n_inputs = g->n_inputs,
                          .inputs = inv,
                          .n_outputs = nout,
                          .outputs = v};
    char err[512] = "";
    char *compiled = NULL;
    int br = opts ? nvw_exec_graph(ctx, &call, opts, &compiled, err, sizeof err)
                  : t->graph(ctx, &call, err, sizeof err);
    free(compiled);
    if (br != NV_OK)
        fprintf(stderr, "model_forward_bench: graph call: %d: %s\n", br, err);
    for (int i = 0; br == NV_OK && i < nout; i++)
        if (v[i].data && t->release_tensor)
            t->release_tensor(ctx, &v[i]);
    free(v);
    return br == NV_OK ? 0 : -EIO;
}

static int one_eager(const nv_backend *t, void *ctx, const nv_graph *g, nv_tensor_view *inv)
{
    nv_tensor **out = calloc((size_t)g->n_nodes, sizeof *out);
    if (!out)
        return -ENOMEM;
    nvw_eager_fail f;
    int r = nvw_graph_eager(t, ctx, g, inv, out, &f);
    if (r == 1)
        fprintf(stderr, "model_forward_bench: node %s: %d: %s\n", g->nodes[f.node].name, f.status,
                f.err);
    for (int k = 0; k < g->n_nodes; k++)
        nv_tensor_free(out[k]);
    free(out);
    return r == 0 ? 0 : -EIO;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: model_forward_bench JOB.json BACKEND eager|graph[:script] REPS\n");
        return 2;
    }
    json_error_t je;
    json_t *spec = json_load_file(argv[1], 0, &je);
    nv_modelspec *s = NULL;
    char *ptr = NULL, *msg = NULL;
    if (!spec || nv_modelspec_parse(spec, &s, &ptr, &msg) < 0) {
        fprintf(stderr, "model_forward_bench: %s: %s %s\n", argv[1], ptr ? ptr : je.text,
                msg ? msg : "");
        return 2;
    }
    nv_dtype dt;
    int sample;
    nv_modelspec_case(s, 0, &dt, &sample);
    nv_graph g;
    if (nvw_case_graph(s->graph, dt, &g) < 0)
        return fprintf(stderr, "model_forward_bench: the model does not infer\n"), 2;
    nv_tensor *in[NV_GRAPH_MAX_INPUTS];
    nv_tensor_view inv[NV_GRAPH_MAX_INPUTS];
    for (int i = 0; i < g.n_inputs; i++) {
        const nv_graph_input *gi = &g.inputs[i];
        in[i] = nv_tensor_new(gi->dtype, gi->ndim, gi->shape);
        if (!in[i])
            return 1;
        nvw_param_fill(in[i], &s->inputs[i], gi->name, s->seed, sample);
        if (nvw_view_from_tensor(in[i], &inv[i]) < 0)
            return 1;
    }
    nvw_backend *b = NULL;
    char err[512] = "";
    void *ctx = NULL;
    if (nvw_backend_load(argv[2], &b, err, sizeof err) < 0 ||
        nvw_backend_table(b)->open(nvw_backend_options(b), &ctx, err, sizeof err) != NV_OK)
        return fprintf(stderr, "model_forward_bench: backend '%s': %s\n", argv[2], err), 2;
    const nv_backend *t = nvw_backend_table(b);
    bool graph = !strncmp(argv[3], "graph", 5);
    const char *compile = !strcmp(argv[3], "graph:script") ? "script" : "none";
    char *opts = graph && t == nvw_exec_table() ? exec_options(s, &g, compile) : NULL;
    int reps = atoi(argv[4]), r = 0;
    printf("{\"backend\": \"%s\", \"execution\": \"%s\", \"nodes\": %d, \"seconds\": [", argv[2],
           argv[3], g.n_nodes);
    for (int k = 0; k < reps && r == 0; k++) {
        double t0 = wall_s();
        r = graph ? one_graph(t, ctx, s, &g, inv, opts) : one_eager(t, ctx, &g, inv);
        printf("%s%.4f", k ? ", " : "", wall_s() - t0);
        fflush(stdout);
    }
    printf("]}\n");
    t->close(ctx);
    nvw_backend_free(b);
    for (int i = 0; i < g.n_inputs; i++) {
        nvw_view_free(&inv[i]);
        nv_tensor_free(in[i]);
    }
    free(opts);
    free(g.nodes);
    nv_modelspec_free(s);
    json_decref(spec);
    free(ptr);
    free(msg);
    return r == 0 ? 0 : 1;
}
