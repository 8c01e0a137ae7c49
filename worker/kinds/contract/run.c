/* Contract jobs (contract.h): the job skeleton of worker/runner/job.h with the
 * contract kind's steps. Two rounds of probes on the case pool (one backend
 * context per thread, each probe's JSON placed by its index): conversions and
 * arithmetic first, then accumulation and transcendentals, which model the
 * device with the rounding and FTZ the first round measured. The result holds
 * the measured contract per dtype (summary.c) and its differences from
 * describe()'s (judge.c). */
#include "contract.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract_internal.h"
#include "worker/runner/case_pool.h"
#include "worker/runner/err.h"
#include "worker/runner/job.h"

typedef enum task_kind { T_CONV, T_ARITH, T_ACCUM, T_MATMUL, T_TRANS } task_kind;

typedef struct task {
    task_kind kind;
    nv_dtype a, b; /* conversions: from a to b; else the dtype a */
} task;

typedef struct ct_job {
    nvw_job_base b;
    nv_contract_spec *s;
    task *tasks; /* round 1 then round 2 */
    int64_t n1, n2;
    json_t **slots; /* n1 + n2 probe results (NULL: refused by the device) */
    bool *refused;
    ct_known known;
    double seconds;
} ct_job;

static int ct_parse(void *job, char **ret_ptr, char **ret_msg)
{
    ct_job *c = job;
    return nv_contract_parse(c->b.spec_json, &c->s, ret_ptr, ret_msg);
}

/* Whether converting a value of src to dst can round: dst lacks some value of
 * src (fewer significand bits, less range or no subnormals where src has them). */
static bool narrowing(nv_dtype src, nv_dtype dst)
{
    const nv_dtype_info *s = nv_dtype_get(src), *d = nv_dtype_get(dst);
    return d->mant_bits < s->mant_bits || d->max_finite < s->max_finite ||
           d->min_subnormal > s->min_subnormal;
}

static int ct_setup(void *job, char **ret_err)
{
    ct_job *c = job;
    const nv_contract_spec *s = c->s;
    int64_t cap = (int64_t)NV_DT_COUNT * NV_DT_COUNT + 5 * NV_DT_COUNT;
    c->tasks = calloc((size_t)cap, sizeof *c->tasks);
    if (!c->tasks)
        return -ENOMEM;
    int64_t n = 0;
    for (int a = 0; a < NV_DT_COUNT && s->probe[NV_CPROBE_CONVERSION]; a++)
        for (int b = 0; b < NV_DT_COUNT; b++) {
            if (a == b || !s->dtype[a] || !s->dtype[b])
                continue;
            /* Wide sources (fp32, fp64) have boundary sets for rounding
             * conversions only; narrow ones are run exhaustively into all. */
            if (nv_dtype_get((nv_dtype)a)->bits > 16 && !narrowing((nv_dtype)a, (nv_dtype)b))
                continue;
            c->tasks[n++] = (task){T_CONV, (nv_dtype)a, (nv_dtype)b};
        }
    for (int a = 0; a < NV_DT_COUNT && s->probe[NV_CPROBE_ARITHMETIC]; a++)
        if (s->dtype[a])
            c->tasks[n++] = (task){T_ARITH, (nv_dtype)a, (nv_dtype)a};
    c->n1 = n;
    /* Transcendentals first: the exhaustive 16-bit sweeps are the longest
     * probes, so they start before the short ones fill the other threads. */
    for (int a = 0; a < NV_DT_COUNT && s->probe[NV_CPROBE_TRANSCENDENTAL]; a++)
        if (s->dtype[a])
            c->tasks[n++] = (task){T_TRANS, (nv_dtype)a, (nv_dtype)a};
    for (int a = 0; a < NV_DT_COUNT && s->probe[NV_CPROBE_ACCUMULATION]; a++)
        if (s->dtype[a]) {
            c->tasks[n++] = (task){T_ACCUM, (nv_dtype)a, (nv_dtype)a};
            c->tasks[n++] = (task){T_MATMUL, (nv_dtype)a, (nv_dtype)a};
        }
    c->n2 = n - c->n1;
    c->slots = calloc((size_t)(n > 0 ? n : 1), sizeof *c->slots);
    c->refused = calloc((size_t)(n > 0 ? n : 1), sizeof *c->refused);
    if (!c->slots || !c->refused)
        return -ENOMEM;
    (void)ret_err;
    return 0;
}

