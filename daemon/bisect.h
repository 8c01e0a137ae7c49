/* Daemon-side bisection (docs/API.md "Bisections"): numvald itself walks the
 * builds between a good and a bad one, in registration order, submitting one
 * suite job per probe for one suite case and halving the range on each
 * verdict, until it knows the first failing build. The state lives in the
 * store (schema/005_bisect.sql) and advances from a 1 s timer that looks at
 * each running bisection's probe job, so it survives a restart of numvald and
 * needs no client to stay connected. It is not a job kind: jobs are what
 * workers claim, and a bisection is run by numvald. */
#ifndef NUMVAL_DAEMON_BISECT_H
#define NUMVAL_DAEMON_BISECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct nvd_app;

/* Running bisections at most; a new one beyond it is refused (-EBUSY). */
#define NVD_BISECT_MAX_RUNNING 32

/* Start a bisection of suite case suite_case from good to bad (build hashes,
 * names or versions), probes pinned to device (may be NULL), actor the
 * token's name (may be NULL). Submits the first probe. Its id in *ret_id. On
 * a bad request -EINVAL / -ENOENT / -EBUSY / -E2BIG with the reason and the
 * field in err (field[0] "" when none); else a store errno. */
int nvd_bisect_start(struct nvd_app *app, int64_t suite_case, const char *good, const char *bad,
                     const char *device, const char *actor, int64_t *ret_id, char *field,
                     size_t field_len, char *err, size_t errlen);
/* The bisection as GET /api/v1/bisections/{id} shows it (new reference). -ENOENT. */
int nvd_bisect_get(struct nvd_app *app, int64_t id, json_t **ret);
/* Resume the running bisections found in the store (at start). */
int nvd_bisect_resume(struct nvd_app *app);
/* Close the timer (on shutdown). */
void nvd_bisect_stop(void);

#endif
