/* The verdict of a long-run job: final-loss tests against the band of the
 * reference seeds, the per-step envelope, determinism, and the diagnosis of a
 * failure (gradient underflow, non-finite training, loss gap). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longrun_internal.h"
#include "worker/runner/job.h"

static json_t *num(double x)
{
    return nvw_json_num(x);
}

static json_t *darr(const double *x, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, num(x[i]));
    return a;
}

/* Envelope: at each logged step the reference runs' [min, max], widened by
 * margin * |value| on each side; every device run must stay inside. */
static json_t *envelope(const nvw_lr_job *j, bool *ret_pass)
{
    const nv_longrun_spec *s = j->s;
    int n_pts = j->ref[0].n_pts, bad = 0;
    json_t *viol = json_array();
    for (int k = 0; k < n_pts; k++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < s->n_seeds; i++) {
            double v = k < j->ref[i].n_pts ? j->ref[i].pts[k].loss : NAN;
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
        lo -= s->envelope_margin * fabs(lo);
        hi += s->envelope_margin * fabs(hi);
        for (int i = 0; i < s->n_seeds; i++) {
            double v = k < j->dev[i].n_pts ? j->dev[i].pts[k].loss : NAN;
            if (v >= lo && v <= hi)
                continue;
            if (bad++ < 8)
                json_array_append_new(viol, json_pack("{s:I, s:I, s:o, s:o, s:o}", "step",
                                                      (json_int_t)j->ref[0].pts[k].step, "seed",
                                                      (json_int_t)s->seeds[i], "loss", num(v),
                                                      "low", num(lo), "high", num(hi)));
        }
    }
    *ret_pass = bad == 0;
    return json_pack("{s:s, s:f, s:b, s:i, s:o}", "rule",
                     "at every logged step each device run's eval loss lies in [min, max] of "
                     "the reference runs widened by margin*|bound|",
                     "margin", s->envelope_margin, "passed", bad == 0, "violations", bad,
                     "first_violations", viol);
}

static json_t *final_tests(const nvw_lr_job *j, bool *ret_welch, bool *ret_trim, double *ret_gap)
{
    const nv_longrun_spec *s = j->s;
    int n = s->n_seeds;
    double rf[NV_LR_MAX_SEEDS] = {0}, df[NV_LR_MAX_SEEDS] = {0};
    for (int i = 0; i < n; i++)
        rf[i] = j->ref[i].final_loss, df[i] = j->dev[i].final_loss;
    nvw_welch w;
    nvw_welch_test(df, n, rf, n, &w);
    bool finite = true;
    for (int i = 0; i < n; i++)
        finite &= isfinite(df[i]) != 0;
    *ret_welch = finite && w.p >= s->alpha;
    double tr = nvw_trimmed_mean(rf, n, s->trim), td = nvw_trimmed_mean(df, n, s->trim);
    double band = fmax(s->band_k * nvw_sd(rf, n), s->band_floor * fabs(tr));
    *ret_gap = td - tr;
    *ret_trim = finite && fabs(td - tr) <= band;
    json_t *welch = json_pack(
        "{s:s, s:o, s:o, s:o, s:f, s:b}", "rule",
        "Welch's two-sided t-test of the device's final eval losses against the reference's: "
        "pass when p >= alpha",
        "t", num(w.t), "df", num(w.df), "p", num(w.p), "alpha", s->alpha, "passed", *ret_welch);
    json_t *trim = json_pack(
        "{s:s, s:i, s:o, s:o, s:o, s:o, s:f, s:f, s:b}", "rule",
        "trimmed means (drop `trim` lowest and highest runs, as MLPerf's reference "
        "convergence points): pass when |device - reference| <= band = max(band_k * sd_ref, "
        "band_floor * reference)",
        "trim", s->trim, "reference", num(tr), "device", num(td), "sd_reference",
        num(nvw_sd(rf, n)), "band", num(band), "band_k", s->band_k, "band_floor", s->band_floor,
        "passed", *ret_trim);
    /* Drift, reported and not judged: device and reference seed i share their
     * initial weights and data, so the paired differences cancel the seed
     * variation the band allows for, and show a systematic shift far smaller
     * than the band (the small, real cost of a low-precision mode included). */
    nvw_paired pd;
    nvw_paired_test(df, rf, n, &pd);
    json_t *drift = json_pack(
        "{s:s, s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:b, s:o}", "rule",
        "paired by seed (device and reference run i share initial weights and data): "
        "Student's paired t-test of device_i - reference_i; reported, not judged",
        "mean_gap", num(pd.mean), "sd", num(pd.sd), "t", num(pd.t), "p", num(pd.p), "device_worse",
        pd.positive, "device_better", pd.negative, "of", n, "significant",
        finite && pd.p < s->alpha, "fraction_of_band", num(band > 0 ? fabs(pd.mean) / band : 0));
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "welch", welch, "trimmed_mean", trim, "drift",
                     drift, "reference_final", darr(rf, n), "device_final", darr(df, n));
}

