/* [webhook NAME] sections of numvald.ini (docs/DEPLOY.md "Webhooks"): where
 * numvald POSTs which events (webhook.h delivers them). config.c hands these
 * sections' keys here. */
#ifndef NUMVAL_DAEMON_WEBHOOK_CONF_H
#define NUMVAL_DAEMON_WEBHOOK_CONF_H

#include <stddef.h>

/* Event bits of a webhook's "events" key. */
enum {
    NVD_EV_PROMOTED = 1,        /* a new failure signature became a suite case */
    NVD_EV_REGRESSION = 2,      /* a build newly fails cases its predecessor passed */
    NVD_EV_SCHEDULE_FAILED = 4, /* a cron slot could not submit, or a job of it failed */
};

/* At most this many [webhook] sections (one delivery thread each). */
#define NVD_WEBHOOKS_MAX 16

typedef struct nvd_webhook_conf {
    char *name, *url;
    char *secret;     /* HMAC-SHA256 key of the signature header; NULL: unsigned */
    unsigned events;  /* NVD_EV_* bits; 0 until "events" is given */
    int timeout_ms;   /* one attempt, connect to last byte (default 5000) */
    int max_attempts; /* per delivery, the first included (default 6) */
    int backoff_ms;   /* pause after the first failure, doubled after each (default 1000) */
    int max_queue;    /* deliveries waiting, at most; beyond it the oldest is dropped (1000) */
} nvd_webhook_conf;

struct nvd_config;
/* One key of section [webhook name]. 0; -ENOENT for an unknown key; -EINVAL
 * for a bad value; -E2BIG past NVD_WEBHOOKS_MAX sections; -ENOMEM. */
int nvd_webhook_conf_key(struct nvd_config *c, const char *name, const char *k, const char *v);
/* The first webhook without url or events, as a message in buf (untouched when
 * all are complete). */
void nvd_webhook_conf_check(const struct nvd_config *c, char *buf, size_t len);
void nvd_webhook_conf_free(struct nvd_config *c);
/* The name of one event bit ("promoted", "regression", "schedule_failed"). */
const char *nvd_webhook_event_name(unsigned ev);

#endif
