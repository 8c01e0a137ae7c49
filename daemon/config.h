/* numvald configuration: defaults, the INI file (libinih), then command-line
 * flags (main.c) override. */
#ifndef NUMVAL_DAEMON_CONFIG_H
#define NUMVAL_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cron.h"
#include "webhook_conf.h"
#include "daemon/http/http.h"
#include "pool_conf.h"

typedef enum { NVD_ANON_LOOPBACK, NVD_ANON_YES, NVD_ANON_NO } nvd_anon;

/* The HTTP body budgets (nvd_http_limits.max_body_budget): requests without a
 * valid token, with a token on a client route, on a worker route. Their
 * shares of max_body_total are set by nvd_config_init and nvd_config_load:
 * 1/16, 6/16 and 9/16. */
enum { NVD_BUDGET_ANON, NVD_BUDGET_CLIENT, NVD_BUDGET_WORKER };

typedef struct nvd_device_conf {
    char *name, *backend, *worker; /* worker: NULL = the configured default */
    int slots;
    int minimize_deadline_s; /* the agent's --minimize-deadline; -1: its default */
    char *build_backend_dir; /* the agent's --build-backend-dir, or NULL (none admitted) */
} nvd_device_conf;

/* A [schedule NAME] section: the suite file run on a cron expression
 * (scheduler.h runs them). */
typedef struct nvd_schedule_conf {
    char *name, *cron_text, *suite, *device; /* device may be NULL */
    nvd_cron cron;                           /* parsed cron_text */
    int cron_ok;                             /* a valid 'cron' was given */
} nvd_schedule_conf;

typedef struct nvd_config {
    char *listen, *data_dir, *web_dir, *js_dir, *worker;
    nvd_anon anonymous_read;
    /* [server] trusted_proxy: addresses of the reverse proxy whose
     * X-Forwarded-For judges anonymous_read = loopback (auth.h
     * nvd_auth_from_loopback); NULL: none trusted. */
    char *trusted_proxy;
    nvd_http_limits http;
    size_t max_job_body, max_artifact_body;
    int queue_depth, max_attempts;
    int64_t lease_ms, claim_max_wait_ms;
    int crash_limit; /* crashes within crash_window_ms that quarantine a device */
    int64_t crash_window_ms;
    int64_t backoff_max_ms;
    int64_t idem_keys;  /* Idempotency-Key records kept, at most */
    int64_t idem_ttl_s; /* and for how long */
    bool sync_full;
    bool skip_check; /* [server] integrity_check = off: no PRAGMA quick_check at start */
    nvd_device_conf *devices;
    int n_devices;
    nvd_schedule_conf *schedules; /* [schedule NAME] sections */
    int n_schedules;
    nvd_pool_conf *pools; /* [pool NAME] sections: Slurm-started workers (pool.h) */
    int n_pools;
    nvd_webhook_conf *webhooks; /* [webhook NAME] sections (webhook_conf.h) */
    int n_webhooks;
    /* [retention]: what `numvald prune` deletes (store_care.h); 0 keeps forever. */
    int retention_case_days, retention_artifact_days;
} nvd_config;

/* Fill defaults. 0 or -ENOMEM. */
int nvd_config_init(nvd_config *c);
/* Read an INI file over the current values. On error a malloc'd message naming
 * the file, line and key goes to *ret_err. 0, -ENOENT, -EINVAL, -ENOMEM. */
int nvd_config_load(nvd_config *c, const char *path, char **ret_err);
/* Check cross-field rules (limits positive, devices have backends, schedules
 * have a cron expression and a suite, the body budgets hold the largest body
 * of their routes). */
int nvd_config_check(const nvd_config *c, char **ret_err);
/* Replace a string field (copying v). 0 or -ENOMEM. */
int nvd_config_set_str(char **field, const char *v);
void nvd_config_done(nvd_config *c);

#endif
