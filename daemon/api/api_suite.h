/* Routes of the permanent suite and build compare (api_suite.c). */
#ifndef NUMVAL_DAEMON_API_SUITE_H
#define NUMVAL_DAEMON_API_SUITE_H

#include <jansson.h>
#include <stdbool.h>

#include "api.h"

void api_suite_list(api_ctx *x);               /* GET  /api/v1/suite?state= */
void api_suite_get(api_ctx *x, int64_t id);    /* GET  /api/v1/suite/{id} */
void api_suite_retire(api_ctx *x, int64_t id); /* POST /api/v1/suite/{id}/retire */
void api_compare(api_ctx *x);                  /* GET  /api/v1/compare?base=&head= */

/* Whether a submitted job is of kind "suite". */
bool api_suite_is(const json_t *body);
/* Validate a "suite" job and expand it in place: "cases" becomes the active
 * suite cases its "filter" selects ({"suite_case", "artifact", "signature", ...}).
 * Returns 0, or -1 after answering the request with a 400. */
int api_suite_expand(api_ctx *x, json_t *body);

#endif
