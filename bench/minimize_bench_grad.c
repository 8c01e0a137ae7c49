/* Gradient rows of the minimization bench (minimize_bench.h): numval's
 * gradient minimizer (nvw_gminimize: shape window, neutral elements of the
 * inputs and the cotangent, simple values) against the engine's plain mode
 * (nvw_min_opts.plain_ddmin: Zeller's ddmin2 deleting slices along each dim of
 * the inputs and the cotangent together, no neutral values, no value
 * simplification) on the same stored failure: same gate, same forked probe
 * (nvw_gprobe), same signature (class and check), same re-verification. */
#include <stdio.h>
#include <stdlib.h>

#include "minimize_bench.h"
#include "worker/kinds/gradient/repro_grad.h"

static void row(const mb_case *c, const nvw_genv *env, bool plain, int budget, double deadline)
{
    nvw_min_opts o = {
        .budget = budget, .deadline_s = deadline, .gate_runs = MB_GATE_RUNS, .plain_ddmin = plain};
    nvw_gmin_result m;
    const char *method = plain ? "plain ddmin" : "numval";
    if (nvw_gminimize(env, &o, &m) < 0) {
        printf("| %s | %s | probe failed |\n", c->label, method);
        return;
    }
    if (m.flaky)
        printf("| %s | %s | flaky (%d of %d gate runs failed) |\n", c->label, method, m.gate_failed,
               m.gate_runs);
    else
        printf("| %s | %s | %s (%s check) | %d | %.2f s | %s | - | %lld -> %lld | %lld -> %lld | "
               "%s |\n",
               c->label, method, env->gr->cls, env->gr->check, m.probes, m.seconds, m.stop,
               (long long)m.numel_before, (long long)m.numel_after, (long long)m.nonneutral_before,
               (long long)m.nonneutral_after, m.verified ? "yes" : "no");
    fflush(stdout);
    nvw_gmin_result_done(&m);
}

int mb_grad(const mb_case *c, int budget, double deadline)
{
    nvw_grepro *gr = NULL;
    nvw_backend *b = NULL;
    char *err = NULL, berr[512] = "";
    if (nvw_grepro_load(c->artifact, &gr, &err) < 0 ||
        nvw_backend_load(c->backend, &b, berr, sizeof berr) < 0) {
        printf("| %s | - | cannot load: %s%s |\n", c->label, err ? err : "", berr);
        free(err);
        nvw_grepro_free(gr);
        return -1;
    }
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = c->backend, .timeout_ms = MB_TIMEOUT_MS};
    row(c, &env, false, budget, deadline);
    row(c, &env, true, budget, deadline);
    nvw_backend_free(b);
    nvw_grepro_free(gr);
    return 0;
}