static bool same_curve(const nvw_run *a, const nvw_run *b)
{
    if (a->n_pts != b->n_pts)
        return false;
    for (int k = 0; k < a->n_pts; k++)
        if (memcmp(&a->pts[k].loss, &b->pts[k].loss, sizeof(double)) ||
            memcmp(&a->pts[k].train_loss, &b->pts[k].train_loss, sizeof(double)) ||
            memcmp(&a->pts[k].grad_norm, &b->pts[k].grad_norm, sizeof(double)))
            return false;
    return true;
}

/* The failure's diagnosis, most specific first. */
static const char *diagnose(const nvw_lr_job *j, bool finals_ok, bool env_ok, double *ret_zero)
{
    const nv_longrun_spec *s = j->s;
    double z = 0, zr = 0;
    bool nonfinite = false;
    int64_t skipped = 0;
    for (int i = 0; i < s->n_seeds; i++) {
        z += j->dev[i].lowp_zero_frac / s->n_seeds;
        nonfinite |= !isfinite(j->dev[i].final_loss);
        skipped += j->dev[i].skipped_steps;
    }
    *ret_zero = z;
    (void)zr;
    if (finals_ok && env_ok)
        return NULL;
    if (nonfinite || skipped >= s->steps * s->n_seeds / 2)
        return "nonfinite";
    if (z > 0.25)
        return "gradient_underflow";
    return finals_ok ? "envelope" : "loss_gap";
}

static int64_t skipped_total(const nvw_lr_job *j)
{
    int64_t n = 0;
    for (int i = 0; i < j->s->n_seeds; i++)
        n += j->dev[i].skipped_steps;
    return n;
}

