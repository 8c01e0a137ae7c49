/* SQLite connection, migrations, statement cache and write transactions. */
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/util/util.h"

static int set_err(char **ret_err, const char *fmt, const char *a, const char *b)
{
    if (ret_err) {
        char buf[1024];
        snprintf(buf, sizeof(buf), fmt, a, b ? b : "");
        *ret_err = strdup(buf);
    }
    return 0;
}

/* Damage seen by any connection of the process (the loop's or the pool's):
 * from then on the store refuses writes and /healthz says so. */
static atomic_bool g_damaged;
static pthread_mutex_t g_damage_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_damage[512];

static void mark_damaged(const char *what, const char *msg)
{
    pthread_mutex_lock(&g_damage_lock);
    if (!atomic_load(&g_damaged))
        snprintf(g_damage, sizeof(g_damage), "%s: %s", what, msg);
    atomic_store(&g_damaged, true);
    pthread_mutex_unlock(&g_damage_lock);
}

bool nvd_store_damaged(char *msg, size_t len)
{
    if (!atomic_load(&g_damaged))
        return false;
    if (msg && len) {
        pthread_mutex_lock(&g_damage_lock);
        snprintf(msg, len, "%s", g_damage);
        pthread_mutex_unlock(&g_damage_lock);
    }
    return true;
}

int store_err(nvd_store *s, int rc, const char *what)
{
    switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: {
        const char *m = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
        nv_log_err("store: %s: the database is damaged: %s", what, m);
        mark_damaged(what, m);
        return -EUCLEAN;
    }
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        nv_log_warn("store: %s: database busy", what);
        return -EBUSY;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_CONSTRAINT:
        return -EEXIST;
    case SQLITE_FULL:
        nv_log_err("store: %s: disk full", what);
        return -ENOSPC;
    default:
        nv_log_err("store: %s: %s", what, s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return -EIO;
    }
}

sqlite3_stmt *store_stmt(nvd_store *s, const char *sql)
{
    for (int i = 0; i < s->n_stmts; i++) {
        if (s->stmts[i].sql == sql) {
            sqlite3_stmt *st = s->stmts[i].stmt;
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            return st;
        }
    }
    if (s->n_stmts >= STORE_MAX_STMTS) {
        nv_log_err("store: statement cache full (%d)", STORE_MAX_STMTS);
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK) {
        store_err(s, rc, "prepare");
        nv_log_err("store: failed to prepare '%s'", sql);
        return NULL;
    }
    s->stmts[s->n_stmts].sql = sql;
    s->stmts[s->n_stmts].stmt = st;
    s->n_stmts++;
    return st;
}

static int exec(nvd_store *s, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        nv_log_err("store: '%s': %s", sql, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        int r = store_err(NULL, rc, sql);
        return r ? r : -EIO;
    }
    return 0;
}

static int write_begin(nvd_store *s)
{
    if (s->write_depth > 0)
        return exec(s, "SAVEPOINT w");
    if (s->opts.group_commit) {
        if (!s->group_open) {
            int r = exec(s, "BEGIN IMMEDIATE");
            if (r < 0)
                return r;
            s->group_open = true;
        }
        return exec(s, "SAVEPOINT w");
    }
    return exec(s, "BEGIN IMMEDIATE");
}

int store_write_begin(nvd_store *s)
{
    /* Writing over damage can spread it: the damaged store is read-only. */
    if (atomic_load(&g_damaged))
        return -EUCLEAN;
    int r = write_begin(s);
    if (r == 0)
        s->write_depth++;
    return r;
}

int store_write_end(nvd_store *s, int r)
{
    if (--s->write_depth > 0 || s->opts.group_commit) {
        if (r < 0) {
            exec(s, "ROLLBACK TO w");
            exec(s, "RELEASE w");
            return r;
        }
        int r2 = exec(s, "RELEASE w");
        return r2 < 0 ? r2 : r;
    }
    if (r < 0) {
        exec(s, "ROLLBACK");
        return r;
    }
    int r2 = exec(s, "COMMIT");
    if (r2 < 0)
        exec(s, "ROLLBACK");
    return r2 < 0 ? r2 : r;
}

bool nvd_store_pending(const nvd_store *s)
{
    return s && s->group_open;
}

