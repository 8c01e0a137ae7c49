/* The job-spec field checkers (core/spec/spec_internal.h): ranges inclusive at
 * both ends, defaults for a missing key or object, wrong types, the one
 * message wording ('<value>' in quotes) word for word, errors handed in by a
 * nested parser, JSON-pointer text (RFC 6901 §3 escaping), the
 * first error winning and how a parse hands its error out. Expected texts are
 * written out by hand from the header's contract. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec_internal.h"

static json_t *obj(const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!j) {
        tap_diag("bad test JSON: %s", text);
        exit(1);
    }
    return j;
}

/* The recorded error is (ptr, msg) exactly; clears it. */
static void expect_err(nv_spec_err *e, int r, const char *ptr, const char *msg, const char *what)
{
    bool ok =
        r == -EINVAL && e->ptr && e->msg && strcmp(e->ptr, ptr) == 0 && strcmp(e->msg, msg) == 0;
    tap_ok(ok, "%s: %s: %s", what, ptr, msg);
    if (!ok)
        tap_diag("got %d '%s': '%s'", r, e->ptr ? e->ptr : "(null)", e->msg ? e->msg : "(null)");
    free(e->ptr);
    free(e->msg);
    e->ptr = e->msg = NULL;
}

static void test_int(void)
{
    json_t *j = obj("{\"lo\": 1, \"hi\": 10, \"below\": 0, \"above\": 11, \"real\": 2.5, "
                    "\"text\": \"3\", \"big\": 9223372036854775807}");
    nv_spec_err e = {0};
    int64_t x = -7;
    tap_ok(nv_spec_int(&e, j, "", "lo", 5, 1, 10, &x) == 0 && x == 1, "int: min is inclusive");
    tap_ok(nv_spec_int(&e, j, "", "hi", 5, 1, 10, &x) == 0 && x == 10, "int: max is inclusive");
    tap_ok(nv_spec_int(&e, j, "", "missing", 5, 1, 10, &x) == 0 && x == 5,
           "int: a missing key gives the default");
    tap_ok(nv_spec_int(&e, NULL, "/sizes", "in", 16, 1, 256, &x) == 0 && x == 16,
           "int: a missing object gives the default");
    tap_ok(nv_spec_int(&e, j, "", "big", 0, 0, INT64_MAX, &x) == 0 && x == INT64_MAX,
           "int: INT64_MAX fits [0, INT64_MAX]");
    tap_ok(!e.ptr && !e.msg, "int: nothing recorded for values in range");
    expect_err(&e, nv_spec_int(&e, j, "", "below", 5, 1, 10, &x), "/below",
               "'0' must be an integer in 1..10", "below min");
    expect_err(&e, nv_spec_int(&e, j, "/data", "above", 5, 1, 10, &x), "/data/above",
               "'11' must be an integer in 1..10", "above max, nested pointer");
    expect_err(&e, nv_spec_int(&e, j, "", "real", 5, 1, 10, &x), "/real",
               "'2.5' must be an integer in 1..10", "a real number");
    expect_err(&e, nv_spec_int(&e, j, "", "text", 5, 1, 10, &x), "/text",
               "'\"3\"' must be an integer in 1..10", "a string shown as JSON");
    expect_err(&e, nv_spec_int(&e, j, "", "real", 0, 0, INT64_MAX, &x), "/real",
               "'2.5' must be an integer in 0..9223372036854775807", "[0, INT64_MAX]");
    tap_ok(x == INT64_MAX, "int: *ret untouched on error");
    json_decref(j);
}

