/* Contract job specs (docs/JOBS.md "Contract jobs"): the defaults, and every
 * refusal naming its JSON pointer and the offending value, through the one
 * validator numvald runs (nv_jobspec_validate). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/spec/contractspec.h"
#include "core/spec/spec.h"
#include "tests/unit/tap.h"

static void expect(const char *text, const char *want_ptr, const char *want_msg)
{
    json_t *spec = json_loads(text, 0, NULL);
    char *ptr = NULL, *msg = NULL;
    int r = nv_jobspec_validate(spec, &ptr, &msg);
    bool ok = want_ptr
                  ? (r == -EINVAL && ptr && !strcmp(ptr, want_ptr) && msg && strstr(msg, want_msg))
                  : r == 0;
    tap_ok(ok, "%s -> %s%s%s", text, want_ptr ? want_ptr : "valid", want_ptr ? ": " : "",
           want_msg ? want_msg : "");
    if (!ok)
        tap_diag("got %d '%s': '%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
    free(ptr);
    free(msg);
    json_decref(spec);
}

static void test_defaults(void)
{
    json_t *spec = json_loads("{\"kind\": \"contract\"}", 0, NULL);
    nv_contract_spec *s = NULL;
    int r = nv_contract_parse(spec, &s, NULL, NULL);
    tap_ok(r == 0 && s, "{\"kind\": \"contract\"} parses");
    if (s) {
        int n = 0;
        for (int d = 0; d < NV_DT_COUNT; d++)
            n += s->dtype[d];
        tap_ok(n == 10 && s->dtype[NV_DT_FP32] && s->dtype[NV_DT_FP4_E2M1] &&
                   !s->dtype[NV_DT_E8M0] && !s->dtype[NV_DT_INT8],
               "default dtypes: the 10 float dtypes but e8m0 (%d)", n);
        bool all = true;
        for (int p = 0; p < NV_CPROBE_COUNT; p++)
            all &= s->probe[p];
        tap_ok(all && s->repeats == 4 && s->fp32_sweep == 4096 && s->seed == 1 && s->judge,
               "default probes all, repeats 4, fp32_sweep 4096, seed 1, judge true");
    }
    nv_contract_free(s);
    json_decref(spec);
}

int main(void)
{
    test_defaults();
    expect("{\"kind\": \"contract\", \"dtypes\": [\"fp32\", \"bf16\"], \"probes\":"
           " [\"conversion\", \"transcendental\"], \"repeats\": 2, \"fp32_sweep\": 0,"
           " \"seed\": 9, \"judge\": false, \"name\": \"x\"}",
           NULL, NULL);
    expect("{\"kind\": \"contract\", \"dtypes\": [\"fp32\", \"int8\"]}", "/dtypes/1",
           "no float contract");
    expect("{\"kind\": \"contract\", \"dtypes\": [\"e8m0\"]}", "/dtypes/0", "no float contract");
    expect("{\"kind\": \"contract\", \"dtypes\": [\"fp7\"]}", "/dtypes/0", "is not a dtype");
    expect("{\"kind\": \"contract\", \"dtypes\": [\"fp32\", \"fp32\"]}", "/dtypes/1",
           "duplicate dtype 'fp32'");
    expect("{\"kind\": \"contract\", \"dtypes\": []}", "/dtypes", "non-empty");
    expect("{\"kind\": \"contract\", \"probes\": [\"accumulation\", \"matmul\"]}", "/probes/1",
           "is not a probe");
    expect("{\"kind\": \"contract\", \"probes\": [\"arithmetic\", \"arithmetic\"]}", "/probes/1",
           "duplicate probe 'arithmetic'");
    expect("{\"kind\": \"contract\", \"repeats\": 1}", "/repeats",
           "'1' must be an integer in 2..64");
    expect("{\"kind\": \"contract\", \"fp32_sweep\": 2000000}", "/fp32_sweep", "'2000000'");
    expect("{\"kind\": \"contract\", \"seed\": -1}", "/seed", "'-1'");
    expect("{\"kind\": \"contract\", \"judge\": \"yes\"}", "/judge", "true or false");
    expect("{\"kind\": \"contract\", \"op\": \"exp\"}", "", "unknown key 'op'");
    return tap_done();
}
