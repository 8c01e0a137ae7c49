/* Delta debugging of an op case (minimize.h) with repro/ddmin.h's engine. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minimize.h"

#define DEFAULT_GATE 5

double nvw_neutral_value(const nvw_repro *rc, int i)
{
    const nv_op_def *op = rc->js->op;
    if (i >= op->n_inputs || op->inputs[i].is_index)
        return NAN;
    const char *n = op->name;
    const nv_dtype_info *di = nv_dtype_get(rc->in[i]->dtype);
    /* max ignores -inf; exp(-inf) = 0 removes a term of logsumexp and the softmax
     * family (IEEE 754-2019 §9.2.1 exp(-inf) = +0). Without infinities the
     * lowest finite value is the nearest thing (its exp underflows to 0). */
    if (!strcmp(n, "max") || !strcmp(n, "logsumexp") || !strcmp(n, "softmax") ||
        !strcmp(n, "log_softmax"))
        return di->has_inf ? -INFINITY : -di->max_finite;
    /* 1 where 0 is outside the op's domain or a pole: log, sqrt family, divisor, pow. */
    if (!strcmp(n, "log") || !strcmp(n, "log2") || !strcmp(n, "rsqrt") ||
        !strcmp(n, "reciprocal") || !strcmp(n, "pow") || !strcmp(n, "mul") ||
        (!strcmp(n, "div") && i == 1))
        return 1.0;
    return 0.0;
}

int64_t nvw_nonneutral(const nvw_repro *rc, int n_in, nv_tensor *const *in)
{
    int64_t n = 0;
    for (int i = 0; i < n_in; i++) {
        double nv = nvw_neutral_value(rc, i);
        for (int64_t k = 0; k < in[i]->numel; k++)
            n += isnan(nv) || !nvw_dd_is_neutral(in[i]->data[k], nv);
    }
    return n;
}

/* ---- op cases --------------------------------------------------------------- */

static int op_test(void *ud, nv_tensor *const *cand)
{
    const nvw_probe_env *env = ud;
    nvw_probe_out p;
    int r = nvw_probe(env, cand, &p);
    if (r < 0)
        return r;
    int same = strcmp(p.cls, env->rc->failure_class) == 0;
    nvw_probe_out_done(&p);
    return same;
}

static double op_neutral(void *ud, int i)
{
    return nvw_neutral_value(((const nvw_probe_env *)ud)->rc, i);
}

static int verify(const nvw_probe_env *env, nv_tensor *const *cur, nvw_min_result *res)
{
    int ok = 0;
    for (int k = 0; k < res->gate_runs; k++) {
        nvw_probe_out p;
        int r = nvw_probe(env, cur, &p);
        if (r < 0)
            return r;
        ok += strcmp(p.cls, env->rc->failure_class) == 0;
        if (k == res->gate_runs - 1) {
            nvw_probe_out_done(&res->last);
            res->last = p;
        } else {
            nvw_probe_out_done(&p);
        }
    }
    res->verified = ok == res->gate_runs;
    return 0;
}

int nvw_minimize(const nvw_probe_env *env, const nvw_min_opts *o, nvw_min_result *ret)
{
    memset(ret, 0, sizeof *ret);
    const nvw_repro *rc = env->rc;
    nvw_dd_problem p = {.n = rc->n_in, .ud = (void *)env, .test = op_test, .neutral = op_neutral};
    nv_tensor *cur[NVW_DD_MAX_TENSORS] = {0};
    ret->gate_runs = o->gate_runs > 0 ? o->gate_runs : DEFAULT_GATE;
    ret->stop = "done";
    ret->n_in = rc->n_in;
    for (int i = 0; i < rc->n_in; i++)
        ret->numel_before += rc->in[i]->numel;
    ret->nonneutral_before = nvw_nonneutral(rc, rc->n_in, rc->in);
    double start = nvw_dd_now();
    int r = nvw_repro_gate(env, ret->gate_runs, &ret->gate_failed, &ret->gate_bits, &ret->last);
    if (r < 0)
        return r;
    /* Fewer than half the runs failing: flaky, not minimized. */

    ret->flaky = 2 * ret->gate_failed < ret->gate_runs;
    if (o->progress)
        fprintf(o->progress, "minimize: gate %d/%d failed as '%s' (%d bit-identical)%s\n",
                ret->gate_failed, ret->gate_runs, rc->failure_class, ret->gate_bits,
                ret->flaky ? ": flaky, not minimized" : "");
    if ((r = nvw_dd_copy_set(rc->in, rc->n_in, cur)) < 0)
        return r;
    if (!ret->flaky)
        r = nvw_dd_minimize(&p, o, cur, start, &ret->probes, &ret->stop);
    if (r == 0 && !ret->flaky)
        r = verify(env, cur, ret);
    ret->seconds = nvw_dd_now() - start;
    if (r < 0) {
        nvw_dd_free_set(cur, rc->n_in);
        nvw_probe_out_done(&ret->last);
        return r;
    }
    memcpy(ret->in, cur, sizeof(cur[0]) * (size_t)rc->n_in);
    for (int i = 0; i < rc->n_in; i++)
        ret->numel_after += ret->in[i]->numel;
    ret->nonneutral_after = nvw_nonneutral(rc, rc->n_in, ret->in);
    if (o->progress)
        fprintf(o->progress,
                "minimize: %s after %d probes in %.2f s: %lld -> %lld elements, %lld -> %lld "
                "non-neutral%s\n",
                ret->stop, ret->probes, ret->seconds, (long long)ret->numel_before,
                (long long)ret->numel_after, (long long)ret->nonneutral_before,
                (long long)ret->nonneutral_after,
                ret->flaky      ? ""
                : ret->verified ? ", re-verified"
                                : ", NOT re-verified");
    return 0;
}

void nvw_min_result_done(nvw_min_result *r)
{
    if (!r)
        return;
    nvw_dd_free_set(r->in, r->n_in);
    nvw_probe_out_done(&r->last);
}
