/* Tokens: SHA-256 hashing (FIPS 180-2 "abc" vector), scopes, create / check /
 * revoke, that only the hash is stored, device binding, and who counts as a
 * loopback client behind a reverse proxy. */
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

/* The proxy rule (auth.h nvd_auth_from_loopback), case by case. */
static void test_origin(void)
{
    const char *tp = "127.0.0.2,::1";
    struct {
        nvd_auth_origin o;
        bool want;
        const char *what;
    } t[] = {
        {{.peer = "127.0.0.1"}, true, "direct loopback peer, no proxy header"},
        {{.peer = "127.0.0.1", .trusted = tp}, true, "direct peer that is not the trusted proxy"},
        {{.peer = "192.0.2.9"}, false, "direct non-loopback peer"},
        {{.peer = "127.0.0.1", .xff = "127.0.0.1", .n_xff = 1},
         false,
         "loopback peer with X-Forwarded-For and no trusted proxy: an untrusted proxy"},
        {{.peer = "127.0.0.1", .forwarded = true}, false, "loopback peer with Forwarded"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "203.0.113.7", .n_xff = 1},
         false,
         "trusted proxy, internet client"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "127.0.0.1", .n_xff = 1},
         true,
         "trusted proxy, client on this host"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "127.0.0.1, 203.0.113.7", .n_xff = 1},
         false,
         "trusted proxy: a spoofed first entry does not count, the last does"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "203.0.113.7, 127.0.0.1", .n_xff = 1},
         true,
         "trusted proxy: the last entry is the one it wrote"},
        {{.peer = "127.0.0.2", .trusted = tp}, false, "trusted proxy without X-Forwarded-For"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "127.0.0.1", .n_xff = 2},
         false,
         "trusted proxy with two X-Forwarded-For headers"},
        {{.peer = "127.0.0.2", .trusted = tp, .xff = "localhost", .n_xff = 1},
         false,
         "trusted proxy, an entry that is not an address"},
        {{.peer = "::1", .trusted = tp, .xff = "::1", .n_xff = 1}, true, "IPv6 proxy and client"},
        {{.peer = "", .trusted = tp}, false, "unknown peer"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        tap_ok(nvd_auth_from_loopback(&t[i].o) == t[i].want, "origin: %s -> %s", t[i].what,
               t[i].want ? "loopback" : "not loopback");
    tap_ok(nvd_auth_addr_list_ok("127.0.0.1, ::1") && !nvd_auth_addr_list_ok("127.0.0.1,") &&
               !nvd_auth_addr_list_ok("proxy.lan") && !nvd_auth_addr_list_ok("10.0.0.0/8"),
           "trusted_proxy: a comma list of addresses (no names, no ranges)");
}

