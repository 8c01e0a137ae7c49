/* The job runner (run.h): validate the spec, load the backend, run the cases on a
 * pool of threads (one backend context each), place each case's result by its
 * index so the output does not depend on the thread count, and build the result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/runner/case_pool.h"
#include "worker/kinds/fused/fused.h"
#include "worker/kinds/gradient/gradient.h"
#include "worker/kinds/longrun/longrun.h"
#include "op_internal.h"

static int set_err(char **ret_err, const char *fmt, const char *a, const char *b)
{
    if (!ret_err)
        return 0;
    char *s = NULL;
    if (asprintf(&s, fmt, a, b) < 0)
        return -ENOMEM;
    *ret_err = s;
    return 0;
}

/* Case i of the pool (case_pool.h), placed by its index so that the result
 * does not depend on the thread count. */
static json_t *pool_case(void *job, void *ctx, int64_t i)
{
    return nvw_case_run(job, ctx, i);
}

/* Open one context to read describe(); note whether the op is declared
 * non-deterministic by the backend. */
static int read_describe(nvw_job *job, char **ret_err)
{
    void *ctx = NULL;
    char err[512] = "";
    if (job->table->open(job->options, &ctx, err, sizeof err) != NV_OK) {
        set_err(ret_err, "backend '%s' failed to open: %s", job->backend_spec, err);
        return -ENODEV;
    }
    const char *text = job->table->describe ? job->table->describe(ctx) : NULL;
    json_error_t jerr;
    json_t *d = text ? json_loads(text, 0, &jerr) : json_object();
    job->table->close(ctx);
    if (!d || !json_is_object(d)) {
        json_decref(d);
        set_err(ret_err, "backend '%s' returned an invalid describe() JSON%s", job->backend_spec,
                "");
        return -EPROTO;
    }
    job->describe = d;
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(d, "nondeterministic_ops"), k, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), job->spec->op->name) == 0)
            job->op_nondeterministic = true;
    }
    return 0;
}

int nvw_run_job(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err)
{
    if (nv_gradspec_is(spec)) /* kind "gradient": worker/kinds/gradient/run.c */
        return nvw_run_gradient(spec, backend_spec, opts, ret_result, ret_err);
    if (nv_fusedspec_is(spec)) /* kind "fused": worker/kinds/fused/run.c */
        return nvw_run_fused(spec, backend_spec, opts, ret_result, ret_err);
    if (nv_longrun_is(spec)) /* kind "longrun": worker/kinds/longrun/run.c */
        return nvw_run_longrun(spec, backend_spec, opts, ret_result, ret_err);
    nvw_job job;
    memset(&job, 0, sizeof job);
    pthread_mutex_init(&job.lock, NULL);
    job.spec_json = spec;
    job.backend_spec = backend_spec;
    job.opts = opts;
    nvw_backend *b = NULL;
    char *ptr = NULL, *msg = NULL, *e = NULL;
    int r = nv_jobspec_parse(spec, &job.spec, &ptr, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            set_err(&e, ptr && *ptr ? "%s: %s" : "%s%s", ptr ? ptr : "",
                    msg ? msg : "invalid job spec");
        goto out;
    }
    char err[512] = "";
    r = nvw_backend_load(backend_spec, &b, err, sizeof err);
    if (r < 0) {
        set_err(&e, "%s%s", err[0] ? err : "could not load the backend", "");
        r = r == -ENOMEM ? r : -ENODEV;
        goto out;
    }
    job.table = nvw_backend_table(b);
    job.options = nvw_backend_options(b);
    r = read_describe(&job, &e);
    if (r < 0)
        goto out;
    job.cases = calloc((size_t)job.spec->n_total, sizeof *job.cases);
    if (!job.cases) {
        r = -ENOMEM;
        goto out;
    }
    nvw_case_pool_job pj = {.opts = opts,
                            .backend = {job.table, job.options, backend_spec},
                            .n = job.spec->n_total,
                            .run = pool_case,
                            .job = &job,
                            .cases = job.cases,
                            .what = "case"};
    r = nvw_case_pool_run_job(&pj, &e);
    if (r < 0)
        goto out;
    json_t *result = nvw_job_result(&job);
    if (!result) {
        r = -ENOMEM;
        goto out;
    }
    *ret_result = result;
out:
    if (r == -ENOMEM && !e)
        set_err(&e, "out of memory%s%s", "", "");
    if (r < 0 && ret_err)
        *ret_err = e;
    else
        free(e);
    if (job.cases)
        for (int64_t i = 0; i < job.spec->n_total; i++)
            json_decref(job.cases[i]);
    free(job.cases);
    json_decref(job.describe);
    nv_jobspec_free(job.spec);
    nvw_backend_free(b);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&job.lock);
    return r;
}
