/* Daemon-side bisections (schema/005_bisect.sql; daemon/bisect.c drives them). */
#ifndef NUMVAL_DAEMON_STORE_BISECT_H
#define NUMVAL_DAEMON_STORE_BISECT_H

#include <jansson.h>
#include <stdint.h>

#include "store.h"

/* Builds from hash `from` to hash `to`, both included, in registration order
 * (GET /api/v1/builds reversed), as [{"id", "identity", "backend"}] in *ret.
 * -ENOENT when either is unknown, -EINVAL when from is not before to, -E2BIG
 * past 10000 builds. */
int nvd_store_build_range(nvd_store *s, const char *from, const char *to, json_t **ret);

/* A new running bisection over builds (nvd_store_build_range), lo and hi its ends'
 * indices; actor may be NULL. Its id in *ret_id. */
int nvd_store_bisect_insert(nvd_store *s, int64_t suite_case, const char *device,
                            const json_t *builds, int lo, int hi, const char *actor, int64_t now,
                            int64_t *ret_id);
/* The row as {"id", "suite_case", "device", "builds", "lo", "hi", "state",
 * "current_job", "probes", "result", "actor", "created_at", "updated_at"}.
 * -ENOENT. */
int nvd_store_bisect_get(nvd_store *s, int64_t id, json_t **ret);
/* The ids of at most limit running bisections, oldest first. */
int nvd_store_bisect_running(nvd_store *s, int limit, json_t **ret);
/* Write row's lo, hi, state, current_job, probes and result back. */
int nvd_store_bisect_save(nvd_store *s, const json_t *row, int64_t now);

#endif
