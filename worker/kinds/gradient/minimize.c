/* Minimization of a gradient failure (repro_grad.h): the reproduction gate,
 * then worker/repro/ddmin.h's delta-debugging engine over the inputs and the output
 * gradient (the cotangent) with the signature (op, attrs, dtype, mode, check,
 * failure class) fixed, then re-verification. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "repro_grad.h"

#define DEFAULT_GATE 5
#define MAX_LISTED 64

/* Tensors 0..n_in-1 are the inputs, n_in the output gradient. */
static int g_test(void *ud, nv_tensor *const *cand)
{
    const nvw_genv *env = ud;
    nvw_gprobe_out p;
    int r = nvw_gprobe(env, cand, cand[env->gr->n_in], &p);
    if (r < 0)
        return r;
    int same = nvw_gprobe_same(env->gr, &p);
    nvw_gprobe_out_done(&p);
    return same;
}

static double g_neutral(void *ud, int i)
{
    return nvw_grad_neutral_value(((const nvw_genv *)ud)->gr, i);
}

/* The output shape the inputs infer, or -1. */
static int infer(const nvw_grepro *gr, nv_tensor *const *in, int64_t *os)
{
    const nv_jobspec *js = gr->gs->base;
    int od;
    char err[256];
    if (nv_op_infer(js->op, &js->attrs, gr->n_in, (const nv_tensor *const *)in, &od, os, err,
                    sizeof err) != 0)
        return -1;
    return od;
}

/* A candidate is a case the gradient runner could have drawn: its inputs fit
 * the op, the cotangent is shaped like the output, and the inputs lie in the
 * op's differentiable domain (nv_op_grad_domain leaves them unchanged; it
 * always raises max's line maxima, so max is exempt and never neutralized). */
static bool g_valid(void *ud, nv_tensor *const *cand)
{
    const nvw_grepro *gr = ((const nvw_genv *)ud)->gr;
    int64_t os[NV_MAX_DIMS];
    int od = infer(gr, cand, os);
    const nv_tensor *gy = cand[gr->n_in];
    if (od < 0 || gy->ndim != od)
        return false;
    for (int d = 0; d < od; d++)
        if (gy->shape[d] != os[d])
            return false;
    if (!strcmp(gr->gs->base->op->name, "max"))
        return true;
    nv_tensor *cp[NV_JOB_MAX_TENSORS] = {0};
    bool ok = true;
    for (int i = 0; i < gr->n_in; i++)
        ok &= (cp[i] = nv_tensor_contiguous(cand[i])) != NULL;
    ok = ok && nv_op_grad_domain(gr->gs->base->op, &gr->gs->base->attrs, gr->n_in, cp) == 0;
    for (int i = 0; ok && i < gr->n_in; i++)
        for (int64_t k = 0; ok && k < cp[i]->numel; k++)
            ok = memcmp(&cp[i]->data[k], &cand[i]->data[k], sizeof(double)) == 0;
    for (int i = 0; i < gr->n_in; i++)
        nv_tensor_free(cp[i]);
    return ok;
}

/* The dim of t matching dim d (extent e) of a tensor of rank nd: the
 * right-aligned one (broadcasting), else the same index; -1 when neither has
 * extent e. */
static int match_dim(const nv_tensor *t, int nd, int d, int64_t e)
{
    int r = d - (nd - t->ndim);
    if (r >= 0 && r < t->ndim && t->shape[r] == e)
        return r;
    return d < t->ndim && t->shape[d] == e ? d : -1;
}

static int take(const nv_tensor *src, int d, const int64_t *idx, int64_t k, nv_tensor **ret)
{
    if (d < 0)
        return (*ret = nv_tensor_contiguous(src)) ? 0 : -ENOMEM;
    return nvw_dd_slice_tensor(src, d, idx, k, ret);
}

/* Input 0 along d, the inputs with a matching dim along it; the cotangent
 * along the one output dim that changed (-EINVAL when the change is not one
 * dim going from the old extent to k). */
static int g_slice(void *ud, nv_tensor *const *cur, int d, const int64_t *idx, int64_t k,
                   nv_tensor **out)
{
    const nvw_grepro *gr = ((const nvw_genv *)ud)->gr;
    int n = gr->n_in, r = 0;
    int64_t e = cur[0]->shape[d];
    memset(out, 0, sizeof(out[0]) * (size_t)(n + 1));
    for (int i = 0; r == 0 && i < n; i++)
        r = take(cur[i], i == 0 ? d : match_dim(cur[i], cur[0]->ndim, d, e), idx, k, &out[i]);
    int64_t os[NV_MAX_DIMS];
    int od = r == 0 ? infer(gr, out, os) : -1;
    const nv_tensor *gy = cur[n];
    int changed = -1, n_changed = 0;
    for (int j = 0; od >= 0 && od == gy->ndim && j < od; j++)
        if (os[j] != gy->shape[j]) {
            changed = j;
            n_changed++;
        }
    if (r == 0 && (od < 0 || od != gy->ndim || n_changed > 1 ||
                   (n_changed == 1 && (os[changed] != k || gy->shape[changed] != e))))
        r = -EINVAL;
    if (r == 0)
        r = take(gy, changed, idx, k, &out[n]);
    if (r < 0)
        for (int i = 0; i <= n; i++) {
            nv_tensor_free(out[i]);
            out[i] = NULL;
        }
    return r;
}

static int verify(const nvw_genv *env, nv_tensor *const *t, nvw_gmin_result *res)
{
    int ok = 0;
    for (int k = 0; k < res->gate_runs; k++) {
        nvw_gprobe_out p;
        int r = nvw_gprobe(env, t, t[env->gr->n_in], &p);
        if (r < 0)
            return r;
        ok += nvw_gprobe_same(env->gr, &p);
        nvw_gprobe_out_done(&res->last);
        res->last = p;
    }
    res->verified = ok == res->gate_runs;
    return 0;
}

