/* Agent mode, job kind "suite" (docs/JOBS.md "suite"): numvald expanded the job
 * into the active suite cases, each with its minimized artifact's content id;
 * the worker downloads each artifact (hash-verified), replays it with the
 * probe of repro.h on its backend and reports one case per suite case. */
#ifndef NUMVAL_WORKER_AGENT_SUITE_H
#define NUMVAL_WORKER_AGENT_SUITE_H

#include <jansson.h>
#include <stdbool.h>

#include "agent_internal.h"

bool nvw_suite_is(const json_t *spec);

/* Run suite job j; *ret_result is the result JSON (verdict, kind "suite",
 * summary, cases with "suite_case"). Returns 0 or a negative errno with a
 * malloc'd message in *ret_err (backend could not load). */
int nvw_agent_run_suite(nvw_agent_job *j, json_t **ret_result, char **ret_err);

#endif
