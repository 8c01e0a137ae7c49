/* Benchmark (bench/RESULTS.md "Fused jobs"): the cost of a fused case, i.e. the
 * three executions (reference, unfused node by node, fused with capture) plus
 * the layer-by-layer comparison, against the reference execution alone, for the
 * attention graph of suites/fused.json (S = Q K^T, Z = S / 8, P = softmax(Z),
 * O = P V; d = 64, bf16) at sequence lengths 512 and 4096 on emu's default mode.
 * Also the cost of capture itself: the fused graph call with capture against
 * the same call without it.
 *
 * usage: fused_bench [-L L1,L2,...] [-b BACKEND_SPEC]
 * Single-threaded; times are process CPU time (the machine is shared). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/numerics/inputs.h"
#include "core/spec/fusedspec.h"
#include "worker/backends/loader.h"
#include "worker/kinds/fused/fused.h"

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static json_t *attention_spec(long L)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"kind\": \"fused\", \"graph\": {\"inputs\": [{\"name\": \"q\", \"shape\": [%ld, "
             "64]}, {\"name\": \"kT\", \"shape\": [64, %ld]}, {\"name\": \"v\", \"shape\": [%ld, "
             "64]}, {\"name\": \"inv_sqrt_d\", \"shape\": [%ld, %ld], \"value\": 0.125}], "
             "\"nodes\": [{\"name\": \"s\", \"op\": \"matmul\", \"inputs\": [\"q\", \"kT\"]}, "
             "{\"name\": \"z\", \"op\": \"mul\", \"inputs\": [\"s\", \"inv_sqrt_d\"]}, {\"name\": "
             "\"p\", \"op\": \"softmax\", \"inputs\": [\"z\"], \"attrs\": {\"axis\": -1}}, "
             "{\"name\": \"o\", \"op\": \"matmul\", \"inputs\": [\"p\", \"v\"]}], \"outputs\": "
             "[\"o\"]}, \"dtypes\": [\"bf16\"], \"inputs\": [\"normal\"], \"seed\": 5}",
             L, L, L, L, L);
    json_error_t e;
    return json_loads(text, 0, &e);
}

/* The fused graph call alone, with and without capture (best of 2 each). */
static int capture_cost(const char *backend, const nv_fusedspec *s, double *ret_plain,
                        double *ret_capture)
{
    nvw_backend *b = NULL;
    char err[512];
    if (nvw_backend_load(backend, &b, err, sizeof err) < 0) {
        fprintf(stderr, "fused_bench: %s\n", err);
        return -1;
    }
    const nv_backend *t = nvw_backend_table(b);
    void *ctx = NULL;
    nv_graph *g = s->graph;
    nv_tensor_view in[NV_GRAPH_MAX_INPUTS];
    int r = t->open(nvw_backend_options(b), &ctx, err, sizeof err);
    for (int i = 0; r == 0 && i < g->n_inputs; i++) {
        nv_tensor *x = nv_tensor_new(NV_DT_BF16, g->inputs[i].ndim, g->inputs[i].shape);
        nv_input_request rq = {.dtype = NV_DT_BF16,
                               .target = NV_DT_BF16,
                               .cls = NV_IN_NORMAL,
                               .seed = 5 + (uint64_t)i,
                               .case_index = 0};
        r = x ? nv_inputs_generate(&rq, x->data, x->numel) : -ENOMEM;
        if (r == 0)
            r = nvw_view_from_tensor(x, &in[i]);
        nv_tensor_free(x);
    }
    double best[2] = {1e30, 1e30};
    for (int rep = 0; r == 0 && rep < 4; rep++) {
        int cap = rep & 1;
        nv_tensor_view out[1 + NV_GRAPH_MAX_NODES];
        nv_graph_call call = {.graph_json = s->graph_text,
                              .capture = cap,
                              .n_inputs = g->n_inputs,
                              .inputs = in,
                              .n_outputs = g->n_outputs + (cap ? g->n_nodes : 0),
                              .outputs = out};
        double t0 = cpu_ms();
        r = t->graph(ctx, &call, err, sizeof err);
        double dt = cpu_ms() - t0;
        for (int i = 0; r == 0 && i < call.n_outputs; i++)
            t->release_tensor(ctx, &out[i]);
        if (dt < best[cap])
            best[cap] = dt;
    }
    for (int i = 0; i < g->n_inputs; i++)
        nvw_view_free(&in[i]);
    if (ctx)
        t->close(ctx);
    nvw_backend_free(b);
    *ret_plain = best[0];
    *ret_capture = best[1];
    return r;
}

static int bench_one(const char *backend, long L)
{
    json_t *spec = attention_spec(L);
    nv_fusedspec *s = NULL;
    if (!spec || nv_fusedspec_parse(spec, &s, NULL, NULL) < 0) {
        fprintf(stderr, "fused_bench: bad spec for L=%ld\n", L);
        json_decref(spec);
        return 1;
    }
    nvw_run_opts o = {.threads = 1};
    json_t *res = NULL;
    char *err = NULL;
    double t0 = cpu_ms();
    int r = nvw_run_fused(spec, backend, &o, &res, &err);
    double total_job = cpu_ms() - t0;
    if (r < 0) {
        fprintf(stderr, "fused_bench: %s\n", err ? err : "job failed to run");
        free(err);
        json_decref(spec);
        nv_fusedspec_free(s);
        return 1;
    }
    json_t *c = json_array_get(json_object_get(res, "cases"), 0);
    json_t *tm = json_object_get(c, "timing_ms");
    double ref = json_number_value(json_object_get(tm, "reference"));
    double unf = json_number_value(json_object_get(tm, "unfused"));
    double fus = json_number_value(json_object_get(tm, "fused_capture"));
    double cmp = json_number_value(json_object_get(tm, "compare"));
    double plain = 0, cap = 0;
    capture_cost(backend, s, &plain, &cap);
    double all = ref + unf + fus + cmp;
    printf("L=%-5ld verdict=%s  reference %9.0f ms | unfused %9.0f | fused+capture %9.0f | "
           "compare (local refs + metrics) %9.0f | all %9.0f (whole job incl. inputs %9.0f)\n",
           L, json_string_value(json_object_get(res, "verdict")), ref, unf, fus, cmp, all,
           total_job);
    printf("        all / reference = %.2fx (overhead %+.0f%%); fused graph call: no capture "
           "%.0f ms, capture %.0f ms (capture overhead %+.1f%%)\n",
           all / ref, 100 * (all / ref - 1), plain, cap, 100 * (cap / plain - 1));
    json_decref(res);
    json_decref(spec);
    nv_fusedspec_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    const char *lens = "512,4096", *backend = "emu";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-L"))
            lens = argv[i + 1];
        else if (!strcmp(argv[i], "-b"))
            backend = argv[i + 1];
    }
    printf("fused_bench: attention (d=64, bf16, inputs normal), backend '%s', 1 thread, "
           "process CPU time\n",
           backend);
    int rc = 0;
    for (const char *p = lens; *p;) {
        char *end;
        long L = strtol(p, &end, 10);
        if (L > 0)
            rc |= bench_one(backend, L);
        p = *end ? end + 1 : end;
    }
    return rc;
}
