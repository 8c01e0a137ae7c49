/* numval-worker's libcurl wrapper (STYLE.md: one curl file per program). */
#include "http_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvw_http {
    char *server; /* without trailing slash */
    char *auth;   /* "Authorization: Bearer ..." or NULL */
    char *cacert; /* --cacert, or NULL: the system's CAs */
    atomic_int *abort;
};

int nvw_http_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void nvw_http_global_done(void)
{
    curl_global_cleanup();
}

nvw_http *nvw_http_new(const char *server, const char *token, atomic_int *abort)
{
    nvw_http *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->abort = abort;
    h->server = strdup(server);
    if (!h->server)
        goto fail;
    for (size_t n = strlen(h->server); n > 0 && h->server[n - 1] == '/'; n--)
        h->server[n - 1] = '\0';
    if (token && *token && asprintf(&h->auth, "Authorization: Bearer %s", token) < 0) {
        h->auth = NULL;
        goto fail;
    }
    return h;
fail:
    nvw_http_free(h);
    return NULL;
}

void nvw_http_free(nvw_http *h)
{
    if (!h)
        return;
    free(h->server);
    free(h->auth);
    free(h->cacert);
    free(h);
}

int nvw_http_set_cacert(nvw_http *h, const char *path)
{
    char *d = path && *path ? strdup(path) : NULL;
    if (path && *path && !d)
        return -ENOMEM;
    free(h->cacert);
    h->cacert = d;
    return 0;
}

void nvw_http_resp_done(nvw_http_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

typedef struct sink {
    char *p;
    size_t len, cap;
    int err;
} sink;

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
    sink *s = ud;
    size_t n = size * nmemb;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->err = -ENOMEM;
            return 0;
        }
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->len, data, n);
    s->len += n;
    s->p[s->len] = '\0';
    return n;
}

/* Called by curl about once a second and on every transfer step: a non-zero
 * return aborts the transfer, which is how SIGTERM cuts a long poll short. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const nvw_http *h = ud;
    return h->abort && atomic_load(h->abort);

}

static int map_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        return -EKEYREJECTED;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

int nvw_http_request(nvw_http *h, const char *method, const char *path, const char *content_type,
                     const void *body, size_t len, long timeout_ms, nvw_http_resp *ret,
                     char **ret_err)
{
    int r = -ENOMEM;
    char *url = NULL, ct[128];
    struct curl_slist *hdrs = NULL;
    sink s = {0};
    CURL *c = curl_easy_init();
    if (!c || asprintf(&url, "%s%s", h->server, path) < 0) {
        url = NULL;
        goto out;
    }
    if (h->auth)
        hdrs = curl_slist_append(hdrs, h->auth);
    snprintf(ct, sizeof(ct), "Content-Type: %s", content_type ? content_type : "application/json");
    if (body)
        hdrs = curl_slist_append(hdrs, ct);
    /* No "Expect: 100-continue" round trip for artifact uploads. */
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "numval-worker/" NV_VERSION);
    /* https: the server's certificate is always verified (the token and the
     * results travel on this connection), against the system's CAs or
     * --cacert; there is no option to turn that off. */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->cacert)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->cacert);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    CURLcode cc = curl_easy_perform(c);
    if (s.err < 0) {
        r = s.err;
        goto out;
    }
    if (cc != CURLE_OK) {
        r = map_curl(cc);
        const char *hint =
            cc == CURLE_PEER_FAILED_VERIFICATION
                ? (h->cacert ? "; the server's TLS certificate does not verify against --cacert"
                             : "; the server's TLS certificate does not verify: pass --cacert "
                               "FILE or set NUMVAL_CACERT to the CA certificate that signed it")
            : cc == CURLE_SSL_CACERT_BADFILE ? "; the --cacert (NUMVAL_CACERT) file cannot be used"
                                             : "";
        if (ret_err && asprintf(ret_err, "%s %s%s: %s%s%s%s", method, h->server, path,
                                curl_easy_strerror(cc), detail[0] ? ": " : "", detail, hint) < 0)
            *ret_err = NULL;
        goto out;
    }
    if (!s.p && !(s.p = calloc(1, 1)))
        goto out;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
    ret->body = s.p;
    ret->len = s.len;
    s.p = NULL;
    r = 0;
out:
    free(s.p);
    free(url);
    curl_slist_free_all(hdrs);
    if (c)
        curl_easy_cleanup(c);
    return r;
}
