/* The permanent suite in the store (schema/002_suite.sql, store_suite.c):
 * promotion with dedup by signature, occurrences, retirement with an audit
 * entry, replay history per case, and the build-to-build compare of cases.
 * Conventions as store.h: 0 or negative errno; JSON through ret is a new
 * reference owned by the caller. */
#ifndef NUMVAL_DAEMON_STORE_SUITE_H
#define NUMVAL_DAEMON_STORE_SUITE_H

#include "store.h"

typedef struct nvd_suite_new {
    const char *signature;      /* 64 hex */
    const char *signature_json; /* compact JSON */
    const char *op, *dtype, *failure_class;
    const char *artifact;        /* minimized reproducer */
    const char *origin_artifact; /* may be NULL */
    int64_t job_id, case_idx;
} nvd_suite_new;

/* Promote: a new signature becomes a suite case (and an audit "promoted" row);
 * a known one records another occurrence (once per job and case index).
 * *ret_id: the suite case; *ret_new: whether it was created. */
int nvd_store_suite_promote(nvd_store *s, const nvd_suite_new *n, int64_t now, int64_t *ret_id,
                            bool *ret_new);

/* Called inside the write transaction of nvd_store_job_finish_then: dup says
 * whether the upload repeated the one that finished the job. A negative return
 * rolls back the whole write (result included). */
typedef int (*nvd_store_then_fn)(nvd_store *s, void *ud, bool dup);

/* nvd_store_job_finish and then(s, ud, dup) as ONE atomic write: a crash or an
 * error leaves either both (result and what then wrote) or neither, so a
 * retried upload finds the job still leased and stores it again. then also
 * runs on a duplicate upload; it must be idempotent (promotion is: one
 * occurrence per job and case index). Returns what nvd_store_job_finish or then
 * returned. */
int nvd_store_job_finish_then(nvd_store *s, int64_t id, const char *token, const json_t *result,
                              int64_t now, nvd_store_then_fn then, void *ud, bool *ret_dup);

/* Suite cases (state NULL: all; "active" or "retired"), each with occurrences,
 * first_failing_build, fixed_in_build, last_verdict and runs. */
int nvd_store_suite_list(nvd_store *s, const char *state, json_t **ret);
/* One case with "history" (runs by build), "occurrences" and "audit". -ENOENT. */
int nvd_store_suite_get(nvd_store *s, int64_t id, json_t **ret);
/* Retire with a non-empty reason; -ENOENT, -EALREADY (already retired). */
int nvd_store_suite_retire(nvd_store *s, int64_t id, const char *reason, const char *actor,
                           int64_t now, json_t **ret);
/* Active cases for a suite job: [{"suite_case", "artifact", "signature", "kind", "op",
 * "dtype", "failure_class"}], optionally only kind (the signature's: op, fused ...) / op /
 * dtype / the ids in ids (an array; NULL: all). */
int nvd_store_suite_active(nvd_store *s, const char *kind, const char *op, const char *dtype,
                           const json_t *ids, json_t **ret);
/* Record a replay verdict of suite case id by job job_id (idempotent per job). */
int nvd_store_suite_run(nvd_store *s, int64_t id, int64_t job_id, const char *verdict, int64_t now);

/* Build compare (docs/API.md "Compare"): the op, gradient and fused cases of
 * jobs of build base vs head (hash, or a build name or version: its newest
 * hash), of kind and op when given (NULL: all), each matched by its test
 * (store_compare.c match_of); newly_failing, newly_passing and drift (each
 * entry's "base" and "head" carry the tolerance the case was judged by), each list
 * at most NVD_COMPARE_MAX_LISTED long (counts give the totals). -ENOENT for an
 * unknown build, -E2BIG when a build has more than NVD_COMPARE_MAX_CASES
 * cases to compare. */
/* A build given as its hash, or as a name or version (the newest build with
 * it), as its hash in *ret (malloc'd). -ENOENT when no build matches. */
int nvd_store_build_resolve(nvd_store *s, const char *build, char **ret);

#define NVD_COMPARE_MAX_CASES 200000
#define NVD_COMPARE_MAX_LISTED 1000
int nvd_store_compare(nvd_store *s, const char *base, const char *head, const char *kind,
                      const char *op, json_t **ret);

#endif
