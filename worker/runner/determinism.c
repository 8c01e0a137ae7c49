/* Demanded determinism (determinism.h). */
#include "determinism.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define ANSWER_LEN 4096

int nvw_det_configure(const nv_backend *t, void *ctx, char *why, size_t whylen)
{
    if (!t->configure) {
        if (t->abi_version < 5)
            snprintf(why, whylen,
                     "the job demands \"deterministic\": true and the backend '%s' does not "
                     "offer configure (backend ABI %u; configure came in ABI 5)",
                     t->name ? t->name : "?", (unsigned)t->abi_version);
        else
            snprintf(why, whylen,
                     "the job demands \"deterministic\": true and the backend '%s' does not "
                     "offer configure (its table's configure entry is NULL)",
                     t->name ? t->name : "?");
        return NVW_DET_NOT_OFFERED;
    }
    char answer[ANSWER_LEN] = "", err[512] = "";
    int code =
        t->configure(ctx, "{\"deterministic\": true}", answer, sizeof answer, err, sizeof err);
    if (code == NV_E_UNSUPPORTED) {
        snprintf(why, whylen,
                 "the job demands \"deterministic\": true and the backend does not offer "
                 "configure: %s",
                 err);
        return NVW_DET_NOT_OFFERED;
    }
    if (code != NV_OK) {
        snprintf(why, whylen,
                 "the job demands \"deterministic\": true and the backend's configure failed "
                 "(code %d): %s",
                 code, err);
        return NVW_DET_REFUSED;
    }
    answer[sizeof answer - 1] = '\0';
    json_error_t jerr;
    json_t *a = json_loads(answer, 0, &jerr);
    json_t *det = json_object_get(a, "deterministic");
    int r = json_is_true(det) ? NVW_DET_HONOURED : NVW_DET_REFUSED;
    if (!json_is_boolean(det))
        snprintf(why, whylen,
                 "the job demands \"deterministic\": true and the backend's configure answer "
                 "has no boolean \"deterministic\": '%.200s'",
                 answer);
    else if (r == NVW_DET_REFUSED)
        snprintf(why, whylen,
                 "the job demands \"deterministic\": true and the backend answers "
                 "{\"deterministic\": false}: it will not run deterministically");
    json_decref(a);
    return r;
}

static int count(json_t *summary, const char *key, json_int_t delta)
{
    json_t *v = json_object_get(summary, key);
    if (!json_is_integer(v))
        return 0;
    return json_integer_set(v, json_integer_value(v) + delta);
}

static const char *verdict_key(const char *v)
{
    if (v && !strcmp(v, "passed"))
        return "passed";
    if (v && !strcmp(v, "failed"))
        return "failed";
    return "errors";
}

int nvw_det_fail_cases(json_t *result, const char *why)
{
    json_t *cases = json_object_get(result, "cases");
    json_t *summary = json_object_get(result, "summary");
    size_t i;
    json_t *c;
    int r = 0, n_failed = 0;
    json_array_foreach(cases, i, c)
    {
        const char *cls = json_string_value(json_object_get(c, "failure_class"));
        /* The op the backend itself lists as non-deterministic keeps its more
         * specific refusal. */
        if (cls && !strcmp(cls, "nondeterministic_op"))
            continue;
        const char *v = json_string_value(json_object_get(c, "verdict"));
        r |= count(summary, verdict_key(v), -1) | count(summary, "failed", 1);
        r |= json_object_set_new(c, "verdict", json_string("failed"));
        r |= json_object_set_new(c, "failure_class", json_string("deterministic_not_honoured"));
        r |= json_object_set_new(c, "error", json_string(why));
        n_failed++;
    }
    if (n_failed > 0)
        r |= json_object_set_new(result, "verdict", json_string("failed"));
    return r ? -ENOMEM : 0;
}

int nvw_det_record(json_t *result, int answer)
{
    json_t *o = json_pack("{s:b, s:o}", "demanded", 1, "answered",
                          answer == NVW_DET_NOT_OFFERED ? json_null()
                                                        : json_boolean(answer == NVW_DET_HONOURED));
    return o && json_object_set_new(result, "determinism", o) == 0 ? 0 : -ENOMEM;
}
