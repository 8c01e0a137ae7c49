-- numval store, version 1. Applied by numvald at start (daemon/store/store.c) in one
-- transaction and recorded in PRAGMA user_version. Never edit a released
-- migration: add schema/NNN_*.sql instead.
--
-- Times are INTEGER milliseconds since the Unix epoch (UTC); JSON is TEXT.
--
-- Index design (docs/API.md "Pagination and indexes"): every list is keyset
-- paginated on the integer primary key, newest first for jobs and by case
-- index for cases, so a page is one index range scan of `limit` rows however
-- large the table grows (1,000,000 cases: the plan never touches rows outside
-- the page). Each filter has an index whose last column is the sort key, so
-- "WHERE filter = ? AND id < ? ORDER BY id DESC LIMIT n" is a seek + n steps.

CREATE TABLE builds (
    hash        TEXT PRIMARY KEY,          -- sha256 hex of identity
    identity    TEXT NOT NULL,             -- canonical JSON (common/buildid.h)
    name        TEXT,
    version     TEXT,
    commit_id   TEXT,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE devices (
    name              TEXT PRIMARY KEY,
    backend           TEXT NOT NULL DEFAULT '',
    slots             INTEGER NOT NULL DEFAULT 0,
    local             INTEGER NOT NULL DEFAULT 0,   -- declared in numvald's config
    contract          TEXT,                         -- dtype contract JSON (from describe)
    describe          TEXT,                         -- full describe JSON
    mode              TEXT,                         -- numerical mode JSON
    state             TEXT NOT NULL DEFAULT 'unknown'
                      CHECK (state IN ('unknown','starting','online','backoff','quarantined','offline')),
    quarantine_reason TEXT,
    last_crash        TEXT,
    restarts          INTEGER NOT NULL DEFAULT 0,
    last_seen         INTEGER,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE jobs (
    id             INTEGER PRIMARY KEY,
    state          TEXT NOT NULL CHECK (state IN
                   ('queued','leased','running','passed','failed','error','cancelled')),
    kind           TEXT NOT NULL,
    op             TEXT,
    device         TEXT,                 -- NULL: any device may claim it
    build_hash     TEXT REFERENCES builds(hash),
    priority       INTEGER NOT NULL DEFAULT 0,
    attempt        INTEGER NOT NULL DEFAULT 0,
    max_attempts   INTEGER NOT NULL,
    lease_token    TEXT,
    lease_expires  INTEGER,
    leased_by      TEXT,                 -- device name of the current/last lease
    finish_token   TEXT,                 -- lease token whose result finished the job
    cases_total    INTEGER NOT NULL DEFAULT 0,
    cases_done     INTEGER NOT NULL DEFAULT 0,
    cases_passed   INTEGER NOT NULL DEFAULT 0,
    cases_failed   INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    finished_at    INTEGER,
    error          TEXT,
    spec           TEXT NOT NULL,
    result         TEXT                  -- result JSON without its cases
) STRICT;
-- List filters (each ends in id so the keyset ORDER BY id DESC is index order).
CREATE INDEX jobs_state ON jobs(state, id);
CREATE INDEX jobs_kind ON jobs(kind, id);
CREATE INDEX jobs_device ON jobs(device, id);
CREATE INDEX jobs_build ON jobs(build_hash, id);
-- Claim order: highest priority first, then FIFO; only queued rows are indexed.
CREATE INDEX jobs_queue ON jobs(priority DESC, id) WHERE state = 'queued';
-- Lease expiry scan touches only live leases.
CREATE INDEX jobs_leases ON jobs(lease_expires) WHERE state IN ('leased','running');

CREATE TABLE cases (
    id                INTEGER PRIMARY KEY,
    job_id            INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    idx               INTEGER NOT NULL,
    verdict           TEXT NOT NULL CHECK (verdict IN ('passed','failed','error')),
    op                TEXT,
    dtype             TEXT,
    input             TEXT,
    layout            TEXT,
    shape             TEXT,                 -- JSON array
    max_ulp           REAL,
    max_abs           REAL,
    max_rel           REAL,
    mismatches        INTEGER,
    failure_class     TEXT,
    tolerance_version INTEGER,
    attempt           INTEGER NOT NULL,
    data              TEXT NOT NULL,        -- the full case JSON as uploaded
    UNIQUE (job_id, idx)                    -- idempotent uploads; pages by idx
) STRICT;
-- "cases of job J with verdict V" pages by idx without visiting other verdicts.
CREATE INDEX cases_job_verdict ON cases(job_id, verdict, idx);

CREATE TABLE tolerances (
    id           INTEGER PRIMARY KEY,
    op           TEXT NOT NULL,
    dtype        TEXT NOT NULL,
    mode         TEXT NOT NULL DEFAULT '*',  -- pattern: '*' or 'key=value,...'
    version      INTEGER NOT NULL,           -- per (op, dtype), 1, 2, 3 ...
    metric       TEXT NOT NULL,              -- tolerance JSON (metric, bounds)
    reason_code  TEXT NOT NULL CHECK (reason_code IN ('dtype_precision','reduction_length',
                 'approximation_error','stochastic','accepted_fast_algorithm')),
    reason       TEXT NOT NULL CHECK (length(reason) > 0),
    author       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    UNIQUE (op, dtype, version)
) STRICT;
-- Rows are never updated: a change is a new row with the next version.
CREATE TRIGGER tolerances_immutable BEFORE UPDATE ON tolerances
BEGIN SELECT RAISE(ABORT, 'tolerances are versioned, never updated in place'); END;

CREATE TABLE artifacts (
    sha256      TEXT PRIMARY KEY,      -- of the zstd bytes as stored
    blob        BLOB NOT NULL,         -- zstd frame
    size        INTEGER NOT NULL,      -- compressed bytes
    raw_size    INTEGER NOT NULL,      -- decompressed bytes
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,  -- sha256 hex of the token
    scopes      TEXT NOT NULL,         -- comma list of read,submit,worker,admin
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
CREATE UNIQUE INDEX tokens_live_name ON tokens(name) WHERE revoked_at IS NULL;
