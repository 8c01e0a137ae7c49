/* Long-run qualification in the store (schema/003_longrun.sql): versioned AMP
 * policies and the record of schedule slots. */
#ifndef NUMVAL_DAEMON_STORE_LONGRUN_H
#define NUMVAL_DAEMON_STORE_LONGRUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* A new version of policy `name` (1 + the latest); *ret_version set. */
int nvd_store_amp_add(nvd_store *s, const char *name, const json_t *policy, const char *author,
                      const char *reason, int64_t now, int64_t *ret_version);
/* Every version of name (NULL: all names), newest first: [{"name","version",
 * "policy","author","reason","created_at"}]. */
int nvd_store_amp_list(nvd_store *s, const char *name, json_t **ret);
/* One version (version 0: the latest); -ENOENT when none. */
int nvd_store_amp_get(nvd_store *s, const char *name, int64_t version, json_t **ret);

/* Claim a schedule slot: true in *ret_new when this call recorded it (the slot
 * had never run). */
int nvd_store_slot_claim(nvd_store *s, const char *schedule, int64_t slot, const char *suite,
                         const char *device, int64_t now, bool *ret_new);
/* Record the jobs (or the error) of a claimed slot. */
int nvd_store_slot_done(nvd_store *s, const char *schedule, int64_t slot, const json_t *job_ids,
                        const char *error);
/* The latest recorded slot of a schedule ({"slot","started_at","job_ids","error"}) or
 * -ENOENT. */
int nvd_store_slot_last(nvd_store *s, const char *schedule, json_t **ret);
/* The latest `limit` slots that submitted jobs, oldest first:
 * [{"schedule","slot","device","job_ids"}] (a restarted numvald watches those whose
 * jobs still run). */
int nvd_store_slots_with_jobs(nvd_store *s, int limit, json_t **ret);

#endif
