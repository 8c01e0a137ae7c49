/* [pool NAME] sections of numvald.ini: a device whose workers Slurm starts
 * (pool.h runs them). Every value that reaches sbatch is checked here against
 * the characters its Slurm option takes, and each goes to sbatch as one argv
 * element (--partition=VALUE), never through a shell. */
#ifndef NUMVAL_DAEMON_POOL_CONF_H
#define NUMVAL_DAEMON_POOL_CONF_H

#include <stddef.h>
#include <stdint.h>

typedef struct nvd_pool_conf {
    char *name;
    char *device;  /* the device name its workers claim for; NULL: the pool's name */
    char *backend; /* the workers' --backend (required) */
    char *worker;  /* numval-worker on the compute nodes; NULL: [server] worker */
    char *server;  /* the URL workers reach numvald at; NULL: where it listens */
    /* sbatch options; NULL: not given. */
    char *partition, *gres, *time_limit, *account, *qos, *constraint;
    char *output;          /* sbatch --output (default /dev/null) */
    char *chdir;           /* sbatch --chdir (default /tmp) */
    char *export_env;      /* variables exported besides NUMVAL_TOKEN (default PATH) */
    char *job_name;        /* the Slurm job name that marks the pool's workers */
    char *sbatch, *squeue; /* the programs (default: from PATH) */
    int max_workers;       /* Slurm jobs at once, pending or running (default 1) */
    int idle_exit_s;       /* the workers' --idle-exit (default 60) */
    int threads;           /* the workers' --threads; 0: theirs */
    int drain_before_s;    /* sbatch --signal=B:USR1@S (the worker drains); 0: none */
    int64_t interval_ms;   /* how often the scaler looks (default 5000) */
} nvd_pool_conf;

/* One key of [pool name]; pools grows as new names appear. 0, -ENOENT (an
 * unknown key), -EINVAL (a bad value), -ENOMEM. */
int nvd_pool_conf_key(nvd_pool_conf **pools, int *n, const char *name, const char *k,
                      const char *v);
struct nvd_device_conf;
/* Cross-field rules: a backend, a device name that claims may use, no two
 * pools for one device and none for a [device] section's name (devs, n_dev).
 * On a problem its message goes into buf (left as it is otherwise). */
void nvd_pool_conf_check(const nvd_pool_conf *pools, int n, const struct nvd_device_conf *devs,
                         int n_dev, char *buf, size_t len);
void nvd_pool_conf_free(nvd_pool_conf *pools, int n);
/* The device name a pool's workers claim for. */
const char *nvd_pool_device(const nvd_pool_conf *p);

#endif
