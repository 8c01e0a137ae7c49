/* numvalctl's one libcurl file (STYLE.md "Build and layout"): requests to the
 * numvald JSON API. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

int nvc_http_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void nvc_http_done(void)
{
    curl_global_cleanup();
}

void nvc_response_done(nvc_response *r)
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
        size_t cap = s->cap ? s->cap : 16384;
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

char *nvc_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    if (!e)
        return NULL;
    char *copy = strdup(e);
    curl_free(e);
    return copy;
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
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

int nvc_http(const nvc_conn *c, const char *method, const char *path, const char *content_type,
             const void *body, size_t body_len, long timeout_s, nvc_response *ret, char **ret_err)
{
    int r = -ENOMEM;
    struct curl_slist *hdrs = NULL;
    char *url = NULL, *auth = NULL;
    sink s = {0};
    CURL *h = curl_easy_init();
    /* A trailing slash on the server URL would double up with "/api/v1". */
    int slen = (int)strlen(c->server);
    while (slen > 0 && c->server[slen - 1] == '/')
        slen--;
    if (!h || asprintf(&url, "%.*s%s", slen, c->server, path) < 0) {
        url = NULL;
        goto out;
    }
    if (c->token && *c->token) {
        if (asprintf(&auth, "Authorization: Bearer %s", c->token) < 0) {
            auth = NULL;
            goto out;
        }
        hdrs = curl_slist_append(hdrs, auth);
    }
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (c->header)
        hdrs = curl_slist_append(hdrs, c->header);
    if (body) {
        char ct[128];
        snprintf(ct, sizeof(ct), "Content-Type: %s",
                 content_type ? content_type : "application/json");
        hdrs = curl_slist_append(hdrs, ct);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s > 0 ? timeout_s : 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "numvalctl/" NV_VERSION);
    /* https: the server's certificate is always verified, against the
     * system's CAs or --cacert (a lab's private CA); there is no option to
     * turn that off. */
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->cacert && *c->cacert)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    CURLcode cc = curl_easy_perform(h);
    if (s.err < 0) {
        r = s.err;
        goto out;
    }
    if (cc != CURLE_OK) {
        r = map_curl(cc);
        int n = 0;
        if (!ret_err)
            goto out;
        if (cc == CURLE_PEER_FAILED_VERIFICATION)
            n = asprintf(ret_err,
                         "server '%s': its TLS certificate does not verify (curl: %s%s%s); pass "
                         "--cacert FILE or set NUMVAL_CACERT to the certificate of the CA that "
                         "signed it%s",
                         c->server, curl_easy_strerror(cc), detail[0] ? ": " : "", detail,
                         c->cacert && *c->cacert ? " (the one given did not)" : "");
        else if (cc == CURLE_SSL_CACERT_BADFILE)
            n = asprintf(ret_err,
                         "server '%s': cannot use CA file '%s' (--cacert, NUMVAL_CACERT): "
                         "curl: %s%s%s",
                         c->server, c->cacert ? c->cacert : "", curl_easy_strerror(cc),
                         detail[0] ? ": " : "", detail);
        else
            n = asprintf(ret_err, "cannot reach server '%s': %s%s%s", c->server,
                         curl_easy_strerror(cc), detail[0] ? ": " : "", detail);
        if (n < 0)
            *ret_err = NULL;
        goto out;
    }
    if (!s.p && !(s.p = calloc(1, 1)))
        goto out;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ret->status);
    ret->body = s.p;
    ret->len = s.len;
    s.p = NULL;
    r = 0;
out:
    if (r == -ENOMEM && ret_err && !*ret_err)
        *ret_err = strdup("out of memory");
    free(s.p);
    free(url);
    free(auth);
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    return r;
}

/* What to do about an authentication failure, appended to its message. */
static const char *auth_hint(long status)
{
    if (status == 401)
        return "; set NUMVAL_TOKEN or pass --token (tokens are minted with "
               "'numvald token create NAME --scope SCOPE')";
    if (status == 403)
        return "; this token's scope does not allow it: use a token with the scope named above";
    return "";
}

/* "server refused the request (400 bad_request): message [field /x]" */
static char *server_error(long status, const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *field = json_string_value(json_object_get(e, "field"));
    char *out = NULL;
    int n;
    if (msg)
        n = asprintf(&out, "server refused the request (HTTP %ld %s): %s%s%s%s%s", status,
                     code ? code : "error", msg, field ? " [field '" : "", field ? field : "",
                     field ? "']" : "", auth_hint(status));
    else
        n = asprintf(&out, "server answered HTTP %ld: %.200s%s", status, body, auth_hint(status));
    json_decref(j);
    return n < 0 ? NULL : out;
}

static int api_try(const nvc_conn *c, const char *method, const char *path, json_t *body,
                   int retries, json_t **ret, char **ret_err)
{
    char *text = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT)))
        return -ENOMEM;
    nvc_response resp = {0};
    int r;
    for (int attempt = 0;; attempt++) {
        char *err = NULL;
        r = nvc_http(c, method, path, NULL, text, text ? strlen(text) : 0, 0, &resp, &err);
        /* A certificate that does not verify will not verify on a retry. */
        bool again = r == 0 ? resp.status >= 500 : r != -ENOMEM && r != -EKEYREJECTED;
        if (!again || attempt >= retries) {
            if (ret_err)
                *ret_err = err;
            else
                free(err);
            break;
        }
        unsigned delay = attempt < 3 ? 1u << attempt : 8u;
        char why[64];
        if (r == 0)
            snprintf(why, sizeof why, "HTTP %ld", resp.status);
        fprintf(stderr, "numvalctl: %s %s: %s; retrying in %u s (%d of %d)\n", method, path,
                r == 0 ? why
                : err  ? err
                       : strerror(-r),
                delay, attempt + 1, retries);
        free(err);
        nvc_response_done(&resp);
        memset(&resp, 0, sizeof resp);
        struct timespec ts = {(time_t)delay, 0};
        nanosleep(&ts, NULL);
    }
    free(text);
    if (r < 0)
        return r;
    if (resp.status < 200 || resp.status > 299) {
        if (ret_err)
            *ret_err = server_error(resp.status, resp.body);
        nvc_response_done(&resp);
        return -EPROTO;
    }
    json_t *j = NULL;
    if (resp.status != 204 && resp.len > 0) {
        json_error_t jerr;
        j = json_loadb(resp.body, resp.len, 0, &jerr);
        if (!j) {
            if (ret_err && asprintf(ret_err, "server sent invalid JSON for %s %s: %s", method, path,
                                    jerr.text) < 0)
                *ret_err = NULL;
            nvc_response_done(&resp);
            return -EPROTO;
        }
    }
    nvc_response_done(&resp);
    *ret = j;
    return 0;
}

int nvc_api(const nvc_conn *c, const char *method, const char *path, json_t *body, json_t **ret,
            char **ret_err)
{
    return api_try(c, method, path, body, 0, ret, ret_err);
}

int nvc_api_retry(const nvc_conn *c, const char *method, const char *path, json_t *body,
                  int retries, json_t **ret, char **ret_err)
{
    return api_try(c, method, path, body, retries, ret, ret_err);
}