int nvd_store_commit(nvd_store *s)
{
    if (!s->group_open)
        return 0;
    s->group_open = false;
    int r = exec(s, "COMMIT");
    if (r < 0)
        exec(s, "ROLLBACK");
    return r;
}

int store_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

json_t *store_col_json(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    if (!t)
        return json_null();
    json_t *v = json_loads(t, JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

json_t *store_col_str(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? json_string(t) : json_null();
}

json_t *store_col_int(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return json_integer(sqlite3_column_int64(st, i));
}

json_t *store_col_real(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return json_real(sqlite3_column_double(st, i));
}

json_t *store_col_time(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return nvd_time_json(sqlite3_column_int64(st, i));
}

char *store_col_dup(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? strdup(t) : NULL;
}

json_t *store_col_value(sqlite3_stmt *st, int i, store_col_type type)
{
    switch (type) {
    case STORE_INT:
        return json_integer(sqlite3_column_int64(st, i));
    case STORE_INT_NULL:
        return store_col_int(st, i);
    case STORE_REAL:
        return store_col_real(st, i);
    case STORE_BOOL:
        return json_boolean(sqlite3_column_int(st, i) != 0);
    case STORE_STR:
        return store_col_str(st, i);
    case STORE_JSON:
        return store_col_json(st, i);
    case STORE_TIME:
        return store_col_time(st, i);
    }
    return NULL;
}

int store_row_set(json_t *o, sqlite3_stmt *st, const store_col *cols)
{
    for (const store_col *c = cols; c->key; c++)
        if (json_object_set_new(o, c->key, store_col_value(st, c->col, c->type)) < 0)
            return -ENOMEM;
    return 0;
}

json_t *store_row_object(sqlite3_stmt *st, const store_col *cols)
{
    json_t *o = json_object();
    if (o && store_row_set(o, st, cols) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int store_each_row(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_fn fn, void *ud)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(st, ud);
        if (r < 0)
            return r;
        if (r == STORE_STOP)
            return 0;
    }
    return rc == SQLITE_DONE ? 0 : store_err(s, rc, what);
}

json_t *store_row_cols(nvd_store *s, sqlite3_stmt *st, const void *arg)
{
    (void)s;
    return store_row_object(st, arg);
}

typedef struct rows_ctx {
    nvd_store *s;
    store_row_json_fn row;
    const void *arg;
    json_t *arr;
    int limit; /* < 0: all rows */
    bool more;
} rows_ctx;

static int append_row(sqlite3_stmt *st, void *ud)
{
    rows_ctx *x = ud;
    if (x->limit >= 0 && json_array_size(x->arr) == (size_t)x->limit) {
        x->more = true;
        return STORE_STOP;
    }
    json_t *v = x->row(x->s, st, x->arg);
    return v && json_array_append_new(x->arr, v) == 0 ? 0 : -ENOMEM;
}

static int rows(rows_ctx *x, sqlite3_stmt *st, const char *what, json_t **ret)
{
    x->arr = json_array();
    if (!x->arr)
        return -ENOMEM;
    int r = store_each_row(x->s, st, what, append_row, x);
    if (r < 0) {
        json_decref(x->arr);
        return r;
    }
    *ret = x->arr;
    return 0;
}

int store_rows_json(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_json_fn row,
                    const void *arg, json_t **ret)
{
    rows_ctx x = {.s = s, .row = row, .arg = arg, .limit = -1};
    return rows(&x, st, what, ret);
}

int store_rows_page(nvd_store *s, sqlite3_stmt *st, const char *what, store_row_json_fn row,
                    const void *arg, int limit, json_t **ret, bool *ret_more)
{
    rows_ctx x = {.s = s, .row = row, .arg = arg, .limit = limit < 0 ? 0 : limit};
    int r = rows(&x, st, what, ret);
    if (r == 0)
        *ret_more = x.more;
    return r;
}

int nvd_store_latest_version(void)
{
    return nvd_n_migrations;
}

int nvd_store_user_version(nvd_store *s)
{
    sqlite3_stmt *st = store_stmt(s, "PRAGMA user_version");
    if (!st)
        return -EIO;
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -EIO;
    sqlite3_reset(st);
    return v;
}

static int migrate(nvd_store *s, char **ret_err)
{
    int cur = nvd_store_user_version(s);
    if (cur < 0)
        return set_err(ret_err, "cannot read the schema version: %s%s", sqlite3_errmsg(s->db),
                       NULL),
               -EIO;
    if (cur > nvd_n_migrations) {
        char a[64], b[32];
        snprintf(a, sizeof(a), "%d", cur);
        snprintf(b, sizeof(b), "%d", nvd_n_migrations);
        set_err(ret_err,
                "database schema version %s is newer than this numvald (knows up to %s); "
                "run a newer numvald or restore a backup",
                a, b);
        return -EPROTO;
    }
    for (int i = cur; i < nvd_n_migrations; i++) {
        const nvd_migration *m = &nvd_migrations[i];
        int r = exec(s, "BEGIN IMMEDIATE");
        if (r < 0)
            return set_err(ret_err, "cannot start migration '%s'%s", m->name, NULL), r;
        char *msg = NULL;
        int rc = sqlite3_exec(s->db, m->sql, NULL, NULL, &msg);
        if (rc == SQLITE_OK) {
            char pragma[64];
            snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", m->version);
            rc = sqlite3_exec(s->db, pragma, NULL, NULL, &msg);
        }
        if (rc != SQLITE_OK) {
            set_err(ret_err, "migration '%s' failed: %s", m->name, msg ? msg : sqlite3_errstr(rc));
            sqlite3_free(msg);
            exec(s, "ROLLBACK");
            return -EIO;
        }
        r = exec(s, "COMMIT");
        if (r < 0)
            return set_err(ret_err, "cannot commit migration '%s'%s", m->name, NULL), r;
        nv_log_info("store: applied migration %s", m->name);
    }
    return 0;
}

static int configure(nvd_store *s, char **ret_err)
{
    sqlite3_busy_timeout(s->db, 5000);
    sqlite3_extended_result_codes(s->db, 1);
    const char *pragmas[] = {"PRAGMA journal_mode = WAL", "PRAGMA foreign_keys = ON",
                             s->opts.sync_full ? "PRAGMA synchronous = FULL"
                                               : "PRAGMA synchronous = NORMAL",
                             "PRAGMA temp_store = MEMORY", "PRAGMA cache_size = -32768"};
    for (size_t i = 0; i < sizeof(pragmas) / sizeof(pragmas[0]); i++) {
        if (s->opts.read_only && i == 0)
            continue;
        if (exec(s, pragmas[i]) < 0) {
            set_err(ret_err, "'%s' failed: %s", pragmas[i], sqlite3_errmsg(s->db));
            return -EIO;
        }
    }
    return 0;
}

int nvd_store_check(nvd_store *s, bool full, char **ret_report)
{
    sqlite3_stmt *st = NULL;
    const char *sql = full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)";
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    size_t cap = 4096, len = 0;
    char *rep = malloc(cap);
    if (!rep) {
        sqlite3_finalize(st);
        return -ENOMEM;
    }
    rep[0] = '\0';
    bool ok = rc == SQLITE_OK;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(st, 0);
        if (line && strcmp(line, "ok"))
            len += (size_t)snprintf(rep + len, cap - len, "%s%s", len ? "; " : "", line);
        if (len >= cap - 1)
            break;
    }
    for (char *c = rep; *c; c++)
        if (*c == '\n') /* one log line */
            *c = ' ';
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && !len)
        snprintf(rep, cap, "%s", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    if (!rep[0]) {
        free(rep);
        *ret_report = NULL;
        return 0;
    }
    mark_damaged(full ? "integrity_check" : "quick_check", rep);
    *ret_report = rep;
    return -EUCLEAN;
}

