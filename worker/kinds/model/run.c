/* Model jobs (model.h): the job skeleton of worker/runner/job.h with the model
 * kind's steps: parse the spec (expanding the model and hashing the expanded
 * graph), run the cases (dtypes x samples) on the case pool, build the result.
 * The per-case work is case.c, the judgement judge.c and logits.c. */
#include "model_internal.h"

#include <errno.h>
#include <string.h>

#include "common/sha256.h"
#include "worker/backends/exec.h"
#include "worker/runner/err.h"

static int m_parse(void *job, char **ret_ptr, char **ret_msg)
{
    mjob *j = job;
    int r = nv_modelspec_parse(j->b.spec_json, &j->s, ret_ptr, ret_msg);
    if (r == 0)
        nv_sha256_hex(j->s->graph_text, strlen(j->s->graph_text), j->graph_hash);
    return r;
}

static int m_check(void *job, char **ret_err)
{
    const mjob *j = job;
    /* an exec harness is sent the optional graph request instead (device.c) */
    if (j->s->graph_exec && !j->b.table->graph && j->b.table != nvw_exec_table())
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' has no graph entry (nv_backend.graph is NULL): it cannot "
                           "run a model with \"execution\": \"graph\"; \"eager\" runs on it",
                           j->b.backend_spec);
    bool asks = strcmp(j->s->compile, "none") || strcmp(j->s->autocast, "none");
    if (asks && j->b.table != nvw_exec_table())
        return nvw_set_err(ret_err, -ENOTSUP,
                           "backend '%s' is not an exec harness: \"compile\" and \"autocast\" "
                           "are options of a harness's graph request (docs/EXEC_PROTOCOL.md "
                           "\"Optional requests\")",
                           j->b.backend_spec);
    return 0;
}

static int m_setup(void *job, char **ret_err)
{
    mjob *j = job;
    j->b.n_cases = j->s->n_cases;
    return model_weights_load(j, ret_err);
}

static json_t *m_case(void *job, void *ctx, int64_t i)
{
    return nvw_model_case(job, ctx, i);
}

/* The model's shape in the result: layers and nodes after expansion. */
static json_t *model_json(const mjob *j)
{
    const nv_modelspec *s = j->s;
    int64_t params = 0;
    for (int i = 0; i < s->graph->n_inputs; i++)
        params += s->inputs[i].is_param ? s->graph->inputs[i].numel : 0;
    return json_pack("{s:i, s:i, s:i, s:I, s:s, s:s}", "layers", s->n_layers, "nodes",
                     s->graph->n_nodes, "inputs", s->graph->n_inputs, "parameters",
                     (json_int_t)params, "logits", s->graph->nodes[s->logits].name, "task",
                     s->task == NV_MTASK_LM ? "lm" : "classifier");
}

static json_t *m_result(void *job)
{
    const mjob *j = job;
    json_t *r = nvw_result_open(&j->b, "model", j->graph_hash, j->s->seed);
    if (r && json_object_set_new(r, "model", model_json(j))) {
        json_decref(r);
        r = NULL;
    }
    r = nvw_result_close(&j->b, r);
    if (r)
        json_object_set_new(r, "execution", json_string(j->s->graph_exec ? "graph" : "eager"));
    if (r && j->weights_json)
        json_object_set(r, "weights", j->weights_json);
    if (r && j->s->graph_exec) {
        json_object_set_new(r, "compile", json_string(j->s->compile));
        json_object_set_new(r, "autocast", json_string(j->s->autocast));
    }
    return r;
}

static void m_done(void *job)
{
    model_weights_free(job);
    nv_modelspec_free(((mjob *)job)->s);
}

static const nvw_runner model_runner = {.what = "model case",
                                        .invalid = "invalid model job",
                                        .parse = m_parse,
                                        .check = m_check,
                                        .setup = m_setup,
                                        .run_case = m_case,
                                        .result = m_result,
                                        .done = m_done};

int nvw_run_model(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err)
{
    mjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&model_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
