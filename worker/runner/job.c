/* The job skeleton (job.h). */
#include "job.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_pool.h"
#include "determinism.h"
#include "err.h"
#include "worker/backends/loader.h"

int nvw_read_describe(const nv_backend *table, const char *options, const char *who, json_t **ret,
                      char **ret_err)
{
    void *ctx = NULL;
    char err[512] = "";
    if (table->open(options, &ctx, err, sizeof err) != NV_OK)
        return nvw_set_err(ret_err, -ENODEV, "%s failed to open: %s", who, err);
    const char *text = table->describe ? table->describe(ctx) : NULL;
    json_error_t jerr;
    json_t *d = text ? json_loads(text, 0, &jerr) : json_object();
    table->close(ctx);
    if (!json_is_object(d)) {
        json_decref(d);
        return nvw_set_err(ret_err, -EPROTO, "%s returned an invalid describe() JSON", who);
    }
    *ret = d;
    return 0;
}

json_t *nvw_json_num(double x)
{
    if (isnan(x))
        return json_string("nan");
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

/* The backend loaded and its describe() read: base->table, options, describe. */
static int open_backend(const nvw_runner *k, nvw_job_base *base, void *job, nvw_backend **ret_b,
                        char **ret_err)
{
    char err[512] = "";
    int r = nvw_backend_load(base->backend_spec, ret_b, err, sizeof err);
    if (r < 0) {
        nvw_set_err(ret_err, r, "%s", err[0] ? err : "could not load the backend");
        return r == -ENOMEM ? r : -ENODEV;
    }
    base->table = nvw_backend_table(*ret_b);
    base->options = nvw_backend_options(*ret_b);
    if (k->check && (r = k->check(job, ret_err)) < 0)
        return r;
    char who[600];
    if (k->backend_unnamed)
        snprintf(who, sizeof who, "backend");
    else
        snprintf(who, sizeof who, "backend '%s'", base->backend_spec);
    return nvw_read_describe(base->table, base->options, who, &base->describe, ret_err);
}

/* A spec demanding "deterministic": true on a kind that configures: ask the
 * backend on a context of its own; the pool's contexts are configured too when
 * it honours it. */
static int probe_determinism(const nvw_runner *k, nvw_job_base *base, char **ret_err)
{
    if (!k->configures || !json_is_true(json_object_get(base->spec_json, "deterministic")))
        return 0;
    base->det_demanded = true;
    void *ctx = NULL;
    char err[512] = "";
    if (base->table->open(base->options, &ctx, err, sizeof err) != NV_OK)
        return nvw_set_err(ret_err, -ENODEV, "backend '%s' failed to open: %s", base->backend_spec,
                           err);
    base->det_answer = nvw_det_configure(base->table, ctx, base->det_why, sizeof base->det_why);
    base->table->close(ctx);
    return 0;
}

/* The cases of the pool, or the kind's own tasks. */
static int run_cases(const nvw_runner *k, nvw_job_base *base, void *job, char **ret_err)
{
    if (!k->run_case)
        return k->run(job, ret_err);
    base->cases = calloc((size_t)base->n_cases + 1, sizeof *base->cases);
    if (!base->cases)
        return -ENOMEM;
    nvw_case_pool_job pj = {.opts = base->opts,
                            .backend = {base->table, base->options, base->backend_spec,
                                        base->det_demanded && base->det_answer == NVW_DET_HONOURED},
                            .n = base->n_cases,
                            .run = k->run_case,
                            .job = job,
                            .cases = base->cases,
                            .what = k->what};
    return nvw_case_pool_run_job(&pj, ret_err);
}

int nvw_runner_run(const nvw_runner *k, nvw_job_base *base, void *job, const json_t *spec,
                   const char *backend_spec, const nvw_run_opts *opts, json_t **ret_result,
                   char **ret_err)
{
    pthread_mutex_init(&base->lock, NULL);
    base->spec_json = spec;
    base->backend_spec = backend_spec;
    base->opts = opts;
    nvw_backend *b = NULL;
    char *ptr = NULL, *msg = NULL, *e = NULL;
    int r = k->parse(job, &ptr, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            nvw_set_err(&e, r, "%s%s%s", ptr ? ptr : "", ptr && *ptr ? ": " : "",
                        msg ? msg : k->invalid);
        goto out;
    }
    if ((r = open_backend(k, base, job, &b, &e)) < 0 || (r = probe_determinism(k, base, &e)) < 0)
        goto out;
    if (k->setup && (r = k->setup(job, &e)) < 0)
        goto out;
    if ((r = run_cases(k, base, job, &e)) < 0)
        goto out;
    json_t *result = k->result(job);
    if (result && base->det_demanded &&
        (nvw_det_record(result, base->det_answer) < 0 ||
         (base->det_answer != NVW_DET_HONOURED && nvw_det_fail_cases(result, base->det_why) < 0))) {
        json_decref(result);
        result = NULL;
    }
    if (!result) {
        r = -ENOMEM;
        goto out;
    }
    *ret_result = result;
out:
    if (r == -ENOMEM && !e)
        nvw_set_err(&e, r, "out of memory");
    if (r < 0 && ret_err)
        *ret_err = e;
    else
        free(e);
    for (int64_t i = 0; base->cases && i < base->n_cases; i++)
        json_decref(base->cases[i]);
    free(base->cases);
    base->cases = NULL;
    if (k->done)
        k->done(job);
    json_decref(base->describe);
    base->describe = NULL;
    nvw_backend_free(b);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&base->lock);
    return r;
}
