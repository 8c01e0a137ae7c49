/* Routes of long-run qualification: versioned AMP policies and the
 * scheduler's listing; the submit hook that puts a job's AMP policy inline. */
#ifndef NUMVAL_DAEMON_API_LONGRUN_H
#define NUMVAL_DAEMON_API_LONGRUN_H

#include <jansson.h>

#include "api.h"

void api_amp_list(api_ctx *x);  /* GET  /api/v1/amp-policies?name= */
void api_amp_post(api_ctx *x);  /* POST /api/v1/amp-policies {"name","policy","reason"} */
void api_schedules(api_ctx *x); /* GET /api/v1/schedules */

/* For a "longrun" job with "amp": put the named policy version inline
 * ("amp.policy" from the store; "amp.policy_version" set to the version used,
 * "amp.policy_name" to its name).
 * Without a stored policy the worker's shipped default applies (version 0).
 * Returns 0, or -1 after answering the request with a 4xx. */
int api_longrun_resolve(api_ctx *x, json_t *body);

#endif
