/* numvalctl's JUnit writer: the exact document for a hand-made job with a
 * passed, a failed and an errored case, including characters XML must escape
 * (XML 1.0 §2.4) and a control character it cannot carry at all (§2.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/unit/tap.h"

static const char WANT[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<testsuites name=\"numval\" tests=\"3\" failures=\"1\" errors=\"1\">\n"
    "  <testsuite name=\"j1 exp\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\">\n"
    "    <properties>\n"
    "      <property name=\"job.id\" value=\"j1\"/>\n"
    "      <property name=\"job.state\" value=\"failed\"/>\n"
    "      <property name=\"job.kind\" value=\"op\"/>\n"
    "      <property name=\"job.op\" value=\"exp\"/>\n"
    "    </properties>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/fp32/4x8/normal/contiguous\"/>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/bf16/16/specials/strided\">\n"
    "      <failure type=\"ulp_exceeded\" message=\"max_ulp 3, mismatches 1\">first mismatches:\n"
    "{&quot;index&quot;:[2],&quot;got&quot;:&quot;inf&quot;}\n"
    "</failure>\n"
    "    </testcase>\n"
    "    <testcase classname=\"numval.op.exp\" name=\"exp/bf16/16/specials/strided #2\">\n"
    "      <error message=\"backend said &lt;&amp;&gt; &apos;x&apos; \xef\xbf\xbd\"/>\n"
    "    </testcase>\n"
    "  </testsuite>\n"
    "</testsuites>\n";

int main(void)
{
    json_t *jobs =
        json_pack("[{s:s,s:s,s:s,s:s}]", "id", "j1", "state", "failed", "kind", "op", "op", "exp");
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
    tap_ok(jobs && cases, "fixtures built");
    char path[] = "/tmp/numval-test-junit-XXXXXX";
    int fd = mkstemp(path);
    tap_ok(fd >= 0, "temp file");
    char *err = NULL;
    int r = nvc_junit_write(path, jobs, cases, &err);
    tap_ok(r == 0, "nvc_junit_write returns 0 (%s)", err ? err : "");
    char got[4096] = "";
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    tap_ok(strcmp(got, WANT) == 0, "document equals the hand-written one");
    if (strcmp(got, WANT) != 0)
        tap_diag("got:\n%s", got);
    r = nvc_junit_write("/nonexistent-dir/x.xml", jobs, cases, &err);
    tap_ok(r < 0, "unwritable path is an error");
    free(err);
    unlink(path);
    json_decref(jobs);
    json_decref(cases);
    return tap_done();
}
