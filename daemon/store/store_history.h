/* Reads across builds and jobs for the dashboards (docs/API.md "History",
 * "Flaky cases"): a test's verdict and error per build, and the cases the
 * agent's gate found flaky. Conventions as store.h; both run on the read-only
 * pool connections (api/api_read.c) and read a bounded number of rows. */
#ifndef NUMVAL_DAEMON_STORE_HISTORY_H
#define NUMVAL_DAEMON_STORE_HISTORY_H

#include "store.h"

/* Which cases are one test across builds. op and dtype are required; kind is
 * "op", "gradient" or "fused" (for "fused", op is the graph's name); the others
 * NULL for any. shape is a JSON array text (compared as JSON). */
typedef struct nvd_history_filter {
    const char *op, *dtype, *kind;
    const char *shape, *layout, *input, *device;
    int limit; /* builds with a matching case, 1..NVD_HISTORY_MAX_BUILDS */
} nvd_history_filter;

#define NVD_HISTORY_MAX_BUILDS 200
/* Cases read in all: past it the walk stops at the last whole build. */
#define NVD_HISTORY_MAX_ROWS 200000

/* The points of the last f->limit builds (newest by the time numvald first saw
 * them) that have a matching case, oldest first: [{"build_id", "identity",
 * "verdict", "max_ulp", "headroom", "cases", "failed", "case_id", "job_id",
 * "tolerance"}], per build from its worst matching case (failed before passed,
 * then the larger max_ulp, for gradient cases the larger headroom).
 * *ret_truncated: whether NVD_HISTORY_MAX_ROWS ended the walk early. */
int nvd_store_history(nvd_store *s, const nvd_history_filter *f, json_t **ret, bool *ret_truncated);

#define NVD_FLAKY_MAX 1000
/* Failed cases read in all, newest job first, looking for flaky ones. */
#define NVD_FLAKY_SCAN 100000

/* The newest (by job, then case index) at most limit cases whose agent gate
 * found them flaky ("flaky": true on the case): [{"case_id", "job_id", "op",
 * "dtype", "shape", "input", "layout", "device", "signature", "repro_rate":
 * {"runs", "failed", "bit_identical"}, "rate", "created_at"}], among the last
 * NVD_FLAKY_SCAN failed cases. */
int nvd_store_flaky(nvd_store *s, int limit, json_t **ret);

#endif
