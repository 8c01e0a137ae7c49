/* AMP policies and schedule slots in SQLite (store_longrun.h). Rare statements:
 * prepared per call. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"
#include "store_longrun.h"

static sqlite3_stmt *prep(nvd_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) {
        store_err(s, rc, "prepare longrun statement");
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

int nvd_store_amp_add(nvd_store *s, const char *name, const json_t *policy, const char *author,
                      const char *reason, int64_t now, int64_t *ret_version)
{
    char *text = json_dumps(policy, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return -ENOMEM;
    int r = store_write_begin(s);
    if (r < 0) {
        free(text);
        return r;
    }
    sqlite3_stmt *st = prep(s, "INSERT INTO amp_policies (name, version, policy_json, author, "
                               "reason, created_at) SELECT ?1, COALESCE(MAX(version), 0) + 1, "
                               "?2, ?3, ?4, ?5 FROM amp_policies WHERE name = ?1 "
                               "RETURNING version");
    if (!st)
        r = -EIO;
    else {
        store_bind_text(st, 1, name);
        store_bind_text(st, 2, text);
        store_bind_text(st, 3, author);
        store_bind_text(st, 4, reason);
        sqlite3_bind_int64(st, 5, now);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *ret_version = sqlite3_column_int64(st, 0);
        else
            r = store_err(s, rc, "add AMP policy");
        sqlite3_finalize(st);
    }
    free(text);
    return store_write_end(s, r);
}

static const store_col amp_cols[] = {
    {"name", 0, STORE_STR},
    {"version", 1, STORE_INT_NULL},
    {"policy", 2, STORE_JSON},
    {"author", 3, STORE_STR},
    {"reason", 4, STORE_STR},
    {"created_at", 5, STORE_TIME},
    {NULL, 0, 0},
};

int nvd_store_amp_list(nvd_store *s, const char *name, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT name, version, policy_json, author, reason, created_at "
                               "FROM amp_policies WHERE ?1 IS NULL OR name = ?1 "
                               "ORDER BY name, version DESC");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, name);
    int r = store_rows_json(s, st, "list AMP policies", store_row_cols, amp_cols, ret);
    sqlite3_finalize(st);
    return r;
}

int nvd_store_amp_get(nvd_store *s, const char *name, int64_t version, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT name, version, policy_json, author, reason, created_at "
                               "FROM amp_policies WHERE name = ?1 AND (?2 = 0 OR version = ?2) "
                               "ORDER BY version DESC LIMIT 1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, name);
    sqlite3_bind_int64(st, 2, version);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "AMP policy");
    json_t *o = r == 0 ? store_row_object(st, amp_cols) : NULL;
    if (r == 0 && !o)
        r = -ENOMEM;
    else if (r == 0)
        *ret = o;
    sqlite3_finalize(st);
    return r;
}

int nvd_store_slot_claim(nvd_store *s, const char *schedule, int64_t slot, const char *suite,
                         const char *device, int64_t now, bool *ret_new)
{
    int r = store_write_begin(s);
    if (r < 0)
        return r;
    sqlite3_stmt *st = prep(s, "INSERT OR IGNORE INTO schedule_runs (schedule, slot, started_at, "
                               "suite, device) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st)
        return store_write_end(s, -EIO);
    store_bind_text(st, 1, schedule);
    sqlite3_bind_int64(st, 2, slot);
    sqlite3_bind_int64(st, 3, now);
    store_bind_text(st, 4, suite);
    store_bind_text(st, 5, device);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_write_end(s, store_err(s, rc, "claim schedule slot"));
    *ret_new = sqlite3_changes(s->db) == 1;
    return store_write_end(s, 0);
}

int nvd_store_slot_done(nvd_store *s, const char *schedule, int64_t slot, const json_t *job_ids,
                        const char *error)
{
    char *ids = json_dumps(job_ids, JSON_COMPACT);
    if (!ids)
        return -ENOMEM;
    int r = store_write_begin(s);
    if (r < 0) {
        free(ids);
        return r;
    }
    sqlite3_stmt *st = prep(s, "UPDATE schedule_runs SET job_ids = ?3, error = ?4 "
                               "WHERE schedule = ?1 AND slot = ?2");
    if (!st)
        r = -EIO;
    else {
        store_bind_text(st, 1, schedule);
        sqlite3_bind_int64(st, 2, slot);
        store_bind_text(st, 3, ids);
        store_bind_text(st, 4, error);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            r = store_err(s, rc, "record schedule run");
    }
    free(ids);
    return store_write_end(s, r);
}

static const store_col slot_cols[] = {
    {"slot", 0, STORE_INT},
    {"started_at", 1, STORE_TIME},
    {"job_ids", 2, STORE_JSON},
    {"error", 3, STORE_STR},
    {NULL, 0, 0},
};

int nvd_store_slot_last(nvd_store *s, const char *schedule, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT slot, started_at, job_ids, error FROM schedule_runs "
                               "WHERE schedule = ?1 ORDER BY slot DESC LIMIT 1");
    if (!st)
        return -EIO;
    store_bind_text(st, 1, schedule);
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : store_err(s, rc, "last slot");
    json_t *o = r == 0 ? store_row_object(st, slot_cols) : NULL;
    if (r == 0 && !o)
        r = -ENOMEM;
    else if (r == 0)
        *ret = o;
    sqlite3_finalize(st);
    return r;
}

static const store_col watch_cols[] = {
    {"schedule", 0, STORE_STR},
    {"slot", 1, STORE_INT},
    {"device", 2, STORE_STR},
    {"job_ids", 3, STORE_JSON},
    {NULL, 0, 0},
};

int nvd_store_slots_with_jobs(nvd_store *s, int limit, json_t **ret)
{
    sqlite3_stmt *st = prep(s, "SELECT schedule, slot, device, job_ids FROM (SELECT * FROM "
                               "schedule_runs WHERE error IS NULL AND job_ids != '[]' "
                               "ORDER BY slot DESC, id DESC LIMIT ?1) ORDER BY slot, id");
    if (!st)
        return -EIO;
    sqlite3_bind_int(st, 1, limit);
    json_t *out = json_array();
    int rc, r = out ? 0 : -ENOMEM;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = store_row_object(st, watch_cols);
        r = o ? json_array_append_new(out, o) ? -ENOMEM : 0 : -ENOMEM;
    }
    if (r == 0 && rc != SQLITE_DONE)
        r = store_err(s, rc, "schedule slots");
    sqlite3_finalize(st);
    if (r == 0)
        *ret = out;
    else
        json_decref(out);
    return r;
}
