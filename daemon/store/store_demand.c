/* How much work a device has: what a scaler of workers (daemon/pool.c) asks. */
#include <errno.h>

#include "store_internal.h"

int nvd_store_jobs_demand(nvd_store *s, const char *device, int64_t cap, int64_t *ret_queued,
                          int64_t *ret_active)
{
    /* The queued count walks the partial index jobs_queue (queued rows only)
     * and stops at cap, so a deep queue costs the loop cap rows, not all. */
    sqlite3_stmt *st =
        store_stmt(s, "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM jobs INDEXED BY jobs_queue "
                      "WHERE state = 'queued' AND (device IS NULL OR device = ?1) LIMIT ?2)), "
                      "(SELECT COUNT(*) FROM jobs WHERE state IN ('leased', 'running') "
                      "AND leased_by = ?1)");
    if (!st)
        return -EIO;
    sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, cap);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : store_err(s, rc, "job demand");
    if (rc == SQLITE_ROW) {
        *ret_queued = sqlite3_column_int64(st, 0);
        *ret_active = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return r < 0 ? r : rc == SQLITE_ROW ? 0 : -EIO;
}
