/* Long-run statistics, gradient scaler and learning-rate schedule
 * (worker/kinds/longrun/train/stats.c) against hand-computed and published values. */
#include <math.h>

#include "tests/unit/tap.h"
#include "worker/kinds/longrun/train/stats.h"

static void welch_cases(void)
{
    /* Hand-computed: means 1 and 2, sample variances 2 and 2, n = 2 each:
     * t = -1 / sqrt(2/2 + 2/2) = -1/sqrt(2); df = (1 + 1)^2 / (1/1 + 1/1) = 2.
     * Student t with 2 df has the closed form P(|T| > t) = 1 - t / sqrt(2 + t^2). */
    double a[] = {0, 2}, b[] = {1, 3};
    nvw_welch w;
    nvw_welch_test(a, 2, b, 2, &w);
    double t = -1 / sqrt(2.0), p = 1 - fabs(t) / sqrt(2 + t * t);
    /* 1e-12: both sides are a few double operations from the same exact value. */
    tap_ok(fabs(w.t - t) < 1e-12 && fabs(w.df - 2) < 1e-12, "welch t %.15g df %.15g", w.t, w.df);
    /* 1e-10: the continued fraction converges to 1e-16 relative; margin for lgamma. */
    tap_ok(fabs(w.p - p) < 1e-10, "welch p %.15g (closed form %.15g)", w.p, p);

    /* Hand-computed unequal variances: a = 1..5 (var 2.5), b = 2,4..10 (var 10):
     * t = -3 / sqrt(0.5 + 2) = -1.8973665961, df = 6.25 / (0.0625 + 1) = 5.88235294. */
    double a2[] = {1, 2, 3, 4, 5}, b2[] = {2, 4, 6, 8, 10};
    nvw_welch_test(a2, 5, b2, 5, &w);
    tap_ok(fabs(w.t + 3 / sqrt(2.5)) < 1e-12 && fabs(w.df - 6.25 / 1.0625) < 1e-12,
           "welch unequal variances t %.12g df %.12g", w.t, w.df);

    /* Published example (Wikipedia, "Welch's t-test", Example 1, after Ruxton 2006):
     * t = -2.46, df = 25.0, p = 0.021 (printed to 3 digits: tolerances are half a
     * unit of the last printed digit). */
    double x1[] = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1,
                   21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
    double x2[] = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0,
                   24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
    nvw_welch_test(x1, 15, x2, 15, &w);
    tap_ok(fabs(w.t + 2.46) < 0.005 && fabs(w.df - 25.0) < 0.05 && fabs(w.p - 0.021) < 0.0005,
           "published example: t %.4f df %.3f p %.4f", w.t, w.df, w.p);

    /* Identical samples: no evidence of a difference. */
    double c[] = {1, 1, 1};
    nvw_welch_test(c, 3, c, 3, &w);
    tap_ok(w.p == 1 && w.t == 0, "constant equal samples: p = 1");
    double d[] = {2, 2, 2};
    nvw_welch_test(c, 3, d, 3, &w);
    tap_ok(w.p == 0, "constant different samples: p = 0");
}

static void paired_cases(void)
{
    /* Hand-computed: differences 1, 2, 3, 4 (mean 2.5, sd sqrt(5/3)), so
     * t = 2.5 / sqrt(5/12) = 3.872983346, df 3. */
    double a[] = {2, 4, 6, 8}, b[] = {1, 2, 3, 4};
    nvw_paired pt;
    nvw_paired_test(a, b, 4, &pt);
    /* 1e-12: a few double operations from the same exact value. */
    tap_ok(fabs(pt.t - 2.5 / sqrt(5.0 / 12)) < 1e-12 && pt.df == 3 && pt.positive == 4 &&
               pt.negative == 0,
           "paired t %.12g df %g, 4 positive", pt.t, pt.df);
    /* Table: the two-sided 5% critical value of t with 3 df is 3.182 and 2% is
     * 4.541, so p lies between them. */
    tap_ok(pt.p < 0.05 && pt.p > 0.02, "paired p %.5f between the 5%% and 2%% points", pt.p);
    /* The pairing matters: unpaired, the samples overlap (Welch t = 2.5 /
     * sqrt(20/12 / 4 + 5/12 / 4) = 1.549, not significant at 5%), the differences
     * do not. */
    nvw_welch w;
    nvw_welch_test(a, 4, b, 4, &w);
    tap_ok(w.p > 0.05, "same data unpaired: Welch p %.3f", w.p);
    /* Symmetric differences: no evidence, t = 0, p = 1. */
    double c[] = {1, 3, 5, 7}, d[] = {2, 2, 6, 6};
    nvw_paired_test(c, d, 4, &pt);
    /* 1e-12: I_1(a, b) = 1 up to the continued fraction's rounding. */
    tap_ok(pt.t == 0 && fabs(pt.p - 1) < 1e-12 && pt.positive == 2 && pt.negative == 2,
           "differences -1, 1, -1, 1: t %g p %g", pt.t, pt.p);
    double e[] = {1, 1, 1}, f[] = {0, 0, 0};
    nvw_paired_test(e, f, 3, &pt);
    tap_ok(pt.p == 0 && isinf(pt.t), "constant non-zero differences: p = 0");
    nvw_paired_test(e, e, 3, &pt);
    tap_ok(pt.p == 1 && pt.t == 0, "equal pairs: p = 1");
}

