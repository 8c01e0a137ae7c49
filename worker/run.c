/* The job runner (run.h): validate the spec, load the backend, run the cases on a
 * pool of threads (one backend context each), place each case's result by its
 * index so the output does not depend on the thread count, and build the result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_fused.h"
#include "numerics/refmath.h"
#include "run_gradient.h"
#include "run_longrun.h"
#include "run_internal.h"

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

/* Record the first infrastructure error and stop the other threads. */
static void infra_error(nvw_job *job, const char *msg)
{
    pthread_mutex_lock(&job->lock);
    if (!job->infra_err)
        job->infra_err = strdup(msg);
    pthread_mutex_unlock(&job->lock);
    atomic_store(&job->abort, 1);
}

static bool cancelled(const nvw_job *job)
{
    return job->opts && job->opts->cancel && *job->opts->cancel;
}

static void *worker_main(void *arg)
{
    nvw_job *job = arg;
    void *ctx = NULL;
    char err[512] = "";
    if (job->table->open(job->options, &ctx, err, sizeof err) != NV_OK) {
        char msg[700];
        snprintf(msg, sizeof msg, "backend '%s' failed to open a context: %s", job->backend_spec,
                 err);
        infra_error(job, msg);
        return NULL;
    }
    int64_t total = job->spec->n_total;
    while (!atomic_load(&job->abort) && !cancelled(job)) {
        int64_t i = atomic_fetch_add(&job->next, 1);
        if (i >= total)
            break;
        json_t *c = nvw_case_run(job, ctx, i);
        if (!c) {
            infra_error(job, "out of memory while running a case");
            break;
        }
        job->cases[i] = c;
        pthread_mutex_lock(&job->lock);
        int64_t done = ++job->done;
        if (job->opts && job->opts->progress)
            job->opts->progress(job->opts->ud, done, total);
        pthread_mutex_unlock(&job->lock);
    }
    job->table->close(ctx);
    nv_ref_thread_done(); /* MPFR caches this thread filled */
    return NULL;
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

static int thread_count(const nvw_run_opts *o, int64_t total)
{
    long n = o && o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 256)
        n = 256;
    if (n > total)
        n = (long)total;
    return (int)n;
}

static int run_pool(nvw_job *job, char **ret_err)
{
    int n = thread_count(job->opts, job->spec->n_total);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (!th)
        return -ENOMEM;
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, worker_main, job) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    if (started == 0) {
        set_err(ret_err, "could not start a runner thread%s%s", "", "");
        return -EAGAIN;
    }
    if (job->infra_err) {
        set_err(ret_err, "%s%s", job->infra_err, "");
        return -EIO;
    }
    if (job->done < job->spec->n_total) {
        char *s = NULL;
        if (ret_err && asprintf(&s, "job cancelled after %lld of %lld cases", (long long)job->done,
                                (long long)job->spec->n_total) >= 0)
            *ret_err = s;
        return -ECANCELED;
    }
    return 0;
}

int nvw_run_job(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err)
{
    if (nv_gradspec_is(spec)) /* kind "gradient": run_gradient.c */
        return nvw_run_gradient(spec, backend_spec, opts, ret_result, ret_err);
    if (nv_fusedspec_is(spec)) /* kind "fused": run_fused.c */
        return nvw_run_fused(spec, backend_spec, opts, ret_result, ret_err);
    if (nv_longrun_is(spec)) /* kind "longrun": run_longrun.c */
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
    r = run_pool(&job, &e);
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
    free(job.infra_err);
    nv_jobspec_free(job.spec);
    nvw_backend_free(b);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&job.lock);
    return r;
}