/* A database once created leaves PATH.created beside it: an empty or missing
 * file under an existing marker is a lost database, not a new one. */
static int guard_empty(const char *path, char **ret_err)
{
    char marker[4096];
    snprintf(marker, sizeof(marker), "%s.created", path);
    struct stat st, ms;
    if (stat(marker, &ms) < 0)
        return 0;
    if (stat(path, &st) == 0 && st.st_size > 0)
        return 0;
    if (ret_err &&
        asprintf(ret_err,
                 "database '%s' is %s, but '%s' says a database was created there: numvald will "
                 "not start on an empty one (that would lose every job unnoticed); restore the "
                 "database from a backup, or remove '%s' to start afresh",
                 path, stat(path, &st) == 0 ? "empty (0 bytes)" : "missing", marker, marker) < 0)
        *ret_err = NULL;
    return -EUCLEAN;
}

static void write_marker(const char *path)
{
    char marker[4096];
    snprintf(marker, sizeof(marker), "%s.created", path);
    int fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        if (errno != EEXIST)
            nv_log_warn("store: cannot write '%s': %s", marker, strerror(errno));
        return;
    }
    static const char text[] = "numvald created the database beside this file; while this file "
                               "exists an empty or missing database is refused\n";
    if (write(fd, text, sizeof(text) - 1) < 0 || fsync(fd) < 0)
        nv_log_warn("store: cannot write '%s': %s", marker, strerror(errno));
    close(fd);
}

