/* The checks of one device-driven training step (driven.c) that need no host
 * forward: the autocast read-back against the job's AMP policy, and the
 * optimizer's update against the reference update rule from the same state. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

static bool is_float(const char *dt)
{
    nv_dtype d;
    return dt && nv_dtype_from_name(dt, &d) == 0 && nv_dtype_get(d)->is_float;
}

static int width(const char *dt)
{
    nv_dtype d;
    return dt && nv_dtype_from_name(dt, &d) == 0 ? nv_dtype_get(d)->storage_bytes : 0;
}

/* Each op's read-back {"op", "inputs": [dtype..], "output": dtype} against the
 * policy (tape.h's categories, PyTorch autocast's rule): a low-precision op
 * gets every float input and its output in amp.low, an fp32 op in fp32, any
 * other op outputs its widest float input; without AMP everything is fp32. */
bool nvw_drive_autocast_ok(const nvw_amp *amp, const json_t *ops, char *why, size_t n)
{
    if (!json_is_array(ops) || json_array_size(ops) == 0) {
        snprintf(why, n, "the device read back no autocast categories (\"ops\")");
        return false;
    }
    size_t i;
    const json_t *o;
    json_array_foreach(ops, i, o)
    {
        const char *op = json_string_value(json_object_get(o, "op"));
        const char *out = json_string_value(json_object_get(o, "output"));
        const json_t *ins = json_object_get(o, "inputs");
        if (!op || !out || !json_is_array(ins)) {
            snprintf(why, n, "autocast read-back entry %zu is not {op, inputs, output}", i);
            return false;
        }
        nvw_amp_cat cat = amp->enabled ? nvw_amp_category(amp, op) : NVW_AMP_FP32;
        const char *want = cat == NVW_AMP_LOW ? nv_dtype_name(amp->low) : "fp32";
        const char *widest = NULL;
        size_t k;
        const json_t *in;
        json_array_foreach(ins, k, in)
        {
            const char *dt = json_string_value(in);
            if (!is_float(dt))
                continue;
            if (cat != NVW_AMP_PROMOTE && strcmp(dt, want)) {
                snprintf(why, n,
                         "op %zu '%s' ran with a %s input; the AMP policy's %s category casts "
                         "its float inputs to %s",
                         i, op, dt, cat == NVW_AMP_LOW ? "low_precision" : "fp32", want);
                return false;
            }
            if (!widest || width(dt) > width(widest))
                widest = dt;
        }
        if (cat == NVW_AMP_PROMOTE)
            want = widest ? widest : out;
        if (strcmp(out, want)) {
            snprintf(why, n, "op %zu '%s' produced %s; the AMP policy (%s) gives %s", i, op, out,
                     cat == NVW_AMP_LOW    ? "low_precision"
                     : cat == NVW_AMP_FP32 ? "fp32"
                                           : "promote: the widest float input",
                     want);
            return false;
        }
    }
    return true;
}

/* The update rule in fp64 from the device's pre-step state and gradient
 * (torch.optim.AdamW, Loshchilov & Hutter Alg. 2; torch.optim.SGD with
 * momentum, dampening 0), compared per element. The device computes in fp32:
 * its weight carries the final subtraction's rounding (u |w|), the weight
 * decay product's (u |w_prev|) and the update's, about ten fp32 operations
 * (u each, relative to the update |dw|): bound 2u|w| + 2u|w_prev| + 16u|dw|.
 * Its moments round twice (product and sum): 4u of their terms. u = 2^-24.
 * A wrong rule (bias correction, weight decay, a step count off by one) moves
 * the update by a relative amount far above 16u. */
bool nvw_drive_update_ok(const nv_longrun_spec *s, const nvw_model *pre, nv_tensor *const *g,
                         nv_tensor *const *w, nv_tensor *const *m1, nv_tensor *const *m2,
                         double lr, int64_t t, char *why, size_t n)
{
    const double u = 0x1p-24;
    double b1t = 1 - pow(s->beta1, (double)t), b2t = 1 - pow(s->beta2, (double)t);
    for (int i = 0; i < pre->n_params; i++) {
        const nvw_param *p = &pre->p[i];
        for (int64_t k = 0; k < p->w->numel; k++) {
            double gk = g[i]->data[k], w0 = p->w->data[k], wr, mr, mt, vr = 0, vt = 0;
            if (s->adamw) {
                mr = s->beta1 * p->m[k] + (1 - s->beta1) * gk;
                mt = fabs(s->beta1 * p->m[k]) + fabs((1 - s->beta1) * gk);
                vr = s->beta2 * p->v[k] + (1 - s->beta2) * gk * gk;
                vt = fabs(vr);
                /* the device's own moments feed the weight (their error is bounded above) */
                double md = m1[i]->data[k], vd = m2[i]->data[k];
                wr = w0 - lr * ((md / b1t) / (sqrt(vd / b2t) + s->eps) + s->weight_decay * w0);
            } else {
                double gw = gk + s->weight_decay * w0;
                mr = t == 1 ? gw : s->momentum * p->m[k] + gw;
                mt = fabs(s->momentum * p->m[k]) + fabs(gw);
                wr = w0 - lr * m1[i]->data[k];
            }
            double wd = w[i]->data[k];
            double wtol = 2 * u * fabs(wr) + 2 * u * fabs(w0) + 16 * u * fabs(wr - w0) + 1e-38;
            if (!(fabs(m1[i]->data[k] - mr) <= 4 * u * mt + 1e-38) ||
                (s->adamw && !(fabs(m2[i]->data[k] - vr) <= 4 * u * vt + 1e-38))) {
                snprintf(why, n,
                         "%s[%lld]: the optimizer state after step %lld is (%.9g, %.9g), the "
                         "update rule from the same state and gradient gives (%.9g, %.9g)",
                         p->name, (long long)k, (long long)t, m1[i]->data[k],
                         s->adamw ? m2[i]->data[k] : 0.0, mr, vr);
                return false;
            }
            if (!(fabs(wd - wr) <= wtol)) {
                snprintf(why, n,
                         "%s[%lld]: the weight after optimizer step %lld is %.9g, the update "
                         "rule (%s, lr %.6g) from the same state gives %.9g (allowed %.3g)",
                         p->name, (long long)k, (long long)t, wd, s->adamw ? "AdamW" : "SGD", lr,
                         wr, wtol);
                return false;
            }
        }
    }
    return true;
}
