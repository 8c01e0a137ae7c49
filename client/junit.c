/* JUnit XML for CI systems (docs/CLIENT.md "JUnit XML"): one <testsuite> per job,
 * named numval.KIND.NAME so that it is the same in every run, and test cases that
 * carry the verdicts of the job's kind: an op case each; a gradient case's checks;
 * a fused case's outputs and its first divergent node; a long-run job's acceptance
 * rules; a suite replay's cases; a contract job's judged fields. Every test case has a time. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "junit_internal.h"

/* XML 1.0 §2.4 and §2.2: escape markup characters; characters outside the Char
 * production (C0 controls other than tab, LF, CR) cannot appear at all, even as
 * references, so they are written as U+FFFD. */
static void xml_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        case '\t':
        case '\n':
        case '\r':
            fputc(*p, f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fputs("\xef\xbf\xbd", f);
            else
                fputc(*p, f);
        }
    }
}

/* A JSON value as text into f ("-" when missing). */
void nvc_junit_put_json(FILE *f, const json_t *v)
{
    char *s = nvc_json_text(v);
    fputs(s ? s : "-", f);
    free(s);
}

bool nvc_text_begin(nvc_text *t)
{
    t->buf = NULL;
    t->len = 0;
    t->f = open_memstream(&t->buf, &t->len);
    return t->f != NULL;
}

char *nvc_text_end(nvc_text *t)
{
    if (!t->f)
        return NULL;
    fclose(t->f);
    t->f = NULL;
    return t->buf;
}

/* ---- the test cases of a job ----
 * Each is a JSON object {"name", "status": passed | failed | error | skipped,
 * "type", "message", "text", "seconds" (the case's own timing, or absent)};
 * the job's duration is divided over those without a timing when written. */

int nvc_junit_add_tc(json_t *list, const char *name, const char *status, const char *type,
                     const char *message, const char *body)
{
    json_t *tc = json_pack("{ss ss}", "name", name, "status", status);
    if (!tc)
        return -ENOMEM;
    if (type && *type)
        json_object_set_new(tc, "type", json_string(type));
    if (message)
        json_object_set_new(tc, "message", json_string(message));
    if (body && *body)
        json_object_set_new(tc, "text", json_string(body));
    return json_array_append_new(list, tc) < 0 ? -ENOMEM : 0;
}

/* "exp/fp32/64x257/normal/contiguous"; fields a kind does not have are left out. */
static void case_name(const json_t *cs, char *buf, size_t n)
{
    char shape[160] = "";
    const json_t *sh = json_object_get(cs, "shape");
    size_t off = 0;
    for (size_t i = 0; json_is_array(sh) && i < json_array_size(sh) && off < sizeof(shape); i++)
        off += snprintf(shape + off, sizeof(shape) - off, "%s%lld", i ? "x" : "",
                        (long long)json_integer_value(json_array_get(sh, i)));
    if (json_is_array(sh) && json_array_size(sh) == 0)
        snprintf(shape, sizeof(shape), "scalar");
    const char *parts[] = {nvc_jstr(cs, "op"), nvc_jstr(cs, "dtype"), shape, nvc_jstr(cs, "input"),
                           nvc_jstr(cs, "layout")};
    off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < 5 && off < n; i++)
        if (*parts[i])
            off += snprintf(buf + off, n - off, "%s%s", off ? "/" : "", parts[i]);
    if (off == 0)
        snprintf(buf, n, "case %lld", (long long)json_integer_value(json_object_get(cs, "index")));
}

/* The first mismatches and the artifact id of a failed case; "" when it has
 * neither (a suite replay reports no mismatches: no empty heading then). */
static void mismatch_text(FILE *f, const json_t *cs)
{
    const json_t *fm = json_object_get(cs, "first_mismatches");
    if (json_array_size(fm) > 0) {
        fputs("first mismatches:\n", f);
        size_t i;
        const json_t *m;
        json_array_foreach(fm, i, m)
        {
            nvc_junit_put_json(f, m);
            fputc('\n', f);
        }
    }
    if (*nvc_jstr(cs, "artifact"))
        fprintf(f, "artifact: %s\n", nvc_jstr(cs, "artifact"));
    if (*nvc_jstr(cs, "minimized_artifact"))
        fprintf(f, "minimized artifact: %s\n", nvc_jstr(cs, "minimized_artifact"));
}

