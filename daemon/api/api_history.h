/* Routes of the dashboards' reads across builds (api_history.c). */
#ifndef NUMVAL_DAEMON_API_HISTORY_H
#define NUMVAL_DAEMON_API_HISTORY_H

#include "api.h"

void api_history(api_ctx *x); /* GET /api/v1/history?op=&dtype=[&kind=&shape=...&limit=] */
void api_flaky(api_ctx *x);   /* GET /api/v1/flaky?limit= */

#endif
