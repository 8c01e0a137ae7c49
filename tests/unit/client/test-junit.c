/* numvalctl's JUnit writer. The exact document for a hand-made op job with a
 * passed, a failed and an errored case, including characters XML must escape
 * (XML 1.0 §2.4) and a control character it cannot carry at all (§2.2); then
 * each other kind's verdicts as test cases, on results shaped as the worker
 * writes them: a long-run job's acceptance rules (it has no cases), a gradient
 * case's checks, a fused case's outputs and first divergent node, a suite
 * replay's cases. Every test case has a time; suite names carry no job id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/unit/tap.h"

/* The job ran 2 s (started_at .. finished_at) and its cases have no timing of
 * their own: 2/3 s each. */
static const char WANT[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<testsuites name=\"numval\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\" "
    "time=\"2.000\">\n"
    "  <testsuite name=\"numval.op.exp\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\" "
    "time=\"2.000\" timestamp=\"2026-11-29T11:13:44.401Z\">\n"
    "    <properties>\n"
    "      <property name=\"job.id\" value=\"j1\"/>\n"
    "      <property name=\"job.state\" value=\"failed\"/>\n"
    "      <property name=\"job.kind\" value=\"op\"/>\n"
    "      <property name=\"job.op\" value=\"exp\"/>\n"
    "    </properties>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/fp32/4x8/normal/contiguous\" "
    "time=\"0.667\"/>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/bf16/16/specials/strided\" "
    "time=\"0.667\">\n"
    "      <failure type=\"ulp_exceeded\" message=\"max_ulp 3, mismatches 1\">first mismatches:\n"
    "{&quot;index&quot;:[2],&quot;got&quot;:&quot;inf&quot;}\n"
    "</failure>\n"
    "    </testcase>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/bf16/16/specials/strided #2\" "
    "time=\"0.667\">\n"
    "      <error message=\"backend said &lt;&amp;&gt; &apos;x&apos; \xef\xbf\xbd\"/>\n"
    "    </testcase>\n"
    "  </testsuite>\n"
    "</testsuites>\n";

/* A failed long-run job as GET /api/v1/jobs/{id} returns it (no cases). */
static const char LONGRUN[] =
    "{\"id\": 7, \"state\": \"failed\", \"kind\": \"longrun\", \"op\": null,"
    " \"started_at\": \"2026-11-29T11:00:00.000Z\", \"finished_at\": \"2026-11-29T11:00:08.000Z\","
    " \"spec\": {\"kind\": \"longrun\", \"name\": \"mlp-small-fp16\", \"model\": \"mlp\"},"
    " \"result\": {\"verdict\": \"failed\", \"kind\": \"longrun\", \"model\": \"mlp\","
    "  \"acceptance\": {\"verdict\": \"failed\", \"failure_class\": \"gradient_underflow\","
    "   \"reason\": \"gradient underflow: 89.0% of the device's low-precision gradient elements "
    "were exactly zero\","
    "   \"final_loss\": {\"welch\": {\"rule\": \"Welch's two-sided t-test\", \"t\": 1.997,"
    "      \"df\": 3.186, \"p\": 0.1344, \"alpha\": 0.01, \"passed\": true},"
    "     \"trimmed_mean\": {\"rule\": \"trimmed means\", \"reference\": 1.0424, \"device\": "
    "1.2350,"
    "      \"band\": 0.2658, \"passed\": true}},"
    "   \"envelope\": {\"rule\": \"inside the reference envelope\", \"margin\": 0.05,"
    "     \"passed\": false, \"violations\": 9, \"first_violations\": [{\"step\": 5, \"seed\": 2,"
    "      \"loss\": 1.5733, \"low\": 1.2786, \"high\": 1.5637}]},"
    "   \"determinism\": {\"rule\": \"repeat\", \"seed\": 1, \"bit_identical\": true}}}}";

/* A gradient case whose device check failed for input x. */
static const char GRAD_JOB[] =
    "{\"id\": 8, \"state\": \"failed\", \"kind\": \"gradient\", \"op\": \"mul\","
    " \"spec\": {\"kind\": \"gradient\", \"op\": \"mul\"}}";
static const char GRAD_CASES[] =
    "[{\"index\": 0, \"op\": \"mul\", \"dtype\": \"fp32\", \"shape\": [16], \"input\": \"normal\","
    "  \"verdict\": \"failed\", \"failure_class\": \"gradient_mismatch\","
    "  \"checks\": {\"formula\": {\"x\": {\"passed\": true}, \"y\": {\"passed\": true}},"
    "   \"device\": {\"x\": {\"passed\": false, \"mismatches\": 3, \"max_abs_error\": 0.5,"
    "     \"headroom\": 2.7e7}, \"y\": {\"passed\": true, \"headroom\": 0.1}},"
    "   \"second_order\": {\"x\": {\"passed\": true}, \"device_double_backward\": \"not offered\"},"
    "   \"determinism\": {\"passed\": true, \"bitwise_equal\": true}},"
    "  \"failed_checks\": [\"device\"], \"artifact\": \"ab12\"}]";

/* A fused case whose output y diverged after its input did; first divergent: mm. */
static const char FUSED_JOB[] =
    "{\"id\": 9, \"state\": \"failed\", \"kind\": \"fused\", \"op\": \"fused\","
    " \"spec\": {\"kind\": \"fused\", \"name\": \"mlp_epilogue\"}}";
static const char FUSED_CASES[] =
    "[{\"index\": 0, \"op\": \"fused\", \"dtype\": \"bf16\", \"input\": \"normal\","
    "  \"verdict\": \"failed\", \"failure_class\": \"bound_exceeded\","
    "  \"error\": \"first divergent node 'mm' (op 'matmul')\","
    "  \"nodes\": [{\"name\": \"mm\", \"op\": \"matmul\", \"output\": false, \"state\": "
    "\"diverged\"},"
    "   {\"name\": \"y\", \"op\": \"gelu\", \"dtype\": \"bf16\", \"output\": true,"
    "    \"state\": \"diverged_after_input\", \"tolerance\": {\"metric\": \"ulp\", \"max_ulp\": 1},"
    "    \"fused\": {\"local\": {\"max_ulp\": 9, \"headroom\": 9, \"mismatches\": 4}}},"
    "   {\"name\": \"z\", \"op\": \"relu\", \"dtype\": \"bf16\", \"output\": true,"
    "    \"state\": \"within_tolerance\"}],"
    "  \"first_divergent\": {\"node\": \"mm\", \"op\": \"matmul\", \"dtype\": \"fp32\","
    "   \"max_ulp\": 25600, \"headroom\": 12, \"mismatches\": 7},"
    "  \"first_mismatches\": [{\"node\": \"mm\", \"index\": [0, 1]}],"
    "  \"timing_ms\": {\"reference\": 1000, \"fused_capture\": 500}}]";

/* A suite replay whose case still fails; replays report no mismatches. */
static const char SUITE_JOB[] =
    "{\"id\": 10, \"state\": \"failed\", \"kind\": \"suite\", \"spec\": {\"kind\": \"suite\"}}";
static const char SUITE_CASES[] =
    "[{\"index\": 0, \"suite_case\": 3, \"signature\": \"0f3a\", \"artifact\": \"4709\","
    "  \"verdict\": \"failed\", \"op\": \"sum\", \"dtype\": \"fp32\", \"shape\": [1, 5001],"
    "  \"stored_class\": \"bound_exceeded\", \"failure_class\": \"bound_exceeded\","
    "  \"max_ulp\": 2.1e7, \"mismatches\": 1, \"bit_identical\": true},"
    " {\"index\": 1, \"suite_case\": 4, \"verdict\": \"passed\", \"op\": \"exp\","
    "  \"dtype\": \"fp32\", \"shape\": [4]}]";

/* A contract job: three judged fields, one contradicted (its evidence an
 * object, as fast_math's is), and a long evidence entry to cut. */
static const char CONTRACT_JOB[] =
    "{\"id\": 11, \"state\": \"failed\", \"kind\": \"contract\","
    " \"spec\": {\"kind\": \"contract\", \"name\": \"contract\"},"
    " \"started_at\": \"2026-11-29T11:13:42.000Z\", \"finished_at\": \"2026-11-29T11:13:45.000Z\","
    " \"result\": {\"kind\": \"contract\", \"verdict\": \"failed\","
    "  \"judged\": [{\"field\": \"contract.fp32.ftz\", \"declared\": \"kept\", \"measured\": true},"
    "   {\"field\": \"contract.fp32.fast_math\", \"declared\": false, \"measured\": true},"
    "   {\"field\": \"contract.bf16.deterministic(sum)\", \"declared\": true, \"measured\": true}],"
    "  \"mismatches\": [{\"class\": \"contract_mismatch\", \"field\": \"contract.fp32.ftz\","
    "    \"declared\": \"kept\", \"measured\": true, \"evidence\": [{\"property\": \"ftz\","
    "    \"pad\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAZZ\"}]},"
    "   {\"class\": \"contract_mismatch\", \"field\": \"contract.fp32.fast_math\","
    "    \"declared\": false, \"measured\": true, \"evidence\": {\"ftz\": true}}]}}";

static char *write_read(const json_t *jobs, const json_t *cases)
{
    char path[] = "/tmp/numval-test-junit-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    char *err = NULL;
    int r = nvc_junit_write(path, jobs, cases, &err);
    free(err);
    static char got[65536];
    got[0] = '\0';
    FILE *f = r == 0 ? fopen(path, "r") : NULL;
    size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
    return r == 0 ? got : NULL;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The text of the <testcase> named name (to its "/>" or "</testcase>"), or "". */
static const char *testcase(const char *doc, const char *name, char *buf, size_t n)
{
    char key[300];
    snprintf(key, sizeof key, "name=\"%s\"", name);
    const char *p = strstr(doc, key);
    buf[0] = '\0';
    if (!p)
        return buf;
    const char *gt = strchr(p, '>');
    const char *e = gt && gt[-1] == '/' ? gt : strstr(p, "</testcase>");
    snprintf(buf, n, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
    return buf;
}

static json_t *load(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j)
        tap_diag("fixture: %s (line %d)", e.text, e.line);
    return j;
}

static void op_job(void)
{
    json_t *jobs = json_pack("[{s:s,s:s,s:s,s:s,s:s,s:s}]", "id", "j1", "state", "failed", "kind",
                             "op", "op", "exp", "started_at", "2026-11-29T11:13:42.401Z",
                             "finished_at", "2026-11-29T11:13:44.401Z");
    json_t *cases = json_pack(
        "[[{s:i,s:s,s:s,s:s,s:[i,i],s:s,s:s},"
        "{s:i,s:s,s:s,s:s,s:[i],s:s,s:s,s:i,s:i,s:s,s:[{s:[i],s:s}]},"
        "{s:i,s:s,s:s,s:s,s:[i],s:s,s:s,s:s}]]",
        "index", 0, "verdict", "passed", "op", "exp", "dtype", "fp32", "shape", 4, 8, "input",
        "normal", "layout", "contiguous", "index", 1, "verdict", "failed", "op", "exp", "dtype",
        "bf16", "shape", 16, "input", "specials", "layout", "strided", "max_ulp", 3, "mismatches",
        1, "failure_class", "ulp_exceeded", "first_mismatches", "index", 2, "got", "inf", "index",
        2, "verdict", "error", "op", "exp", "dtype", "bf16", "shape", 16, "input", "specials",
        "layout", "strided", "error", "backend said <&> 'x' \x01");
    tap_ok(jobs && cases, "op fixtures built");
    const char *got = write_read(jobs, cases);
    tap_ok(got && strcmp(got, WANT) == 0, "op job: the document equals the hand-written one");
    if (got && strcmp(got, WANT) != 0)
        tap_diag("got:\n%s", got);
    char *err = NULL;
    int r = nvc_junit_write("/nonexistent-dir/x.xml", jobs, cases, &err);
    tap_ok(r < 0 && err && strstr(err, "/nonexistent-dir/x.xml"), "unwritable path is an error");
    free(err);
    json_decref(jobs);
    json_decref(cases);
}

static void longrun_job(void)
{
    json_t *jobs = json_pack("[o]", load(LONGRUN)), *cases = json_pack("[[]]");
    const char *got = write_read(jobs, cases);
    char tc[4096];
    tap_ok(got != NULL, "long-run job written");
    got = got ? got : "";
    tap_ok(strstr(got, "<testsuite name=\"numval.longrun.mlp-small-fp16\" tests=\"4\" "
                       "failures=\"1\" errors=\"0\" skipped=\"0\" time=\"8.000\"") != NULL,
           "long run: suite numval.longrun.NAME with one test case per acceptance rule, 1 failed");
    tap_ok(strstr(testcase(got, "final_loss.welch", tc, sizeof tc), "time=\"2.000\"") &&
               !strstr(tc, "failure"),
           "Welch's test passed (the job's 8 s over its 4 rules)");
    tap_ok(strstr(testcase(got, "final_loss.trimmed_mean", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "trimmed-mean band passed");
    testcase(got, "envelope", tc, sizeof tc);
    tap_ok(strstr(tc, "<failure type=\"gradient_underflow\" message=\"9 logged steps outside the "
                      "reference envelope; first: step 5 seed 2 loss 1.573 not in [1.279, "
                      "1.564]\">gradient underflow: 89.0%") != NULL,
           "envelope failed with the rule's reason and the acceptance reason");
    if (!strstr(tc, "message=\"9 logged"))
        tap_diag("envelope: %s", tc);
    tap_ok(strstr(testcase(got, "determinism", tc, sizeof tc), "name=") && !strstr(tc, "failure"),
           "determinism passed");
    json_decref(jobs);
    json_decref(cases);
}

static void gradient_job(void)
{
    json_t *jobs = json_pack("[o]", load(GRAD_JOB)), *cases = json_pack("[o]", load(GRAD_CASES));
    const char *got = write_read(jobs, cases);
    char tc[4096];
    got = got ? got : "";
    tap_ok(strstr(got, "<testsuite name=\"numval.gradient.mul\" tests=\"4\" failures=\"1\"") !=
               NULL,
           "gradient: one test case per check of the case, 1 failed");
    tap_ok(strstr(testcase(got, "mul/fp32/16/normal/formula", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "formula check passed");
    testcase(got, "mul/fp32/16/normal/device", tc, sizeof tc);
    tap_ok(strstr(tc, "<failure type=\"gradient_mismatch\" message=\"device check failed: input x: "
                      "mismatches 3, max_abs_error 0.5, headroom 2.7e+07\"") &&
               strstr(tc, "artifact: ab12"),
           "device check failed naming the input, its errors and the artifact");
    if (!strstr(tc, "input x"))
        tap_diag("device: %s", tc);
    tap_ok(strstr(testcase(got, "mul/fp32/16/normal/second_order", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "second order passed (the device_double_backward note is no check)");
    tap_ok(strstr(testcase(got, "mul/fp32/16/normal/determinism", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "determinism passed");
    json_decref(jobs);
    json_decref(cases);
}

static void fused_job(void)
{
    json_t *jobs = json_pack("[o]", load(FUSED_JOB)), *cases = json_pack("[o]", load(FUSED_CASES));
    const char *got = write_read(jobs, cases);
    char tc[4096];
    got = got ? got : "";
    tap_ok(strstr(got, "<testsuite name=\"numval.fused.mlp_epilogue\" tests=\"3\" failures=\"2\" "
                       "errors=\"0\" skipped=\"0\" time=\"1.500\"") != NULL,
           "fused: suite named by the graph; a test case per output and the first divergent "
           "node, timed by the case's timing_ms");
    testcase(got, "fused/bf16/normal/output y", tc, sizeof tc);
    tap_ok(strstr(tc, "time=\"0.500\"") &&
               strstr(tc, "message=\"output &apos;y&apos; (gelu, bf16) diverged_after_input: "
                          "max_ulp 9, headroom 9, mismatches 4"),
           "output y failed with its error");
    tap_ok(strstr(testcase(got, "fused/bf16/normal/output z", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "output z passed");
    testcase(got, "fused/bf16/normal/first divergent node", tc, sizeof tc);
    tap_ok(strstr(tc, "<failure type=\"bound_exceeded\" message=\"node &apos;mm&apos; (op "
                      "matmul, judged in fp32): max_ulp 25600, headroom 12, mismatches 7\">") &&
               strstr(tc, "first mismatches:\n{&quot;node&quot;"),
           "first divergent node failed naming the node, with its mismatches");
    json_decref(jobs);
    json_decref(cases);
}

static void suite_job(void)
{
    json_t *jobs = json_pack("[o]", load(SUITE_JOB)), *cases = json_pack("[o]", load(SUITE_CASES));
    const char *got = write_read(jobs, cases);
    char tc[4096];
    got = got ? got : "";
    tap_ok(strstr(got, "<testsuite name=\"numval.suite.suite\" tests=\"2\" failures=\"1\"") != NULL,
           "suite replay: one test case per replayed suite case");
    testcase(got, "suite case 3 op sum/fp32/1x5001", tc, sizeof tc);
    tap_ok(strstr(tc, "message=\"still fails: bound_exceeded (promoted as bound_exceeded), max_ulp "
                      "2.1e+07, mismatches 1, output bit-identical to the stored one\"") != NULL,
           "a failing replay says how it fails now");
    tap_ok(!strstr(got, "first mismatches:"),
           "and no empty 'first mismatches:' heading (a replay reports none)");
    tap_ok(strstr(tc, "artifact: 4709") != NULL, "the replayed artifact is named");
    json_decref(jobs);
    json_decref(cases);
}

static void contract_job(void)
{
    json_t *job = load(CONTRACT_JOB);
    json_t *jobs = json_pack("[O]", job), *cases = json_pack("[[]]");
    const char *got = write_read(jobs, cases);
    char tc[4096];
    got = got ? got : "";
    tap_ok(strstr(got, "<testsuite name=\"numval.contract.contract\" tests=\"3\" failures=\"2\"") !=
               NULL,
           "contract job: one test case per judged field, the 2 mismatches failed");
    testcase(got, "contract.fp32.ftz", tc, sizeof tc);
    tap_ok(strstr(tc, "<failure type=\"contract_mismatch\" message=\"declared kept, measured "
                      "true\">field: contract.fp32.ftz\ndeclared: kept\nmeasured: true\n"
                      "evidence: {") &&
               strstr(tc, " ...\n") && !strstr(tc, "ZZ"),
           "ftz failed with type, values and the first evidence entry cut short");
    if (!strstr(tc, "contract_mismatch"))
        tap_diag("ftz: %s", tc);
    tap_ok(strstr(testcase(got, "contract.fp32.fast_math", tc, sizeof tc),
                  "evidence: {&quot;ftz&quot;:true}") != NULL,
           "an evidence object is shown whole");
    tap_ok(strstr(testcase(got, "contract.bf16.deterministic(sum)", tc, sizeof tc), "name=") &&
               !strstr(tc, "failure"),
           "a judged field that agrees is a passed test case");
    json_decref(jobs);
    /* a result stored before "judged" existed: its mismatches alone */
    json_object_del(json_object_get(job, "result"), "judged");
    jobs = json_pack("[O]", job);
    got = write_read(jobs, cases);
    tap_ok(got && count_of(got, "<testcase ") == 2 && count_of(got, "<failure ") == 2,
           "without judged: the mismatches as failed test cases");
    json_decref(jobs);
    json_decref(cases);
    json_decref(job);
}

static void times_everywhere(void)
{
    json_t *jobs =
        json_pack("[o,o,o,o]", load(LONGRUN), load(GRAD_JOB), load(FUSED_JOB), load(SUITE_JOB));
    json_t *cases = json_pack("[[],o,o,o]", load(GRAD_CASES), load(FUSED_CASES), load(SUITE_CASES));
    const char *got = write_read(jobs, cases);
    got = got ? got : "";
    int n = count_of(got, "<testcase "), t = 0;
    for (const char *p = got; (p = strstr(p, "<testcase ")); p++) {
        const char *e = strchr(p, '>');
        const char *tm = strstr(p, " time=\"");
        t += tm && e && tm < e;
    }
    tap_ok(n == 13 && t == n, "every one of the %d test cases has a time attribute (%d)", n, t);
    tap_ok(strstr(got, "<testsuites name=\"numval\" tests=\"13\" failures=\"5\" errors=\"0\"") !=
               NULL,
           "the totals add the jobs' test cases");
    json_decref(jobs);
    json_decref(cases);
}

int main(void)
{
    op_job();
    longrun_job();
    gradient_job();
    fused_job();
    suite_job();
    contract_job();
    times_everywhere();
    return tap_done();
}