static void test_number(void)
{
    json_t *j = obj("{\"lo\": 0.5, \"hi\": 2, \"below\": 0.25, \"above\": 2.5, \"s\": \"x\"}");
    nv_spec_err e = {0};
    double x = 0;
    tap_ok(nv_spec_number(&e, j, "", "lo", 1, 0.5, 2, &x) == 0 && x == 0.5,
           "number: min is inclusive");
    tap_ok(nv_spec_number(&e, j, "", "hi", 1, 0.5, 2, &x) == 0 && x == 2,
           "number: max is inclusive, an integer is a number");
    tap_ok(nv_spec_number(&e, j, "", "gone", 1.25, 0.5, 2, &x) == 0 && x == 1.25,
           "number: a missing key gives the default");
    expect_err(&e, nv_spec_number(&e, j, "/optimizer", "below", 1, 0.5, 2, &x), "/optimizer/below",
               "'0.25' must be a number in 0.5..2", "number below");
    expect_err(&e, nv_spec_number(&e, j, "", "s", 1, 0.5, 2, &x), "/s",
               "'\"x\"' must be a number in 0.5..2", "a string is not a number");
    expect_err(&e, nv_spec_number(&e, j, "", "above", 1, 0.5, 2, &x), "/above",
               "'2.5' must be a number in 0.5..2", "number above");
    json_decref(j);
}

static void test_bool_choice(void)
{
    json_t *j = obj("{\"t\": true, \"f\": false, \"n\": 1, \"m\": \"sgd\", \"bad\": \"adam\", "
                    "\"num\": 3}");
    nv_spec_err e = {0};
    bool b = false;
    tap_ok(nv_spec_bool(&e, j, "", "t", false, &b) == 0 && b, "bool: true");
    tap_ok(nv_spec_bool(&e, j, "", "f", true, &b) == 0 && !b, "bool: false");
    tap_ok(nv_spec_bool(&e, j, "", "gone", true, &b) == 0 && b, "bool: missing gives the default");
    expect_err(&e, nv_spec_bool(&e, j, "/grad_scaler", "n", true, &b), "/grad_scaler/n",
               "'1' must be true or false", "1 is not a boolean");
    bool is_b = true;
    tap_ok(nv_spec_choice(&e, j, "/optimizer", "m", "adamw", "sgd", &is_b) == 0 && is_b,
           "choice: the second name");
    tap_ok(nv_spec_choice(&e, j, "", "gone", "adamw", "sgd", &is_b) == 0 && !is_b,
           "choice: missing is the first name");
    expect_err(&e, nv_spec_choice(&e, j, "/optimizer", "bad", "adamw", "sgd", &is_b),
               "/optimizer/bad", "'adam' must be \"adamw\" or \"sgd\"", "choice: unknown name");
    expect_err(&e, nv_spec_choice(&e, j, "", "num", "mlp", "transformer", &is_b), "/num",
               "'(not a string)' must be \"mlp\" or \"transformer\"", "choice: not a string");
    json_decref(j);
}

static void test_pointer(void)
{
    char buf[64];
    nv_spec_pointer(buf, sizeof buf, "", "steps");
    tap_ok(strcmp(buf, "/steps") == 0, "pointer: top level '%s'", buf);
    nv_spec_pointer(buf, sizeof buf, "/amp/policy", "fp32");
    tap_ok(strcmp(buf, "/amp/policy/fp32") == 0, "pointer: nested '%s'", buf);
    /* RFC 6901 §3: '~' is written "~0" and '/' is written "~1". */
    nv_spec_pointer(buf, sizeof buf, "/build", "a/b~c");
    tap_ok(strcmp(buf, "/build/a~1b~0c") == 0, "pointer: escaped '%s'", buf);
    nv_spec_pointer(buf, sizeof buf, "", "");
    tap_ok(strcmp(buf, "/") == 0, "pointer: the empty key is '/'");
    char small[7]; /* room for 6 characters */
    nv_spec_pointer(small, sizeof small, "/ab", "c/d");
    tap_ok(strcmp(small, "/ab/c") == 0, "pointer: cut before an escape that does not fit '%s'",
           small);
    nv_spec_pointer(small, sizeof small, "/abcdefghij", "k");
    tap_ok(strcmp(small, "/abcde") == 0, "pointer: a long base is cut and terminated '%s'", small);
    char *t = nv_json_pointer_escape("~/x");
    tap_ok(t && strcmp(t, "~0~1x") == 0, "nv_json_pointer_escape shares the escaping");
    free(t);
}

