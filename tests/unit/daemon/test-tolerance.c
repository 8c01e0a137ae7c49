/* Which tolerance applies (daemon/tolerance.h): the stored row of the most
 * specific mode pattern over the shipped default, and the promotion rule for a
 * failure found under a job's own tolerance, on hand-made cases whose verdict
 * under the other tolerance is worked out by hand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/store/store.h"
#include "daemon/tolerance.h"
#include "tests/unit/tap.h"

static json_t *ulp(double u, const char *source)
{
    return json_pack("{ss sf ss ss si ss}", "metric", "ulp", "max_ulp", u, "reason_code",
                     "approximation_error", "reason", "test", "version", 0, "source", source);
}

static json_t *failed_case(const char *cls, json_t *tol, double max_ulp, double max_abs)
{
    return json_pack("{ss so sf sf}", "failure_class", cls, "tolerance", tol, "max_ulp", max_ulp,
                     "max_abs", max_abs);
}

static void fails_under(void)
{
    char why[300];
    json_t *one = ulp(1, "default");
    /* A quarter-ulp demand, max_ulp 0.49: within 1 ULP, so not a failure there. */
    json_t *c = failed_case("ulp_exceeded", ulp(0.25, "job"), 0.49, 1e-8);
    tap_ok(!nvd_tolerance_fails_under(c, one, why, sizeof why) && strstr(why, "within"),
           "tighter job tolerance, error within the default: not a failure there (%s)", why);
    json_decref(c);
    /* The same demand with max_ulp 3: over 1 ULP. */
    c = failed_case("ulp_exceeded", ulp(0.25, "job"), 3, 1e-7);
    tap_ok(nvd_tolerance_fails_under(c, one, why, sizeof why), "max_ulp 3 fails 1 ULP (%s)", why);
    json_decref(c);
    /* A looser job tolerance that failed: fails the default too, whatever the metric says. */
    c = failed_case("ulp_exceeded", ulp(1.5, "job"), 2, 1e-7);
    tap_ok(nvd_tolerance_fails_under(c, one, why, sizeof why) && strstr(why, "loose"),
           "a looser job tolerance that failed fails the default (%s)", why);
    json_decref(c);
    /* Classes no tolerance decides. */
    c = failed_case("nan_mismatch", ulp(0.25, "job"), 0, 0);
    tap_ok(nvd_tolerance_fails_under(c, one, why, sizeof why),
           "a NaN mismatch fails every tolerance");
    json_decref(c);
    /* A tighter bound against a bound default: nothing decides it, not promoted. */
    json_t *bound =
        json_pack("{ss sf ss ss}", "metric", "bound", "c", 2.0, "growth", "n", "u_dtype", "fp32");
    json_t *pairwise = json_pack("{ss sf ss ss}", "metric", "bound", "c", 1.0, "growth", "log2n",
                                 "u_dtype", "fp32");
    c = failed_case("bound_exceeded", pairwise, 2e7, 1.5);
    tap_ok(!nvd_tolerance_fails_under(c, bound, why, sizeof why),
           "a tighter bound of another growth: undecided, so not a failure there (%s)", why);
    json_decref(c);
    /* allclose default, max_abs within atol: every element passes it. */
    json_t *ac = json_pack("{ss sf sf}", "metric", "allclose", "atol", 1e-5, "rtol", 0.0);
    c = failed_case("ulp_exceeded", ulp(0.25, "job"), 0.49, 1e-6);
    tap_ok(!nvd_tolerance_fails_under(c, ac, why, sizeof why) && strstr(why, "atol"),
           "max_abs within the default's atol: passes it (%s)", why);
    json_decref(c);
    json_decref(ac);
    json_decref(bound);
    json_t *one_real = ulp(1.0, "default");
    tap_ok(nvd_tolerance_same(one, one_real) == 1, "1 and 1.0 ULP are the same");
    json_decref(one_real);
    json_t *v2 =
        json_pack("{ss si si ss}", "metric", "ulp", "max_ulp", 1, "version", 2, "source", "store");
    tap_ok(!nvd_tolerance_same(one, v2), "another version is another tolerance");
    json_decref(v2);
    json_decref(one);
}

static void current(void)
{
    char dir[] = "/tmp/nvd-test-tolerance-XXXXXX", path[300];
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/numval.db", dir);
    nvd_store_opts o = {0};
    nvd_store *s = NULL;
    char *err = NULL;
    tap_ok(nvd_store_open(path, &o, &s, &err) == 0, "store opened");
    json_t *t = NULL;
    int r = nvd_tolerance_current(s, "exp", NULL, "fp32", NULL, NULL, &t);
    const char *src = json_string_value(json_object_get(t, "source"));
    tap_ok(r == 0 && src && !strcmp(src, "default") &&
               json_number_value(json_object_get(t, "max_ulp")) == 1,
           "no stored row: the shipped default (exp fp32: 1 ULP)");
    json_decref(t);
    nvd_tolerance_new rows[] = {
        {"exp", "fp32", "*", "{\"metric\":\"ulp\",\"max_ulp\":2}", "approximation_error", "any",
         "t"},
        {"exp", "fp32", "transcendental=fast", "{\"metric\":\"ulp\",\"max_ulp\":8}",
         "accepted_fast_algorithm", "fast", "t"},
    };
    for (int i = 0; i < 2; i++) {
        json_t *row = NULL;
        nvd_store_tolerance_add(s, &rows[i], 1000 + i, &row);
        json_decref(row);
    }
    json_t *fast = json_pack("{ss}", "transcendental", "fast");
    r = nvd_tolerance_current(s, "exp", NULL, "fp32", NULL, fast, &t);
    tap_ok(r == 0 && json_number_value(json_object_get(t, "max_ulp")) == 8 &&
               json_integer_value(json_object_get(t, "version")) == 2,
           "the most specific mode pattern wins (v2, 8 ULP)");
    json_decref(t);
    r = nvd_tolerance_current(s, "exp", NULL, "fp32", NULL, NULL, &t);
    tap_ok(r == 0 && json_number_value(json_object_get(t, "max_ulp")) == 2 &&
               !strcmp(json_string_value(json_object_get(t, "source")), "store"),
           "another mode: the '*' row (v1, source store)");
    json_decref(t);
    tap_ok(nvd_tolerance_current(s, "nope", NULL, "fp32", NULL, NULL, &t) == -ENOENT,
           "an unknown op: -ENOENT");
    json_decref(fast);
    nvd_store_free(s);
    unlink(path);
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", path);
    unlink(wal);
    rmdir(dir);
}

int main(void)
{
    fails_under();
    current();
    return tap_done();
}
