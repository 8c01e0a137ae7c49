/* The kind table (kinds.h). The op row comes first: it is the kind of a spec
 * or an artifact without "kind", and runs whatever no other row does. */
#include "kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"
#include "worker/kinds/contract/contract.h"
#include "worker/kinds/fused/fused.h"
#include "worker/kinds/gradient/gradient.h"
#include "worker/kinds/longrun/longrun.h"
#include "worker/kinds/model/model.h"
#include "worker/kinds/op/op.h"
#include "worker/kinds/rng/rng.h"
#include "worker/kinds/serving/serving.h"

static void artifact_failure_key(const json_t *manifest, char *key, size_t len);
static void artifact_gate(const nvw_gate_env *env, const nvw_gate_case *k);
static void serving_failure_key(const json_t *manifest, char *key, size_t len);
static void serving_gate(const nvw_gate_env *env, const nvw_gate_case *k);

static const nvw_kind kinds[] = {
    {.name = "op",
     .run = nvw_run_op,
     .repro_main = nvw_op_repro_main,
     .minimize_main = nvw_op_minimize_main,
     .failure_key = nvw_op_failure_key,
     .gate = nvw_op_gate,
     .replay = nvw_op_replay},
    {.name = "fused",
     .run = nvw_run_fused,
     .repro_main = nvw_fused_repro_main,
     .minimize_main = nvw_fused_minimize_main,
     .failure_key = nvw_fused_failure_key,
     .gate = nvw_fused_gate,
     .replay = nvw_fused_replay},
    {.name = "gradient",
     .run = nvw_run_gradient,
     .repro_main = nvw_grad_repro_main,
     .minimize_main = nvw_grad_minimize_main,
     .failure_key = nvw_grad_failure_key,
     .gate = nvw_grad_gate,
     .replay = nvw_grad_replay},
    {.name = "longrun", .run = nvw_run_longrun},
    /* A model failure's artifact is an op case of its first divergent node
     * (worker/kinds/model/artifact.c): its signature, gate and minimization are
     * those of the artifact's own kind; repro, minimize and replay reach that
     * kind through nvw_kind_of_artifact already. */
    {.name = "model",
     .run = nvw_run_model,
     .failure_key = artifact_failure_key,
     .gate = artifact_gate},
    {.name = "suite", .run = nvw_run_suite},
    {.name = "contract", .run = nvw_run_contract},
    /* A batch or sustained failure's artifact is a serving pair
     * (worker/kinds/serving/localize.c): the first divergent node's op called
     * on the request alone and among the others; a prefill_decode or
     * long_context failure's is an op case of the first op call that fails
     * its tolerance (localize_op.c), whose signature and gate are the op
     * kind's. */
    {.name = "serving",
     .run = nvw_run_serving,
     .repro_main = nvw_serving_repro_main,
     .minimize_main = nvw_serving_minimize_main,
     .failure_key = serving_failure_key,
     .gate = serving_gate,
     .replay = nvw_serving_replay},
    {.name = "rng", .run = nvw_run_rng},
};

#define N_KINDS (sizeof kinds / sizeof kinds[0])

const nvw_kind *nvw_kind_named(const json_t *spec, const char **ret_name)
{
    const char *name = json_string_value(json_object_get(spec, "kind"));
    if (!name)
        name = "op";
    if (ret_name)
        *ret_name = name;
    for (size_t i = 0; i < N_KINDS; i++)
        if (!strcmp(kinds[i].name, name))
            return &kinds[i];
    return NULL;
}

const nvw_kind *nvw_kind_of_artifact(const nv_artifact *a, const char **ret_name)
{
    return nvw_kind_named(json_object_get(a->manifest, "spec"), ret_name);
}

void nvw_kind_replay_names(char *buf, size_t len)
{
    size_t n = 0, k = 0, at = 0;
    for (size_t i = 0; i < N_KINDS; i++)
        n += kinds[i].replay != NULL;
    buf[0] = 0;
    for (size_t i = 0; i < N_KINDS && at < len; i++) {
        if (!kinds[i].replay)
            continue;
        const char *sep = k == 0 ? "" : k + 1 == n ? " and " : ", ";
        int w = snprintf(buf + at, len - at, "%s%s", sep, kinds[i].name);
        at += w > 0 ? (size_t)w : 0;
        k++;
    }
}

/* The row of a failure's own spec (its manifest's "spec"), when that is not
 * the model row itself (no loop) and has the column. */
static const nvw_kind *artifact_kind(const json_t *manifest)
{
    const nvw_kind *k = nvw_kind_named(json_object_get(manifest, "spec"), NULL);
    return k && strcmp(k->name, "model") ? k : NULL;
}

static void artifact_failure_key(const json_t *manifest, char *key, size_t len)
{
    const nvw_kind *k = artifact_kind(manifest);
    if (k && k->failure_key)
        k->failure_key(manifest, key, len);
    else
        snprintf(key, len, "model/unknown");
}

static void artifact_gate(const nvw_gate_env *env, const nvw_gate_case *kc)
{
    nv_artifact *a = NULL;
    char *err = NULL;
    if (nv_artifact_decode(kc->buf, kc->len, &a, &err) < 0) {
        free(err);
        return;
    }
    const nvw_kind *k = artifact_kind(a->manifest);
    nv_artifact_free(a);
    if (k && k->gate)
        k->gate(env, kc);
}

/* A serving failure's artifact: a serving pair (its spec the serving job's),
 * or another kind's case (its spec that kind's). */
static const nvw_kind *serving_other(const json_t *manifest)
{
    const nvw_kind *k = nvw_kind_named(json_object_get(manifest, "spec"), NULL);
    return k && strcmp(k->name, "serving") && strcmp(k->name, "model") ? k : NULL;
}

static void serving_failure_key(const json_t *manifest, char *key, size_t len)
{
    const nvw_kind *k = serving_other(manifest);
    if (k && k->failure_key)
        k->failure_key(manifest, key, len);
    else if (!k)
        nvw_serving_failure_key(manifest, key, len);
    else
        snprintf(key, len, "serving/unknown");
}

static void serving_gate(const nvw_gate_env *env, const nvw_gate_case *kc)
{
    nv_artifact *a = NULL;
    char *err = NULL;
    if (nv_artifact_decode(kc->buf, kc->len, &a, &err) < 0) {
        free(err);
        return;
    }
    const nvw_kind *k = serving_other(a->manifest);
    nv_artifact_free(a);
    if (!k)
        nvw_serving_gate(env, kc);
    else if (k->gate)
        k->gate(env, kc);
}

int nvw_run_job(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err)
{
    const nvw_kind *k = nvw_kind_named(spec, NULL);
    return (k && k->run ? k->run : kinds[0].run)(spec, backend_spec, opts, ret_result, ret_err);
}
