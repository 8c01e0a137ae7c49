/* Minimization cost (bench/RESULTS.md "Minimization"): for each injected
 * fault, the failing case is minimized twice on the same input with the same
 * probe budget and deadline, by numval's minimizer and by a plain ddmin
 * (Zeller's ddmin2 deleting slices) as the baseline; the signature is fixed, every probe forks (as
 * in production), both results are re-verified. Prints one Markdown table row per (fault, method).
 * - op faults: built in memory (inputs from the project's generator, class
 *   from a first probe); numval = window bisection + ddmin over non-neutral
 *   elements + value simplification; baseline = slices along each dim.
 * - fused faults (--fused, minimize_bench_fused.c) and gradient faults
 *   (--grad, minimize_bench_grad.c): stored failure artifacts written by
 *   `numval-worker run --artifacts` (bench/minimize_bench.sh writes them).
 *
 * usage: minimize_bench PLUGIN_DROPSUM_SO [BUDGET] [DEADLINE_S] [--no-op]
 *          [--fused LABEL ARTIFACT BACKEND]... [--grad LABEL ARTIFACT BACKEND]... */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/inputs.h"
#include "minimize_bench.h"
#include "worker/kinds/op/minimize.h"

typedef struct fault {
    const char *name, *backend, *op;
    int ndim;
    int64_t shape[2];
    const char *tolerance; /* JSON, or NULL: the op's shipped default */
} fault;

static json_t *tolerance_json(const nv_op_def *op, const char *text)
{
    if (text)
        return json_loads(text, 0, NULL);
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    nv_tolerance t;
    if (nv_op_default_tolerance(op, &a, NV_DT_FP32, &t) < 0)
        return NULL;
    return nv_tolerance_to_json(&t);
}

/* The failing case as an artifact: spec, fp32 inputs of the "normal" class
 * (seed 5), and a placeholder output replaced after the first probe. */
static nvw_repro *make_case(const fault *f)
{
    const nv_op_def *op = nv_op_find(f->op);
    json_t *tol = tolerance_json(op, f->tolerance);
    json_t *shape = json_array();
    for (int d = 0; d < f->ndim; d++)
        json_array_append_new(shape, json_integer(f->shape[d]));
    json_t *spec =
        json_pack("{ss ss s[s] s[O] s[s] si so}", "kind", "op", "op", f->op, "dtypes", "fp32",
                  "shapes", shape, "inputs", "normal", "seed", 5, "tolerance", json_deep_copy(tol));
    json_t *man = json_pack("{ss so ss ss ss ss so s{}}", "format", "numval-artifact", "spec", spec,
                            "dtype", "fp32", "out_dtype", "fp32", "layout", "contiguous",
                            "failure_class", "pending", "tolerance", tol, "mode");
    json_decref(shape);
    int64_t n = f->shape[0] * (f->ndim > 1 ? f->shape[1] : 1);
    double *v = malloc((size_t)n * sizeof *v);
    float *x = malloc((size_t)n * sizeof *x);
    nv_input_request rq = {.domain = nv_op_input_domain(op, 0),
                           .dtype = NV_DT_FP32,
                           .target = NV_DT_FP32,
                           .cls = NV_IN_NORMAL,
                           .seed = 5,
                           .index_range = f->shape[f->ndim - 1],
                           .reduction_len = op->kind == NV_OPK_REDUCE ? f->shape[f->ndim - 1] : 0};
    nv_inputs_generate(&rq, v, n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)v[i];
    nv_artifact *a = nv_artifact_new();
    nv_artifact_set_manifest(a, man);
    nv_artifact_add_tensor(a, "input:0", NV_DT_FP32, f->ndim, f->shape, x, (size_t)n * 4);
    int64_t one = 1;
    float z = 0;
    nv_artifact_add_tensor(a, "output:0", NV_DT_FP32, 1, &one, &z, 4);
    nvw_repro *rc = NULL;
    char *err = NULL;
    if (nvw_repro_from_artifact(a, &rc, &err) < 0)
        fprintf(stderr, "minimize_bench: %s\n", err ? err : "cannot build the case");
    free(err);
    nv_artifact_free(a);
    json_decref(man);
    free(v);
    free(x);
    return rc;
}

static void run_method(const fault *f, const nvw_probe_env *env, bool plain, int budget,
                       double deadline)
{
    nvw_min_opts o = {
        .budget = budget, .deadline_s = deadline, .gate_runs = 5, .plain_ddmin = plain};
    nvw_min_result m;
    if (nvw_minimize(env, &o, &m) < 0) {
        printf("| %s | %s | probe failed |\n", f->name, plain ? "plain ddmin" : "numval");
        return;
    }
    printf("| %s | %s | %s | %d | %.2f s | %s | - | %lld -> %lld | %lld -> %lld | %s |\n", f->name,
           plain ? "plain ddmin" : "numval", env->rc->failure_class, m.probes, m.seconds, m.stop,
           (long long)m.numel_before, (long long)m.numel_after, (long long)m.nonneutral_before,
           (long long)m.nonneutral_after, m.verified ? "yes" : "no");
    fflush(stdout);
    nvw_min_result_done(&m);
}

