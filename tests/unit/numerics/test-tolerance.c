/* tolerance: parsing refuses what lacks a reason or is malformed, naming the
 * field by JSON pointer and the offending value; serialisation round-trips. */
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/tolerance.h"

/* Parses text; returns the error field (malloc'd) or NULL on success. */
static char *parse(const char *text, nv_tolerance *t, char **msg)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    char *field = NULL;
    *msg = NULL;
    int r = nv_tolerance_from_json(o, t, &field, msg);
    json_decref(o);
    if (r == 0)
        return NULL;
    return field ? field : strdup("?");
}

static void expect_err(const char *text, const char *want_field, const char *want_in_msg)
{
    nv_tolerance t;
    char *msg;
    char *field = parse(text, &t, &msg);
    tap_ok(field && strcmp(field, want_field) == 0 && msg && strstr(msg, want_in_msg),
           "refused %s -> field '%s' msg '%s'", text, field ? field : "(accepted)", msg ? msg : "");
    free(field);
    free(msg);
}

int main(void)
{
    nv_tolerance t;
    char *msg;
    char *f = parse("{\"metric\":\"ulp\",\"max_ulp\":1,\"reason_code\":\"approximation_error\","
                    "\"reason\":\"device exp is documented to 1 ulp\"}",
                    &t, &msg);
    tap_ok(!f && t.metric == NV_TOL_ULP && t.max_ulp == 1 &&
               t.reason_code == NV_REASON_APPROXIMATION_ERROR &&
               strcmp(t.reason, "device exp is documented to 1 ulp") == 0,
           "the contract's example parses");
    json_t *j = nv_tolerance_to_json(&t);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    tap_ok(s && strcmp(s, "{\"max_ulp\":1.0,\"metric\":\"ulp\",\"reason\":\"device exp is "
                          "documented to 1 ulp\",\"reason_code\":\"approximation_error\","
                          "\"version\":0}") == 0,
           "serialised: %s", s);
    nv_tolerance t2;
    f = parse(s, &t2, &msg);
    tap_ok(!f && memcmp(&t, &t2, sizeof(t)) == 0, "round trip is identity");
    free(s);
    json_decref(j);

    f = parse("{\"metric\":\"bound\",\"c\":2,\"growth\":\"log2n\",\"u_dtype\":\"bf16\","
              "\"reason_code\":\"reduction_length\",\"reason\":\"pairwise fp32 sum\","
              "\"version\":3,\"source\":\"store\"}",
              &t, &msg);
    tap_ok(!f && t.metric == NV_TOL_BOUND && t.c == 2 && t.growth == NV_GROWTH_LOG2N &&
               t.has_u_dtype && t.u_dtype == NV_DT_BF16 && t.version == 3 &&
               strcmp(t.source, "store") == 0,
           "bound with u_dtype, version, source");
    j = nv_tolerance_to_json(&t);
    nv_tolerance t3;
    char *fld = NULL;
    tap_ok(nv_tolerance_from_json(j, &t3, &fld, &msg) == 0 && memcmp(&t, &t3, sizeof(t)) == 0,
           "bound round trip");
    json_decref(j);
    f = parse("{\"metric\":\"bound\",\"c\":1,\"growth\":\"probabilistic\","
              "\"reason_code\":\"reduction_length\",\"reason\":\"Higham & Mary\"}",
              &t, &msg);
    j = nv_tolerance_to_json(&t);
    tap_ok(!f && t.growth == NV_GROWTH_PROBABILISTIC &&
               !strcmp(json_string_value(json_object_get(j, "growth")), "probabilistic"),
           "growth probabilistic parsed and written back");
    json_decref(j);
    f = parse(
        "{\"metric\":\"allclose\",\"atol\":1e-5,\"rtol\":0,\"reason_code\":\"dtype_precision\","
        "\"reason\":\"bf16 storage\"}",
        &t, &msg);
    tap_ok(!f && t.atol == 1e-5 && t.rtol == 0, "allclose");

    expect_err("{\"metric\":\"ulp\",\"max_ulp\":1,\"reason_code\":\"approximation_error\"}",
               "/reason", "missing 'reason'");
    expect_err("{\"metric\":\"ulp\",\"max_ulp\":1,\"reason_code\":\"approximation_error\","
               "\"reason\":\"  \"}",
               "/reason", "empty 'reason'");
    expect_err("{\"metric\":\"ulp\",\"max_ulp\":1,\"reason\":\"x\"}", "/reason_code",
               "missing 'reason_code'");
    expect_err("{\"metric\":\"ulp\",\"max_ulp\":1,\"reason_code\":\"because\",\"reason\":\"x\"}",
               "/reason_code", "'because'");
    expect_err(
        "{\"metric\":\"ulp\",\"max_ulp\":-1,\"reason_code\":\"stochastic\",\"reason\":\"x\"}",
        "/max_ulp", "'-1'");
    expect_err(
        "{\"metric\":\"ulp\",\"max_ulp\":\"1\",\"reason_code\":\"stochastic\",\"reason\":\"x\"}",
        "/max_ulp", "must be a number");
    expect_err("{\"metric\":\"ulp\",\"max_ulp\":1,\"atol\":1,\"reason_code\":\"stochastic\","
               "\"reason\":\"x\"}",
               "/atol", "unknown key 'atol'");
    expect_err(
        "{\"metric\":\"ulp\",\"max_ulps\":1,\"reason_code\":\"stochastic\",\"reason\":\"x\"}",
        "/max_ulps", "unknown key 'max_ulps'");
    expect_err("{\"metric\":\"close\",\"reason_code\":\"stochastic\",\"reason\":\"x\"}", "/metric",
               "'close'");
    expect_err("{\"metric\":\"bound\",\"c\":1,\"growth\":\"n2\",\"reason_code\":\"stochastic\","
               "\"reason\":\"x\"}",
               "/growth", "'n2'");
    expect_err("{\"metric\":\"bound\",\"c\":1,\"growth\":\"n\",\"u_dtype\":\"fp12\","
               "\"reason_code\":\"stochastic\",\"reason\":\"x\"}",
               "/u_dtype", "'fp12'");
    expect_err("{\"metric\":\"bound\",\"growth\":\"n\",\"reason_code\":\"stochastic\","
               "\"reason\":\"x\"}",
               "/c", "missing 'c'");
    expect_err("[1]", "", "JSON object");

    static const char *names[] = {"dtype_precision", "reduction_length", "approximation_error",
                                  "stochastic", "accepted_fast_algorithm"};
    int ok = 1;
    for (int i = 0; i < NV_REASON_COUNT; i++) {
        nv_reason_code c;
        ok &= strcmp(nv_reason_code_name((nv_reason_code)i), names[i]) == 0 &&
              nv_reason_code_from_name(names[i], &c) == 0 && c == (nv_reason_code)i;
    }
    tap_ok(ok && nv_reason_code_name(NV_REASON_COUNT) == NULL, "reason code names");
    return tap_done();
}
