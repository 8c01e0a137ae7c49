/* Long-run qualification: the statistics that judge a device's
 * training runs against the reference runs, the dynamic gradient scaler and the
 * learning-rate schedule. Pure functions with no backend, so they are unit
 * tested on their own (tests/unit/worker/test-train-stats.c). */
#ifndef NUMVAL_WORKER_TRAIN_STATS_H
#define NUMVAL_WORKER_TRAIN_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* Sample mean and sample standard deviation (n - 1 in the denominator). */
double nvw_mean(const double *x, int n);
double nvw_sd(const double *x, int n);

/* Mean after dropping the `trim` smallest and `trim` largest values (MLPerf's
 * reference convergence points drop the fastest and slowest run). n > 2 trim. */
double nvw_trimmed_mean(const double *x, int n, int trim);

/* Regularized incomplete beta function I_x(a, b) (continued fraction, modified
 * Lentz; Numerical Recipes 3rd ed. §6.4). */
double nvw_betai(double a, double b, double x);

/* Two-sided tail probability P(|T| >= |t|) of Student's t with df degrees of
 * freedom: I_{df/(df+t^2)}(df/2, 1/2). */
double nvw_t_two_sided(double t, double df);

typedef struct nvw_welch {
    double t, df, p; /* p: two-sided */
    double mean_a, mean_b, sd_a, sd_b;
} nvw_welch;

/* Welch's unequal-variance t-test of sample a against sample b (Welch 1947;
 * Welch-Satterthwaite degrees of freedom). Both samples constant: p = 1 when the
 * means are equal, else 0. Needs na, nb >= 2. */
void nvw_welch_test(const double *a, int na, const double *b, int nb, nvw_welch *ret);

typedef struct nvw_paired {
    double mean, sd, t, df, p; /* of the differences a_i - b_i; p: two-sided */
    int positive, negative;    /* differences above and below zero */
} nvw_paired;

/* Paired t-test (Student 1908) of a_i - b_i against a zero mean: t = mean /
 * (sd / sqrt(n)) with n - 1 degrees of freedom. Constant differences: p = 1 when
 * they are all zero, else 0. Needs n >= 2. */
void nvw_paired_test(const double *a, const double *b, int n, nvw_paired *ret);

/* Dynamic loss scaling as PyTorch's torch.cuda.amp.GradScaler: the loss is
 * multiplied by scale before backward; a step whose unscaled gradients hold a
 * non-finite value is skipped and the scale multiplied by backoff; after
 * growth_interval consecutive finite steps the scale is multiplied by growth. */
typedef struct nvw_scaler {
    bool enabled;
    double scale, growth, backoff;
    int interval;
    int tracker; /* consecutive finite steps since the last change */
} nvw_scaler;

void nvw_scaler_init(nvw_scaler *s, bool enabled, double init_scale, double growth, double backoff,
                     int interval);
/* The scale to multiply the loss by (1 when disabled). */
double nvw_scaler_scale(const nvw_scaler *s);
/* Record one step's outcome; returns true when the step must be skipped (a
 * non-finite gradient, with scaling enabled or not). */
bool nvw_scaler_update(nvw_scaler *s, bool found_nonfinite);

typedef enum nvw_lr_kind { NVW_LR_CONSTANT, NVW_LR_COSINE } nvw_lr_kind;

/* Learning rate at step t (0-based) of total: linear warmup over `warmup` steps
 * ((t + 1) / warmup of the base), then constant or half-cosine decay to
 * min_ratio * base at the last step (Loshchilov & Hutter, SGDR, eq. 5). */
double nvw_lr_at(nvw_lr_kind k, double base, int warmup, double min_ratio, int64_t t,
                 int64_t total);

#endif