static void t_dist_cases(void)
{
    /* df = 1 is the Cauchy distribution: P(|T| > t) = 1 - (2/pi) atan t. */
    double p1 = nvw_t_two_sided(1.5, 1), c1 = 1 - 2 / 3.14159265358979323846 * atan(1.5);
    tap_ok(fabs(p1 - c1) < 1e-12, "t df=1 %.15g vs Cauchy %.15g", p1, c1);
    /* Table value: the two-sided 5% critical value with 10 df is 2.228 (3 decimals:
     * the p at 2.228 lies within 2e-4 of 0.05). */
    double p10 = nvw_t_two_sided(2.228, 10);
    tap_ok(fabs(p10 - 0.05) < 2e-4, "t df=10 at 2.228: p %.6f", p10);
    /* Large df approaches the normal: P(|Z| > 1.959964) = 0.05. */
    double pz = nvw_t_two_sided(1.959964, 1e7);
    tap_ok(fabs(pz - 0.05) < 1e-5, "t df=1e7 at 1.959964: p %.7f", pz);
}

static void trimmed_cases(void)
{
    double x[] = {5, 1, 100, 3, 4}; /* drop 1 and 100: mean of 3, 4, 5 */
    tap_ok(nvw_trimmed_mean(x, 5, 1) == 4, "trimmed mean drops the extremes");
    double y[] = {2, 4, 4, 4, 5, 5, 7, 9}; /* sample sd: sqrt(32/7) */
    tap_ok(fabs(nvw_sd(y, 8) - sqrt(32.0 / 7)) < 1e-14, "sample sd %.15g", nvw_sd(y, 8));
}

static void scaler_cases(void)
{
    /* PyTorch GradScaler semantics: backoff on inf and skip; growth after
     * `interval` consecutive finite steps. */
    nvw_scaler s;
    nvw_scaler_init(&s, true, 65536, 2, 0.5, 3);
    tap_ok(nvw_scaler_scale(&s) == 65536, "initial scale");
    tap_ok(nvw_scaler_update(&s, true) && s.scale == 32768, "inf: skipped, backed off");
    tap_ok(!nvw_scaler_update(&s, false) && !nvw_scaler_update(&s, false) && s.scale == 32768,
           "two finite steps: no growth yet");
    tap_ok(!nvw_scaler_update(&s, false) && s.scale == 65536, "third finite step: grows");
    nvw_scaler_update(&s, false);
    nvw_scaler_update(&s, false);
    tap_ok(nvw_scaler_update(&s, true) && s.scale == 32768 && s.tracker == 0,
           "inf resets the growth tracker");
    nvw_scaler_update(&s, false);
    nvw_scaler_update(&s, false);
    tap_ok(s.scale == 32768, "tracker restarted after the backoff");
    nvw_scaler off;
    nvw_scaler_init(&off, false, 65536, 2, 0.5, 1);
    tap_ok(nvw_scaler_scale(&off) == 1 && nvw_scaler_update(&off, true) && off.scale == 65536,
           "disabled: scale 1, non-finite still skips, no backoff");
}

static void lr_cases(void)
{
    /* Warmup 4 of base 1: 0.25, 0.5, 0.75, 1; cosine over steps 4..12 of 13:
     * step 8 is halfway: 0.5; last step: min_ratio. */
    tap_ok(nvw_lr_at(NVW_LR_COSINE, 1, 4, 0, 0, 13) == 0.25, "warmup first step");
    tap_ok(nvw_lr_at(NVW_LR_COSINE, 1, 4, 0, 3, 13) == 1, "warmup last step");
    tap_ok(fabs(nvw_lr_at(NVW_LR_COSINE, 1, 4, 0, 8, 13) - 0.5) < 1e-15, "cosine halfway");
    tap_ok(fabs(nvw_lr_at(NVW_LR_COSINE, 1, 4, 0.1, 12, 13) - 0.1) < 1e-15, "cosine end");
    tap_ok(nvw_lr_at(NVW_LR_CONSTANT, 0.3, 0, 0, 7, 13) == 0.3, "constant");
}

int main(void)
{
    welch_cases();
    paired_cases();
    t_dist_cases();
    trimmed_cases();
    scaler_cases();
    lr_cases();
    return tap_done();
}
