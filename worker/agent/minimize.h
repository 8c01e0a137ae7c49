/* Agent mode, after a failed job (issue 6): the reproduction gate and the
 * minimizer run on the job's failures before its result is uploaded; each
 * minimized reproducer is uploaded as an artifact and its case carries
 * "signature", "minimized_artifact" and "repro_rate" (docs/ARTIFACTS.md).
 * Op failures go through minimize.h, fused ones through repro_fused.h
 * (also "minimized_nodes"); other kinds keep their artifact only. */
#ifndef NUMVAL_WORKER_AGENT_MINIMIZE_H
#define NUMVAL_WORKER_AGENT_MINIMIZE_H

#include <jansson.h>

#include "agent_internal.h"

/* nvw_failure_fn: nvw_agent_on_failure (build + upload), and keeps the artifact
 * of the first failure of each signature of the job (op: dtype, output dtype,
 * class; fused: first divergent op, its judged dtype, case dtype, class;
 * gradient: dtype, failing check, class), at
 * most NVW_AGENT_MIN_CASES, for nvw_agent_minimize_failures. */
int nvw_agent_on_failure_min(void *ud, const nvw_failure *f, char **ret_artifact_id);

/* Gate and minimize the kept failures of job j (within j->minimize_deadline_s
 * in all: `--minimize-deadline S`, default NVW_AGENT_MIN_DEADLINE_S, 0 none), upload each verified minimized artifact and
 * annotate its case in result (cases[]). Frees what was kept. Errors are logged:
 * the job's result stands without the annotations. */
void nvw_agent_minimize_failures(nvw_agent_job *j, json_t *result);

#define NVW_AGENT_MIN_CASES 3
#define NVW_AGENT_MIN_DEADLINE_S 120.0
#define NVW_AGENT_MIN_BUDGET 2000

#endif
