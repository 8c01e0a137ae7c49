/* The verdict of device-driven training's own checks (docs/JOBS.md
 * "Device-driven training"): the first step check a device run failed
 * (driven.c), and the checkpoint: the run of the first seed checkpointed after
 * `checkpoint_at` steps and restored in a fresh context must repeat the
 * uninterrupted run bit for bit from there on (deterministic jobs), in the
 * order a restore brings state back: the scaler's scale, then the random
 * stream (the dropout mask), then the weights, moments and loss. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "longrun_internal.h"

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* A non-deterministic job's resumed run (docs/JOBS.md "Device-driven
 * training"): bits need not repeat, so the restored run is judged by what a
 * restore must still bring back: its own step checks after the restore (the
 * scale schedule continues from the saved scaler state, the update rule from
 * the saved moments) and its final eval loss within the reference's
 * seed-to-seed band (rule 2's band: max(band_k sd, band_floor mean)) of the
 * uninterrupted run's. */
static const char *resumed_in_band(const nvw_lr_job *j, double *ret_gap, double *ret_band,
                                   char *why, size_t n)
{
    const nv_longrun_spec *s = j->s;
    const nvw_run *a = &j->dev[0], *b = &j->resumed;
    double rf[NV_LR_MAX_SEEDS];
    for (int i = 0; i < s->n_seeds; i++)
        rf[i] = j->ref[i].final_loss;
    double band = fmax(s->band_k * nvw_sd(rf, s->n_seeds),
                       s->band_floor * fabs(nvw_trimmed_mean(rf, s->n_seeds, s->trim)));
    double gap = b->final_loss - a->final_loss;
    *ret_gap = gap, *ret_band = band;
    if (b->fail_class[0] && b->fail_step >= s->checkpoint_at) {
        bool scaler = !strcmp(b->fail_class, "grad_scaler");
        snprintf(why, n, "restored after step %lld, the resumed run fails its own %s check (%.200s)",
                 (long long)s->checkpoint_at, b->fail_class, b->fail_why);
        return scaler ? "checkpoint_scaler" : "checkpoint_state";
    }
    if (!(fabs(gap) <= band)) {
        snprintf(why, n,
                 "restored after step %lld, the run's final eval loss %.6g differs from the "
                 "uninterrupted run's %.6g by %.3g, beyond the reference's seed-to-seed band "
                 "%.3g (max(%g sd, %g mean) of the reference's final losses): the restore did "
                 "not bring the training state back",
                 (long long)s->checkpoint_at, b->final_loss, a->final_loss, fabs(gap), band,
                 s->band_k, s->band_floor);
        return "checkpoint_state";
    }
    return NULL;
}

static json_t *checkpoint(const nvw_lr_job *j, const char **ret_class, char *why, size_t n)
{
    const nv_longrun_spec *s = j->s;
    if (!j->has_resumed)
        return json_pack("{s:s}", "rule", "not checked (no \"checkpoint_at\")");
    const nvw_run *a = &j->dev[0], *b = &j->resumed;
    const char *cls = NULL;
    int64_t at = -1;
    for (int64_t t = s->checkpoint_at; t < s->steps && !cls; t++) {
        at = t;
        if (a->scale_bits[t] != b->scale_bits[t])
            cls = "checkpoint_scaler";
        else if (a->mask_hash[t] != b->mask_hash[t])
            cls = "checkpoint_rng";
        else if (a->state_hash[t] != b->state_hash[t])
            cls = "checkpoint_state";
    }
    bool judged = s->deterministic;
    double gap = NAN, band = NAN;
    if (!judged) {
        const char *bc = resumed_in_band(j, &gap, &band, why, n);
        if (bc)
            *ret_class = bc;
        return json_pack("{s:s, s:I, s:b, s:s, s:b, s:o, s:o, s:b, s:s?}", "rule",
                         "non-deterministic job: checkpointed after checkpoint_at steps, "
                         "restored in a fresh context and continued, the first seed's run "
                         "passes its own step checks after the restore and ends within the "
                         "reference's seed-to-seed band of the uninterrupted run's final eval "
                         "loss (bits recorded, not judged)",
                         "checkpoint_at", (json_int_t)s->checkpoint_at, "judged", 1, "judged_by",
                         "seed_band", "bit_identical", cls == NULL, "final_loss_gap", num(gap),
                         "band", num(band), "passed", bc == NULL, "failure", bc);
    }
    if (cls && judged) {
        double sa, sb;
        memcpy(&sa, &a->scale_bits[at], 8), memcpy(&sb, &b->scale_bits[at], 8);
        if (!strcmp(cls, "checkpoint_scaler"))
            snprintf(why, n,
                     "restored after step %lld, the run's loss scale at step %lld is %.9g, the "
                     "uninterrupted run's %.9g: the checkpoint lost the grad scaler's state",
                     (long long)s->checkpoint_at, (long long)at, sb, sa);
        else if (!strcmp(cls, "checkpoint_rng"))
            snprintf(why, n,
                     "restored after step %lld, the run's dropout mask at step %lld differs from "
                     "the uninterrupted run's: the checkpoint lost the generator's state",
                     (long long)s->checkpoint_at, (long long)at);
        else
            snprintf(why, n,
                     "restored after step %lld, the run's weights, optimizer state or loss at "
                     "step %lld differ from the uninterrupted run's",
                     (long long)s->checkpoint_at, (long long)at);
        *ret_class = cls;
    }
    return json_pack("{s:s, s:I, s:b, s:s, s:b, s:s?, s:I}", "rule",
                     "checkpointed after checkpoint_at steps, restored in a fresh context and "
                     "continued, the first seed's run repeats the uninterrupted one bit for bit "
                     "(scale, dropout mask, weights, optimizer state, loss)",
                     "checkpoint_at", (json_int_t)s->checkpoint_at, "judged", judged,
                     "judged_by", "bits", "bit_identical", cls == NULL, "first_difference", cls, "first_step",
                     (json_int_t)(cls ? at : -1));
}