static int64_t numel(nv_tensor *const *t, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += t[i]->numel;
    return s;
}

int nvw_gminimize(const nvw_genv *env, const nvw_min_opts *o, nvw_gmin_result *ret)
{
    memset(ret, 0, sizeof *ret);
    const nvw_grepro *gr = env->gr;
    nvw_dd_problem p = {.n = gr->n_in + 1,
                        .ud = (void *)env,
                        .test = g_test,
                        .valid = g_valid,
                        .neutral = g_neutral,
                        .slice = g_slice};
    ret->n = p.n;
    ret->gate_runs = o->gate_runs > 0 ? o->gate_runs : DEFAULT_GATE;
    ret->stop = "done";
    for (int i = 0; i < gr->n_in; i++)
        ret->t[i] = nv_tensor_contiguous(gr->in[i]);
    ret->t[gr->n_in] = nv_tensor_contiguous(gr->gy);
    for (int i = 0; i < p.n; i++)
        if (!ret->t[i]) {
            nvw_gmin_result_done(ret);
            return -ENOMEM;
        }
    ret->numel_before = numel(ret->t, p.n);
    ret->nonneutral_before = nvw_dd_nonneutral(&p, ret->t);
    double start = nvw_dd_now();
    int r = nvw_grepro_gate(env, ret->gate_runs, &ret->gate_failed, &ret->gate_bits, &ret->last);
    /* Fewer than half the runs failing: flaky, not minimized. */
    ret->flaky = 2 * ret->gate_failed < ret->gate_runs;
    if (r == 0 && o->progress)
        fprintf(o->progress,
                "minimize: gate %d/%d failed as '%s' in check '%s' (%d "
                "bit-identical)%s\n",
                ret->gate_failed, ret->gate_runs, gr->cls, gr->check, ret->gate_bits,
                ret->flaky ? ": flaky, not minimized" : "");
    if (r == 0 && !ret->flaky)
        r = nvw_dd_minimize(&p, o, ret->t, start, &ret->probes, &ret->stop);
    if (r == 0 && !ret->flaky)
        r = verify(env, ret->t, ret);
    ret->seconds = nvw_dd_now() - start;
    if (r < 0) {
        nvw_gmin_result_done(ret);
        return r;
    }
    ret->numel_after = numel(ret->t, p.n);
    ret->nonneutral_after = nvw_dd_nonneutral(&p, ret->t);
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

void nvw_gmin_result_done(nvw_gmin_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        nv_tensor_free(r->t[i]);
        r->t[i] = NULL;
    }
    nvw_gprobe_out_done(&r->last);
}

/* The elements not at their neutral value (at most MAX_LISTED). */
static json_t *non_neutral(const nvw_grepro *gr, const nvw_gmin_result *m)
{
    json_t *a = json_array();
    for (int i = 0; a && i < m->n; i++) {
        double nv = nvw_grad_neutral_value(gr, i);
        for (int64_t k = 0; k < m->t[i]->numel && json_array_size(a) < MAX_LISTED; k++) {
            double v = m->t[i]->data[k];
            if (!isnan(nv) && v == nv && signbit(v) == signbit(nv))
                continue;
            char name[32];
            snprintf(name, sizeof name, i == gr->n_in ? "grad_output:0" : "input:%d", i);
            json_array_append_new(a, json_pack("{s:s, s:I, s:f}", "tensor", name, "index",
                                               (json_int_t)k, "value", isfinite(v) ? v : 0.0));
        }
    }
    return a;
}

static json_t *extra_keys(const nvw_grepro *gr, const nvw_gmin_result *m)
{
    return json_pack(
        "{s:o, s:s, s:{s:i, s:i, s:i}, s:{s:s, s:i, s:f, s:s, s:I, s:I, s:I, s:I, s:b, s:o}}",
        "signature", nvw_grepro_signature(gr, NULL), "minimized_from", gr->sha, "repro_rate",
        "runs", m->gate_runs, "failed", m->gate_failed, "bit_identical", m->gate_bits, "minimized",
        "method",
        "gradient: ddmin over the shape window, neutral elements of the inputs and the output "
        "gradient, simple values",
        "probes", m->probes, "seconds", m->seconds, "stop", m->stop, "elements_before",
        (json_int_t)m->numel_before, "elements_after", (json_int_t)m->numel_after,
        "non_neutral_before", (json_int_t)m->nonneutral_before, "non_neutral_after",
        (json_int_t)m->nonneutral_after, "verified", m->verified, "non_neutral",
        non_neutral(gr, m));
}

int nvw_gminimized_artifact(const nvw_grepro *gr, const nvw_gmin_result *m, const json_t *extra,
                            uint8_t **ret_buf, size_t *ret_len, char sha[65])
{
    if (!m->last.buf)
        return -EINVAL;
    nv_artifact *a = NULL;
    int r = nv_artifact_decode(m->last.buf, m->last.len, &a, NULL);
    if (r < 0)
        return r;
    json_t *keys = extra_keys(gr, m);
    r = keys && json_object_update(a->manifest, keys) == 0 ? 0 : -ENOMEM;
    if (r == 0 && extra)
        r = json_object_update(a->manifest, (json_t *)extra) == 0 ? 0 : -ENOMEM;
    if (r == 0)
        r = nv_artifact_encode(a, 0, ret_buf, ret_len, sha);
    json_decref(keys);
    nv_artifact_free(a);
    return r;
}
