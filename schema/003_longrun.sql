-- numval store, version 3: long-run qualification (issue 7, docs/API.md "AMP
-- policies" and "Schedules"). AMP policies are versioned, never edited in
-- place: each change is a new version with its author and reason. Schedule
-- slots are recorded once (UNIQUE (schedule, slot)), so a restarted numvald
-- never runs the same slot twice.

CREATE TABLE amp_policies (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    policy_json TEXT NOT NULL,   -- {"low_precision": [...], "fp32": [...], "promote": [...]}
    author      TEXT NOT NULL,
    reason      TEXT NOT NULL CHECK (length(reason) > 0),
    created_at  INTEGER NOT NULL,
    UNIQUE (name, version)
) STRICT;
CREATE TRIGGER amp_policies_keep BEFORE UPDATE ON amp_policies
BEGIN SELECT RAISE(ABORT, 'AMP policies are versioned: add a new version with a reason'); END;

CREATE TABLE schedule_runs (
    id         INTEGER PRIMARY KEY,
    schedule   TEXT NOT NULL,
    slot       INTEGER NOT NULL,   -- the cron fire time (Unix seconds, UTC)
    started_at INTEGER NOT NULL,   -- ms
    suite      TEXT NOT NULL,
    device     TEXT,
    job_ids    TEXT NOT NULL DEFAULT '[]',
    error      TEXT,
    UNIQUE (schedule, slot)
) STRICT;
CREATE INDEX schedule_runs_last ON schedule_runs(schedule, slot DESC);
