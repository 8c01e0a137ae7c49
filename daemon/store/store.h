/* numvald's store: the only module that talks to SQLite (store*.c).
 *
 * One read-write connection used from the event-loop thread. The database is in
 * WAL mode with foreign keys on; schema/NNN_*.sql migrations (embedded at build
 * time) are applied in order at open and recorded in PRAGMA user_version.
 *
 * Writes: every write function is atomic. With group_commit, writes made during
 * one event-loop turn share one transaction (each inside its own SAVEPOINT) that
 * the owner commits with nvd_store_commit() before the loop blocks; responses
 * that promise durability are sent only after that commit. Without group_commit
 * every write commits before it returns.
 *
 * JSON returned through json_t **ret is a new reference owned by the caller.
 * Errors: -ENOENT (no such row), -ESTALE (lease token does not match),
 * -EEXIST, -EINVAL, -EBUSY, -ENOMEM, -EUCLEAN (the database is damaged; see
 * nvd_store_check), -EIO (SQLite error; logged).
 */
#ifndef NUMVAL_DAEMON_STORE_H
#define NUMVAL_DAEMON_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nvd_store nvd_store;

typedef struct nvd_store_opts {
    bool group_commit; /* see above */
    bool sync_full;    /* PRAGMA synchronous=FULL: commits survive power loss (else NORMAL) */
    bool read_only;    /* open an existing database for reading (no migrations) */
    /* numvald's own database: refuse an empty or missing file where one was
     * created (PATH.created marks it), and a damaged one (PRAGMA quick_check)
     * with -EUCLEAN and the reason in *ret_err. */
    bool guard;
    bool skip_check; /* with guard: leave out the quick_check (large databases) */
} nvd_store_opts;

/* Open (creating if needed) the database at path and migrate it. A database
 * newer than this binary is refused with -EPROTO and a message in *ret_err
 * (malloc'd, also on other failures). */
int nvd_store_open(const char *path, const nvd_store_opts *o, nvd_store **ret, char **ret_err);
void nvd_store_free(nvd_store *s); /* commits a pending group; NULL is a no-op */

int nvd_store_user_version(nvd_store *s);

/* Damage: PRAGMA quick_check (full: integrity_check) of s; 0 when it says ok,
 * else -EUCLEAN with what it found in *ret_report (malloc'd). Damage found here
 * or by any statement (SQLITE_CORRUPT, SQLITE_NOTADB; those return -EUCLEAN)
 * makes the store read-only for the rest of the process: every write then
 * fails with -EUCLEAN. nvd_store_damaged tells whether that happened, with the
 * first finding in msg. */
int nvd_store_check(nvd_store *s, bool full, char **ret_report);
bool nvd_store_damaged(char *msg, size_t len);
int nvd_store_latest_version(void); /* the newest migration this binary carries */

/* Group commit: whether a group transaction is open, and commit it. */
bool nvd_store_pending(const nvd_store *s);
int nvd_store_commit(nvd_store *s);

/* Read-only connections for long reads on the libuv threadpool: each is used
 * by one thread at a time (acquire blocks until one is free). In WAL mode they
 * read the last committed state while the loop's connection writes. */
typedef struct nvd_store_pool nvd_store_pool;
int nvd_store_pool_new(const char *path, int n, nvd_store_pool **ret, char **ret_err);
nvd_store *nvd_store_pool_acquire(nvd_store_pool *p);
void nvd_store_pool_release(nvd_store_pool *p, nvd_store *s);
void nvd_store_pool_free(nvd_store_pool *p); /* NULL is a no-op */

/* ---- jobs ---- */
/* The Idempotency-Key recorded with a job, in the same atomic write
 * (store_idempotency.h). */
typedef struct nvd_job_idem {
    const char *principal, *key, *body_sha256;
    int64_t since;    /* records older than this are dropped */
    int64_t max_keys; /* and beyond this many, the oldest */
} nvd_job_idem;

