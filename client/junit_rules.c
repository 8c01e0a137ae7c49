/* JUnit test cases of the kinds judged as a whole job (junit_internal.h): a long
 * run's acceptance rules and a contract job's judged fields. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "junit_internal.h"

/* One long-run acceptance rule: passed, or failed with why. */
static int rule_tc(json_t *list, const char *name, bool passed, const char *cls, const char *why,
                   const json_t *acc, const json_t *rule)
{
    if (passed)
        return nvc_junit_add_tc(list, name, "passed", NULL, NULL, NULL);
    nvc_text b;
    if (!nvc_text_begin(&b))
        return -ENOMEM;
    if (*nvc_jstr(acc, "reason"))
        fprintf(b.f, "%s\n", nvc_jstr(acc, "reason"));
    if (*nvc_jstr(rule, "rule"))
        fprintf(b.f, "rule: %s\n", nvc_jstr(rule, "rule"));
    char *bs = nvc_text_end(&b);
    int r = bs ? nvc_junit_add_tc(list, name, "failed", cls && *cls ? cls : "failed", why, bs)
               : -ENOMEM;
    free(bs);
    return r;
}

/* A long-run job: one test case per acceptance rule of its result (final loss:
 * Welch's test and the trimmed-mean band; the envelope; the gradient and the
 * eval loss at matched weights; determinism, skipped when not checked). */
int nvc_junit_longrun(json_t *list, const json_t *job)
{
    const json_t *res = json_object_get(job, "result");
    const json_t *acc = json_object_get(res, "acceptance");
    if (!json_is_object(acc))
        return 0;
    const char *cls = nvc_jstr(acc, "failure_class");
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
                 nvc_jnum(w, "p"), nvc_jnum(w, "alpha"), nvc_jnum(w, "t"), nvc_jnum(w, "df"));
        failed += !ok;
        r = rule_tc(list, "final_loss.welch", ok, cls, why, acc, w);
    }
    if (r == 0 && json_is_object(tm)) {
        bool ok = json_is_true(json_object_get(tm, "passed"));
        snprintf(why, sizeof why,
                 "trimmed-mean final loss gap |%.4g - %.4g| = %.4g exceeds the band %.4g",
                 nvc_jnum(tm, "device"), nvc_jnum(tm, "reference"),
                 fabs(nvc_jnum(tm, "device") - nvc_jnum(tm, "reference")), nvc_jnum(tm, "band"));
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
                     (long long)json_integer_value(json_object_get(v0, "seed")),
                     nvc_jnum(v0, "loss"), nvc_jnum(v0, "low"), nvc_jnum(v0, "high"));
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
                             nvc_jstr(bad, "layer"), nvc_jnum(bad, "device_error"),
                             nvc_jnum(bad, "allowed"), nvc_jnum(bad, "declared_error"));
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
                     nvc_jnum(ev, "device_error"), nvc_jnum(ev, "allowed"),
                     nvc_jnum(ev, "declared_error"));
            failed += !ok;
            r = rule_tc(list, "matched_weights.eval_loss", ok, "eval_error", why, acc, mw);
        }
    }
    if (r == 0 && json_is_object(det)) {
        const json_t *bits = json_object_get(det, "bit_identical");
        if (!json_is_boolean(bits)) {
            r = nvc_junit_add_tc(list, "determinism", "skipped", NULL, nvc_jstr(det, "rule"), NULL);
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
    if (r == 0 && !failed && !strcmp(nvc_jstr(acc, "verdict"), "failed"))
        r = nvc_junit_add_tc(list, "acceptance", "failed", cls, nvc_jstr(acc, "reason"), NULL);
    return r;
}

/* A contract job (docs/CONTRACT.md): one test case per judged field, named
 * by the field ("contract.fp32.ftz"), failed with type contract_mismatch when
 * the mismatches name it. A result stored before "judged" existed gives its
 * mismatches alone. */
int nvc_junit_contract(json_t *list, const json_t *job)
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
        const char *field = nvc_jstr(jf, "field");
        const json_t *m = NULL;
        size_t k;
        const json_t *c;
        json_array_foreach(mism, k, c) if (!strcmp(nvc_jstr(c, "field"), field)) m = c;
        int r;
        if (!m) {
            r = nvc_junit_add_tc(list, field, "passed", NULL, NULL, NULL);
        } else {
            nvc_text msg, b;
            if (!nvc_text_begin(&msg))
                return -ENOMEM;
            fputs("declared ", msg.f);
            nvc_junit_put_json(msg.f, json_object_get(m, "declared"));
            fputs(", measured ", msg.f);
            nvc_junit_put_json(msg.f, json_object_get(m, "measured"));
            char *ms = nvc_text_end(&msg);
            if (!ms || !nvc_text_begin(&b)) {
                free(ms);
                return -ENOMEM;
            }
            fprintf(b.f, "field: %s\ndeclared: ", field);
            nvc_junit_put_json(b.f, json_object_get(m, "declared"));
            fputs("\nmeasured: ", b.f);
            nvc_junit_put_json(b.f, json_object_get(m, "measured"));
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
            char *bs = nvc_text_end(&b);
            r = bs ? nvc_junit_add_tc(list, field, "failed", "contract_mismatch", ms, bs) : -ENOMEM;
            free(ms);
            free(bs);
        }
        if (r < 0)
            return r;
    }
    return 0;
}
