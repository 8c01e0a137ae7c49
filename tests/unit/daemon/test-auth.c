/* Tokens: SHA-256 hashing (FIPS 180-2 "abc" vector), scopes, create / check /
 * revoke, and that only the hash is stored. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/auth.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-auth-XXXXXX";

/* Count rows of tokens where any column equals v. */
static int rows_with(const char *path, const char *sql, const char *v)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    int n = -1;
    sqlite3_open(path, &db);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, v, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

int main(void)
{
    char h[65];
    nvd_auth_hash("abc", h);
    /* FIPS 180-2 Appendix B.1: SHA-256("abc"). */
    tap_ok(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
           "hash of 'abc' is the FIPS 180-2 vector");

    unsigned sc = 0;
    char bad[64] = "";
    tap_ok(nvd_auth_parse_scopes("read,submit", &sc, bad) == 0 &&
               sc == (NVD_SCOPE_READ | NVD_SCOPE_SUBMIT),
           "'read,submit' parses");
    tap_ok(nvd_auth_parse_scopes("read,bogus", &sc, bad) == -EINVAL && !strcmp(bad, "bogus"),
           "unknown scope refused, named: '%s'", bad);
    tap_ok(nvd_auth_parse_scopes("", &sc, bad) == -EINVAL, "empty scope list refused");
    char buf[64];
    nvd_auth_format_scopes(NVD_SCOPE_WORKER | NVD_SCOPE_READ, buf);
    tap_ok(!strcmp(buf, "read,worker"), "format: '%s'", buf);
    tap_ok(nvd_auth_allows(NVD_SCOPE_ADMIN, NVD_SCOPE_WORKER), "admin grants worker");
    tap_ok(!nvd_auth_allows(NVD_SCOPE_WORKER, NVD_SCOPE_SUBMIT), "worker does not grant submit");
    tap_ok(nvd_auth_allows(NVD_SCOPE_SUBMIT, NVD_SCOPE_READ), "submit may read");
    tap_ok(!nvd_auth_allows(0, NVD_SCOPE_READ), "no scope, no read");

    if (!mkdtemp(dir))
        return 1;
    char path[300];
    snprintf(path, sizeof(path), "%s/numvald.db", dir);
    nvd_store *s = NULL;
    nvd_store_open(path, NULL, &s, NULL);
    char *tok = NULL;
    tap_ok(nvd_auth_create(s, "ci", NVD_SCOPE_SUBMIT, &tok) == 0, "token created");
    tap_ok(tok && strlen(tok) == 68 && !strncmp(tok, "nvt_", 4), "token is nvt_ + 64 hex");
    char *tok2 = NULL;
    tap_ok(nvd_auth_create(s, "ci", NVD_SCOPE_READ, &tok2) == -EEXIST,
           "a second live token with the same name is refused");
    char hdr[128], *name = NULL;
    unsigned got = 0;
    snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
    tap_ok(nvd_auth_check(s, hdr, &name, &got) == 0 && name && !strcmp(name, "ci") &&
               got == NVD_SCOPE_SUBMIT,
           "check finds name and scope");
    free(name);
    tap_ok(nvd_auth_check(s, NULL, &name, &got) == -ENOENT, "no header: -ENOENT");
    tap_ok(nvd_auth_check(s, "Bearer nvt_0000", &name, &got) == -EACCES, "unknown token: -EACCES");
    snprintf(hdr, sizeof(hdr), "Basic %s", tok);
    tap_ok(nvd_auth_check(s, hdr, &name, &got) == -EACCES, "non-Bearer scheme: -EACCES");

    nvd_auth_hash(tok, h);
    tap_ok(rows_with(path, "SELECT COUNT(*) FROM tokens WHERE hash = ?1", h) == 1,
           "the store holds the token's SHA-256");
    tap_ok(rows_with(path,
                     "SELECT COUNT(*) FROM tokens WHERE hash = ?1 OR name = ?1 OR "
                     "scopes = ?1",
                     tok) == 0,
           "the token text itself is stored nowhere");

    tap_ok(nvd_store_token_revoke(s, "ci", 5) == 0, "revoke");
    snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
    tap_ok(nvd_auth_check(s, hdr, &name, &got) == -EACCES, "revoked token: -EACCES");
    tap_ok(nvd_store_token_revoke(s, "ci", 6) == -ENOENT, "revoking again: -ENOENT");
    tap_ok(nvd_auth_create(s, "ci", NVD_SCOPE_READ, &tok2) == 0, "the name is free again");
    free(tok);
    free(tok2);
    nvd_store_free(s);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