typedef struct nvd_job_new {
    const char *kind;
    const char *op;         /* may be NULL */
    const char *device;     /* NULL: any device */
    const char *build_hash; /* NULL or a hash already in builds */
    int priority;
    int max_attempts;
    const char *spec_json;    /* the job spec, compact JSON */
    const nvd_job_idem *idem; /* NULL: no Idempotency-Key */
} nvd_job_new;

typedef struct nvd_job_filter {
    const char *state, *kind, *device, *build; /* NULL: no filter */
    int64_t cursor;                            /* 0: first page; else ids below it */
    int limit;
} nvd_job_filter;

int nvd_store_job_insert(nvd_store *s, const nvd_job_new *j, int64_t now, int64_t *ret_id);
/* JOB object as in docs/API.md. */
int nvd_store_job_get(nvd_store *s, int64_t id, json_t **ret);
/* Array of JOB objects, newest first; *ret_next is the next cursor or 0. */
int nvd_store_jobs_list(nvd_store *s, const nvd_job_filter *f, json_t **ret, int64_t *ret_next);
int nvd_store_jobs_count(nvd_store *s, const char *state, int64_t *ret);
/* {"queued": n, ...} for every state. */
int nvd_store_jobs_count_states(nvd_store *s, json_t **ret);
/* Work for device: queued jobs it may claim (its own and those for any
 * device, counted up to cap) and jobs leased or running under its name
 * (store_demand.c). 0, -EIO. */
int nvd_store_jobs_demand(nvd_store *s, const char *device, int64_t cap, int64_t *ret_queued,
                          int64_t *ret_active);

/* Lease the best queued job for device (priority, then age): attempt + 1, a new
 * lease token. *ret = {"id","attempt","lease_token","op","spec"}; -ENOENT if none. */
int nvd_store_job_claim(nvd_store *s, const char *device, const char *token, int64_t now,
                        int64_t lease_ms, json_t **ret);
/* Whether token still holds job id: 1 while the job is leased or running
 * under it, once its result finished the job, or when the job was cancelled
 * (the worker learns that at its next heartbeat); 0 when the lease was lost
 * (expired: requeued, leased again, or ended in error). -ENOENT, -EIO. */
int nvd_store_lease_held(nvd_store *s, int64_t id, const char *token);
/* Extend a lease and record progress; leased -> running. *ret_cancel when the job
 * was cancelled. -ESTALE when the lease is not the job's live lease. */
int nvd_store_job_heartbeat(nvd_store *s, int64_t id, const char *token, int64_t done,
                            int64_t total, int64_t now, int64_t lease_ms, bool *ret_cancel);
/* Store a result: cases (INSERT OR IGNORE on (job, idx)) and the final state.
 * A repeat of the upload that finished the job succeeds with *ret_dup set.
 * -ESTALE: not the live lease; -ECANCELED: the job was cancelled. */
int nvd_store_job_finish(nvd_store *s, int64_t id, const char *token, const json_t *result,
                         int64_t now, bool *ret_dup);
/* queued/leased/running -> cancelled. -EALREADY when already final. */
int nvd_store_job_cancel(nvd_store *s, int64_t id, int64_t now);
/* Requeue jobs whose lease expired before now, or end them in error once they
 * used max_attempts. Counts into *ret_requeued / *ret_errored (may be NULL). */
int nvd_store_leases_expire(nvd_store *s, int64_t now, int *ret_requeued, int *ret_errored);
/* The earliest live lease expiry, or 0 when none. */
int nvd_store_next_expiry(nvd_store *s, int64_t *ret);

/* ---- cases ---- */
typedef struct nvd_case_filter {
    int64_t job_id;
    const char *verdict; /* NULL: all */
    int64_t cursor;      /* case index to start after; -1: first page */
    int limit;
} nvd_case_filter;
int nvd_store_cases_list(nvd_store *s, const nvd_case_filter *f, json_t **ret, int64_t *ret_next,
                         bool *ret_more);
