/* Status texts, JSON error bodies, listen addresses and header names for the
 * HTTP server. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "http.h"
#include "http_internal.h"

const char *nvd_http_status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

static size_t json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; s && *s && n + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        } else {
            out[n++] = (char)ch;
        }
    }
    out[n] = '\0';
    return n;
}

int http_format_error(char *buf, size_t cap, const char *code, const char *message,
                      const char *field)
{
    char m[1024], f[512];
    json_escape(m, sizeof(m), message);
    json_escape(f, sizeof(f), field);
    if (field)
        return snprintf(buf, cap,
                        "{\"error\":{\"code\":\"%s\",\"message\":\"%s\",\"field\":\"%s\"}}", code,
                        m, f);
    return snprintf(buf, cap, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, m);
}

int http_parse_listen(const char *listen, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof(host))
        return -EINVAL;
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535)
        return -EINVAL;
    const char *h = host;
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        h = host + 1;
        return uv_ip6_addr(h, (int)port, (struct sockaddr_in6 *)ss);
    }
    if (hl == 0)
        h = "0.0.0.0";
    return uv_ip4_addr(h, (int)port, (struct sockaddr_in *)ss);
}

bool nvd_http_listen_is_loopback(const char *listen)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (!listen || http_parse_listen(listen, &ss) < 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        static const unsigned char lo[16] = {[15] = 1};
        return memcmp(((const struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr, lo, 16) == 0;
    }
    return false;
}

bool nvd_http_token_ok(const char *name)
{
    /* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
     *         "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA */
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if (!name || !*name)
        return false;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        bool alnum = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= 'A' && *p <= 'Z');
        if (!alnum && !strchr(extra, *p))
            return false;
    }
    return true;
}
