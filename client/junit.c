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

/* A growing text (open_memstream): text_end returns the malloc'd string. */
typedef struct text {
    char *buf;
    size_t len;
    FILE *f;
} text;

static bool text_begin(text *t)
{
    t->buf = NULL;
    t->len = 0;
    t->f = open_memstream(&t->buf, &t->len);
    return t->f != NULL;
}

static char *text_end(text *t)
{
    if (!t->f)
        return NULL;
    fclose(t->f);
    t->f = NULL;
    return t->buf;
}

/* A JSON value as text into f ("-" when missing). */
static void put_json(FILE *f, const json_t *v)
{
    char *s = nvc_json_text(v);
    fputs(s ? s : "-", f);
    free(s);
}

/* ---- the test cases of a job ----
 * Each is a JSON object {"name", "status": passed | failed | error | skipped,
 * "type", "message", "text", "seconds" (the case's own timing, or absent)};
 * the job's duration is divided over those without a timing when written. */

static int add_tc(json_t *list, const char *name, const char *status, const char *type,
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
            put_json(f, m);
            fputc('\n', f);
        }
    }
    if (*str(cs, "artifact"))
        fprintf(f, "artifact: %s\n", str(cs, "artifact"));
    if (*str(cs, "minimized_artifact"))
        fprintf(f, "minimized artifact: %s\n", str(cs, "minimized_artifact"));
}

/* An errored case: its error text, else its verdict. */
static int add_error(json_t *list, const char *name, const json_t *cs)
{
    const char *v = str(cs, "verdict");
    return add_tc(list, name, "error", str(cs, "failure_class"),
                  *str(cs, "error") ? str(cs, "error")
                  : *v              ? v
                                    : "error",
                  NULL);
}