int nvd_store_case_get(nvd_store *s, int64_t id, json_t **ret);

/* ---- tolerances (never updated in place) ---- */
typedef struct nvd_tolerance_new {
    const char *op, *dtype, *mode, *metric_json, *reason_code, *reason, *author;
} nvd_tolerance_new;
/* Insert the next version for (op, dtype); *ret is the new row. */
int nvd_store_tolerance_add(nvd_store *s, const nvd_tolerance_new *t, int64_t now, json_t **ret);
/* history: every row, newest first; else the latest row per (op, dtype, mode).
 * op/dtype NULL: all. */
int nvd_store_tolerances_list(nvd_store *s, const char *op, const char *dtype, bool history,
                              json_t **ret);

/* ---- builds ---- */
int nvd_store_build_put(nvd_store *s, const char *hash, const char *identity_json, int64_t now);
/* At most limit builds, newest first: by the time numvald first saw each
 * (created_at), ties in the order they were stored, so the order is the same on
 * every call. "Newest" means the same in compare and history. */
int nvd_store_builds_list(nvd_store *s, int limit, json_t **ret);
/* Register a build with the backend spec its jobs run on (store_builds.c):
 * stores the identity row if new, then sets its backend. 0 also when the build
 * already names this backend; -EEXIST when it names another (a copy of that
 * one, malloc'd, in *ret_existing when not NULL): a build's backend is never
 * changed, since its stored results were made with it. */
int nvd_store_build_register(nvd_store *s, const char *hash, const char *identity_json,
                             const char *backend, int64_t now, char **ret_existing);
/* The backend spec of build hash (malloc'd) in *ret, NULL when the build has
 * none or does not exist. */
int nvd_store_build_backend(nvd_store *s, const char *hash, char **ret);
/* The build stored just before build hash (the order of GET /api/v1/builds),
 * malloc'd in *ret; -ENOENT when hash is the first or unknown. */
int nvd_store_build_predecessor(nvd_store *s, const char *hash, char **ret);

/* ---- devices ---- */
int nvd_store_device_declare(nvd_store *s, const char *name, const char *backend, int slots,
                             int64_t now);
/* A worker claimed for the device: remember its describe JSON (may be NULL). */
int nvd_store_device_seen(nvd_store *s, const char *name, const json_t *describe, int64_t now);
int nvd_store_device_state(nvd_store *s, const char *name, const char *state,
                           const char *quarantine_reason, const char *last_crash, int restarts,
                           int64_t now);
int nvd_store_device_get(nvd_store *s, const char *name, json_t **ret);
int nvd_store_devices_list(nvd_store *s, json_t **ret);

/* ---- artifacts ---- */
int nvd_store_artifact_put(nvd_store *s, const char *sha256, const void *blob, size_t len,
                           int64_t raw_size, int64_t now, bool *ret_existed);
/* *ret_blob is malloc'd. */
int nvd_store_artifact_get(nvd_store *s, const char *sha256, void **ret_blob, size_t *ret_len);
int nvd_store_artifacts_stats(nvd_store *s, int64_t *ret_count, int64_t *ret_bytes);

/* ---- tokens ---- */
/* A token: its hash, scopes ("read,worker"), and devices, the comma list of
 * devices a worker token is bound to (NULL: not bound). -EEXIST when a live
 * token has that name. */
int nvd_store_token_add(nvd_store *s, const char *name, const char *hash, const char *scopes,
                        const char *devices, int64_t now);
/* Live token by hash: name, scopes and devices (malloc'd; *ret_devices NULL
 * when not bound; ret_devices itself may be NULL). -ENOENT for unknown or revoked. */
int nvd_store_token_find(nvd_store *s, const char *hash, char **ret_name, char **ret_scopes,
                         char **ret_devices);
int nvd_store_token_revoke(nvd_store *s, const char *name, int64_t now);
int nvd_store_tokens_list(nvd_store *s, json_t **ret);

#endif
