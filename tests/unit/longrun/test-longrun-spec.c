/* Long-run job spec validation (core/spec/jobspec_longrun.c): defaults, and
 * each refusal names the JSON pointer and the offending value. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/spec/jobspec.h"
#include "core/spec/longrunspec.h"
#include "core/spec/spec.h"
#include "tests/unit/tap.h"

static void refused(const char *text, const char *ptr, const char *needle)
{
    json_t *j = json_loads(text, 0, NULL);
    char *p = NULL, *m = NULL;
    int r = nv_jobspec_validate(j, &p, &m);
    tap_ok(r == -EINVAL && p && strcmp(p, ptr) == 0 && m && strstr(m, needle),
           "refused %s at '%s': %s", text, p ? p : "(none)", m ? m : "(none)");
    free(p);
    free(m);
    json_decref(j);
}

int main(void)
{
    json_t *j = json_loads("{\"kind\":\"longrun\"}", 0, NULL);
    nv_longrun_spec *s = NULL;
    int r = nv_longrun_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && s->model == NV_LR_MLP && s->n_seeds == 8 && s->seeds[7] == 8 &&
               s->steps == 200 && s->adamw && !s->amp && !s->scaler && s->alpha == 0.01 &&
               s->deterministic,
           "defaults: mlp, 8 seeds 1..8, 200 AdamW steps, no AMP, no scaler, alpha 0.01");
    nv_longrun_free(s);
    json_decref(j);
    refused("{\"kind\":\"longrun\",\"model\":\"rnn\"}", "/model",
            "'\"rnn\"' must be \"mlp\", \"transformer\" or \"cnn\"");
    refused("{\"kind\":\"longrun\",\"model\":\"cnn\",\"sizes\":{\"in\":10}}", "/sizes/in",
            "multiple of 4");
    refused("{\"kind\":\"longrun\",\"model\":\"transformer\",\"device_training\":{}}",
            "/device_training", "\"mlp\" and \"cnn\"");
    refused("{\"kind\":\"longrun\",\"steps\":0}", "/steps", "'0'");
    refused("{\"kind\":\"longrun\",\"seeds\":[1,2]}", "/seeds", "at least 3");
    refused("{\"kind\":\"longrun\",\"seeds\":[1,2,-3]}", "/seeds/2", "non-negative");
    refused("{\"kind\":\"longrun\",\"amp\":{\"dtype\":\"int8\"}}", "/amp/dtype", "'int8'");
    refused("{\"kind\":\"longrun\",\"amp\":{\"dtype\":\"bf16\",\"policy\":{\"fp32\":[\"nope\"]}}}",
            "/amp/policy/fp32", "'nope'");
    refused("{\"kind\":\"longrun\",\"grad_scaler\":{\"backoff_factor\":2}}",
            "/grad_scaler/backoff_factor", "'2'");
    refused("{\"kind\":\"longrun\",\"optimizer\":{\"name\":\"lion\"}}", "/optimizer/name",
            "'lion'");
    refused("{\"kind\":\"longrun\",\"n_seeds\":3,\"acceptance\":{\"trim\":2}}", "/acceptance/trim",
            "'2'");
    refused("{\"kind\":\"longrun\",\"bogus\":1}", "", "'bogus'");
    /* distributed device-driven steps */
    refused("{\"kind\":\"longrun\",\"batch\":16,\"device_training\":{\"distributed\":"
            "{\"ranks\":3}}}",
            "/device_training/distributed/ranks", "does not divide the batch (16)");
    refused("{\"kind\":\"longrun\",\"device_training\":{\"distributed\":{\"ranks\":65}}}",
            "/device_training/distributed/ranks", "'65'");
    refused("{\"kind\":\"longrun\",\"device_training\":{\"distributed\":"
            "{\"algorithm\":\"bcube\"}}}",
            "/device_training/distributed/algorithm", "'bcube'");
    refused("{\"kind\":\"longrun\",\"device_training\":{\"distributed\":"
            "{\"dtype\":\"fp8_e4m3\"}}}",
            "/device_training/distributed/dtype", "fp8_e4m3");
    refused("{\"kind\":\"longrun\",\"device_training\":{\"distributed\":{\"rank\":2}}}",
            "/device_training/distributed", "unknown key 'rank'");
    j = json_loads("{\"kind\":\"longrun\",\"device_training\":{\"distributed\":"
                   "{\"algorithm\":\"tree\",\"dtype\":\"bf16\"}}}",
                   0, NULL);
    r = nv_longrun_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && s->ranks == 2 && s->allreduce_tree && s->allreduce_dtype == NV_DT_BF16,
           "distributed: ranks default 2, tree, bf16");
    nv_longrun_free(s);
    json_decref(j);
    j = json_loads("{\"kind\":\"longrun\"}", 0, NULL);
    r = nv_longrun_parse(j, &s, NULL, NULL);
    tap_ok(r == 0 && s->ranks == 1 && !s->driven, "no device_training: one rank");
    nv_longrun_free(s);
    json_decref(j);
    return tap_done();
}
