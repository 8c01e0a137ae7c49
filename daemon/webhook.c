/* Webhook delivery through libcurl, one thread per webhook (webhook.h). */
#include "webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hmac.h"
#include "common/log.h"
#include "daemon/util/util.h"

/* The longest pause between two attempts of one delivery. */
#define BACKOFF_CAP_MS 300000

typedef struct delivery {
    struct delivery *next;
    unsigned event;
    char id[33];
    char *body; /* the JSON text, signed as it is */
} delivery;

/* One webhook's thread and queue. The lock guards head, tail, n and stop;
 * the thread holds it only to take or put a delivery, never across an attempt. */
typedef struct hook {
    const nvd_webhook_conf *conf;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a delivery was queued, or stop was set */
    delivery *head, *tail;
    int n;
    atomic_int stop;
    atomic_uint_fast64_t delivered, failed_attempts, dropped;
} hook;

struct nvd_webhooks {
    hook *hooks;
    int n;
    delivery *held, *held_tail; /* loop thread: emitted, waiting for the commit */
    bool curl_ok;
};

static void delivery_free(delivery *d)
{
    if (d) {
        free(d->body);
        free(d);
    }
}

/* The time CLOCK_REALTIME says ms from now, for pthread_cond_timedwait. */
static struct timespec after_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Aborts an attempt in flight when numvald stops. */
static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((hook *)ud)->stop) ? 1 : 0;
}

/* The reply body is not needed: read and drop it. */
static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    (void)p, (void)ud;
    return size * n;
}

/* One attempt: 0 on a 2xx, else -EIO with the reason in why. */
static int attempt(hook *h, CURL *curl, const delivery *d, int n, char *why, size_t len)
{
    const nvd_webhook_conf *c = h->conf;
    char line[160];
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(line, sizeof line, "X-Numval-Event: %s", nvd_webhook_event_name(d->event));
    hdrs = hdrs ? curl_slist_append(hdrs, line) : NULL;
    snprintf(line, sizeof line, "X-Numval-Delivery: %s", d->id);
    hdrs = hdrs ? curl_slist_append(hdrs, line) : NULL;
    snprintf(line, sizeof line, "X-Numval-Attempt: %d", n);
    hdrs = hdrs ? curl_slist_append(hdrs, line) : NULL;
    if (hdrs && c->secret) {
        char sig[65];
        nv_hmac_sha256_hex(c->secret, strlen(c->secret), d->body, strlen(d->body), sig);
        snprintf(line, sizeof line, "X-Numval-Signature: sha256=%s", sig);
        hdrs = curl_slist_append(hdrs, line);
    }
    if (!hdrs) {
        snprintf(why, len, "out of memory");
        return -EIO;
    }
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, c->url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, d->body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(d->body));
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "numvald/" NV_VERSION);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, h);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        snprintf(why, len, "%s", curl_easy_strerror(rc));
        return -EIO;
    }
    if (status < 200 || status > 299) {
        snprintf(why, len, "HTTP %ld", status);
        return -EIO;
    }
    return 0;
}

/* Deliver d, retrying with backoff; returns when it got a 2xx, its attempts
 * ran out, or numvald is stopping. */
static void deliver(hook *h, CURL *curl, const delivery *d)
{
    long pause = h->conf->backoff_ms;
    for (int n = 1; n <= h->conf->max_attempts && !atomic_load(&h->stop); n++) {
        char why[256];
        if (attempt(h, curl, d, n, why, sizeof why) == 0) {
            atomic_fetch_add(&h->delivered, 1);
            nv_log_debug("webhook '%s': %s %s delivered (attempt %d)", h->conf->name,
                         nvd_webhook_event_name(d->event), d->id, n);
            return;
        }
        atomic_fetch_add(&h->failed_attempts, 1);
        if (n == h->conf->max_attempts || atomic_load(&h->stop)) {
            nv_log_warn("webhook '%s': %s %s dropped after %d attempts; last: %s", h->conf->name,
                        nvd_webhook_event_name(d->event), d->id, n, why);
            atomic_fetch_add(&h->dropped, 1);
            return;
        }
        nv_log_info("webhook '%s': %s %s attempt %d failed (%s); retrying in %ld ms",
                    h->conf->name, nvd_webhook_event_name(d->event), d->id, n, why, pause);
        /* Sleep on the condition so that stopping wakes it. */
        struct timespec until = after_ms(pause);
        pthread_mutex_lock(&h->lock);
        while (!atomic_load(&h->stop) &&
               pthread_cond_timedwait(&h->cond, &h->lock, &until) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&h->lock);
        pause = pause * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : pause * 2;
    }
}

static void *run(void *arg)
{
    hook *h = arg;
    CURL *curl = curl_easy_init();
    if (!curl)
        nv_log_err("webhook '%s': cannot start libcurl; its events are dropped", h->conf->name);
    for (;;) {
        pthread_mutex_lock(&h->lock);
        while (!h->head && !atomic_load(&h->stop))
            pthread_cond_wait(&h->cond, &h->lock);
        if (atomic_load(&h->stop)) {
            pthread_mutex_unlock(&h->lock);
            break;
        }
        delivery *d = h->head;
        h->head = d->next;
        if (!h->head)
            h->tail = NULL;
        h->n--;
        pthread_mutex_unlock(&h->lock);
        if (curl)
            deliver(h, curl, d);
        else
            atomic_fetch_add(&h->dropped, 1);
        delivery_free(d);
    }
    curl_easy_cleanup(curl);
    return NULL;
}

