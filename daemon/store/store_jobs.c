/* Jobs and cases: insert, list, lease transitions, results. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/util/util.h"
#include "store_idempotency.h"
#include "store_internal.h"

#define JOB_COLS_BASE                                                                              \
    "id, state, kind, op, device, build_hash, priority, attempt, max_attempts, cases_total, "      \
    "cases_done, cases_passed, cases_failed, created_at, started_at, finished_at, error, spec, "   \
    "leased_by, "
#define JOB_COLS JOB_COLS_BASE "result"
/* Lists leave out a long-run result's per-step record and curves (up to
 * max_artifact_body each): a page of nightly jobs stays small; GET
 * /api/v1/jobs/{id} has them. */
#define JOB_COLS_LIST JOB_COLS_BASE "json_remove(result, '$.series', '$.curves')"

/* A JOB object (docs/API.md), from the columns of JOB_COLS. */
static const store_col job_cols[] = {
    {"id", 0, STORE_INT},
    {"state", 1, STORE_STR},
    {"kind", 2, STORE_STR},
    {"op", 3, STORE_STR},
    {"device", 4, STORE_STR},
    {"build_id", 5, STORE_STR},
    {"priority", 6, STORE_INT},
    {"attempt", 7, STORE_INT},
    {"max_attempts", 8, STORE_INT},
    {"cases_total", 9, STORE_INT},
    {"cases_done", 10, STORE_INT},
    {"cases_passed", 11, STORE_INT},
    {"cases_failed", 12, STORE_INT},
    {"created_at", 13, STORE_TIME},
    {"started_at", 14, STORE_TIME},
    {"finished_at", 15, STORE_TIME},
    {"error", 16, STORE_STR},
    {"spec", 17, STORE_JSON},
    {"leased_by", 18, STORE_STR},
    {"result", 19, STORE_JSON},
    {NULL, 0, 0},
};

int nvd_store_job_insert(nvd_store *s, const nvd_job_new *j, int64_t now, int64_t *ret_id)
{
    static const char sql[] =
        "INSERT INTO jobs (state, kind, op, device, build_hash, priority, max_attempts, "
        "created_at, spec) VALUES ('queued', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = store_stmt(s, sql);
    if (!st) {
        r = -EIO;
        goto out;
    }
    store_bind_text(st, 1, j->kind);
    store_bind_text(st, 2, j->op);
    store_bind_text(st, 3, j->device);
    store_bind_text(st, 4, j->build_hash);
    sqlite3_bind_int(st, 5, j->priority);
    sqlite3_bind_int(st, 6, j->max_attempts);
    sqlite3_bind_int64(st, 7, now);
    store_bind_text(st, 8, j->spec_json);
    r = store_err(s, sqlite3_step(st), "insert job");
    sqlite3_reset(st);
    if (r == 0)
        *ret_id = sqlite3_last_insert_rowid(s->db);
    const nvd_job_idem *k = j->idem;
    if (r == 0 && k)
        r = nvd_store_idem_put(s, k->principal, k->key, k->body_sha256, *ret_id, now, k->since,
                               k->max_keys);
out:
    return store_write_end(s, r);
}

int nvd_store_job_get(nvd_store *s, int64_t id, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT " JOB_COLS " FROM jobs WHERE id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int r = 0;
    if (rc == SQLITE_ROW) {
        json_t *j = store_row_object(st, job_cols);
        if (!j)
            r = -ENOMEM;
        else
            *ret = j;
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "get job");
    }
    sqlite3_reset(st);
    return r;
}

/* One SQL text per combination of filters, so each plan can use the index of
 * its first filter; built once, the buffers are the statement-cache keys. */
static const char *list_sql(unsigned mask)
{
    static char texts[16][512];
    static const char *const cond[4] = {"state = ?1", "kind = ?2", "device = ?3",
                                        "build_hash = ?4"};
    char *t = texts[mask & 15];
    if (!t[0]) {
        int n = snprintf(t, 512, "SELECT " JOB_COLS_LIST " FROM jobs WHERE id < ?5");
        for (int i = 0; i < 4; i++)
            if (mask & (1u << i))
                n += snprintf(t + n, (size_t)(512 - n), " AND %s", cond[i]);
        snprintf(t + n, (size_t)(512 - n), " ORDER BY id DESC LIMIT ?6");
    }
    return t;
}

int nvd_store_jobs_list(nvd_store *s, const nvd_job_filter *f, json_t **ret, int64_t *ret_next)
{
    const char *vals[4] = {f->state, f->kind, f->device, f->build};
    unsigned mask = 0;
    for (int i = 0; i < 4; i++)
        if (vals[i])
            mask |= 1u << i;
    sqlite3_stmt *st = store_stmt(s, list_sql(mask));
    if (!st)
        return -EIO;
    for (int i = 0; i < 4; i++)
        if (vals[i])
            store_bind_text(st, i + 1, vals[i]);
    sqlite3_bind_int64(st, 5, f->cursor > 0 ? f->cursor : INT64_MAX);
    sqlite3_bind_int(st, 6, f->limit + 1);
    json_t *arr = NULL;
    bool more = false;
    int r = store_rows_page(s, st, "list jobs", store_row_cols, job_cols, f->limit, &arr, &more);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    /* The next page starts below the last job of this one. */
    json_t *last = json_array_get(arr, json_array_size(arr) - 1);
    *ret = arr;
    *ret_next = more ? json_integer_value(json_object_get(last, "id")) : 0;
    return 0;
}

