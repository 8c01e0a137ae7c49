/* The promoter (docs/DESIGN.md "Failures, reproducers, the permanent suite"):
 * dedup of minimized reproducers by failure signature into the permanent
 * suite, and the replay history of suite jobs, from an uploaded result. */
#ifndef NUMVAL_DAEMON_PROMOTE_H
#define NUMVAL_DAEMON_PROMOTE_H

#include <jansson.h>
#include <stdint.h>

#include "daemon/store/store.h"

/* For a result of job_id, in the write that stores it (nvd_store_job_finish_then):
 * promote minimized reproducers ("signature" + "minimized_artifact" on a case)
 * and record suite replays ("suite_case" on a case of a suite job). A failure
 * judged by the job's own tolerance is promoted only if it also fails under the
 * stored tolerance (else the shipped default) of its op and dtype
 * (tolerance.h nvd_tolerance_fails_under). Idempotent:
 * a repeat records no second occurrence or run. A case without a well-formed
 * signature is skipped; a store error is returned (negative errno, logged) so
 * the caller rolls back the result with it. */
int nvd_promote_result(nvd_store *s, int64_t job_id, const json_t *result, int64_t now);
/* The same, appending the id of each suite case it created (a signature not
 * seen before) to new_ids (an array; NULL: not wanted), for the webhooks. */
int nvd_promote_result_ids(nvd_store *s, int64_t job_id, const json_t *result, int64_t now,
                           json_t *new_ids);

#endif
