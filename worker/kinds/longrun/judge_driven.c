/* The verdict of device-driven training's own checks (docs/JOBS.md
 * "Device-driven training"): the first step check a device run failed
 * (driven.c), and the checkpoint: the run of the first seed checkpointed after
 * `checkpoint_at` steps and restored in a fresh context must repeat the
 * uninterrupted run bit for bit from there on (deterministic jobs), in the
 * order a restore brings state back: the scaler's scale, then the random
 * stream (the dropout mask), then the weights, moments and loss. */
#include <stdio.h>
#include <string.h>

#include "longrun_internal.h"

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
    return json_pack("{s:s, s:I, s:b, s:b, s:s?, s:I}", "rule",
                     "checkpointed after checkpoint_at steps, restored in a fresh context and "
                     "continued, the first seed's run repeats the uninterrupted one bit for bit "
                     "(scale, dropout mask, weights, optimizer state, loss)",
                     "checkpoint_at", (json_int_t)s->checkpoint_at, "judged", judged,
                     "bit_identical", cls == NULL, "first_difference", cls, "first_step",
                     (json_int_t)(cls ? at : -1));
}

json_t *nvw_lr_driven(const nvw_lr_job *j, const char **ret_class, char *why, size_t why_len)
{
    const nv_longrun_spec *s = j->s;
    *ret_class = NULL;
    if (!s->driven)
        return NULL;
    int64_t checked = 0, growths = 0, backoffs = 0, skipped = 0;
    json_t *failure = NULL;
    for (int i = 0; i < s->n_seeds; i++) {
        const nvw_run *r = &j->dev[i];
        checked += r->checked_steps, growths += r->growths, backoffs += r->backoffs;
        skipped += r->skipped_steps;
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
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:o?, s:o, s:o}", "rule",
                     "every device step against the reference step from the same state: "
                     "autocast categories vs the AMP policy, the GradScaler schedule, "
                     "non-finite steps skipped with nothing updated, gradients unscaled before "
                     "clipping, the optimizer's update rule; gradients at logged steps by rule 5",
                     "checked_steps", (json_int_t)checked, "skipped_steps", (json_int_t)skipped,
                     "scale_growths", (json_int_t)growths, "scale_backoffs", (json_int_t)backoffs,
                     "failure", failure, "autocast", ops ? ops : json_null(), "checkpoint", ck);
}
