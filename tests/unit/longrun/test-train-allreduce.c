/* The distributed step's reduction check (worker/kinds/longrun/train/
 * allreduce.c) on hand-built ranks' gradients whose exact sums and bounds are
 * worked out below: u = 2^-24 (fp32), gamma_k = k u / (1 - k u). */
#include <math.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "worker/kinds/longrun/train/train_internal.h"

static nvw_model model;
static nv_tensor *rank_g[64], *red[1];

/* One parameter of n elements; rank r's gradient element e is g[r][e]. */
static void setup(int R, int n, double g[][4], const double *reduced)
{
    memset(&model, 0, sizeof model);
    model.n_params = 1;
    strcpy(model.p[0].name, "fc1.weight");
    int64_t shape[1] = {n};
    for (int r = 0; r < R; r++) {
        nv_tensor_free(rank_g[r]);
        rank_g[r] = nv_tensor_new(NV_DT_FP32, 1, shape);
        for (int e = 0; e < n; e++)
            rank_g[r]->data[e] = g[r][e];
    }
    nv_tensor_free(red[0]);
    red[0] = nv_tensor_new(NV_DT_FP32, 1, shape);
    for (int e = 0; e < n; e++)
        red[0]->data[e] = reduced[e];
}

static bool judge(int R, bool tree, nv_dtype dt, nvw_run *run, char *why, size_t n)
{
    nv_longrun_spec s;
    memset(&s, 0, sizeof s);
    s.ranks = R, s.allreduce_tree = tree, s.allreduce_dtype = dt;
    memset(run, 0, sizeof *run);
    why[0] = 0;
    return nvw_allreduce_ok(&s, &model, rank_g, red, run, why, n);
}

int main(void)
{
    char why[512];
    nvw_run run;
    bool ok; /* judged before tap_ok reads run's counts (argument order) */
    const double u = 0x1p-24;

    /* R = 2: 1 + 2^-24 is a tie in fp32; both neighbours, 1 and 1 + 2^-23, are
     * 2^-24 away, within gamma_1 (1 + 2^-24) > 2^-24; 1 - 2^-24 is 2^-23 away. */
    double g2[2][4] = {{1, 1, 1}, {u, u, u}};
    double r2[3] = {1, 1 + 2 * u, 1 - u};
    setup(2, 3, g2, r2);
    red[0]->data[2] = 1; /* first the two neighbours alone */
    ok = judge(2, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(ok && run.ar_elements == 3 &&
               run.ar_exact == 2,
           "R = 2: both neighbours of a tie within gamma_1; 1 is the exactly rounded sum (%lld "
           "of %lld)", (long long)run.ar_exact, (long long)run.ar_elements);
    red[0]->data[2] = 1 - u;
    ok = judge(2, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(!ok && strstr(why, "fc1.weight[2]") &&
               strstr(why, "gamma_1") && strstr(why, "Higham"),
           "R = 2: 1 - 2^-24 is beyond gamma_1 sum|g_r|, named: %s", why);

    /* A bf16 reduction: 1 + 2^-10 and 2^-10 round to 1 and 2^-10 in bf16, their
     * bf16 sum is 1, the exact sum 1 + 2^-9: an error 2^-9, far beyond fp32's
     * gamma_1 (1 + 2^-9) ~ 2^-24, within bf16's gamma_2 (u = 2^-8: the terms
     * rounded once more, 2 2^-8 / (1 - 2^-7) (1 + 2^-9)). */
    double gb[2][4] = {{1 + 0x1p-10}, {0x1p-10}};
    double rb[1] = {1};
    setup(2, 1, gb, rb);
    ok = judge(2, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(!ok && run.ar_worst > 1e4,
           "bf16 partial sums where fp32 is declared fail (error / bound %.3g)", run.ar_worst);
    ok = judge(2, false, NV_DT_BF16, &run, why, sizeof why);
    tap_ok(ok,
           "the same sum declared bf16 passes (error / bound %.3g)", run.ar_worst);

    /* R = 4, terms 3, -1, 1, 1: exact 4, sum|g| = 6. 4 + 2^-20 errs by 16 u:
     * within ring's gamma_3 6 = 18 u / (1 - 3u), beyond tree's gamma_2 6 = 12 u / (1 - 2u). */
    double g4[4][4] = {{3}, {-1}, {1}, {1}};
    double r4[1] = {4 + 0x1p-20};
    setup(4, 1, g4, r4);
    ok = judge(4, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(ok,
           "R = 4: 16 u within the ring bound 18 u (error / bound %.4f)", run.ar_worst);
    ok = judge(4, true, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(!ok && strstr(why, "gamma_2") &&
               strstr(why, "tree"),
           "R = 4: 16 u beyond the tree bound 12 u, named: %s", why);

    /* A non-finite term: the inf check owns the element, it is not judged. */
    double gi[2][4] = {{INFINITY, 1}, {1, 1}};
    double ri[2] = {0, 2};
    setup(2, 2, gi, ri);
    ok = judge(2, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(ok && run.ar_skipped == 1 &&
               run.ar_elements == 1,
           "a non-finite term is not judged (%lld skipped)", (long long)run.ar_skipped);
    /* A non-finite reduction of finite terms is beyond every bound. */
    red[0]->data[1] = NAN;
    ok = judge(2, false, NV_DT_FP32, &run, why, sizeof why);
    tap_ok(!ok,
           "a NaN reduction of finite terms fails: %s", why);

    nv_longrun_spec s;
    memset(&s, 0, sizeof s);
    s.ranks = 8, s.allreduce_dtype = NV_DT_FP32;
    int ring = nvw_allreduce_k(&s);
    s.allreduce_tree = true;
    int tree = nvw_allreduce_k(&s);
    s.ranks = 5;
    int tree5 = nvw_allreduce_k(&s);
    s.allreduce_dtype = NV_DT_FP16;
    tap_ok(ring == 7 && tree == 3 && tree5 == 3 && nvw_allreduce_k(&s) == 4,
           "k: ring R - 1 = %d, tree ceil(log2 8) = %d, ceil(log2 5) = %d, + 1 for a narrower "
           "dtype", ring, tree, tree5);
    for (int r = 0; r < 64; r++)
        nv_tensor_free(rank_g[r]);
    nv_tensor_free(red[0]);
    return tap_done();
}
