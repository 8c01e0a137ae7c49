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

/* ---- rows into JSON ----
 * Every listing steps its statement through store_each_row; a row becomes a
 * JSON object through a column table (store_row_object), or through a row
 * function of its own when it has computed keys. */

/* How a column becomes a JSON value. */
typedef enum store_col_type {
    STORE_INT,      /* integer (json_integer of the column; NULL reads as 0) */
    STORE_INT_NULL, /* integer, or null (store_col_int) */
    STORE_REAL,     /* real, or null (store_col_real) */
    STORE_BOOL,     /* false for 0, else true */
    STORE_STR,      /* text, or null (store_col_str) */
    STORE_JSON,     /* text parsed as JSON (store_col_json) */
    STORE_TIME,     /* ms as an RFC 3339 string, or null (store_col_time) */
} store_col_type;

/* One key of a row object: key is column col read as type. A table is an
 * array ending with a NULL key; keys go into the object in table order. */
typedef struct store_col {
    const char *key;
    int col;
    store_col_type type;
} store_col;

/* Column i of the current row as type: a new reference, NULL on ENOMEM. */
json_t *store_col_value(sqlite3_stmt *st, int i, store_col_type type);
/* Set every key of cols on o (replacing a key o already has, in place).
 * 0, or -ENOMEM (o then holds the keys set so far). */
int store_row_set(json_t *o, sqlite3_stmt *st, const store_col *cols);
/* A new object of the keys of cols from the current row; NULL on ENOMEM. */
json_t *store_row_object(sqlite3_stmt *st, const store_col *cols);

/* Called by store_each_row for each row: 0 goes on, STORE_STOP ends the walk
 * (store_each_row returns 0), a negative errno ends it with that error. */
#define STORE_STOP 1
typedef int (*store_row_fn)(sqlite3_stmt *st, void *ud);
/* Step st until SQLITE_DONE, calling fn(st, ud) on each row. Returns 0, fn's
 * error, or the SQLite error through store_err (what names the statement in
 * the log). The caller resets (cached) or finalizes (prepared) st. */
int store_each_row(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_fn fn, void *ud);

/* The JSON value of the current row (a new reference; NULL on ENOMEM). arg is
 * the listing's own (a column table for store_row_cols). */
typedef json_t *(*store_row_json_fn)(nvd_store *s, sqlite3_stmt *st, const void *arg);
/* store_row_json_fn of a column table: store_row_object(st, arg). */
json_t *store_row_cols(nvd_store *s, sqlite3_stmt *st, const void *arg);
/* Every row of st as row(s, st, arg), in a new array in *ret (written only on
 * success). Errors as store_each_row; -ENOMEM. */
int store_rows_json(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_json_fn row,
                    const void *arg, json_t **ret);
/* A page: at most limit rows, as store_rows_json; *ret_more tells whether
 * another row followed (the statement should ask for limit + 1). */
int store_rows_page(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_json_fn row,
                    const void *arg, int limit, json_t **ret, bool *ret_more);

/* A job's state, live lease token and finishing token (malloc'd or NULL;
 * ret_finish may be NULL). -ENOENT when there is no such job. */
int store_lease_of(nvd_store *s, int64_t id, char state[16], char **ret_token, char **ret_finish);
/* Both non-NULL and equal. */
bool store_same(const char *a, const char *b);

#endif
