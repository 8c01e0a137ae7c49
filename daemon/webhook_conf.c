/* Parsing of the [webhook NAME] sections (webhook_conf.h). */
#include "webhook_conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const struct {
    const char *name;
    unsigned bit;
} events[] = {
    {"promoted", NVD_EV_PROMOTED},
    {"regression", NVD_EV_REGRESSION},
    {"schedule_failed", NVD_EV_SCHEDULE_FAILED},
};

const char *nvd_webhook_event_name(unsigned ev)
{
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (events[i].bit == ev)
            return events[i].name;
    return "?";
}

static nvd_webhook_conf *hook(nvd_config *c, const char *name)
{
    for (int i = 0; i < c->n_webhooks; i++)
        if (!strcmp(c->webhooks[i].name, name))
            return &c->webhooks[i];
    if (c->n_webhooks >= NVD_WEBHOOKS_MAX)
        return NULL;
    nvd_webhook_conf *w = realloc(c->webhooks, sizeof(*w) * (size_t)(c->n_webhooks + 1));
    if (!w)
        return NULL;
    c->webhooks = w;
    w = &c->webhooks[c->n_webhooks];
    *w = (nvd_webhook_conf){.name = strdup(name),
                            .timeout_ms = 5000,
                            .max_attempts = 6,
                            .backoff_ms = 1000,
                            .max_queue = 1000};
    if (!w->name)
        return NULL;
    c->n_webhooks++;
    return w;
}

/* "promoted, regression" into bits; -EINVAL for an unknown or empty list. */
static int parse_events(const char *v, unsigned *ret)
{
    unsigned bits = 0;
    const char *p = v;
    while (*p) {
        p += strspn(p, " ,\t");
        size_t n = strcspn(p, " ,\t");
        if (!n)
            break;
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
            if (strlen(events[i].name) == n && !strncmp(events[i].name, p, n))
                bit = events[i].bit;
        if (!bit)
            return -EINVAL;
        bits |= bit;
        p += n;
    }
    if (!bits)
        return -EINVAL;
    *ret = bits;
    return 0;
}

static int int_in(const char *v, long lo, long hi, int *ret)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -EINVAL;
    *ret = (int)n;
    return 0;
}

int nvd_webhook_conf_key(nvd_config *c, const char *name, const char *k, const char *v)
{
    bool known = false;
    for (int i = 0; i < c->n_webhooks; i++)
        known |= !strcmp(c->webhooks[i].name, name);
    if (!known && c->n_webhooks >= NVD_WEBHOOKS_MAX)
        return -E2BIG;
    nvd_webhook_conf *w = hook(c, name);
    if (!w)
        return -ENOMEM;
    if (!strcmp(k, "url")) {
        /* libcurl speaks many protocols; a webhook is HTTP(S) and nothing else. */
        if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
            return -EINVAL;
        return nvd_config_set_str(&w->url, v);
    }
    if (!strcmp(k, "events"))
        return parse_events(v, &w->events);
    if (!strcmp(k, "secret"))
        return *v ? nvd_config_set_str(&w->secret, v) : -EINVAL;
    if (!strcmp(k, "timeout_ms"))
        return int_in(v, 100, 600000, &w->timeout_ms);
    if (!strcmp(k, "max_attempts"))
        return int_in(v, 1, 100, &w->max_attempts);
    if (!strcmp(k, "backoff_ms"))
        return int_in(v, 1, 3600000, &w->backoff_ms);
    if (!strcmp(k, "max_queue"))
        return int_in(v, 1, 1000000, &w->max_queue);
    return -ENOENT;
}

void nvd_webhook_conf_check(const nvd_config *c, char *buf, size_t len)
{
    for (int i = 0; i < c->n_webhooks && !buf[0]; i++) {
        const nvd_webhook_conf *w = &c->webhooks[i];
        if (!w->url)
            snprintf(buf, len, "webhook '%s' has no 'url' (e.g. url = https://ci.example/hook)",
                     w->name);
        else if (!w->events)
            snprintf(buf, len,
                     "webhook '%s' has no 'events' (promoted, regression, schedule_failed)",
                     w->name);
    }
}

void nvd_webhook_conf_free(nvd_config *c)
{
    for (int i = 0; i < c->n_webhooks; i++) {
        free(c->webhooks[i].name);
        free(c->webhooks[i].url);
        free(c->webhooks[i].secret);
    }
    free(c->webhooks);
    c->webhooks = NULL;
    c->n_webhooks = 0;
}