/* An errored case: its error text, else its verdict. */
static int add_error(json_t *list, const char *name, const json_t *cs)
{
    const char *v = nvc_jstr(cs, "verdict");
    return nvc_junit_add_tc(list, name, "error", nvc_jstr(cs, "failure_class"),
                            *nvc_jstr(cs, "error") ? nvc_jstr(cs, "error")
                            : *v                   ? v
                                                   : "error",
                            NULL);
}

static int op_case(json_t *list, const char *name, const json_t *cs)
{
    const char *v = nvc_jstr(cs, "verdict");
    if (!strcmp(v, "passed"))
        return nvc_junit_add_tc(list, name, "passed", NULL, NULL, NULL);
    if (strcmp(v, "failed"))
        return add_error(list, name, cs);
    nvc_text m, b;
    if (!nvc_text_begin(&m))
        return -ENOMEM;
    if (!nvc_text_begin(&b)) {
        free(nvc_text_end(&m));
        return -ENOMEM;
    }
    fputs("max_ulp ", m.f);
    nvc_junit_put_json(m.f, json_object_get(cs, "max_ulp"));
    fputs(", mismatches ", m.f);
    nvc_junit_put_json(m.f, json_object_get(cs, "mismatches"));
    if (json_object_get(cs, "tolerance")) {
        fputs(", tolerance ", m.f);
        nvc_junit_put_json(m.f, json_object_get(cs, "tolerance"));
    }
    if (*nvc_jstr(cs, "error"))
        fprintf(b.f, "%s\n", nvc_jstr(cs, "error"));
    mismatch_text(b.f, cs);
    char *ms = nvc_text_end(&m), *bs = nvc_text_end(&b);
    const char *cls = nvc_jstr(cs, "failure_class");
    int r =
        ms && bs ? nvc_junit_add_tc(list, name, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
    free(ms);
    free(bs);
    return r;
}

/* Whether a gradient check passed: its own "passed", else every per-input
 * entry's (objects with "passed"); what failed goes to detail. */
static bool check_passed(const json_t *chk, FILE *detail)
{
    const json_t *p = json_object_get(chk, "passed");
    if (json_is_boolean(p)) {
        if (!json_is_true(p) && json_object_get(chk, "first_difference")) {
            fputs("first difference: ", detail);
            nvc_junit_put_json(detail, json_object_get(chk, "first_difference"));
        }
        return json_is_true(p);
    }
    bool ok = true;
    const char *input;
    const json_t *e;
    json_object_foreach((json_t *)chk, input, e)
    {
        if (!json_is_object(e) || !json_is_boolean(json_object_get(e, "passed")) ||
            json_is_true(json_object_get(e, "passed")))
            continue;
        fprintf(detail, "%sinput %s: mismatches ", ok ? "" : "; ", input);
        nvc_junit_put_json(detail, json_object_get(e, "mismatches"));
        static const char *const keys[] = {"max_abs_error", "worst_ratio", "headroom"};
        for (int k = 0; k < 3; k++)
            if (json_object_get(e, keys[k])) {
                fprintf(detail, ", %s ", keys[k]);
                nvc_junit_put_json(detail, json_object_get(e, keys[k]));
            }
        ok = false;
    }
    return ok;
}

/* A gradient case: one test case per check it ran (formula, device,
 * second_order, determinism, double_backward, contract), named CASE/CHECK; a
 * check listed in the case's failed_checks fails. */
static int gradient_case(json_t *list, const char *name, const json_t *cs)
{
    const json_t *checks = json_object_get(cs, "checks");
    const char *v = nvc_jstr(cs, "verdict");
    if (strcmp(v, "passed") && strcmp(v, "failed"))
        return add_error(list, name, cs);
    static const char *const order[] = {"formula",     "device",          "second_order",
                                        "determinism", "double_backward", "contract"};
    const json_t *failed = json_object_get(cs, "failed_checks");
    int n = 0;
    for (int k = 0; k < 6; k++) {
        const json_t *chk = json_object_get(checks, order[k]);
        if (!json_is_object(chk))
            continue;
        char tn[640];
        snprintf(tn, sizeof tn, "%s/%s", name, order[k]);
        nvc_text d;
        if (!nvc_text_begin(&d))
            return -ENOMEM;
        bool ok = check_passed(chk, d.f);
        size_t fi;
        const json_t *fv;
        json_array_foreach(failed, fi, fv) if (json_is_string(fv) &&
                                               !strcmp(json_string_value(fv), order[k])) ok = false;
        char *ds = nvc_text_end(&d);
        int r;
        if (ok) {
            r = nvc_junit_add_tc(list, tn, "passed", NULL, NULL, NULL);
        } else {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s check failed: %s", order[k], ds ? ds : "");
            nvc_text b;
            r = nvc_text_begin(&b) ? 0 : -ENOMEM;
            char *bs = NULL;
            if (r == 0) {
                if (!strcmp(order[k], "device") && *nvc_jstr(cs, "failure_class"))
                    fprintf(b.f, "failure class: %s\n", nvc_jstr(cs, "failure_class"));
                mismatch_text(b.f, cs);
                bs = nvc_text_end(&b);
                /* the checks of the device (the formula and second-order checks
                 * test the reference) carry the case's failure class */
                bool dev = !strcmp(order[k], "device") || !strcmp(order[k], "determinism") ||
                           !strcmp(order[k], "double_backward") || !strcmp(order[k], "contract");
                const char *cls = dev ? nvc_jstr(cs, "failure_class") : "";
                r = nvc_junit_add_tc(list, tn, "failed", *cls ? cls : "gradient_check", msg, bs);
            }
            free(bs);
        }
        free(ds);
        if (r < 0)
            return r;
        n++;
    }
    /* A case without checks still carries its verdict. */
    if (n == 0)
        return op_case(list, name, cs);
    return 0;
}

/* A fused case: one test case per graph output and one for the first
 * divergent node (passes when no node diverged). */
static int fused_case(json_t *list, const char *name, const json_t *cs)
{
    const char *v = nvc_jstr(cs, "verdict");
    if (strcmp(v, "passed") && strcmp(v, "failed"))
        return add_error(list, name, cs);
    size_t i;
    const json_t *node;
    json_array_foreach(json_object_get(cs, "nodes"), i, node)
    {
        if (!json_is_true(json_object_get(node, "output")))
            continue;
        char tn[700];
        snprintf(tn, sizeof tn, "%s/output %s", name, nvc_jstr(node, "name"));
        const char *state = nvc_jstr(node, "state");
        int r;
        if (!strcmp(state, "within_tolerance")) {
            r = nvc_junit_add_tc(list, tn, "passed", NULL, NULL, NULL);
        } else {
            const json_t *loc = json_object_get(json_object_get(node, "fused"), "local");
            nvc_text m;
            if (!nvc_text_begin(&m))
                return -ENOMEM;
            fprintf(m.f, "output '%s' (%s, %s) %s: max_ulp ", nvc_jstr(node, "name"),
                    nvc_jstr(node, "op"), nvc_jstr(node, "dtype"), state);
            nvc_junit_put_json(m.f, json_object_get(loc, "max_ulp"));
            fputs(", headroom ", m.f);
            nvc_junit_put_json(m.f, json_object_get(loc, "headroom"));
            fputs(", mismatches ", m.f);
            nvc_junit_put_json(m.f, json_object_get(loc, "mismatches"));
            fputs(", tolerance ", m.f);
            nvc_junit_put_json(m.f, json_object_get(node, "tolerance"));
            char *ms = nvc_text_end(&m);
            r = ms ? nvc_junit_add_tc(list, tn, "failed", "output_diverged", ms, NULL) : -ENOMEM;
            free(ms);
        }
        if (r < 0)
            return r;
    }
    char tn[640];
    snprintf(tn, sizeof tn, "%s/first divergent node", name);
    const json_t *fd = json_object_get(cs, "first_divergent");
    if (!json_is_object(fd))
        return nvc_junit_add_tc(list, tn, !strcmp(v, "passed") ? "passed" : "failed",
                                !strcmp(v, "passed") ? NULL : nvc_jstr(cs, "failure_class"),
                                !strcmp(v, "passed") ? NULL : nvc_jstr(cs, "error"), NULL);
    nvc_text m, b;
    if (!nvc_text_begin(&m))
        return -ENOMEM;
    if (!nvc_text_begin(&b)) {
        free(nvc_text_end(&m));
        return -ENOMEM;
    }
    fprintf(m.f, "node '%s' (op %s, judged in %s): max_ulp ", nvc_jstr(fd, "node"),
            nvc_jstr(fd, "op"), nvc_jstr(fd, "dtype"));
    nvc_junit_put_json(m.f, json_object_get(fd, "max_ulp"));
    fputs(", headroom ", m.f);
    nvc_junit_put_json(m.f, json_object_get(fd, "headroom"));
    fputs(", mismatches ", m.f);
    nvc_junit_put_json(m.f, json_object_get(fd, "mismatches"));
    if (*nvc_jstr(cs, "error"))
        fprintf(b.f, "%s\n", nvc_jstr(cs, "error"));
    mismatch_text(b.f, cs);
    char *ms = nvc_text_end(&m), *bs = nvc_text_end(&b);
    const char *cls = nvc_jstr(cs, "failure_class");
    int r =
        ms && bs ? nvc_junit_add_tc(list, tn, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
    free(ms);
    free(bs);
    return r;
}

/* A suite replay: one test case per replayed suite case. */
static int suite_case(json_t *list, const json_t *cs, char *name, size_t n)
{
    char inner[512];
    case_name(cs, inner, sizeof inner);
    const json_t *sc = json_object_get(cs, "suite_case");
    snprintf(name, n, "suite case %lld %s %s", (long long)json_integer_value(sc),
             *nvc_jstr(cs, "kind") ? nvc_jstr(cs, "kind") : "op", inner);
    const char *v = nvc_jstr(cs, "verdict");
    if (!strcmp(v, "passed"))
        return nvc_junit_add_tc(list, name, "passed", NULL, NULL, NULL);
    if (strcmp(v, "failed"))
        return add_error(list, name, cs);
    nvc_text m, b;
    if (!nvc_text_begin(&m))
        return -ENOMEM;
    if (!nvc_text_begin(&b)) {
        free(nvc_text_end(&m));
        return -ENOMEM;
    }
    fprintf(m.f, "still fails: %s (promoted as %s), max_ulp ",
            *nvc_jstr(cs, "failure_class") ? nvc_jstr(cs, "failure_class") : "failed",
            *nvc_jstr(cs, "stored_class") ? nvc_jstr(cs, "stored_class") : "-");
    nvc_junit_put_json(m.f, json_object_get(cs, "max_ulp"));
    fputs(", mismatches ", m.f);
    nvc_junit_put_json(m.f, json_object_get(cs, "mismatches"));
    if (json_is_boolean(json_object_get(cs, "bit_identical")))
        fprintf(m.f, ", output %s the stored one",
                json_is_true(json_object_get(cs, "bit_identical")) ? "bit-identical to"
                                                                   : "differs from");
    if (*nvc_jstr(cs, "error"))
        fprintf(b.f, "%s\n", nvc_jstr(cs, "error"));
    if (*nvc_jstr(cs, "signature"))
        fprintf(b.f, "signature: %s\n", nvc_jstr(cs, "signature"));
    mismatch_text(b.f, cs);
    char *ms = nvc_text_end(&m), *bs = nvc_text_end(&b);
    const char *cls = nvc_jstr(cs, "failure_class");
    int r =
        ms && bs ? nvc_junit_add_tc(list, name, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
    free(ms);
    free(bs);
    return r;
}

/* The timing of a case in seconds ("timing_ms" summed), or a negative value. */
static double case_seconds(const json_t *cs)
{
    const json_t *t = json_object_get(cs, "timing_ms");
    if (!json_is_object(t))
        return -1;
    double ms = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)t, k, v)
    {
        if (json_is_number(v))
            ms += json_number_value(v);
    }
    return ms / 1000;
}

/* Build the test cases of one job into list. */
static int job_cases(json_t *list, const json_t *job, const json_t *cases)
{
    const char *kind = nvc_jstr(job, "kind");
    json_t *seen = json_object();
    if (!seen)
        return -ENOMEM;
    int r = 0;
    if (!strcmp(kind, "longrun"))
        r = nvc_junit_longrun(list, job);
    else if (!strcmp(kind, "contract"))
        r = nvc_junit_contract(list, job);
    for (size_t i = 0; r == 0 && i < json_array_size(cases); i++) {
        const json_t *cs = json_array_get(cases, i);
        char name[600];
        size_t before = json_array_size(list);
        if (!strcmp(kind, "suite")) {
            r = suite_case(list, cs, name, sizeof name);
        } else {
            case_name(cs, name, sizeof name);
            /* Two cases with the same parameters (several samples) still get
             * distinct names. */
            if (json_object_get(seen, name)) {
                size_t l = strlen(name);
                snprintf(name + l, sizeof(name) - l, " #%lld",
                         (long long)json_integer_value(json_object_get(cs, "index")));
            }
            json_object_set_new(seen, name, json_true());
            if (!strcmp(kind, "gradient"))
                r = gradient_case(list, name, cs);
            else if (!strcmp(kind, "fused"))
                r = fused_case(list, name, cs);
            else
                r = op_case(list, name, cs);
        }
        /* The case's own timing, shared by its test cases. */
        double s = case_seconds(cs);
        size_t n = json_array_size(list) - before;
        for (size_t k = before; r == 0 && s >= 0 && k < json_array_size(list); k++)
            json_object_set_new(json_array_get(list, k), "seconds", json_real(s / (double)n));
    }
    json_decref(seen);
    if (r < 0)
        return r;
    /* A job that ended without a verdict of its own (error, cancelled) and
     * without test cases still shows up in CI: one errored test case. */
    const char *state = nvc_jstr(job, "state");
    if (json_array_size(list) == 0 && (!strcmp(state, "error") || !strcmp(state, "cancelled")))
        r = nvc_junit_add_tc(list, "job", "error", state,
                             *nvc_jstr(job, "error") ? nvc_jstr(job, "error") : state, NULL);
    return r;
}

/* RFC 3339 UTC "2026-11-29T11:13:42.401Z" as seconds, or NAN. */
static double rfc3339(const char *s)
{
    struct tm tm = {0};
    double frac = 0;
    int n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return NAN;
    if (s[n] == '.')
        frac = strtod(s + n, NULL);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + frac;
}

double nvc_job_seconds(const json_t *job)
{
    double a = rfc3339(json_string_value(json_object_get(job, "started_at")));
    double b = rfc3339(json_string_value(json_object_get(job, "finished_at")));
    return isnan(a) || isnan(b) || b < a ? 0 : b - a;
}

/* The suite name of a job: numval.KIND.NAME, NAME the op (op and gradient
 * jobs), the graph's name (fused), the job's name else its model (long run),
 * the job's name else "suite" (suite replays). No job id: the name is the same
 * in every run of the job, which is what CI systems track tests by. */
void nvc_junit_suite_name(const json_t *job, char *buf, size_t n)
{
    const json_t *spec = json_object_get(job, "spec");
    const json_t *res = json_object_get(job, "result");
    const char *kind = *nvc_jstr(job, "kind") ? nvc_jstr(job, "kind") : "job";
    const char *name = "";
    if (!strcmp(kind, "fused"))
        name = *nvc_jstr(spec, "name") ? nvc_jstr(spec, "name") : nvc_jstr(res, "name");
    else if (!strcmp(kind, "longrun"))
        name = *nvc_jstr(spec, "name") ? nvc_jstr(spec, "name") : nvc_jstr(spec, "model");
    else if (!strcmp(kind, "suite"))
        name = *nvc_jstr(spec, "name") ? nvc_jstr(spec, "name") : "suite";
    if (!*name)
        name = *nvc_jstr(job, "op") ? nvc_jstr(job, "op") : nvc_jstr(spec, "op");
    if (!*name)
        name = kind;
    snprintf(buf, n, "numval.%s.%s", kind, name);
}

typedef struct counts {
    int tests, failures, errors, skipped;
    double seconds;
} counts;

static void count(const json_t *list, counts *c)
{
    size_t i;
    const json_t *tc;
    json_array_foreach(list, i, tc)
    {
        const char *st = nvc_jstr(tc, "status");
        c->tests++;
        c->failures += !strcmp(st, "failed");
        c->errors += !strcmp(st, "error");
        c->skipped += !strcmp(st, "skipped");
        c->seconds += nvc_jnum(tc, "seconds");
    }
}

/* The job's duration over the test cases that have no timing of their own. */
static void spread_time(const json_t *job, json_t *list)
{
    size_t untimed = 0, i;
    json_t *tc;
    json_array_foreach(list, i, tc) untimed += !json_object_get(tc, "seconds");
    double each = untimed ? nvc_job_seconds(job) / (double)untimed : 0;
    json_array_foreach(list, i, tc) if (!json_object_get(tc, "seconds"))
        json_object_set_new(tc, "seconds", json_real(each));
}

static void write_tc(FILE *f, const char *suite, const json_t *tc)
{
    const char *st = nvc_jstr(tc, "status");
    fputs("    <testcase classname=\"", f);
    xml_text(f, suite);
    fputs("\" name=\"", f);
    xml_text(f, nvc_jstr(tc, "name"));
    fprintf(f, "\" time=\"%.3f\"", nvc_jnum(tc, "seconds"));
    if (!strcmp(st, "passed")) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    if (!strcmp(st, "skipped")) {
        fputs("      <skipped message=\"", f);
        xml_text(f, nvc_jstr(tc, "message"));
        fputs("\"/>\n", f);
    } else if (!strcmp(st, "failed")) {
        fputs("      <failure type=\"", f);
        xml_text(f, *nvc_jstr(tc, "type") ? nvc_jstr(tc, "type") : "failed");
        fputs("\" message=\"", f);
        xml_text(f, nvc_jstr(tc, "message"));
        fputs("\">", f);
        xml_text(f, nvc_jstr(tc, "text"));
        fputs("</failure>\n", f);
    } else {
        fputs("      <error message=\"", f);
        xml_text(f, nvc_jstr(tc, "message"));
        fputs("\"/>\n", f);
    }
    fputs("    </testcase>\n", f);
}

static void write_suite(FILE *f, const json_t *job, const json_t *list)
{
    counts c = {0};
    count(list, &c);
    char suite[300];
    nvc_junit_suite_name(job, suite, sizeof suite);
    fputs("  <testsuite name=\"", f);
    xml_text(f, suite);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\"",
            c.tests, c.failures, c.errors, c.skipped, c.seconds);
    if (*nvc_jstr(job, "finished_at")) {
        fputs(" timestamp=\"", f);
        xml_text(f, nvc_jstr(job, "finished_at"));
        fputc('"', f);
    }
    fputs(">\n    <properties>\n", f);
    const char *props[] = {"id", "state", "kind", "op", "device", "build_id", "attempt"};
    for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++) {
        const json_t *v = json_object_get(job, props[i]);
        /* A job submitted for any device ran on the one that leased it. */
        if ((!v || json_is_null(v)) && !strcmp(props[i], "device"))
            v = json_object_get(job, "leased_by");
        if (!v || json_is_null(v))
            continue;
        char *t = nvc_json_text(v);
        fprintf(f, "      <property name=\"job.%s\" value=\"", props[i]);
        xml_text(f, t);
        fputs("\"/>\n", f);
        free(t);
    }
    fputs("    </properties>\n", f);
    size_t i;
    const json_t *tc;
    json_array_foreach(list, i, tc) write_tc(f, suite, tc);
    fputs("  </testsuite>\n", f);
}

