/* Internals shared by daemon/store*.c only: the connection, the statement cache
 * and the write-transaction helpers. */
#ifndef NUMVAL_DAEMON_STORE_INTERNAL_H
#define NUMVAL_DAEMON_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store.h"

typedef struct nvd_migration {
    int version;
    const char *name;
    const char *sql;
} nvd_migration;

extern const nvd_migration nvd_migrations[];
extern const int nvd_n_migrations;

#define STORE_MAX_STMTS 96

struct nvd_store {
    sqlite3 *db;
    nvd_store_opts opts;
    bool group_open; /* a group transaction is open (group_commit) */
    int write_depth; /* store_write_begin nesting: > 1 runs as a SAVEPOINT inside */
    int n_stmts;
    struct {
        const char *sql; /* a string literal: identity is the cache key */
        sqlite3_stmt *stmt;
    } stmts[STORE_MAX_STMTS];
};

/* The cached prepared statement for sql (a string literal), reset and with its
 * bindings cleared; NULL on error (logged). */
sqlite3_stmt *store_stmt(nvd_store *s, const char *sql);
/* Map an SQLite result code to -errno, logging unexpected ones with context. */
int store_err(nvd_store *s, int rc, const char *what);

/* Start / end an atomic write (a SAVEPOINT inside the group transaction, or a
 * transaction of its own). store_write_end rolls back when r < 0 and returns r
 * (or the commit's error). Writes nest: one begun inside another is a SAVEPOINT
 * of the outer one, so several write functions can form one atomic write. */
int store_write_begin(nvd_store *s);
int store_write_end(nvd_store *s, int r);

/* Bind helpers: NULL text binds SQL NULL. */
int store_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Column as a new JSON value: text parsed as JSON (json_null() if NULL/bad). */
json_t *store_col_json(sqlite3_stmt *st, int i);
/* Text column as JSON string, or json_null(). */
json_t *store_col_str(sqlite3_stmt *st, int i);
/* Integer column or JSON null when the column is NULL. */
json_t *store_col_int(sqlite3_stmt *st, int i);
/* Real column or JSON null. */
json_t *store_col_real(sqlite3_stmt *st, int i);
/* Time column (ms) as RFC 3339 JSON string or null. */
json_t *store_col_time(sqlite3_stmt *st, int i);
/* malloc'd copy of a text column, or NULL. */
char *store_col_dup(sqlite3_stmt *st, int i);

/* A job's state, live lease token and finishing token (malloc'd or NULL;
 * ret_finish may be NULL). -ENOENT when there is no such job. */
int store_lease_of(nvd_store *s, int64_t id, char state[16], char **ret_token, char **ret_finish);
/* Both non-NULL and equal. */
bool store_same(const char *a, const char *b);

#endif
