/* Idempotency keys of job submission in the store (schema/004_idempotency.sql). */
#ifndef NUMVAL_DAEMON_STORE_IDEMPOTENCY_H
#define NUMVAL_DAEMON_STORE_IDEMPOTENCY_H

#include <stdint.h>

#include "store.h"

/* The job and body hash (65 bytes) recorded for (principal, key) at or after
 * since (ms); -ENOENT when none (or only an older one). */
int nvd_store_idem_get(nvd_store *s, const char *principal, const char *key, int64_t since,
                       int64_t *ret_job, char body_sha256[65]);
/* Record (principal, key) -> job. Drops the keys older than since and, beyond
 * the newest max_keys, the oldest, so the table stays bounded in time and
 * size. An older record of the same key is replaced. nvd_store_job_insert
 * calls it in the write that inserts the job (nvd_job_new.idem), so both are
 * stored or neither is. */
int nvd_store_idem_put(nvd_store *s, const char *principal, const char *key,
                       const char *body_sha256, int64_t job_id, int64_t now, int64_t since,
                       int64_t max_keys);
/* Keys recorded (for /metrics). */
int nvd_store_idem_count(nvd_store *s, int64_t *ret);

#endif
