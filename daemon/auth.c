#include "auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/sha256.h"
#include "daemon/util/util.h"

static const struct {
    const char *name;
    unsigned bit;
} scope_names[] = {{"read", NVD_SCOPE_READ},
                   {"submit", NVD_SCOPE_SUBMIT},
                   {"worker", NVD_SCOPE_WORKER},
                   {"admin", NVD_SCOPE_ADMIN}};

int nvd_auth_parse_scopes(const char *list, unsigned *ret, char bad[64])
{
    unsigned bits = 0;
    const char *p = list;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < sizeof(scope_names) / sizeof(scope_names[0]); i++)
            if (strlen(scope_names[i].name) == n && !strncmp(scope_names[i].name, p, n)) {
                bits |= scope_names[i].bit;
                found = true;
            }
        if (!found) {
            snprintf(bad, 64, "%.*s", (int)(n < 63 ? n : 63), p);
            return -EINVAL;
        }
        p = e ? e + 1 : NULL;
    }
    if (!bits) {
        snprintf(bad, 64, "%s", list ? list : "");
        return -EINVAL;
    }
    *ret = bits;
    return 0;
}

void nvd_auth_format_scopes(unsigned scopes, char buf[64])
{
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(scope_names) / sizeof(scope_names[0]); i++)
        if (scopes & scope_names[i].bit) {
            if (buf[0])
                strcat(buf, ",");
            strcat(buf, scope_names[i].name);
        }
}

bool nvd_auth_allows(unsigned scopes, unsigned need)
{
    if (scopes & NVD_SCOPE_ADMIN)
        return true;
    if (need == NVD_SCOPE_READ)
        return scopes != 0;
    return (scopes & need) == need;
}

void nvd_auth_hash(const char *token, char out[65])
{
    nv_sha256_hex(token, strlen(token), out);
}

/* An address (n bytes of text, spaces around allowed) as 16 bytes, IPv4 as
 * ::ffff:a.b.c.d. false if it does not parse. */
static bool addr_parse(const char *s, size_t n, unsigned char out[16])
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    struct in_addr a4;
    if (inet_pton(AF_INET, buf, &a4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a4, 4);
        return true;
    }
    return inet_pton(AF_INET6, buf, out) == 1;
}

static bool addr_loopback(const unsigned char a[16])
{
    static const unsigned char lo6[16] = {[15] = 1};
    static const unsigned char v4[12] = {[10] = 0xff, [11] = 0xff};
    return memcmp(a, lo6, 16) == 0 || (memcmp(a, v4, 12) == 0 && a[12] == 127);
}

/* Whether the comma list holds the address a. */
static bool addr_listed(const char *list, const unsigned char a[16])
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        unsigned char b[16];
        if (addr_parse(p, len, b) && memcmp(a, b, 16) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

bool nvd_auth_addr_list_ok(const char *list)
{
    if (!list || !*list)
        return false;
    for (const char *p = list; p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        unsigned char b[16];
        if (!addr_parse(p, len, b))
            return false;
        p = e ? e + 1 : NULL;
    }
    return true;
}

bool nvd_auth_from_loopback(const nvd_auth_origin *o)
{
    unsigned char peer[16];
    if (!o->peer || !addr_parse(o->peer, strlen(o->peer), peer))
        return false;
    if (!o->trusted || !addr_listed(o->trusted, peer))
        return addr_loopback(peer) && o->n_xff == 0 && !o->xff && !o->forwarded;
    /* From the proxy: the last X-Forwarded-For entry is the address it saw;
     * entries before it are whatever the client sent. */
    if (o->n_xff != 1 || !o->xff)
        return false;
    const char *last = strrchr(o->xff, ',');
    last = last ? last + 1 : o->xff;
    unsigned char client[16];
    return addr_parse(last, strlen(last), client) && addr_loopback(client);
}

int nvd_auth_parse_devices(const char *list, unsigned scopes, char *err, size_t cap)
{
    if (!(scopes & NVD_SCOPE_WORKER) || (scopes & NVD_SCOPE_ADMIN)) {
        snprintf(err, cap,
                 "--device binds a worker token to devices: the scope must hold "
                 "'worker' and not 'admin'");
        return -EINVAL;
    }
    int n = 0;
    for (const char *p = list;; n++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool ok = len >= 1 && len <= 128;
        for (size_t i = 0; ok && i < len; i++)
            ok = p[i] == '-' || p[i] == '_' || p[i] == '.' || (p[i] >= '0' && p[i] <= '9') ||
                 (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z');
        if (!ok) {
            snprintf(err, cap,
                     "--device '%.*s' is not a device name ([A-Za-z0-9._-], 1 to 128 "
                     "bytes, comma-separated)",
                     (int)(len < 128 ? len : 128), p);
            return -EINVAL;
        }
        /* The same name earlier in the list? */
        for (const char *q = list; q < p;) {
            const char *qe = strchr(q, ',');
            if ((size_t)(qe - q) == len && !strncmp(q, p, len)) {
                snprintf(err, cap, "--device names '%.*s' twice", (int)len, p);
                return -EINVAL;
            }
            q = qe + 1;
        }
        if (n + 1 > NVD_AUTH_MAX_DEVICES) {
            snprintf(err, cap, "--device names more than %d devices", NVD_AUTH_MAX_DEVICES);
            return -EINVAL;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

bool nvd_auth_device_listed(const char *devices, const char *device)
{
    size_t n = strlen(device);
    for (const char *p = devices; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, device, n))
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

int nvd_auth_create(nvd_store *s, const char *name, unsigned scopes, char **ret_token)
{
    return nvd_auth_create_bound(s, name, scopes, NULL, ret_token);
}

int nvd_auth_create_bound(nvd_store *s, const char *name, unsigned scopes, const char *devices,
                          char **ret_token)
{
    char hexs[65], hash[65], sc[64];
    int r = nvd_random_hex(32, hexs);
    if (r < 0)
        return r;
    char *tok = malloc(4 + 64 + 1);
    if (!tok)
        return -ENOMEM;
    snprintf(tok, 4 + 64 + 1, "nvt_%s", hexs);
    nvd_auth_hash(tok, hash);
    nvd_auth_format_scopes(scopes, sc);
    r = nvd_store_token_add(s, name, hash, sc, devices, nvd_now_ms());
    if (r < 0) {
        free(tok);
        return r;
    }
    *ret_token = tok;
    return 0;
}

int nvd_auth_check(nvd_store *s, const char *authorization, char **ret_name, unsigned *ret_scopes,
                   char **ret_devices)
{
    if (!authorization)
        return -ENOENT;
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return -EACCES;
    const char *t = authorization + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    if (n == 0 || n > 256)
        return -EACCES;
    char tok[257], hash[65];
    memcpy(tok, t, n);
    tok[n] = '\0';
    nvd_auth_hash(tok, hash);
    char *name = NULL, *scopes = NULL, *devices = NULL;
    int r = nvd_store_token_find(s, hash, &name, &scopes, ret_devices ? &devices : NULL);
    if (r == -ENOENT)
        return -EACCES;
    if (r < 0)
        return r;
    unsigned bits = 0;
    char bad[64];
    if (nvd_auth_parse_scopes(scopes, &bits, bad) < 0)
        bits = 0;
    free(scopes);
    *ret_name = name;
    *ret_scopes = bits;
    if (ret_devices)
        *ret_devices = devices;
    return 0;
}
