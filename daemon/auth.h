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

/* Check an Authorization header value. 0 with name (malloc'd, may be NULL) and
 * scopes; -ENOENT when header is NULL; -EACCES for a malformed, unknown or
 * revoked token. */
int nvd_auth_check(nvd_store *s, const char *authorization, char **ret_name, unsigned *ret_scopes);

#endif
