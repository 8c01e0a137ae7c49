/* The op runner (op.h): the job skeleton of worker/runner/job.h with the op
 * kind's steps: parse an op spec, note whether the backend declares the op
 * non-deterministic, run each case (case.c) and build the result (result.c). */
#include "op.h"

#include <errno.h>
#include <string.h>

#include "op_internal.h"

static int op_parse(void *job, char **ret_ptr, char **ret_msg)
{
    nvw_op_job *j = job;
    return nv_jobspec_parse(j->b.spec_json, &j->spec, ret_ptr, ret_msg);
}

/* Whether the op is declared non-deterministic by the backend's describe(). */
static int op_setup(void *job, char **ret_err)
{
    (void)ret_err;
    nvw_op_job *j = job;
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(j->b.describe, "nondeterministic_ops"), k, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), j->spec->op->name) == 0)
            j->op_nondeterministic = true;
    }
    j->b.n_cases = j->spec->n_total;
    return 0;
}

static json_t *op_case(void *job, void *ctx, int64_t i)
{
    return nvw_case_run(job, ctx, i);
}

static json_t *op_result(void *job)
{
    return nvw_job_result(job);
}

static void op_done(void *job)
{
    nv_jobspec_free(((nvw_op_job *)job)->spec);
}

static const nvw_runner op_runner = {.what = "case",
                                     .configures = true,
                                     .invalid = "invalid job spec",
                                     .parse = op_parse,
                                     .setup = op_setup,
                                     .run_case = op_case,
                                     .result = op_result,
                                     .done = op_done};

int nvw_run_op(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
               json_t **ret_result, char **ret_err)
{
    nvw_op_job j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&op_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
