/* Fused jobs (fused.h): the job skeleton of worker/runner/job.h with the fused
 * kind's steps: parse the spec (and hash its graph), refuse a backend without a
 * graph entry, run the cases on a pool of threads (one backend context each,
 * results placed by case index so the output does not depend on the thread
 * count) and build the result. The per-case work is in case.c. */
#include "fused_internal.h"

#include <errno.h>
#include <string.h>

#include "common/sha256.h"
#include "worker/runner/err.h"

static int f_parse(void *job, char **ret_ptr, char **ret_msg)
{
    fjob *j = job;
    int r = nv_fusedspec_parse(j->b.spec_json, &j->s, ret_ptr, ret_msg);
    if (r == 0)
        nv_sha256_hex(j->s->graph_text, strlen(j->s->graph_text), j->graph_hash);
    return r;
}

static int f_check(void *job, char **ret_err)
{
    const fjob *j = job;
    if (!j->b.table->graph)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' has no graph entry (nv_backend.graph is NULL): it cannot "
                           "run fused jobs; op jobs still run on it",
                           j->b.backend_spec);
    return 0;
}

static int f_setup(void *job, char **ret_err)
{
    (void)ret_err;
    fjob *j = job;
    j->b.n_cases = j->s->n_cases;
    return 0;
}

/* Case i of the pool, placed by its index by the skeleton. */
static json_t *f_case(void *job, void *ctx, int64_t i)
{
    return nvw_fused_case(job, ctx, i);
}

static json_t *f_result(void *job)
{
    const fjob *j = job;
    json_t *r = nvw_result_close(&j->b, nvw_result_open(&j->b, "fused", j->graph_hash, j->s->seed));
    if (r)
        json_object_set_new(r, "intermediate_dtype",
                            json_string(nv_dtype_name(j->s->intermediate)));
    return r;
}

static void f_done(void *job)
{
    nv_fusedspec_free(((fjob *)job)->s);
}

static const nvw_runner fused_runner = {.what = "fused case",
                                        .configures = true,
                                        .invalid = "invalid fused job",
                                        .parse = f_parse,
                                        .check = f_check,
                                        .setup = f_setup,
                                        .run_case = f_case,
                                        .result = f_result,
                                        .done = f_done};

int nvw_run_fused(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err)
{
    fjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&fused_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