json_t *nvw_lr_judge(const nvw_lr_job *j, const char **ret_verdict)
{
    const nv_longrun_spec *s = j->s;
    bool welch, trim, env, det = true;
    double gap, zero;
    json_t *fin = final_tests(j, &welch, &trim, &gap);
    json_t *envj = envelope(j, &env);
    json_t *detj;
    if (s->deterministic && j->has_repeat) {
        det = same_curve(&j->dev[0], &j->repeat);
        detj = json_pack("{s:s, s:I, s:b}", "rule",
                         "the device run of the first seed, repeated, gives bit-identical eval "
                         "loss, training loss and gradient-norm curves",
                         "seed", (json_int_t)s->seeds[0], "bit_identical", det);
    } else
        detj = json_pack("{s:s}", "rule", "not checked (\"deterministic\": false)");
    const char *why = diagnose(j, welch && trim, env, &zero);
    bool matched_ok;
    const char *matched_class;
    char matched_why[320];
    json_t *matched =
        nvw_lr_matched(j, &matched_ok, &matched_class, matched_why, sizeof matched_why);
    const char *driven_class = NULL;
    char driven_why[560] = "";
    json_t *driven = nvw_lr_driven(j, &driven_class, driven_why, sizeof driven_why);
    bool pass = why == NULL && det && matched_ok && !driven_class;
    if (!why && !det)
        why = "nondeterministic";
    /* The arithmetic itself, seen at matched weights, comes before what the loss
     * curve shows of it (a consequence) unless training broke down. */
    if (!matched_ok && (!why || strcmp(why, "nonfinite")))
        why = matched_class;
    /* A device-driven step that broke a rule of the training stack (scaler,
     * skipped step, unscale, update, autocast, checkpoint) is the cause of
     * whatever the curves and gradients show after it. */
    if (driven_class)
        why = driven_class;
    json_t *seeds = json_array();
    for (int i = 0; i < s->n_seeds; i++)
        json_array_append_new(seeds, json_integer((json_int_t)s->seeds[i]));
    char reason[512];
    const json_t *drift = json_object_get(fin, "drift");
    char drift_text[200] = "";
    if (json_is_true(json_object_get(drift, "significant")))
        snprintf(drift_text, sizeof drift_text,
                 "; drift: device %s on %lld of %d seeds by %.3g on average (paired t p = %.3g, "
                 "%.0f%% of the band)",
                 json_number_value(json_object_get(drift, "mean_gap")) > 0 ? "worse" : "better",
                 (long long)json_integer_value(json_object_get(
                     drift, json_number_value(json_object_get(drift, "mean_gap")) > 0
                                ? "device_worse"
                                : "device_better")),
                 s->n_seeds, fabs(json_number_value(json_object_get(drift, "mean_gap"))),
                 json_number_value(json_object_get(drift, "p")),
                 100 * json_number_value(json_object_get(drift, "fraction_of_band")));
    if (pass)
        snprintf(reason, sizeof reason,
                 "passed over %d seeds: Welch p = %.3g >= alpha %g; trimmed-mean gap %.4g "
                 "within the band; loss curves inside the reference envelope%s%s",
                 s->n_seeds, json_number_value(json_object_get(json_object_get(fin, "welch"), "p")),
                 s->alpha, gap, s->deterministic ? "; bit-identical on repeat" : "", drift_text);
    else if (why == driven_class)
        snprintf(reason, sizeof reason, "%s: %.460s", why, driven_why);
    else if (why == matched_class)
        snprintf(reason, sizeof reason,
                 "%s: %s; final eval loss gap %.4g (Welch %s, trimmed mean %s, envelope %s)", why,
                 matched_why, gap, welch ? "passed" : "failed", trim ? "passed" : "failed",
                 env ? "passed" : "failed");
    else if (strcmp(why, "gradient_underflow") == 0)
        snprintf(reason, sizeof reason,
                 "gradient underflow: %.1f%% of the device's low-precision gradient elements "
                 "were exactly zero (mean over steps and seeds); final loss gap %.4g (Welch "
                 "%s, trimmed mean %s)",
                 100 * zero, gap, welch ? "passed" : "failed", trim ? "passed" : "failed");
    else if (strcmp(why, "nonfinite") == 0)
        snprintf(reason, sizeof reason,
                 "nonfinite: %lld of %lld device steps skipped for non-finite gradients (the "
                 "scaler backs off by %g per skip); final eval loss gap %.4g (Welch %s, trimmed "
                 "mean %s, envelope %s)",
                 (long long)skipped_total(j), (long long)(s->steps * s->n_seeds), s->backoff, gap,
                 welch ? "passed" : "failed", trim ? "passed" : "failed",
                 env ? "passed" : "failed");
    else
        snprintf(reason, sizeof reason,
                 "%s: final eval loss gap device - reference = %.4g over %d seeds (Welch %s, "
                 "trimmed mean %s, envelope %s%s)",
                 why, gap, s->n_seeds, welch ? "passed" : "failed", trim ? "passed" : "failed",
                 env ? "passed" : "failed", det ? "" : ", not bit-identical on repeat");
    *ret_verdict = pass ? "passed" : "failed";
    return json_pack("{s:s, s:s?, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o*}", "verdict",
                     *ret_verdict, "failure_class", why, "reason", reason, "seeds", seeds,
                     "final_loss", fin, "envelope", envj, "determinism", detj, "matched_weights",
                     matched, "lowp_gradient_zero_fraction", num(zero), "device_steps", driven);
}
