/* Job spec validation: every refusal names the JSON pointer of the field and the
 * offending value; case expansion follows the documented order (docs/JOBS.md). */
#include <errno.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"

/* The example job of docs/JOBS.md, the contract users script against. */
static const char *contract =
    "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\", \"bf16\"],"
    " \"shapes\": [[4096], [64, 257]], \"inputs\": [\"normal\", \"near_zero\", \"specials\"],"
    " \"seed\": 7, \"tolerance\": {\"metric\": \"ulp\", \"max_ulp\": 1,"
    " \"reason_code\": \"approximation_error\", \"reason\": \"device exp is documented to 1 "
    "ulp\"}}";

/* Validate the contract example with key set to the JSON value text (NULL
 * deletes it); check pointer and a fragment of the message. */
static void expect(const char *key, const char *value, const char *want_ptr, const char *want_msg)
{
    json_t *spec = json_loads(contract, 0, NULL);
    if (value) {
        json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
        json_object_set_new(spec, key, v);
    } else {
        json_object_del(spec, key);
    }
    char *ptr = NULL, *msg = NULL;
    int r = nv_jobspec_validate(spec, &ptr, &msg);
    bool ok = want_ptr ? (r == -EINVAL && ptr && strcmp(ptr, want_ptr) == 0 && msg &&
                          strstr(msg, want_msg) != NULL)
                       : r == 0;
    tap_ok(ok, "%s = %s -> %s%s%s", key, value ? value : "(deleted)", want_ptr ? want_ptr : "valid",
           want_ptr ? ": " : "", want_msg ? want_msg : "");
    if (!ok)
        tap_diag("got %d '%s': '%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
    free(ptr);
    free(msg);
    json_decref(spec);
}

static void test_fields(void)
{
    expect("seed", "7", NULL, NULL);
    /* "sweep": only beside the class it configures (the contract lists no sweep) */
    expect("sweep", "{\"stride\": 3}", "/sweep", "applies to the 'sweep' input class");
    expect("dtypes", "[\"fp32\", \"fp7\"]", "/dtypes/1", "unknown dtype 'fp7'");
    expect("dtypes", "[\"fp32\", \"fp32\"]", "/dtypes/1", "duplicate dtype 'fp32'");
    expect("dtypes", "[]", "/dtypes", "non-empty");
    expect("dtypes", NULL, "/dtypes", "missing");
    expect("colour", "\"blue\"", "/colour", "unknown key 'colour'");
    expect("kind", "\"bogus\"", "/kind",
           "unknown kind 'bogus'; known kinds: op, gradient, fused, longrun, model, suite, contract, serving, rng");
    expect("kind", "\"suite\"", "/kind", "kind 'suite' is not supported by this build");
    expect("kind", "7", "/kind", "'7' must be a string such as \"op\"");
    expect("kind", NULL, "/kind", "missing \"kind\"");
    expect("op", "\"expp\"", "/op", "unknown op 'expp'");
    expect("shapes", "[[4096], [64, 0]]", "/shapes/1/1", "'0' must be a positive integer");
    expect("shapes", "[[4096], [2.5]]", "/shapes/1/0", "'2.5' must be a positive integer");
    expect("shapes", "[[1,1,1,1,1,1,1,1,1]]", "/shapes/0", "rank 9 exceeds the maximum of 8");
    /* 2^14 x 2^14 = 2^28 elements: twice the per-tensor limit of 2^27. */
    expect("shapes", "[[16384, 16384]]", "/shapes/0", "more than the limit of 134217728");
    expect("shapes", "[[8192, 16384]]", NULL, NULL); /* exactly 2^27: allowed */
    expect("layouts", "[\"contiguous\", \"diagonal\"]", "/layouts/1", "unknown layout 'diagonal'");
    expect("inputs", "[\"normal\", \"gaussian\"]", "/inputs/1", "unknown input class 'gaussian'");
    expect("seed", "-1", "/seed", "'-1' must be an integer in 0..");
    expect("seed", "1.5", "/seed", "'1.5'");
    expect("seed", "9223372036854775807", NULL, NULL); /* 2^63 - 1 */
    expect("samples", "0", "/samples", "'0'");
    expect("repeat", "2", NULL, NULL);
    expect("repeat", "0", "/repeat", "'0'");
    expect("deterministic", "\"yes\"", "/deterministic", "true or false");
    expect("build", "{\"name\": \"rt\", \"commit\": 12}", "/build/commit", "'12' must be a string");
    expect("attrs", "{\"axis\": 0}", "/attrs", "axis");
    expect("tolerance",
           "{\"metric\": \"ulp\", \"max_ulp\": 1, \"reason_code\": "
           "\"approximation_error\"}",
           "/tolerance/reason", "");
    expect("tolerance_by_dtype", "{\"fp7\": {}}", "/tolerance_by_dtype/fp7", "unknown dtype 'fp7'");
    expect("tolerance_by_dtype",
           "{\"bf16\": {\"metric\": \"ulp\", \"max_ulp\": 2, \"reason_code\":"
           " \"dtype_precision\", \"reason\": \"r\", \"version\": 3}}",
           NULL, NULL);
    expect("tolerance_by_dtype",
           "{\"bf16\": {\"metric\": \"ulp\", \"max_ulp\": 2, \"reason_code\":"
           " \"dtype_precision\", \"version\": 3}}",
           "/tolerance_by_dtype/bf16/reason", "");
    expect("expect_error", "{\"case\": \"shape_mismatch\"}", "/expect_error/case",
           "does not apply to op 'exp'");
    expect("expect_error", "{\"case\": \"melted\"}", "/expect_error/case", "'\"melted\"'");
}

static void test_root(void)
{
    json_t *arr = json_array();
    char *ptr = NULL, *msg = NULL;
    tap_ok(nv_jobspec_validate(arr, &ptr, &msg) == -EINVAL && ptr && strcmp(ptr, "") == 0,
           "a non-object is refused at the root pointer \"\"");
    free(ptr);
    free(msg);
    json_decref(arr);
    /* The op parser alone refuses the other kinds; the dispatcher sends each to
     * its own parser (an empty gradient job fails there, at "/op"). */
    json_t *g = json_loads("{\"kind\": \"gradient\"}", 0, NULL);
    nv_jobspec *s = NULL;
    tap_ok(nv_jobspec_parse(g, &s, &ptr, &msg) == -EINVAL && ptr && strcmp(ptr, "/kind") == 0 &&
               msg && strcmp(msg, "kind 'gradient' is not supported by this build") == 0,
           "the op parser refuses kind 'gradient' at /kind");
    free(ptr);
    free(msg);
    ptr = msg = NULL;
    tap_ok(nv_jobspec_validate(g, &ptr, &msg) == -EINVAL && ptr && strcmp(ptr, "/op") == 0,
           "validation sends kind 'gradient' to the gradient parser");
    free(ptr);
    free(msg);
    nv_jobspec_free(s);
    json_decref(g);
    /* A gradient job's "deterministic" is checked as an op job's (the same field). */
    g = json_loads("{\"kind\": \"gradient\", \"op\": \"tanh\", \"dtypes\": [\"fp32\"], "
                   "\"shapes\": [[8]], \"deterministic\": 1}",
                   0, NULL);
    ptr = msg = NULL;
    tap_ok(nv_jobspec_validate(g, &ptr, &msg) == -EINVAL && ptr &&
               strcmp(ptr, "/deterministic") == 0 && msg && strstr(msg, "true or false"),
           "a gradient job's non-boolean deterministic is refused at /deterministic (%s)",
           msg ? msg : "");
    free(ptr);
    free(msg);
    json_decref(g);
    g = json_loads("{\"kind\": \"gradient\", \"op\": \"tanh\", \"dtypes\": [\"fp32\"], "
                   "\"shapes\": [[8]], \"deterministic\": true}",
                   0, NULL);
    ptr = msg = NULL;
    tap_ok(nv_jobspec_validate(g, &ptr, &msg) == 0, "a gradient job takes deterministic: true (%s)",
           msg ? msg : "");
    free(ptr);
    free(msg);
    json_decref(g);
    char *e = nv_json_pointer_escape("a/b~c");
    tap_ok(e && strcmp(e, "a~1b~0c") == 0, "RFC 6901 escaping: a/b~c -> a~1b~0c");
    free(e);
}

static nv_jobspec *parse(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    nv_jobspec *s = NULL;
    char *ptr = NULL, *msg = NULL;
    if (nv_jobspec_parse(j, &s, &ptr, &msg) < 0)
        tap_diag("parse failed: %s: %s", ptr ? ptr : "", msg ? msg : "");
    free(ptr);
    free(msg);
    json_decref(j);
    return s;
}

static void test_cases(void)
{
    nv_jobspec *s = parse(contract);
    /* 2 dtypes x 2 shapes x 1 layout x 3 classes x 1 sample = 12 cases. */
    tap_ok(s && s->n_cases == 12 && s->n_total == 12, "contract example expands to 12 cases");
    nv_job_case c;
    /* Index 7 = dtype 1 (7 / 6), shape 0 ((7 % 6) / 3), class 1 (7 % 3). */
    tap_ok(s && nv_jobspec_case(s, 7, &c) == 0 && c.dtype == NV_DT_BF16 && c.shape_index == 0 &&
               c.cls == NV_IN_NEAR_ZERO && c.layout == NV_LAYOUT_CONTIGUOUS,
           "case 7: bf16, [4096], near_zero");
    tap_ok(s && s->has_tolerance && s->tolerance.max_ulp == 1 && s->seed == 7,
           "tolerance override and seed parsed");
    nv_jobspec_free(s);

    s = parse("{\"kind\":\"op\",\"op\":\"add\",\"dtypes\":[\"fp32\",\"fp16\"],\"shapes\":[[4,6]],"
              "\"layouts\":[\"contiguous\",\"strided\"],\"samples\":2,"
              "\"expect_error\":{\"case\":[\"shape_mismatch\",\"wrong_dtype\"]}}");
    /* 2 x 1 x 2 x 1 x 2 = 8 regular, then 2 dtypes x 2 kinds expect_error cases. */
    tap_ok(s && s->n_cases == 8 && s->n_total == 12, "add: 8 cases + 4 expect_error cases");
    tap_ok(s && nv_jobspec_case(s, 5, &c) == 0 && c.dtype == NV_DT_FP16 &&
               c.layout == NV_LAYOUT_CONTIGUOUS && c.sample == 1 && !c.expect_error,
           "case 5: fp16, contiguous, sample 1");
    tap_ok(s && nv_jobspec_case(s, 11, &c) == 0 && c.expect_error && c.dtype == NV_DT_FP16 &&
               c.expect == NV_EXPECT_WRONG_DTYPE,
           "case 11: fp16 wrong_dtype check");
    nv_tensor t[NV_JOB_MAX_TENSORS];
    int n = s ? nv_jobspec_tensors(s, &s->shapes[0], NV_DT_FP32, NV_EXPECT_SHAPE_MISMATCH, t,
                                   NV_JOB_MAX_TENSORS)
              : -1;
    tap_ok(n == 2 && t[1].shape[1] == 7 && t[0].shape[1] == 6, "shape_mismatch: y is [4, 7]");
    nv_jobspec_free(s);
}

static void test_tensors(void)
{
    nv_jobspec *s = parse("{\"kind\":\"op\",\"op\":\"matmul\",\"dtypes\":[\"fp32\"],"
                          "\"shapes\":[[64,96,16]],\"attrs\":{\"scale\":\"block:32\"}}");
    nv_tensor t[NV_JOB_MAX_TENSORS];
    int n = s ? nv_jobspec_tensors(s, &s->shapes[0], NV_DT_FP32, -1, t, NV_JOB_MAX_TENSORS) : -1;
    /* [M, K, N] = [64, 96, 16]: A [64, 96], B [96, 16]; MX block 32 along K (OCP
     * MX v1.0 §5): scales [64, 3] and [3, 16] in e8m0. */
    tap_ok(n == 4 && t[0].shape[0] == 64 && t[0].shape[1] == 96 && t[1].shape[0] == 96 &&
               t[1].shape[1] == 16 && t[2].dtype == NV_DT_E8M0 && t[2].shape[1] == 3 &&
               t[3].shape[0] == 3 && t[3].shape[1] == 16,
           "matmul [M,K,N] with block:32 scales");
    nv_jobspec_free(s);
    s = parse("{\"kind\":\"op\",\"op\":\"cross_entropy\",\"dtypes\":[\"fp32\"],"
              "\"shapes\":[[8,10]]}");
    n = s ? nv_jobspec_tensors(s, &s->shapes[0], NV_DT_FP32, -1, t, NV_JOB_MAX_TENSORS) : -1;
    tap_ok(n == 2 && t[1].dtype == NV_DT_INT32 && t[1].ndim == 1 && t[1].shape[0] == 8,
           "cross_entropy [8, 10]: int32 target [8]");
    n = s ? nv_jobspec_tensors(s, &s->shapes[0], NV_DT_FP32, NV_EXPECT_WRONG_DTYPE, t,
                               NV_JOB_MAX_TENSORS)
          : -1;
    tap_ok(n == 2 && t[1].dtype == NV_DT_FP32, "cross_entropy wrong_dtype: fp32 target");
    nv_jobspec_free(s);
}

/* fp32 "exhaustive": all 2^32 encodings for a unary op as [65536, 65536] rows,
 * past the element limit; refused with another class beside it, for a binary
 * op, with fewer elements, and as rows the worker cannot block. */
static void test_streamed(void)
{
    static const struct {
        const char *spec, *want_msg; /* NULL: accepted */
    } cases[] = {
        {"{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[65536, 65536]], "
         "\"inputs\": [\"exhaustive\"], \"seed\": 1}",
         NULL},
        {"{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[65536, 65536]], "
         "\"inputs\": [\"exhaustive\", \"normal\"], \"seed\": 1}",
         "more than the limit of 134217728"},
        {"{\"kind\": \"op\", \"op\": \"add\", \"dtypes\": [\"fp32\"], \"shapes\": [[65536, 65536]], "
         "\"inputs\": [\"exhaustive\"], \"seed\": 1}",
         "more than the limit of 134217728"},
        {"{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[4096]], "
         "\"inputs\": [\"exhaustive\"], \"seed\": 1}",
         "give a unary op the shape [65536, 65536]"},
        {"{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[2, 32768, 65536]], "
         "\"inputs\": [\"exhaustive\"], \"seed\": 1}",
         "more than the limit of 134217728"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *j = json_loads(cases[k].spec, 0, NULL);
        nv_jobspec *s = NULL;
        char *ptr = NULL, *msg = NULL;
        int r = nv_jobspec_parse(j, &s, &ptr, &msg);
        bool ok = cases[k].want_msg ? r == -EINVAL && msg && strstr(msg, cases[k].want_msg)
                                    : r == 0 && s && s->n_cases == 1;
        tap_ok(ok, "streamed fp32 exhaustive %zu: %s (%s)", k,
               cases[k].want_msg ? "refused" : "accepted", msg ? msg : "ok");
        nv_jobspec_free(s);
        free(ptr);
        free(msg);
        json_decref(j);
    }
}

/* "sweep" with the class listed: the stride's range, from <= to, known keys. */
static void test_sweep_field(void)
{
    static const struct {
        const char *sweep, *ptr, *msg;
    } rows[] = {
        {"{\"stride\": 7, \"from\": -1, \"to\": 2.5}", NULL, NULL},
        {"{\"stride\": 0}", "/sweep/stride", "must be an integer in 1.."},
        {"{\"from\": 1}", "/sweep/stride", "missing"},
        {"{\"stride\": 2, \"from\": 3, \"to\": 1}", "/sweep", "'from' (3) is above 'to' (1)"},
        {"{\"stride\": 2, \"step\": 1}", "/sweep", "unknown key 'step'"},
        {"[3]", "/sweep", "must be an object"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        json_t *spec = json_loads(contract, 0, NULL);
        json_object_set_new(spec, "inputs", json_pack("[s]", "sweep"));
        json_object_set_new(spec, "sweep", json_loads(rows[k].sweep, JSON_DECODE_ANY, NULL));
        char *ptr = NULL, *msg = NULL;
        int r = nv_jobspec_validate(spec, &ptr, &msg);
        bool ok = rows[k].ptr ? r == -EINVAL && ptr && !strcmp(ptr, rows[k].ptr) && msg &&
                                    strstr(msg, rows[k].msg)
                              : r == 0;
        tap_ok(ok, "sweep = %s -> %s%s%s", rows[k].sweep, rows[k].ptr ? rows[k].ptr : "valid",
               rows[k].ptr ? ": " : "", rows[k].msg ? rows[k].msg : "");
        if (!ok)
            tap_diag("got %d '%s': '%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
        free(ptr);
        free(msg);
        json_decref(spec);
    }
}

int main(void)
{
    test_sweep_field();
    test_streamed();
    test_fields();
    test_root();
    test_cases();
    test_tensors();
    return tap_done();
}