int nvd_store_open(const char *path, const nvd_store_opts *o, nvd_store **ret, char **ret_err)
{
    nvd_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    if (o)
        s->opts = *o;
    int flags =
        s->opts.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int r;
    if (s->opts.guard && (r = guard_empty(path, ret_err)) < 0)
        goto fail;
    int rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        set_err(ret_err, "cannot open database '%s': %s", path,
                s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        r = -EIO;
        goto fail;
    }
    r = configure(s, ret_err);
    if (r < 0)
        goto fail;
    if (s->opts.guard && !s->opts.skip_check && nvd_store_user_version(s) > 0) {
        char *rep = NULL;
        r = nvd_store_check(s, false, &rep);
        if (r < 0) {
            if (ret_err && asprintf(ret_err,
                                    "database '%s' is damaged (PRAGMA quick_check: %s); numvald "
                                    "will not start on it: restore a backup (see 'numvald "
                                    "check-db' and docs/RELIABILITY.md)",
                                    path, rep ? rep : strerror(-r)) < 0)
                *ret_err = NULL;
            free(rep);
            goto fail;
        }
    }
    if (!s->opts.read_only) {
        r = migrate(s, ret_err);
        if (r < 0)
            goto fail;
        if (s->opts.guard)
            write_marker(path);
    } else if (nvd_store_user_version(s) > nvd_n_migrations) {
        set_err(ret_err, "database '%s' is newer than this numvald%s", path, NULL);
        r = -EPROTO;
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    nvd_store_free(s);
    return r;
}

void nvd_store_free(nvd_store *s)
{
    if (!s)
        return;
    if (s->db && s->group_open)
        nvd_store_commit(s);
    for (int i = 0; i < s->n_stmts; i++)
        sqlite3_finalize(s->stmts[i].stmt);
    if (s->db)
        sqlite3_close(s->db);
    free(s);
}

struct nvd_store_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int n, n_free;
    nvd_store **all, **free;
};

int nvd_store_pool_new(const char *path, int n, nvd_store_pool **ret, char **ret_err)
{
    nvd_store_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->all = calloc((size_t)n, sizeof(*p->all));
    p->free = calloc((size_t)n, sizeof(*p->free));
    if (!p->all || !p->free) {
        nvd_store_pool_free(p);
        return -ENOMEM;
    }
    nvd_store_opts o = {.read_only = true};
    for (int i = 0; i < n; i++) {
        int r = nvd_store_open(path, &o, &p->all[i], ret_err);
        if (r < 0) {
            nvd_store_pool_free(p);
            return r;
        }
        p->n++;
        p->free[p->n_free++] = p->all[i];
    }
    *ret = p;
    return 0;
}

nvd_store *nvd_store_pool_acquire(nvd_store_pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->n_free == 0)
        pthread_cond_wait(&p->freed, &p->lock);
    nvd_store *s = p->free[--p->n_free];
    pthread_mutex_unlock(&p->lock);
    return s;
}

void nvd_store_pool_release(nvd_store_pool *p, nvd_store *s)
{
    pthread_mutex_lock(&p->lock);
    p->free[p->n_free++] = s;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

void nvd_store_pool_free(nvd_store_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        nvd_store_free(p->all[i]);
    free(p->all);
    free(p->free);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p);
}