static int op_case(json_t *list, const char *name, const json_t *cs)
{
    const char *v = str(cs, "verdict");
    if (!strcmp(v, "passed"))
        return add_tc(list, name, "passed", NULL, NULL, NULL);
    if (strcmp(v, "failed"))
        return add_error(list, name, cs);
    text m, b;
    if (!text_begin(&m))
        return -ENOMEM;
    if (!text_begin(&b)) {
        free(text_end(&m));
        return -ENOMEM;
    }
    fputs("max_ulp ", m.f);
    put_json(m.f, json_object_get(cs, "max_ulp"));
    fputs(", mismatches ", m.f);
    put_json(m.f, json_object_get(cs, "mismatches"));
    if (json_object_get(cs, "tolerance")) {
        fputs(", tolerance ", m.f);
        put_json(m.f, json_object_get(cs, "tolerance"));
    }
    if (*str(cs, "error"))
        fprintf(b.f, "%s\n", str(cs, "error"));
    mismatch_text(b.f, cs);
    char *ms = text_end(&m), *bs = text_end(&b);
    const char *cls = str(cs, "failure_class");
    int r = ms && bs ? add_tc(list, name, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
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
            put_json(detail, json_object_get(chk, "first_difference"));
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
        put_json(detail, json_object_get(e, "mismatches"));
        static const char *const keys[] = {"max_abs_error", "worst_ratio", "headroom"};
        for (int k = 0; k < 3; k++)
            if (json_object_get(e, keys[k])) {
                fprintf(detail, ", %s ", keys[k]);
                put_json(detail, json_object_get(e, keys[k]));
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
    const char *v = str(cs, "verdict");
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
        char tn[600];
        snprintf(tn, sizeof tn, "%s/%s", name, order[k]);
        text d;
        if (!text_begin(&d))
            return -ENOMEM;
        bool ok = check_passed(chk, d.f);
        size_t fi;
        const json_t *fv;
        json_array_foreach(failed, fi, fv) if (json_is_string(fv) &&
                                               !strcmp(json_string_value(fv), order[k])) ok = false;
        char *ds = text_end(&d);
        int r;
        if (ok) {
            r = add_tc(list, tn, "passed", NULL, NULL, NULL);
        } else {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s check failed: %s", order[k], ds ? ds : "");
            text b;
            r = text_begin(&b) ? 0 : -ENOMEM;
            char *bs = NULL;
            if (r == 0) {
                if (!strcmp(order[k], "device") && *str(cs, "failure_class"))
                    fprintf(b.f, "failure class: %s\n", str(cs, "failure_class"));
                mismatch_text(b.f, cs);
                bs = text_end(&b);
                /* the checks of the device (the formula and second-order checks
                 * test the reference) carry the case's failure class */
                bool dev = !strcmp(order[k], "device") || !strcmp(order[k], "determinism") ||
                           !strcmp(order[k], "double_backward") || !strcmp(order[k], "contract");
                const char *cls = dev ? str(cs, "failure_class") : "";
                r = add_tc(list, tn, "failed", *cls ? cls : "gradient_check", msg, bs);
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
    const char *v = str(cs, "verdict");
    if (strcmp(v, "passed") && strcmp(v, "failed"))
        return add_error(list, name, cs);
    size_t i;
    const json_t *node;
    json_array_foreach(json_object_get(cs, "nodes"), i, node)
    {
        if (!json_is_true(json_object_get(node, "output")))
            continue;
        char tn[700];
        snprintf(tn, sizeof tn, "%s/output %s", name, str(node, "name"));
        const char *state = str(node, "state");
        int r;
        if (!strcmp(state, "within_tolerance")) {
            r = add_tc(list, tn, "passed", NULL, NULL, NULL);
        } else {
            const json_t *loc = json_object_get(json_object_get(node, "fused"), "local");
            text m;
            if (!text_begin(&m))
                return -ENOMEM;
            fprintf(m.f, "output '%s' (%s, %s) %s: max_ulp ", str(node, "name"), str(node, "op"),
                    str(node, "dtype"), state);
            put_json(m.f, json_object_get(loc, "max_ulp"));
            fputs(", headroom ", m.f);
            put_json(m.f, json_object_get(loc, "headroom"));
            fputs(", mismatches ", m.f);
            put_json(m.f, json_object_get(loc, "mismatches"));
            fputs(", tolerance ", m.f);
            put_json(m.f, json_object_get(node, "tolerance"));
            char *ms = text_end(&m);
            r = ms ? add_tc(list, tn, "failed", "output_diverged", ms, NULL) : -ENOMEM;
            free(ms);
        }
        if (r < 0)
            return r;
    }
    char tn[600];
    snprintf(tn, sizeof tn, "%s/first divergent node", name);
    const json_t *fd = json_object_get(cs, "first_divergent");
    if (!json_is_object(fd))
        return add_tc(list, tn, !strcmp(v, "passed") ? "passed" : "failed",
                      !strcmp(v, "passed") ? NULL : str(cs, "failure_class"),
                      !strcmp(v, "passed") ? NULL : str(cs, "error"), NULL);
    text m, b;
    if (!text_begin(&m))
        return -ENOMEM;
    if (!text_begin(&b)) {
        free(text_end(&m));
        return -ENOMEM;
    }
    fprintf(m.f, "node '%s' (op %s, judged in %s): max_ulp ", str(fd, "node"), str(fd, "op"),
            str(fd, "dtype"));
    put_json(m.f, json_object_get(fd, "max_ulp"));
    fputs(", headroom ", m.f);
    put_json(m.f, json_object_get(fd, "headroom"));
    fputs(", mismatches ", m.f);
    put_json(m.f, json_object_get(fd, "mismatches"));
    if (*str(cs, "error"))
        fprintf(b.f, "%s\n", str(cs, "error"));
    mismatch_text(b.f, cs);
    char *ms = text_end(&m), *bs = text_end(&b);
    const char *cls = str(cs, "failure_class");
    int r = ms && bs ? add_tc(list, tn, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
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
             *str(cs, "kind") ? str(cs, "kind") : "op", inner);
    const char *v = str(cs, "verdict");
    if (!strcmp(v, "passed"))
        return add_tc(list, name, "passed", NULL, NULL, NULL);
    if (strcmp(v, "failed"))
        return add_error(list, name, cs);
    text m, b;
    if (!text_begin(&m))
        return -ENOMEM;
    if (!text_begin(&b)) {
        free(text_end(&m));
        return -ENOMEM;
    }
    fprintf(m.f, "still fails: %s (promoted as %s), max_ulp ",
            *str(cs, "failure_class") ? str(cs, "failure_class") : "failed",
            *str(cs, "stored_class") ? str(cs, "stored_class") : "-");
    put_json(m.f, json_object_get(cs, "max_ulp"));
    fputs(", mismatches ", m.f);
    put_json(m.f, json_object_get(cs, "mismatches"));
    if (json_is_boolean(json_object_get(cs, "bit_identical")))
        fprintf(m.f, ", output %s the stored one",
                json_is_true(json_object_get(cs, "bit_identical")) ? "bit-identical to"
                                                                   : "differs from");
    if (*str(cs, "error"))
        fprintf(b.f, "%s\n", str(cs, "error"));
    if (*str(cs, "signature"))
        fprintf(b.f, "signature: %s\n", str(cs, "signature"));
    mismatch_text(b.f, cs);
    char *ms = text_end(&m), *bs = text_end(&b);
    const char *cls = str(cs, "failure_class");
    int r = ms && bs ? add_tc(list, name, "failed", *cls ? cls : "failed", ms, bs) : -ENOMEM;
    free(ms);
    free(bs);
    return r;
}

/* One long-run acceptance rule: passed, or failed with why. */
static int rule_tc(json_t *list, const char *name, bool passed, const char *cls, const char *why,
                   const json_t *acc, const json_t *rule)
{
    if (passed)
        return add_tc(list, name, "passed", NULL, NULL, NULL);
    text b;
    if (!text_begin(&b))
        return -ENOMEM;
    if (*str(acc, "reason"))
        fprintf(b.f, "%s\n", str(acc, "reason"));
    if (*str(rule, "rule"))
        fprintf(b.f, "rule: %s\n", str(rule, "rule"));
    char *bs = text_end(&b);
    int r = bs ? add_tc(list, name, "failed", cls && *cls ? cls : "failed", why, bs) : -ENOMEM;
    free(bs);
    return r;
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A long-run job: one test case per acceptance rule of its result (final loss:
 * Welch's test and the trimmed-mean band; the envelope; the gradient and the
 * eval loss at matched weights; determinism, skipped when not checked). */
static int longrun_cases(json_t *list, const json_t *job)
{
    const json_t *res = json_object_get(job, "result");
    const json_t *acc = json_object_get(res, "acceptance");
    if (!json_is_object(acc))
        return 0;
    const char *cls = str(acc, "failure_class");
    const json_t *fin = json_object_get(acc, "final_loss");
    const json_t *w = json_object_get(fin, "welch");
    const json_t *tm = json_object_get(fin, "trimmed_mean");
    const json_t *env = json_object_get(acc, "envelope");
    const json_t *det = json_object_get(acc, "determinism");
    int failed = 0;
    char why[600];
    int r = 0;
    if (json_is_object(w)) {
        bool ok = json_is_true(json_object_get(w, "passed"));
        snprintf(why, sizeof why,
                 "final eval losses differ: Welch's t-test p = %.4g < alpha %g (t = %.4g, df = "
                 "%.4g)",
                 num(w, "p"), num(w, "alpha"), num(w, "t"), num(w, "df"));
        failed += !ok;
        r = rule_tc(list, "final_loss.welch", ok, cls, why, acc, w);
    }
    if (r == 0 && json_is_object(tm)) {
        bool ok = json_is_true(json_object_get(tm, "passed"));
        snprintf(why, sizeof why,
                 "trimmed-mean final loss gap |%.4g - %.4g| = %.4g exceeds the band %.4g",
                 num(tm, "device"), num(tm, "reference"),
                 fabs(num(tm, "device") - num(tm, "reference")), num(tm, "band"));
        failed += !ok;
        r = rule_tc(list, "final_loss.trimmed_mean", ok, cls, why, acc, tm);
    }
    if (r == 0 && json_is_object(env)) {
        bool ok = json_is_true(json_object_get(env, "passed"));
        const json_t *v0 = json_array_get(json_object_get(env, "first_violations"), 0);
        int n = snprintf(why, sizeof why, "%lld logged steps outside the reference envelope",
                         (long long)json_integer_value(json_object_get(env, "violations")));
        if (v0 && n > 0 && (size_t)n < sizeof why)
            snprintf(why + n, sizeof why - (size_t)n,
                     "; first: step %lld seed %lld loss %.4g not in [%.4g, %.4g]",
                     (long long)json_integer_value(json_object_get(v0, "step")),
                     (long long)json_integer_value(json_object_get(v0, "seed")), num(v0, "loss"),
                     num(v0, "low"), num(v0, "high"));
        failed += !ok;
        r = rule_tc(list, "envelope", ok, cls, why, acc, env);
    }
    const json_t *mw = json_object_get(acc, "matched_weights");
    if (r == 0 && json_is_object(mw)) {
        const json_t *bad = NULL, *L;
        size_t i;
        json_array_foreach(json_object_get(mw, "gradient"), i,
                           L) if (!bad && json_is_false(json_object_get(L, "passed"))) bad = L;
        if (bad) {
            const json_t *fb = json_object_get(bad, "first_beyond");
            int n = snprintf(why, sizeof why,
                             "gradient of layer '%s' at matched weights: relative error %.4g, "
                             "allowed %.4g (declared-precision reference %.4g)",
                             str(bad, "layer"), num(bad, "device_error"), num(bad, "allowed"),
                             num(bad, "declared_error"));
            if (json_is_object(fb) && n > 0 && (size_t)n < sizeof why)
                snprintf(why + n, sizeof why - (size_t)n, "; first beyond it: step %lld seed %lld",
                         (long long)json_integer_value(json_object_get(fb, "step")),
                         (long long)json_integer_value(json_object_get(fb, "seed")));
        }
        failed += bad != NULL;
        r = rule_tc(list, "matched_weights.gradient", !bad, "gradient_error", why, acc, mw);
        const json_t *ev = json_object_get(mw, "eval_loss");
        if (r == 0 && json_is_object(ev)) {
            bool ok = json_is_true(json_object_get(ev, "passed"));
            snprintf(why, sizeof why,
                     "the device's own eval loss: rms error %.4g against the fp64 loss of the same "
                     "weights, allowed %.4g (declared-precision reference %.4g)",
                     num(ev, "device_error"), num(ev, "allowed"), num(ev, "declared_error"));
            failed += !ok;
            r = rule_tc(list, "matched_weights.eval_loss", ok, "eval_error", why, acc, mw);
        }
    }
    if (r == 0 && json_is_object(det)) {
        const json_t *bits = json_object_get(det, "bit_identical");
        if (!json_is_boolean(bits)) {
            r = add_tc(list, "determinism", "skipped", NULL, str(det, "rule"), NULL);
        } else {
            snprintf(why, sizeof why,
                     "the repeated device run of seed %lld is not bit-identical to the first",
                     (long long)json_integer_value(json_object_get(det, "seed")));
            failed += !json_is_true(bits);
            r = rule_tc(list, "determinism", json_is_true(bits), "nondeterministic", why, acc, det);
        }
    }
    /* A failed verdict that no rule above carries (a newer worker's rule, a
     * result without them) still fails one test case with the reason. */
    if (r == 0 && !failed && !strcmp(str(acc, "verdict"), "failed"))
        r = add_tc(list, "acceptance", "failed", cls, str(acc, "reason"), NULL);
    return r;
}

/* A contract job (docs/CONTRACT.md): one test case per judged field, named
 * by the field ("contract.fp32.ftz"), failed with type contract_mismatch when
 * the mismatches name it. A result stored before "judged" existed gives its
 * mismatches alone. */
static int contract_cases(json_t *list, const json_t *job)
{
    const json_t *res = json_object_get(job, "result");
    const json_t *mism = json_object_get(res, "mismatches");
    const json_t *judged = json_object_get(res, "judged");
    if (!json_is_array(judged))
        judged = mism;
    size_t i;
    const json_t *jf;
    json_array_foreach(judged, i, jf)
    {
        const char *field = str(jf, "field");
        const json_t *m = NULL;
        size_t k;
        const json_t *c;
        json_array_foreach(mism, k, c) if (!strcmp(str(c, "field"), field)) m = c;
        int r;
        if (!m) {
            r = add_tc(list, field, "passed", NULL, NULL, NULL);
        } else {
            text msg, b;
            if (!text_begin(&msg))
                return -ENOMEM;
            fputs("declared ", msg.f);
            put_json(msg.f, json_object_get(m, "declared"));
            fputs(", measured ", msg.f);
            put_json(msg.f, json_object_get(m, "measured"));
            char *ms = text_end(&msg);
            if (!ms || !text_begin(&b)) {
                free(ms);
                return -ENOMEM;
            }
            fprintf(b.f, "field: %s\ndeclared: ", field);
            put_json(b.f, json_object_get(m, "declared"));
            fputs("\nmeasured: ", b.f);
            put_json(b.f, json_object_get(m, "measured"));
            /* the first evidence entry (or the evidence object), cut short:
             * the whole of it is in the stored result (numvalctl show) */
            const json_t *ev = json_object_get(m, "evidence");
            if (json_is_array(ev))
                ev = json_array_get(ev, 0);
            if (ev) {
                char *es = nvc_json_text(ev);
                fprintf(b.f, "\nevidence: %.240s%s", es ? es : "-",
                        es && strlen(es) > 240 ? " ..." : "");
                free(es);
            }
            fputc('\n', b.f);
            char *bs = text_end(&b);
            r = bs ? add_tc(list, field, "failed", "contract_mismatch", ms, bs) : -ENOMEM;
            free(ms);
            free(bs);
        }
        if (r < 0)
            return r;
    }
    return 0;
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
    const char *kind = str(job, "kind");
    json_t *seen = json_object();
    if (!seen)
        return -ENOMEM;
    int r = 0;
    if (!strcmp(kind, "longrun"))
        r = longrun_cases(list, job);
    else if (!strcmp(kind, "contract"))
        r = contract_cases(list, job);
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
    const char *state = str(job, "state");
    if (json_array_size(list) == 0 && (!strcmp(state, "error") || !strcmp(state, "cancelled")))
        r = add_tc(list, "job", "error", state, *str(job, "error") ? str(job, "error") : state,
                   NULL);
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
    const char *kind = *str(job, "kind") ? str(job, "kind") : "job";
    const char *name = "";
    if (!strcmp(kind, "fused"))
        name = *str(spec, "name") ? str(spec, "name") : str(res, "name");
    else if (!strcmp(kind, "longrun"))
        name = *str(spec, "name") ? str(spec, "name") : str(spec, "model");
    else if (!strcmp(kind, "suite"))
        name = *str(spec, "name") ? str(spec, "name") : "suite";
    if (!*name)
        name = *str(job, "op") ? str(job, "op") : str(spec, "op");
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
        const char *st = str(tc, "status");
        c->tests++;
        c->failures += !strcmp(st, "failed");
        c->errors += !strcmp(st, "error");
        c->skipped += !strcmp(st, "skipped");
        c->seconds += num(tc, "seconds");
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
    const char *st = str(tc, "status");
    fputs("    <testcase classname=\"", f);
    xml_text(f, suite);
    fputs("\" name=\"", f);
    xml_text(f, str(tc, "name"));
    fprintf(f, "\" time=\"%.3f\"", num(tc, "seconds"));
    if (!strcmp(st, "passed")) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n", f);
    if (!strcmp(st, "skipped")) {
        fputs("      <skipped message=\"", f);
        xml_text(f, str(tc, "message"));
        fputs("\"/>\n", f);
    } else if (!strcmp(st, "failed")) {
        fputs("      <failure type=\"", f);
        xml_text(f, *str(tc, "type") ? str(tc, "type") : "failed");
        fputs("\" message=\"", f);
        xml_text(f, str(tc, "message"));
        fputs("\">", f);
        xml_text(f, str(tc, "text"));
        fputs("</failure>\n", f);
    } else {
        fputs("      <error message=\"", f);
        xml_text(f, str(tc, "message"));
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