/* One probe; the case JSON slot holds the probe's JSON or null (refused). */
static json_t *run_task(ct_job *c, void *ctx, int64_t i)
{
    const task *t = &c->tasks[i];
    ct_dev d = {.t = c->b.table, .ctx = ctx};
    bool refused = false;
    json_t *j = NULL;
    switch (t->kind) {
    case T_CONV:
        j = ct_probe_conversion(&d, t->a, t->b, &refused);
        break;
    case T_ARITH:
        j = ct_probe_arithmetic(&d, t->a, c->s->seed, &refused);
        break;
    case T_ACCUM:
        j = ct_probe_accumulation(&d, t->a, &c->known, c->s->repeats, c->s->seed, &refused);
        break;
    case T_MATMUL:
        j = ct_probe_matmul(&d, t->a, &c->known, c->s->repeats, c->s->seed, &refused);
        break;
    case T_TRANS:
        j = ct_probe_transcendental(&d, t->a, &c->known, c->s->fp32_sweep, c->s->seed, &refused);
        break;
    }
    c->refused[i] = refused;
    if (refused)
        return json_null();
    return j;
}

static json_t *round1(void *job, void *ctx, int64_t i)
{
    return run_task(job, ctx, i);
}

static json_t *round2(void *job, void *ctx, int64_t i)
{
    ct_job *c = job;
    return run_task(c, ctx, c->n1 + i);
}

static const char *str_or(const char *s)
{
    return s ? s : "";
}

/* What round 1 measured that round 2 models: the arithmetic rounding (from
 * the conversion fp32 -> bf16, else fp64 -> fp32, else any conversion with one
 * direction, with its saturation) and fp32's FTZ/DAZ (else the first dtype's). */
static void learn(ct_job *c)
{
    int best = -1, arith_seen = 0;
    for (int64_t i = 0; i < c->n1; i++) {
        const task *t = &c->tasks[i];
        const json_t *j = c->slots[i];
        if (t->kind == T_CONV) {
            const char *r = json_string_value(json_object_get(j, "rounding"));
            nv_rounding rr = NV_ROUND_NEAREST_EVEN;
            bool ok = false;
            for (int k = 0; r && k < 5; k++)
                if (!strcmp(r, ct_rounding_name((nv_rounding)k)))
                    rr = (nv_rounding)k, ok = true;
            int score = !ok                                        ? -1
                        : t->a == NV_DT_FP32 && t->b == NV_DT_BF16 ? 3
                        : t->a == NV_DT_FP64 && t->b == NV_DT_FP32 ? 2
                                                                   : 1;
            if (score > best) {
                best = score;
                c->known.rounding_known = true;
                c->known.rounding = rr;
                c->known.saturate = !strcmp(
                    str_or(json_string_value(json_object_get(j, "saturation"))), "saturate");
            }
        } else if (t->kind == T_ARITH && json_is_boolean(json_object_get(j, "ftz")) &&
                   (t->a == NV_DT_FP32 || !arith_seen)) {
            arith_seen = t->a == NV_DT_FP32 ? 2 : 1;
            c->known.ftz = json_is_true(json_object_get(j, "ftz"));
            c->known.daz = json_is_true(json_object_get(j, "daz"));
        }
    }
}

static int pool(ct_job *c, int64_t n, nvw_case_json_fn fn, json_t **slots, char **ret_err)
{
    if (n == 0)
        return 0;
    nvw_case_pool_job pj = {.opts = c->b.opts,
                            .backend = {c->b.table, c->b.options, c->b.backend_spec},
                            .n = n,
                            .run = fn,
                            .job = c,
                            .cases = slots,
                            .what = "contract probe"};
    return nvw_case_pool_run_job(&pj, ret_err);
}