json_t *nvw_lr_driven(const nvw_lr_job *j, const char **ret_class, char *why, size_t why_len)
{
    const nv_longrun_spec *s = j->s;
    *ret_class = NULL;
    if (!s->driven)
        return NULL;
    int64_t checked = 0, growths = 0, backoffs = 0, skipped = 0;
    int64_t ar_el = 0, ar_exact = 0, ar_skip = 0;
    double ar_worst = 0;
    int honoured = -1; /* -1: no step said */
    json_t *failure = NULL;
    for (int i = 0; i < s->n_seeds; i++) {
        const nvw_run *r = &j->dev[i];
        checked += r->checked_steps, growths += r->growths, backoffs += r->backoffs;
        skipped += r->skipped_steps;
        ar_el += r->ar_elements, ar_exact += r->ar_exact, ar_skip += r->ar_skipped;
        ar_worst = fmax(ar_worst, r->ar_worst);
        if (r->det_honoured >= 0)
            honoured = honoured == 0 ? 0 : r->det_honoured;
        if (r->fail_class[0] && !failure) {
            failure = json_pack("{s:s, s:I, s:I, s:s}", "class", r->fail_class, "seed",
                                (json_int_t)r->seed, "step", (json_int_t)r->fail_step, "reason",
                                r->fail_why);
            *ret_class = r->fail_class;
            snprintf(why, why_len, "seed %llu, %s", (unsigned long long)r->seed, r->fail_why);
        }
    }
    char ckwhy[400] = "";
    const char *ckcls = NULL;
    json_t *ck = checkpoint(j, &ckcls, ckwhy, sizeof ckwhy);
    if (ckcls && !*ret_class) {
        *ret_class = ckcls;
        snprintf(why, why_len, "seed %llu: %s", (unsigned long long)s->seeds[0], ckwhy);
    }
    json_error_t je;
    json_t *ops = json_loads(j->dev[0].ops[0] ? j->dev[0].ops : "null", JSON_DECODE_ANY, &je);
    json_t *ar = NULL;
    if (s->ranks > 1) {
        char b[400];
        nvw_allreduce_bound_text(s, b, sizeof b);
        ar = json_pack("{s:s, s:i, s:s, s:s, s:i, s:I, s:I, s:I, s:o}", "rule", b, "ranks",
                       s->ranks, "algorithm", s->allreduce_tree ? "tree" : "ring", "dtype",
                       nv_dtype_name(s->allreduce_dtype), "gamma_k", nvw_allreduce_k(s),
                       "elements", (json_int_t)ar_el, "exactly_rounded", (json_int_t)ar_exact,
                       "not_judged", (json_int_t)ar_skip, "worst_error_to_bound", num(ar_worst));
    }
    json_t *det = json_pack("{s:b, s:o}", "demanded", s->deterministic, "ran_deterministic",
                            honoured < 0 ? json_null() : json_boolean(honoured));
    json_t *out = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o?, s:o, s:o}", "rule",
                     "every device step against the reference step from the same state: "
                     "autocast categories vs the AMP policy, the GradScaler schedule, "
                     "non-finite steps skipped with nothing updated, gradients unscaled before "
                     "clipping, the optimizer's update rule; gradients at logged steps by rule 5",
                     "checked_steps", (json_int_t)checked, "skipped_steps", (json_int_t)skipped,
                     "scale_growths", (json_int_t)growths, "scale_backoffs", (json_int_t)backoffs,
                     "failure", failure, "autocast", ops ? ops : json_null(), "checkpoint", ck);
    json_object_set_new(out, "deterministic", det);
    if (ar)
        json_object_set_new(out, "allreduce", ar);
    return out;
}
