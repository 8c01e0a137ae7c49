/* Bearer tokens with scopes, stored as SHA-256 hashes (never the token). */
#ifndef NUMVAL_DAEMON_AUTH_H
#define NUMVAL_DAEMON_AUTH_H

#include <stdbool.h>

#include "daemon/store/store.h"

enum {
    NVD_SCOPE_READ = 1,
    NVD_SCOPE_SUBMIT = 2,
    NVD_SCOPE_WORKER = 4,
    NVD_SCOPE_ADMIN = 8, /* implies every other scope */
};

/* "read,submit" -> bits. -EINVAL with the offending word copied to bad (64 bytes). */
int nvd_auth_parse_scopes(const char *list, unsigned *ret, char bad[64]);
/* bits -> "read,submit,..." into buf (64 bytes). */
void nvd_auth_format_scopes(unsigned scopes, char buf[64]);
/* Whether scopes grant need (admin grants everything; any scope grants read). */
bool nvd_auth_allows(unsigned scopes, unsigned need);
/* SHA-256 hex of the token text. */
void nvd_auth_hash(const char *token, char out[65]);

/* Mint a token for name with scopes and store its hash; the token itself
 * ("nvt_" + 64 hex digits, malloc'd) is returned once. -EEXIST when a live
 * token already has that name. */
int nvd_auth_create(nvd_store *s, const char *name, unsigned scopes, char **ret_token);
/* The same, for a worker token bound to devices (a comma list that
 * nvd_auth_parse_devices accepted; NULL: not bound). */
int nvd_auth_create_bound(nvd_store *s, const char *name, unsigned scopes, const char *devices,
                          char **ret_token);

/* Most devices one token may be bound to. */
#define NVD_AUTH_MAX_DEVICES 64

/* Check a --device list for a token of scopes: comma-separated device names
 * ([A-Za-z0-9._-], 1..128 bytes), none twice, at most NVD_AUTH_MAX_DEVICES,
 * and scopes must hold worker and not admin (binding restricts the worker
 * routes; an admin token could mint itself an unbound one). 0, or -EINVAL
 * with a message naming the problem in err. */
int nvd_auth_parse_devices(const char *list, unsigned scopes, char *err, size_t cap);
/* Whether the comma list devices names device. */
bool nvd_auth_device_listed(const char *devices, const char *device);

/* Where a request comes from, for [server] anonymous_read = loopback. */
typedef struct nvd_auth_origin {
    const char *peer;    /* the TCP peer's address as text (nvd_http_req.peer) */
    const char *trusted; /* [server] trusted_proxy: comma list of addresses, or NULL */
    const char *xff;     /* the X-Forwarded-For header, or NULL */
    int n_xff;           /* how many X-Forwarded-For headers came */
    bool forwarded;      /* a Forwarded or X-Real-IP header came */
} nvd_auth_origin;

/* Whether the client behind a request is on this host. A request from a
 * trusted proxy is judged by the last X-Forwarded-For address (the one that
 * proxy wrote); one from any other peer by the peer address, unless it carries
 * a proxy header: then an untrusted proxy forwarded it and its client is
 * unknown, so it is not loopback. Everything unclear (no or two
 * X-Forwarded-For headers from the proxy, an address that does not parse)
 * is not loopback. */
bool nvd_auth_from_loopback(const nvd_auth_origin *o);
/* Whether list is a comma list of IPv4 or IPv6 addresses (trusted_proxy). */
bool nvd_auth_addr_list_ok(const char *list);

/* Check an Authorization header value. 0 with name (malloc'd, may be NULL),
 * scopes and, when ret_devices is not NULL, the devices the token is bound to
 * (malloc'd; NULL when not bound); -ENOENT when header is NULL; -EACCES for a
 * malformed, unknown or revoked token. */
int nvd_auth_check(nvd_store *s, const char *authorization, char **ret_name, unsigned *ret_scopes,
                   char **ret_devices);

#endif