int nvd_webhooks_new(const nvd_config *cfg, nvd_webhooks **ret)
{
    nvd_webhooks *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    int r = 0;
    if (cfg->n_webhooks > 0) {
        /* Before any thread: curl_global_init is not thread-safe. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            free(w);
            return -EIO;
        }
        w->curl_ok = true;
        w->hooks = calloc((size_t)cfg->n_webhooks, sizeof *w->hooks);
        if (!w->hooks)
            r = -ENOMEM;
    }
    for (int i = 0; r == 0 && i < cfg->n_webhooks; i++) {
        hook *h = &w->hooks[i];
        h->conf = &cfg->webhooks[i];
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->cond, NULL);
        w->n++;
        int e = pthread_create(&h->thread, NULL, run, h);
        if (e)
            r = -e;
        h->started = e == 0;
    }
    if (r < 0) {
        nvd_webhooks_free(w);
        return r;
    }
    *ret = w;
    return 0;
}

void nvd_webhooks_free(nvd_webhooks *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        hook *h = &w->hooks[i];
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->stop, 1);
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
    }
    for (int i = 0; i < w->n; i++) {
        hook *h = &w->hooks[i];
        if (h->started)
            pthread_join(h->thread, NULL);
        if (h->n)
            nv_log_warn("webhook '%s': %d undelivered events dropped at shutdown", h->conf->name,
                        h->n);
        while (h->head) {
            delivery *d = h->head;
            h->head = d->next;
            delivery_free(d);
        }
        pthread_cond_destroy(&h->cond);
        pthread_mutex_destroy(&h->lock);
    }
    while (w->held) {
        delivery *d = w->held;
        w->held = d->next;
        delivery_free(d);
    }
    free(w->hooks);
    if (w->curl_ok)
        curl_global_cleanup();
    free(w);
}

void nvd_webhooks_emit(nvd_webhooks *w, unsigned event, json_t *data)
{
    bool wanted = false;
    for (int i = 0; w && i < w->n; i++)
        wanted |= (w->hooks[i].conf->events & event) != 0;
    if (!wanted) {
        json_decref(data);
        return;
    }
    delivery *d = calloc(1, sizeof *d);
    char at[32];
    nvd_time_format(nvd_now_ms(), at);
    if (!d || nvd_random_hex(16, d->id) < 0) {
        free(d);
        json_decref(data);
        nv_log_warn("webhook: cannot build a %s event: out of memory",
                    nvd_webhook_event_name(event));
        return;
    }
    json_t *body = json_pack("{s:s, s:s, s:s, s:o}", "event", nvd_webhook_event_name(event), "id",
                             d->id, "created_at", at, "data", data ? data : json_null());
    d->event = event;
    d->body = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(body);
    if (!d->body) {
        free(d);
        nv_log_warn("webhook: cannot build a %s event: out of memory",
                    nvd_webhook_event_name(event));
        return;
    }
    if (w->held_tail)
        w->held_tail->next = d;
    else
        w->held = d;
    w->held_tail = d;
}

/* Queue a copy of d on h; the oldest queued delivery goes when the queue is full. */
static void enqueue(hook *h, const delivery *d)
{
    delivery *c = calloc(1, sizeof *c);
    if (c && !(c->body = strdup(d->body))) {
        free(c);
        c = NULL;
    }
    if (!c) {
        atomic_fetch_add(&h->dropped, 1);
        return;
    }
    c->event = d->event;
    memcpy(c->id, d->id, sizeof c->id);
    delivery *old = NULL;
    pthread_mutex_lock(&h->lock);
    if (h->n >= h->conf->max_queue) {
        old = h->head;
        h->head = old->next;
        if (!h->head)
            h->tail = NULL;
        h->n--;
    }
    if (h->tail)
        h->tail->next = c;
    else
        h->head = c;
    h->tail = c;
    h->n++;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    if (old) {
        atomic_fetch_add(&h->dropped, 1);
        nv_log_warn("webhook '%s': queue full (%d); dropped the oldest event %s", h->conf->name,
                    h->conf->max_queue, old->id);
        delivery_free(old);
    }
}

void nvd_webhooks_release(nvd_webhooks *w, bool committed)
{
    if (!w)
        return;
    while (w->held) {
        delivery *d = w->held;
        w->held = d->next;
        if (!w->held)
            w->held_tail = NULL;
        if (!committed)
            nv_log_warn("webhook: %s event %s dropped: its write was not committed",
                        nvd_webhook_event_name(d->event), d->id);
        for (int i = 0; committed && i < w->n; i++)
            if (w->hooks[i].conf->events & d->event)
                enqueue(&w->hooks[i], d);
        delivery_free(d);
    }
}

void nvd_webhooks_stats(nvd_webhooks *w, nvd_webhook_stats *ret)
{
    *ret = (nvd_webhook_stats){0};
    for (int i = 0; w && i < w->n; i++) {
        ret->delivered += atomic_load(&w->hooks[i].delivered);
        ret->failed_attempts += atomic_load(&w->hooks[i].failed_attempts);
        ret->dropped += atomic_load(&w->hooks[i].dropped);
    }
}
