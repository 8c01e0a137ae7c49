/* A job's demanded determinism reaching the backend (nv_backend.configure,
 * docs/JOBS.md "Determinism demanded"): every backend context of an op,
 * gradient or fused job that demands "deterministic": true is configured
 * right after it opens, and the backend's answer judges the job. */
#ifndef NUMVAL_WORKER_RUNNER_DETERMINISM_H
#define NUMVAL_WORKER_RUNNER_DETERMINISM_H

#include <jansson.h>
#include <stddef.h>

#include "numval/backend.h"

enum {
    NVW_DET_NOT_OFFERED = -1, /* no configure entry (ABI <= 4), or NV_E_UNSUPPORTED */
    NVW_DET_REFUSED = 0,      /* answered false, or a failing or malformed answer */
    NVW_DET_HONOURED = 1,     /* answered {"deterministic": true} */
};

/* Send {"deterministic": true} to ctx: one of NVW_DET_*, with what the backend
 * said in why (a message for users) unless honoured. */
int nvw_det_configure(const nv_backend *t, void *ctx, char *why, size_t whylen);

/* Every case of result["cases"] that did not already fail as
 * nondeterministic_op is turned into a failed case of class
 * deterministic_not_honoured carrying why as its "error"; "summary" counts and
 * the "verdict" follow. Returns 0 or -ENOMEM. */
int nvw_det_fail_cases(json_t *result, const char *why);

/* result["determinism"] = {"demanded": true, "answered": bool|null}. 0 or -ENOMEM. */
int nvw_det_record(json_t *result, int answer);

#endif
