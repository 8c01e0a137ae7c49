/* The suite kind (docs/JOBS.md "Suite jobs"): numvald expands the job into the
 * active suite cases, each with its minimized artifact's content id; every case
 * is fetched (opts->fetch_artifact, agent mode) and replayed by the kind of its
 * artifact through the kind table, one result case per suite case. It lives
 * beside the table because it reaches the other kinds through it. */
#ifndef NUMVAL_WORKER_KINDS_SUITE_H
#define NUMVAL_WORKER_KINDS_SUITE_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Same contract as nvw_run_job (kinds.h): the result JSON is {verdict, kind
 * "suite", backend, summary, cases with "suite_case"}. -ENODEV with a message
 * when the backend does not load; without opts->fetch_artifact (outside agent
 * mode) the spec is refused as it always was outside agent mode (-EINVAL). */
int nvw_run_suite(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err);

#endif
