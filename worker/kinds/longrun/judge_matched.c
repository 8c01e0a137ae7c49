/* The device's arithmetic at matched weights (train/shadow.c), judged: at every
 * logged step of every device run, the device's gradient and eval loss against
 * the fp64 reference of the same weights and data, with the declared-precision
 * reference's error (each op rounded once to the dtype the AMP policy gives the
 * device) as the yardstick.
 *
 * Per layer, over all checked steps and seeds, the relative error norm
 *     E = sqrt(sum ||g - g64||^2 / sum ||g64||^2)
 * of the device (E_dev) and of the declared-precision reference (E_decl). The
 * device passes when E_dev <= ratio * E_decl + floor:
 * - ratio: a device that rounds to the declared dtypes errs by about as much as
 *   the reference that rounds each op once: both errors are sums of many
 *   independent roundings of the same sizes, and their pooled norms concentrate
 *   (measured on emu's correct modes: docs/JOBS.md). The ratio allows for a
 *   device's own correct choices (summation order, fused kernels, its
 *   transcendental approximations); a device storing op outputs in a narrower
 *   dtype than declared errs by the ratio of the unit roundoffs (fp8 e5m2 for
 *   bf16: 2^6).
 * - floor: what a correct fp32 accumulation adds on top of the declared
 *   roundings (which include none inside an op): lambda sqrt(K) u_fp32, the
 *   probabilistic bound of an inner product of length K (Higham & Mary 2019;
 *   docs/TOLERANCES.md), K the model's longest reduction, lambda = 8.
 * The eval loss likewise: E over the logged steps of |L - L64|, the device's own
 * forward against the declared reference's, floor lambda sqrt(N) u_fp32 |L| for
 * the eval mean over N examples. */
#include <math.h>
#include <stdio.h>

#include "longrun_internal.h"
#include "worker/runner/job.h"

#define MATCHED_RATIO 4.0
#define MATCHED_LAMBDA 8.0
#define U_FP32 0x1p-24

static double floor_k(const nv_longrun_spec *s)
{
    double k = fmax(fmax(s->in_dim, s->hidden), fmax(s->classes, s->batch));
    if (s->model == NV_LR_TRANSFORMER)
        k = fmax(k, (double)s->batch * s->seq);
    if (s->model == NV_LR_CNN) /* conv1's weight gradient sums batch x pixels; the head reads
                                  the flattened 2 hidden (in/4)^2 */
        k = fmax(k, fmax((double)s->batch * s->in_dim * s->in_dim,
                         2.0 * s->hidden * (s->in_dim / 4) * (s->in_dim / 4)));
    return MATCHED_LAMBDA * sqrt(k) * U_FP32;
}

static json_t *num(double x)
{
    return nvw_json_num(x);
}

/* The first logged step (in step order, over the seeds) whose own error left the
 * allowance: where the difference starts. */
static json_t *first_leave(const nvw_lr_job *j, int l, double floor)
{
    const nv_longrun_spec *s = j->s;
    int n_pts = j->dev[0].n_pts;
    for (int k = 0; k < n_pts; k++)
        for (int i = 0; i < s->n_seeds; i++) {
            const nvw_run *d = &j->dev[i];
            if (k >= d->n_pts || !d->pts[k].checked || !(d->pts[k].ref2[l] > 0))
                continue;
            const nvw_point *p = &d->pts[k];
            double ed = sqrt(p->dev_err2[l] / p->ref2[l]), ec = sqrt(p->decl_err2[l] / p->ref2[l]);
            if (!(ed <= MATCHED_RATIO * ec + floor))
                return json_pack("{s:I, s:I, s:o, s:o}", "step", (json_int_t)p->step, "seed",
                                 (json_int_t)s->seeds[i], "device_error", num(ed), "declared_error",
                                 num(ec));
        }
    return json_null();
}

