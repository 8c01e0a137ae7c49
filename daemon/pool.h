/* Slurm pools: for each [pool NAME] of the config, workers that Slurm starts
 * (docs/DEPLOY.md, "Scale-out through Slurm"). Every interval_ms the scaler
 * asks squeue how many of the pool's Slurm jobs are pending or running
 * (matched by job name and user), asks the store how many jobs the pool's
 * device has (queued for it, and leased or running under its name), and
 * submits the difference, up to max_workers, as one sbatch job array. Each
 * task runs a plain numval-worker agent that pulls over HTTP and exits after
 * idle_exit seconds without a job; the scaler never cancels a worker, so
 * shrinking costs nothing, and a worker that Slurm preempts or kills costs
 * the lease of the job it held, which the queue requeues when it expires.
 *
 * The sbatch and squeue calls run as child processes (uv_spawn), never on
 * the loop's time; one call at a time per pool, each with a time limit.
 * The workers' token is minted once per pool (name "numvald-pool-NAME"),
 * kept in DATA_DIR/pool-NAME.token (mode 600) so that a numvald restart does
 * not strand the workers Slurm is running, and reaches them through the
 * environment of sbatch (--export=NUMVAL_TOKEN), never its command line. */
#ifndef NUMVAL_DAEMON_POOL_H
#define NUMVAL_DAEMON_POOL_H

#include "app.h"

/* Start the scalers of cfg->pools (none: an empty, idle set). 0, -ENOMEM,
 * -EIO (the token or the job script could not be written; logged). */
int nvd_pools_new(nvd_app *app, nvd_pools **ret);
/* Stop the timers and the calls in flight (SIGTERM), close the handles, then
 * call done. The pools' Slurm jobs are left to run: they finish their jobs,
 * ride out a numvald restart, and exit once idle. ps NULL: done at once. */
void nvd_pools_stop(nvd_pools *ps, void (*done)(void *ud), void *ud);
void nvd_pools_free(nvd_pools *ps); /* after the loop ran; NULL is a no-op */
/* The pools' lines for GET /metrics (Prometheus text): their Slurm jobs as of
 * the last squeue, by state, and the workers submitted and the failed calls
 * since start. malloc'd; NULL when there are no pools (or on ENOMEM). */
char *nvd_pools_metrics(const nvd_pools *ps);

#endif
