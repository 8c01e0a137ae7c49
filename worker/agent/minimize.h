/* Agent mode, after a failed job: the reproduction gate and the minimizer run
 * on the job's failures before its result is uploaded; each minimized
 * reproducer is uploaded as an artifact and its case carries "signature",
 * "minimized_artifact" and "repro_rate" (docs/ARTIFACTS.md). Each failure goes
 * to its kind's gate through the kind table (worker/kinds/kinds.h); a kind
 * without one keeps its artifact only. */
#ifndef NUMVAL_WORKER_AGENT_MINIMIZE_H
#define NUMVAL_WORKER_AGENT_MINIMIZE_H

#include <jansson.h>

#include "agent_internal.h"

/* nvw_failure_fn: nvw_agent_on_failure (build + upload), and keeps the artifact
 * of the first failure of each signature key of the job (the kind's
 * failure_key), at most NVW_AGENT_MIN_CASES, for nvw_agent_minimize_failures. */
int nvw_agent_on_failure_min(void *ud, const nvw_failure *f, char **ret_artifact_id);

/* Gate and minimize the kept failures of job j (within j->minimize_deadline_s
 * in all: `--minimize-deadline S`, default NVW_AGENT_MIN_DEADLINE_S, 0 none),
 * upload each verified minimized artifact and annotate its case in result
 * (cases[]). Frees what was kept. Errors are logged: the job's result stands
 * without the annotations. */
void nvw_agent_minimize_failures(nvw_agent_job *j, json_t *result);

#define NVW_AGENT_MIN_CASES 3
#define NVW_AGENT_MIN_DEADLINE_S 120.0
#define NVW_AGENT_MIN_BUDGET 2000

#endif