json_t *nvw_lr_matched(const nvw_lr_job *j, bool *ret_pass, const char **ret_class, char *why,
                       size_t why_len)
{
    *ret_class = NULL;
    const nv_longrun_spec *s = j->s;
    const nvw_run *d0 = &j->dev[0];
    double floor = floor_k(s);
    bool pass = true;
    *why = 0;
    json_t *layers = json_array();
    int checked = 0;
    for (int i = 0; i < s->n_seeds; i++)
        for (int k = 0; k < j->dev[i].n_pts; k++)
            checked += j->dev[i].pts[k].checked;
    for (int l = 0; l < d0->n_layers; l++) {
        double de = 0, ce = 0, rr = 0;
        for (int i = 0; i < s->n_seeds; i++)
            for (int k = 0; k < j->dev[i].n_pts; k++) {
                const nvw_point *p = &j->dev[i].pts[k];
                if (!p->checked)
                    continue;
                de += p->dev_err2[l], ce += p->decl_err2[l], rr += p->ref2[l];
            }
        if (!(rr > 0))
            continue;
        double ed = sqrt(de / rr), ec = sqrt(ce / rr), allowed = MATCHED_RATIO * ec + floor;
        bool ok = ed <= allowed;
        json_t *first = ok ? json_null() : first_leave(j, l, floor);
        if (!ok && pass) {
            const json_t *st = json_object_get(first, "step");
            int w = snprintf(why, why_len,
                             "gradient of layer '%s': relative error %.3g at matched weights, "
                             "%.1f times the declared-precision reference's %.3g (allowed %.3g)",
                             d0->layers[l], ed, ec > 0 ? ed / ec : INFINITY, ec, allowed);
            if (st && w > 0 && (size_t)w < why_len)
                snprintf(why + w, why_len - (size_t)w, ", first beyond it at step %lld (seed %lld)",
                         (long long)json_integer_value(st),
                         (long long)json_integer_value(json_object_get(first, "seed")));
            *ret_class = "gradient_error";
        }
        pass &= ok;
        json_array_append_new(layers, json_pack("{s:s, s:o, s:o, s:o, s:b, s:o}", "layer",
                                                d0->layers[l], "device_error", num(ed),
                                                "declared_error", num(ec), "allowed", num(allowed),
                                                "passed", ok, "first_beyond", first));
    }
    double de = 0, ce = 0, lsum = 0;
    int ne = 0;
    for (int i = 0; i < s->n_seeds; i++)
        for (int k = 0; k < j->dev[i].n_pts; k++) {
            const nvw_point *p = &j->dev[i].pts[k];
            if (!isfinite(p->eval_decl) || !isfinite(p->loss))
                continue;
            double dv = isfinite(p->eval_dev) ? p->eval_dev - p->loss : INFINITY;
            de += dv * dv, ce += (p->eval_decl - p->loss) * (p->eval_decl - p->loss);
            lsum += fabs(p->loss), ne++;
        }
    double eed = ne ? sqrt(de / ne) : 0, eec = ne ? sqrt(ce / ne) : 0;
    double efloor = MATCHED_LAMBDA * sqrt((double)s->eval_examples) * U_FP32 * (ne ? lsum / ne : 0);
    double eallowed = MATCHED_RATIO * eec + efloor;
    bool eok = eed <= eallowed;
    if (!eok && pass)
        *ret_class = "eval_error",
        snprintf(why, why_len,
                 "eval loss computed by the device: rms error %.3g against the fp64 loss of the "
                 "same weights, %.1f times the declared-precision reference's %.3g (allowed %.3g)",
                 eed, eec > 0 ? eed / eec : INFINITY, eec, eallowed);
    pass &= eok;
    *ret_pass = pass;
    return json_pack(
        "{s:s, s:b, s:f, s:o, s:i, s:o, s:o}", "rule",
        "the device's gradient per layer and its own eval loss, at the weights its run holds, vs "
        "the fp64 reference of the same weights and data: error <= ratio * error of the "
        "declared-precision reference (each op rounded once to its AMP dtype) + floor",
        "passed", pass, "ratio", MATCHED_RATIO, "floor", num(floor), "checked_steps", checked,
        "gradient", layers, "eval_loss",
        json_pack("{s:o, s:o, s:o, s:b}", "device_error", num(eed), "declared_error", num(eec),
                  "allowed", num(eallowed), "passed", eok));
}
