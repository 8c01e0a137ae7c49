/* Gradient jobs (worker/kinds/gradient/gradient.h): cases on a pool of threads, one backend
 * context each; per case the inputs (moved into the op's differentiable
 * domain), the formula check, the device check through nv_backward_call, the
 * determinism check and second order; the result names the failing check, the
 * input, the gradient elements that are off and their values. */
#include "gradient.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/runner/case_pool.h"
#include "core/numerics/inputs.h"
#include "core/numerics/rng.h"
#include "core/ref/backward.h"
#include "gradient_internal.h"
#include "worker/repro/repro_util.h"

/* Case i of the pool (case_pool.h), placed by its index so that the result
 * does not depend on the thread count. */
static json_t *pool_case(void *job, void *ctx, int64_t i)
{
    return nvw_grad_case(job, ctx, i);
}

/* Sets *ret to the message (repro_util.h) and returns 0. */
#define set_err(ret, ...) nvw_set_err((ret), 0, __VA_ARGS__)

static bool listed(const json_t *arr, const char *name)
{
    size_t k;
    json_t *v;
    json_array_foreach(arr, k,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return true;
    return false;
}

/* describe(): refuse inference-only backends and, in deterministic mode,
 * ops the backend declares non-deterministic. */
static int read_describe(gjob *j, char **ret_err)
{
    void *ctx = NULL;
    char err[512] = "";
    if (j->table->open(j->options, &ctx, err, sizeof err) != NV_OK) {
        set_err(ret_err, "backend '%s' failed to open: %s", j->backend_spec, err);
        return -ENODEV;
    }
    const char *text = j->table->describe ? j->table->describe(ctx) : NULL;
    json_error_t jerr;
    j->describe = text ? json_loads(text, 0, &jerr) : json_object();
    j->table->close(ctx);
    if (!json_is_object(j->describe)) {
        set_err(ret_err, "backend '%s' returned an invalid describe() JSON", j->backend_spec);
        return -EPROTO;
    }
    const char *op = j->g->base->op->name;
    if (json_is_true(json_object_get(j->describe, "inference_only")) || !j->table->backward) {
        set_err(ret_err,
                "backend '%s' is inference-only (describe: \"inference_only\": true%s): "
                "it offers no backward, so gradient job for op '%s' cannot run; op jobs still "
                "run on it",
                j->backend_spec, j->table->backward ? "" : ", no backward entry", op);
        return -ENOTSUP;
    }
    j->nondeterministic = listed(json_object_get(j->describe, "nondeterministic_ops"), op);
    if (j->nondeterministic && j->g->base->deterministic) {
        set_err(ret_err,
                "op '%s' is non-deterministic on backend '%s' (listed in describe's "
                "\"nondeterministic_ops\", e.g. reduce=random) and the job requires "
                "\"deterministic\": true; refused instead of run",
                op, j->backend_spec);
        return -ENOTSUP;
    }
    j->saved = json_object_get(json_object_get(j->describe, "saved"), op);
    return 0;
}

static json_t *result(const gjob *j)
{
    int64_t n = j->g->base->n_cases, passed = 0, failed = 0, errors = 0;
    json_t *cases = json_array();
    for (int64_t i = 0; cases && i < n; i++) {
        const char *v = json_string_value(json_object_get(j->cases[i], "verdict"));
        passed += v && !strcmp(v, "passed");
        failed += v && !strcmp(v, "failed");
        errors += !v || !strcmp(v, "error");
        json_array_append(cases, j->cases[i]);
    }
    json_t *build = json_object_get(j->spec_json, "build");
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:{s:I, s:I, s:I, s:I}, s:o}", "verdict",
        failed   ? "failed"
        : errors ? "error"
                 : "passed",
        "kind", "gradient", "op", j->g->base->op->name, "backend", j->backend_spec, "device",
        json_object_get(j->describe, "device"), "mode", json_object_get(j->describe, "mode"),
        "contract", json_object_get(j->describe, "contract"), "build",
        build ? build : json_object_get(j->describe, "build"), "summary", "cases", (json_int_t)n,
        "passed", (json_int_t)passed, "failed", (json_int_t)failed, "errors", (json_int_t)errors,
        "cases", cases);
    if (r)
        json_object_set_new(r, "gradient", nvw_grad_settings(j));
    return r;
}

int nvw_run_gradient(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                     json_t **ret_result, char **ret_err)
{
    gjob j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.lock, NULL);
    j.spec_json = spec;
    j.backend_spec = backend_spec;
    j.opts = opts;
    nvw_backend *b = NULL;
    char *ptr = NULL, *msg = NULL, *e = NULL;
    int r = nv_gradspec_parse(spec, &j.g, &ptr, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            set_err(&e, "%s%s%s", ptr ? ptr : "", ptr && *ptr ? ": " : "",
                    msg ? msg : "invalid gradient job");
        goto out;
    }
    char err[512] = "";
    r = nvw_backend_load(backend_spec, &b, err, sizeof err);
    if (r < 0) {
        set_err(&e, "%s", err[0] ? err : "could not load the backend");
        r = r == -ENOMEM ? r : -ENODEV;
        goto out;
    }
    j.table = nvw_backend_table(b);
    j.options = nvw_backend_options(b);
    if ((r = read_describe(&j, &e)) < 0)
        goto out;
    j.cases = calloc((size_t)j.g->base->n_cases + 1, sizeof *j.cases);
    if (!j.cases) {
        r = -ENOMEM;
        goto out;
    }
    nvw_case_pool_job pj = {.opts = opts,
                            .backend = {j.table, j.options, backend_spec},
                            .n = j.g->base->n_cases,
                            .run = pool_case,
                            .job = &j,
                            .cases = j.cases,
                            .what = "gradient case"};
    if ((r = nvw_case_pool_run_job(&pj, &e)) < 0)
        goto out;
    json_t *res = result(&j);
    if (!res) {
        r = -ENOMEM;
        goto out;
    }
    *ret_result = res;
out:
    if (r == -ENOMEM && !e)
        set_err(&e, "out of memory");
    if (r < 0 && ret_err)
        *ret_err = e;
    else
        free(e);
    for (int64_t i = 0; j.cases && i < j.g->base->n_cases; i++)
        json_decref(j.cases[i]);
    free(j.cases);
    json_decref(j.describe);
    nv_gradspec_free(j.g);
    nvw_backend_free(b);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&j.lock);
    return r;
}