static void test_devices(nvd_store *s)
{
    char err[300] = "";
    unsigned w = NVD_SCOPE_WORKER;
    tap_ok(nvd_auth_parse_devices("gpu0,gpu1", w, err, sizeof err) == 0, "'gpu0,gpu1' parses");
    tap_ok(nvd_auth_parse_devices("gpu0,,gpu1", w, err, sizeof err) == -EINVAL && strstr(err, "''"),
           "empty device name refused: %s", err);
    tap_ok(nvd_auth_parse_devices("gpu0,gpu 1", w, err, sizeof err) == -EINVAL &&
               strstr(err, "'gpu 1'"),
           "bad device name named: %s", err);
    tap_ok(nvd_auth_parse_devices("a,b,a", w, err, sizeof err) == -EINVAL && strstr(err, "twice"),
           "duplicate refused: %s", err);
    tap_ok(nvd_auth_parse_devices("gpu0", NVD_SCOPE_READ, err, sizeof err) == -EINVAL &&
               strstr(err, "worker"),
           "binding a read token refused: %s", err);
    tap_ok(nvd_auth_parse_devices("gpu0", NVD_SCOPE_ADMIN | w, err, sizeof err) == -EINVAL,
           "binding an admin token refused");
    char many[700] = "";
    for (int i = 0; i <= NVD_AUTH_MAX_DEVICES; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sd%d", i ? "," : "", i);
    tap_ok(nvd_auth_parse_devices(many, w, err, sizeof err) == -EINVAL,
           "more than %d devices refused", NVD_AUTH_MAX_DEVICES);
    tap_ok(nvd_auth_device_listed("gpu0,gpu1", "gpu1") &&
               !nvd_auth_device_listed("gpu0,gpu1", "gpu") &&
               !nvd_auth_device_listed("gpu0,gpu1", "gpu0,gpu1"),
           "device_listed matches whole names only");

    char *tok = NULL, hdr[128], *name = NULL, *dev = NULL;
    unsigned got = 0;
    tap_ok(nvd_auth_create_bound(s, "host-a", w, "gpu0,gpu1", &tok) == 0, "bound token created");
    snprintf(hdr, sizeof hdr, "Bearer %s", tok);
    tap_ok(nvd_auth_check(s, hdr, &name, &got, &dev) == 0 && got == w && dev &&
               !strcmp(dev, "gpu0,gpu1"),
           "check returns the bound devices: '%s'", dev ? dev : "(null)");
    free(name);
    free(dev);
    free(tok);
    tap_ok(nvd_auth_create(s, "host-any", w, &tok) == 0, "unbound token created");
    snprintf(hdr, sizeof hdr, "Bearer %s", tok);
    dev = (char *)"sentinel";
    tap_ok(nvd_auth_check(s, hdr, &name, &got, &dev) == 0 && dev == NULL,
           "an unbound token has no devices");
    free(name);
    free(tok);
}

/* A store made before schema version 5 (its tokens table without the devices
 * column, user_version 4) keeps its tokens, unbound, after the migration. */
static void test_upgrade(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/v4.db", dir);
    nvd_store *s = NULL;
    char *tok = NULL, hdr[128], *name = NULL, *dev = NULL;
    unsigned got = 0;
    nvd_store_open(path, NULL, &s, NULL);
    tap_ok(s && nvd_auth_create(s, "old-worker", NVD_SCOPE_WORKER, &tok) == 0,
           "token made in a fresh store");
    int latest = s ? nvd_store_user_version(s) : -1;
    nvd_store_free(s);
    s = NULL;
    sqlite3 *db;
    sqlite3_open(path, &db);
    /* Version 4: without migration 005's column and what later migrations add
     * (006: builds.backend, the bisections table). */
    int rc = sqlite3_exec(db,
                          "DROP TABLE IF EXISTS bisections; "
                          "ALTER TABLE builds DROP COLUMN backend; "
                          "ALTER TABLE tokens DROP COLUMN devices; PRAGMA user_version = 4",
                          NULL, NULL, NULL);
    sqlite3_close(db);
    tap_ok(rc == SQLITE_OK, "store taken back to version 4 (no devices column)");
    char *err = NULL;
    tap_ok(nvd_store_open(path, NULL, &s, &err) == 0 && latest >= 5 &&
               nvd_store_user_version(s) == latest,
           "reopened: migrated to version %d again (%s)", latest, err ? err : "");
    free(err);
    snprintf(hdr, sizeof hdr, "Bearer %s", tok ? tok : "");
    dev = (char *)"sentinel";
    tap_ok(s && nvd_auth_check(s, hdr, &name, &got, &dev) == 0 && got == NVD_SCOPE_WORKER &&
               dev == NULL,
           "the version-4 token still checks, worker scope, bound to no device");
    free(name);
    free(tok);
    nvd_store_free(s);
}

int main(void)
{
    test_origin();
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
    tap_ok(nvd_auth_check(s, hdr, &name, &got, NULL) == 0 && name && !strcmp(name, "ci") &&
               got == NVD_SCOPE_SUBMIT,
           "check finds name and scope");
    free(name);
    tap_ok(nvd_auth_check(s, NULL, &name, &got, NULL) == -ENOENT, "no header: -ENOENT");
    tap_ok(nvd_auth_check(s, "Bearer nvt_0000", &name, &got, NULL) == -EACCES,
           "unknown token: -EACCES");
    snprintf(hdr, sizeof(hdr), "Basic %s", tok);
    tap_ok(nvd_auth_check(s, hdr, &name, &got, NULL) == -EACCES, "non-Bearer scheme: -EACCES");

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
    tap_ok(nvd_auth_check(s, hdr, &name, &got, NULL) == -EACCES, "revoked token: -EACCES");
    tap_ok(nvd_store_token_revoke(s, "ci", 6) == -ENOENT, "revoking again: -ENOENT");
    tap_ok(nvd_auth_create(s, "ci", NVD_SCOPE_READ, &tok2) == 0, "the name is free again");
    test_devices(s);
    test_upgrade();
    free(tok);
    free(tok2);
    nvd_store_free(s);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