static int ct_run(void *job, char **ret_err)
{
    ct_job *c = job;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = pool(c, c->n1, round1, c->slots, ret_err);
    if (r < 0)
        return r;
    learn(c);
    r = pool(c, c->n2, round2, c->slots + c->n1, ret_err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return r;
}

static json_t *ct_result(void *job)
{
    ct_job *c = job;
    json_t *conv = json_array(), *arith = json_object(), *acc = json_object(),
           *trans = json_object(), *mm = json_object();
    if (!conv || !arith || !acc || !trans || !mm)
        goto oom;
    for (int64_t i = 0; i < c->n1 + c->n2; i++) {
        const task *t = &c->tasks[i];
        json_t *j = c->slots[i];
        if (!j || json_is_null(j))
            continue;
        const char *dt = nv_dtype_name(t->a);
        if (t->kind == T_CONV)
            json_array_append(conv, j);
        else
            json_object_set(t->kind == T_ARITH   ? arith
                            : t->kind == T_ACCUM ? acc
                            : t->kind == T_MATMUL ? mm
                                                  : trans,
                            dt, j);
    }
    json_t *measured =
        json_pack("{s:o, s:o, s:o, s:o, s:o}", "conversions", conv, "arithmetic", arith,
                  "accumulation", acc, "matmul", mm, "transcendental", trans);
    conv = arith = acc = trans = mm = NULL;
    if (!measured)
        goto oom;
    json_t *summary = ct_summary(measured, c->s->dtype);
    if (!summary) {
        json_decref(measured);
        return NULL;
    }
    json_object_set_new(measured, "contract", summary);
    int64_t errors = 0;
    json_t *judged_list = json_array();
    json_t *mism = !judged_list   ? NULL
                   : c->s->judge ? ct_judge(c->b.describe, measured, judged_list)
                                 : json_array();
    int64_t judged = (int64_t)json_array_size(judged_list);
    for (int64_t i = 0; i < c->n1 + c->n2; i++)
        errors += json_object_get(c->slots[i], "error") != NULL;
    if (!mism) {
        json_decref(judged_list);
        json_decref(measured);
        return NULL;
    }
    const json_t *desc = c->b.describe;
    const json_t *build = json_object_get(c->b.spec_json, "build");
    /* summary: each judged field is one check (a case of the common summary) */
    int64_t failed = (int64_t)json_array_size(mism);
    return json_pack(
        "{s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I},"
        " s:I, s:f}",
        "verdict",
        failed   ? "failed"
        : errors ? "error"
                 : "passed",
        "kind", "contract", "backend", c->b.backend_spec, "device", json_object_get(desc, "device"),
        "mode", json_object_get(desc, "mode"), "contract", json_object_get(desc, "contract"),
        "build", build ? build : json_object_get(desc, "build"), "measured", measured, "mismatches",
        mism, "judged", judged_list, "summary", "cases", (json_int_t)judged, "passed",
        (json_int_t)(judged - failed), "failed", (json_int_t)failed, "errors", (json_int_t)errors,
        "probes", (json_int_t)(c->n1 + c->n2), "seconds", c->seconds);
oom:
    json_decref(conv);
    json_decref(arith);
    json_decref(acc);
    json_decref(trans);
    json_decref(mm);
    return NULL;
}

static void ct_done(void *job)
{
    ct_job *c = job;
    for (int64_t i = 0; c->slots && i < c->n1 + c->n2; i++)
        json_decref(c->slots[i]);
    free(c->slots);
    free(c->refused);
    free(c->tasks);
    nv_contract_free(c->s);
}

static const nvw_runner contract_runner = {.what = "contract probe",
                                           .invalid = "invalid contract job spec",
                                           .parse = ct_parse,
                                           .setup = ct_setup,
                                           .run = ct_run,
                                           .result = ct_result,
                                           .done = ct_done};

int nvw_run_contract(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                     json_t **ret_result, char **ret_err)
{
    ct_job c;
    memset(&c, 0, sizeof c);
    return nvw_runner_run(&contract_runner, &c.b, &c, spec, backend_spec, opts, ret_result,
                          ret_err);
}