int nvc_junit_write(const char *path, const json_t *jobs, const json_t *cases, char **ret_err)
{
    json_t *all = json_array();
    int r = all ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < json_array_size(jobs); i++) {
        json_t *list = json_array();
        const json_t *job = json_array_get(jobs, i);
        r = list ? job_cases(list, job, json_array_get(cases, i)) : -ENOMEM;
        if (r == 0) {
            spread_time(job, list);
            r = json_array_append(all, list) < 0 ? -ENOMEM : 0;
        }
        json_decref(list);
    }
    if (r < 0) {
        *ret_err = NULL;
        json_decref(all);
        return r;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        r = -errno;
        if (asprintf(ret_err, "cannot open '%s': %s", path, strerror(errno)) < 0)
            *ret_err = NULL;
        json_decref(all);
        return r;
    }
    counts c = {0};
    for (size_t i = 0; i < json_array_size(all); i++)
        count(json_array_get(all, i), &c);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"numval\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
            "skipped=\"%d\" time=\"%.3f\">\n",
            c.tests, c.failures, c.errors, c.skipped, c.seconds);
    for (size_t i = 0; i < json_array_size(jobs); i++)
        write_suite(f, json_array_get(jobs, i), json_array_get(all, i));
    fputs("</testsuites>\n", f);
    json_decref(all);
    if (ferror(f) | (fclose(f) != 0)) {
        if (asprintf(ret_err, "cannot write '%s': %s", path, strerror(errno)) < 0)
            *ret_err = NULL;
        return -EIO;
    }
    return 0;
}