int nvd_store_jobs_count(nvd_store *s, const char *state, int64_t *ret)
{
    sqlite3_stmt *st = store_stmt(s, "SELECT COUNT(*) FROM jobs WHERE state = ?1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, state);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : store_err(s, rc, "count jobs");
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return r < 0 ? r : 0;
}

int nvd_store_jobs_count_states(nvd_store *s, json_t **ret)
{
    static const char *const states[] = {"queued", "leased", "running",  "passed",
                                         "failed", "error",  "cancelled"};
    json_t *o = json_object();
    if (!o)
        return -ENOMEM;
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
        int64_t n = 0;
        int r = nvd_store_jobs_count(s, states[i], &n);
        if (r < 0) {
            json_decref(o);
            return r;
        }
        json_object_set_new(o, states[i], json_integer(n));
    }
    *ret = o;
    return 0;
}

static int claim_locked(nvd_store *s, const char *device, const char *token, int64_t now,
                        int64_t lease_ms, json_t **ret)
{
    /* Without INDEXED BY the planner prefers jobs_state (an equality on state)
     * and sorts every queued row per claim: 17 ms of loop time with 100,000
     * queued (bench/store_bench.c). The partial index jobs_queue walks the
     * queue in claim order and stops at the first row the device may take. */
    sqlite3_stmt *st = store_stmt(s, "SELECT id FROM jobs INDEXED BY jobs_queue "
                                     "WHERE state = 'queued' AND (device IS NULL OR device = ?1) "
                                     "ORDER BY priority DESC, id LIMIT 1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, device);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return store_err(s, rc, "claim");
    st = store_stmt(s, "UPDATE jobs SET state = 'leased', attempt = attempt + 1, "
                       "lease_token = ?2, lease_expires = ?3, leased_by = ?4, started_at = ?5, "
                       "cases_done = 0 WHERE id = ?1 RETURNING attempt, op, spec, build_hash");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    store_bind_text(st, 2, token);
    sqlite3_bind_int64(st, 3, now + lease_ms);
    store_bind_text(st, 4, device);
    sqlite3_bind_int64(st, 5, now);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        int r = store_err(s, rc, "claim update");
        return r < 0 ? r : -EIO;
    }
    json_t *c = json_pack("{s:I, s:I, s:s, s:o, s:o, s:I}", "id", (json_int_t)id, "attempt",
                          (json_int_t)sqlite3_column_int64(st, 0), "lease_token", token, "op",
                          store_col_str(st, 1), "spec", store_col_json(st, 2), "lease_ms",
                          (json_int_t)lease_ms);
    char *build = store_col_dup(st, 3);
    sqlite3_step(st);
    sqlite3_reset(st);
    if (!c) {
        free(build);
        return -ENOMEM;
    }
    /* A registered build's backend goes with the job: the worker loads it,
     * if its allow-list lets it (docs/API.md "POST /api/v1/builds"). */
    char *backend = NULL;
    int r = build ? nvd_store_build_backend(s, build, &backend) : 0;
    free(build);
    if (r == 0 && backend && json_object_set_new(c, "build_backend", json_string(backend)) < 0)
        r = -ENOMEM;
    free(backend);
    if (r < 0) {
        json_decref(c);
        return r;
    }
    *ret = c;
    return 0;
}

int nvd_store_job_claim(nvd_store *s, const char *device, const char *token, int64_t now,
                        int64_t lease_ms, json_t **ret)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    json_t *c = NULL;
    r = claim_locked(s, device, token, now, lease_ms, &c);
    r = store_write_end(s, r);
    if (r < 0) {
        json_decref(c);
        return r;
    }
    *ret = c;
    return 0;
}

int store_lease_of(nvd_store *s, int64_t id, char state[16], char **ret_token, char **ret_finish)
{
    sqlite3_stmt *st =
        store_stmt(s, "SELECT state, lease_token, finish_token FROM jobs WHERE id = ?1");
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "lease");
    }
    snprintf(state, 16, "%s", (const char *)sqlite3_column_text(st, 0));
    *ret_token = store_col_dup(st, 1);
    if (ret_finish)
        *ret_finish = store_col_dup(st, 2);
    sqlite3_reset(st);
    return 0;
}

bool store_same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

int nvd_store_lease_held(nvd_store *s, int64_t id, const char *token)
{
    char state[16];
    char *live = NULL, *fin = NULL;
    int r = store_lease_of(s, id, state, &live, &fin);
    if (r < 0)
        return r;
    bool live_lease =
        store_same(live, token) && (!strcmp(state, "leased") || !strcmp(state, "running"));
    r = live_lease || store_same(fin, token) || !strcmp(state, "cancelled");
    free(live);
    free(fin);
    return r;
}

int nvd_store_job_heartbeat(nvd_store *s, int64_t id, const char *token, int64_t done,
                            int64_t total, int64_t now, int64_t lease_ms, bool *ret_cancel)
{
    char state[16];
    char *live = NULL;
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    r = store_lease_of(s, id, state, &live, NULL);
    if (r < 0)
        goto out;
    if (!store_same(live, token)) {
        r = -ESTALE;
        goto out;
    }
    if (strcmp(state, "cancelled") == 0) {
        *ret_cancel = true;
        goto out;
    }
    if (strcmp(state, "leased") != 0 && strcmp(state, "running") != 0) {
        r = -ESTALE;
        goto out;
    }
    sqlite3_stmt *st = store_stmt(s, "UPDATE jobs SET state = 'running', cases_done = ?2, "
                                     "cases_total = ?3, lease_expires = ?4 WHERE id = ?1");
    if (!st) {
        r = -EIO;
        goto out;
    }
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, done);
    sqlite3_bind_int64(st, 3, total);
    sqlite3_bind_int64(st, 4, now + lease_ms);
    r = store_err(s, sqlite3_step(st), "heartbeat");
    sqlite3_reset(st);
    *ret_cancel = false;
out:
    free(live);
    return store_write_end(s, r);
}
