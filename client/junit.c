/* JUnit XML for CI systems: one <testsuite> per job, one <testcase> per case,
 * <failure> with the case's first mismatches, <error> for cases that errored. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

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

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
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
    const char *parts[] = {str(cs, "op"), str(cs, "dtype"), shape, str(cs, "input"),
                           str(cs, "layout")};
    off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < 5 && off < n; i++)
        if (*parts[i])
            off += snprintf(buf + off, n - off, "%s%s", off ? "/" : "", parts[i]);
    if (off == 0)
        snprintf(buf, n, "case %lld", (long long)json_integer_value(json_object_get(cs, "index")));
}

static void write_failure(FILE *f, const json_t *cs)
{
    char *maxulp = nvc_json_text(json_object_get(cs, "max_ulp"));
    char *mism = nvc_json_text(json_object_get(cs, "mismatches"));
    const char *cls = str(cs, "failure_class");
    fputs("      <failure type=\"", f);
    xml_text(f, *cls ? cls : "failed");
    fputs("\" message=\"", f);
    fprintf(f, "max_ulp ");
    xml_text(f, maxulp);
    fputs(", mismatches ", f);
    xml_text(f, mism);
    const json_t *tol = json_object_get(cs, "tolerance");
    if (tol) {
        char *t = nvc_json_text(tol);
        fputs(", tolerance ", f);
        xml_text(f, t);
        free(t);
    }
    fputs("\">", f);
    const json_t *fm = json_object_get(cs, "first_mismatches");
    fputs("first mismatches:\n", f);
    for (size_t i = 0; json_is_array(fm) && i < json_array_size(fm); i++) {
        char *m = nvc_json_text(json_array_get(fm, i));
        xml_text(f, m);
        fputc('\n', f);
        free(m);
    }
    if (*str(cs, "artifact")) {
        fputs("artifact: ", f);
        xml_text(f, str(cs, "artifact"));
        fputc('\n', f);
    }
    fputs("</failure>\n", f);
    free(maxulp);
    free(mism);
}

static void write_case(FILE *f, const json_t *job, const json_t *cs, json_t *seen)
{
    char name[512];
    case_name(cs, name, sizeof(name));
    /* Two cases with the same parameters (several samples) still get distinct names. */
    if (json_object_get(seen, name)) {
        size_t l = strlen(name);
        snprintf(name + l, sizeof(name) - l, " #%lld",
                 (long long)json_integer_value(json_object_get(cs, "index")));
    }
    json_object_set_new(seen, name, json_true());
    fputs("    <testcase classname=\"numval.", f);
    xml_text(f, str(job, "kind"));
    fputc('.', f);
    xml_text(f, *str(cs, "op") ? str(cs, "op") : str(job, "op"));
    fputs("\" name=\"", f);
    xml_text(f, name);
    const char *v = str(cs, "verdict");
    if (!strcmp(v, "passed")) {
        fputs("\"/>\n", f);
        return;
    }
    fputs("\">\n", f);
    if (!strcmp(v, "failed")) {
        write_failure(f, cs);
    } else {
        fputs("      <error message=\"", f);
        xml_text(f, *str(cs, "error") ? str(cs, "error") : v);
        fputs("\"/>\n", f);
    }
    fputs("    </testcase>\n", f);
}

static void count(const json_t *cases, int *tests, int *failures, int *errors)
{
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const char *v = str(json_array_get(cases, i), "verdict");
        (*tests)++;
        if (!strcmp(v, "failed"))
            (*failures)++;
        else if (strcmp(v, "passed"))
            (*errors)++;
    }
}

static void write_suite(FILE *f, const json_t *job, const json_t *cases)
{
    int tests = 0, failures = 0, errors = 0;
    count(cases, &tests, &failures, &errors);
    const char *state = str(job, "state");
    /* A job that ended in error or was cancelled without case results still
     * shows up in CI: as one errored testcase carrying the job's error. */
    bool job_error = (!strcmp(state, "error") || !strcmp(state, "cancelled")) && tests == 0;
    fputs("  <testsuite name=\"", f);
    char idb[32];
    xml_text(f, nvc_id_text(json_object_get(job, "id"), idb));
    fputc(' ', f);
    xml_text(f, *str(job, "op") ? str(job, "op") : str(job, "kind"));
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"0\"", tests + job_error,
            failures, errors + job_error);
    if (*str(job, "finished_at")) {
        fputs(" timestamp=\"", f);
        xml_text(f, str(job, "finished_at"));
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
    json_t *seen = json_object();
    for (size_t i = 0; i < json_array_size(cases); i++)
        write_case(f, job, json_array_get(cases, i), seen);
    json_decref(seen);
    if (job_error) {
        fputs("    <testcase classname=\"numval.job\" name=\"job\">\n      <error message=\"", f);
        xml_text(f, *str(job, "error") ? str(job, "error") : state);
        fputs("\"/>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n", f);
}

int nvc_junit_write(const char *path, const json_t *jobs, const json_t *cases, char **ret_err)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        int r = -errno;
        if (asprintf(ret_err, "cannot open '%s': %s", path, strerror(errno)) < 0)
            *ret_err = NULL;
        return r;
    }
    int tests = 0, failures = 0, errors = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *cs = json_array_get(cases, i);
        const char *state = str(json_array_get(jobs, i), "state");
        count(cs, &tests, &failures, &errors);
        if ((!strcmp(state, "error") || !strcmp(state, "cancelled")) && !json_array_size(cs)) {
            tests++;
            errors++;
        }
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"numval\" tests=\"%d\" failures=\"%d\" errors=\"%d\">\n",
            tests, failures, errors);
    for (size_t i = 0; i < json_array_size(jobs); i++)
        write_suite(f, json_array_get(jobs, i), json_array_get(cases, i));
    fputs("</testsuites>\n", f);
    if (ferror(f) | (fclose(f) != 0)) {
        if (asprintf(ret_err, "cannot write '%s': %s", path, strerror(errno)) < 0)
            *ret_err = NULL;
        return -EIO;
    }
    return 0;
}