static void test_keys_and_errors(void)
{
    static const char *const keys[] = {"a", "b", NULL};
    json_t *j = obj("{\"a\": 1, \"b\": 2}");
    tap_ok(nv_spec_unknown_key(j, keys) == NULL, "unknown key: none");
    json_object_set_new(j, "x/y", json_true());
    const char *k = nv_spec_unknown_key(j, keys);
    tap_ok(k && strcmp(k, "x/y") == 0, "unknown key: named");
    json_t *arr = obj("[1]");
    tap_ok(nv_spec_unknown_key(arr, keys) == NULL, "unknown key: not an object has none");
    json_decref(arr);

    nv_spec_err e = {0};
    tap_ok(nv_spec_fail(&e, "/first", "one %d", 1) == -EINVAL, "fail: -EINVAL");
    tap_ok(nv_spec_fail(&e, "/second", "two") == -EINVAL, "fail: later errors report -EINVAL");
    tap_ok(strcmp(e.ptr, "/first") == 0 && strcmp(e.msg, "one 1") == 0,
           "fail: the first error wins");
    char *ptr = NULL, *msg = NULL;
    tap_ok(nv_spec_err_finish(&e, -EINVAL, &ptr, &msg) == -EINVAL && ptr && msg &&
               strcmp(ptr, "/first") == 0 && !e.ptr && !e.msg,
           "finish: hands the error out and leaves e empty");
    free(ptr);
    free(msg);
    tap_ok(nv_spec_err_finish(&e, 0, &ptr, &msg) == 0, "finish: success");
    nv_spec_fail(&e, "", "dropped");
    tap_ok(nv_spec_err_finish(&e, 0, NULL, NULL) == -EINVAL && !e.msg,
           "finish: a recorded error fails a parse that returned 0; NULL outputs are freed");
    nv_spec_fail(&e, "/x", "m");
    tap_ok(nv_spec_err_finish(&e, -ENOMEM, &ptr, &msg) == -ENOMEM && !e.ptr,
           "finish: -ENOMEM wins over a recorded error");
    tap_ok(nv_spec_err_finish(&e, -EINVAL, &ptr, &msg) == -ENOMEM,
           "finish: -EINVAL without a message is out of memory");

    /* An error handed out by a nested parser enters the record as it was. */
    tap_ok(nv_spec_fail_from(&e, 0, "/x", "m") == 0 && !e.msg, "fail_from: success passes");
    tap_ok(nv_spec_fail_from(&e, -ENOMEM, "/x", "m") == -ENOMEM && !e.msg,
           "fail_from: -ENOMEM passes, nothing recorded");
    tap_ok(nv_spec_fail_from(&e, -EINVAL, "/x", NULL) == -ENOMEM && !e.msg,
           "fail_from: -EINVAL without a message is out of memory");
    expect_err(&e, nv_spec_fail_from(&e, -EINVAL, "/graph/nodes/1", "node 'b': 100%"),
               "/graph/nodes/1", "node 'b': 100%", "fail_from: recorded verbatim");
    expect_err(&e, nv_spec_fail_from(&e, -EINVAL, NULL, "m"), "", "m",
               "fail_from: no pointer is the root");

    /* Values in messages: compact JSON, cut to 59 characters with "...". */
    json_t *longs =
        json_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    char *s = nv_spec_show(longs);
    tap_ok(s && strlen(s) == 59 && strcmp(s + 56, "...") == 0 && s[0] == '"', "show: cut at 59");
    free(s);
    json_decref(longs);
    json_t *small = obj("[1, {\"a\": 2}]");
    s = nv_spec_show(small);
    tap_ok(s && strcmp(s, "[1,{\"a\":2}]") == 0, "show: compact '%s'", s ? s : "");
    free(s);
    expect_err(&e, nv_spec_fail_value(&e, "/v", small, "is wrong"), "/v",
               "'[1,{\"a\":2}]' is wrong", "fail_value");
    json_decref(small);
    json_decref(j);
}

int main(void)
{
    test_int();
    test_number();
    test_bool_choice();
    test_pointer();
    test_keys_and_errors();
    return tap_done();
}
