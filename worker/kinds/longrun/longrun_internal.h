/* Internal interface of the long-run kind (run.c, judge.c, series.c). */
#ifndef NUMVAL_WORKER_RUN_LONGRUN_INTERNAL_H
#define NUMVAL_WORKER_RUN_LONGRUN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "worker/kinds/longrun/train/train.h"

typedef struct nvw_lr_job {
    const nv_longrun_spec *s;
    nvw_run ref[NV_LR_MAX_SEEDS], dev[NV_LR_MAX_SEEDS];
    nvw_run repeat; /* device, seeds[0] again (determinism) */
    bool has_repeat;
    nvw_run resumed; /* device-driven, seeds[0] checkpointed and restored */
    bool has_resumed;
} nvw_lr_job;

/* The verdict object ("verdict", "failure_class", "reason", the tests with their
 * numbers and the seeds); *ret_verdict "passed" or "failed". New reference. */
json_t *nvw_lr_judge(const nvw_lr_job *j, const char **ret_verdict);

/* The device's gradient and eval loss at matched weights (judge_matched.c): the
 * "matched_weights" object; *ret_pass, and when it fails *ret_class
 * ("gradient_error" or "eval_error") and why (one sentence). New reference. */
json_t *nvw_lr_matched(const nvw_lr_job *j, bool *ret_pass, const char **ret_class, char *why,
                       size_t why_len);

/* Device-driven training (judge_driven.c): the "device_steps" object (step
 * checks and the checkpoint comparison); *ret_class NULL when they pass, else
 * the class and why. New reference. */
json_t *nvw_lr_driven(const nvw_lr_job *j, const char **ret_class, char *why, size_t why_len);

/* The zstd-compressed per-step series of every run (JSON lines, base64 in the
 * result) and the downsampled curves for the UI. New references, NULL on ENOMEM. */
json_t *nvw_lr_series(const nvw_lr_job *j);
json_t *nvw_lr_curves(const nvw_lr_job *j, int max_points);

#endif