static void bench_fault(const fault *f, int budget, double deadline)
{
    nvw_repro *rc = make_case(f);
    nvw_backend *b = NULL;
    char err[512] = "";
    if (!rc || nvw_backend_load(f->backend, &b, err, sizeof err) < 0) {
        fprintf(stderr, "minimize_bench: %s: %s\n", f->name, err);
        nvw_repro_free(rc);
        return;
    }
    nvw_probe_env env = {.rc = rc,
                         .table = nvw_backend_table(b),
                         .options = nvw_backend_options(b),
                         .timeout_ms = 60000,
                         .isolate = true};
    nvw_probe_out p;
    if (nvw_probe(&env, rc->in, &p) == 0 && p.cls[0] && p.out_bytes) {
        /* The first run's class and output are the stored failure. */
        snprintf(rc->failure_class, sizeof rc->failure_class, "%s", p.cls);
        free(rc->out_bytes);
        rc->out_bytes = p.out_bytes;
        rc->out_nbytes = p.out_nbytes;
        rc->out_dtype = p.out_dtype;
        rc->out_ndim = p.out_ndim;
        memcpy(rc->out_shape, p.out_shape, sizeof rc->out_shape);
        run_method(f, &env, false, budget, deadline);
        run_method(f, &env, true, budget, deadline);
    } else {
        printf("| %s | - | does not fail (%s) |\n", f->name, p.cls);
        nvw_probe_out_done(&p);
    }
    nvw_backend_free(b);
    nvw_repro_free(rc);
}

#define MAX_STORED 16

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: minimize_bench PLUGIN_DROPSUM_SO [BUDGET] [DEADLINE_S] [--no-op] "
                        "[--fused LABEL ARTIFACT BACKEND]... [--grad LABEL ARTIFACT BACKEND]...\n");
        return 2;
    }
    int budget = 1000, n_pos = 0, n_fused = 0, n_grad = 0;
    double deadline = 120;
    bool op_faults = true;
    mb_case fused[MAX_STORED], grad[MAX_STORED];
    for (int i = 2; i < argc; i++) {
        bool f = !strcmp(argv[i], "--fused"), g = !strcmp(argv[i], "--grad");
        if (f || g) {
            if (i + 3 >= argc || (f ? n_fused : n_grad) == MAX_STORED) {
                fprintf(stderr, "minimize_bench: '%s' needs LABEL ARTIFACT BACKEND\n", argv[i]);
                return 2;
            }
            mb_case c = {argv[i + 1], argv[i + 2], argv[i + 3]};
            if (f)
                fused[n_fused++] = c;
            else
                grad[n_grad++] = c;
            i += 3;
        } else if (!strcmp(argv[i], "--no-op")) {
            op_faults = false;
        } else if (n_pos < 2) {
            if (n_pos++ == 0)
                budget = atoi(argv[i]);
            else
                deadline = atof(argv[i]);
        } else {
            fprintf(stderr, "minimize_bench: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char drop[4200];
    snprintf(drop, sizeof drop, "plugin:%s?fault=drop", argv[1]);
    static const char *bound =
        "{\"metric\": \"bound\", \"c\": 1, \"growth\": \"log2n\", \"reason_code\": "
        "\"reduction_length\", \"reason\": \"pairwise-or-better fp32 summation, Higham 4.2\"}";
    static const char *ulp1 = "{\"metric\": \"ulp\", \"max_ulp\": 1, \"reason_code\": "
                              "\"approximation_error\", \"reason\": \"exp documented to 1 ulp\"}";
    const fault faults[] = {
        {"dropsum: element 5000 of axis > 4096 skipped", drop, "sum", 2, {128, 8192}, bound},
        {"emu accum=bf16 sum (Higham bound)", "emu:accum=bf16", "sum", 2, {16, 4096}, NULL},
        {"emu transcendental=fast exp (1 ulp)", "emu:transcendental=fast", "exp", 1, {65536}, ulp1},
    };
    printf("| fault | method | class | probes | time | stop | nodes | elements | non-neutral | "
           "re-verified |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; op_faults && i < sizeof faults / sizeof faults[0]; i++)
        bench_fault(&faults[i], budget, deadline);
    int bad = 0;
    for (int i = 0; i < n_fused; i++)
        bad += mb_fused(&fused[i], budget, deadline) < 0;
    for (int i = 0; i < n_grad; i++)
        bad += mb_grad(&grad[i], budget, deadline) < 0;
    return bad ? 1 : 0;
}
