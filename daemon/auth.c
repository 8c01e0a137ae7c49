#include "auth.h"

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

int nvd_auth_create(nvd_store *s, const char *name, unsigned scopes, char **ret_token)
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
    r = nvd_store_token_add(s, name, hash, sc, nvd_now_ms());
    if (r < 0) {
        free(tok);
        return r;
    }
    *ret_token = tok;
    return 0;
}

int nvd_auth_check(nvd_store *s, const char *authorization, char **ret_name, unsigned *ret_scopes)
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
    char *name = NULL, *scopes = NULL;
    int r = nvd_store_token_find(s, hash, &name, &scopes);
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
    return 0;
}
