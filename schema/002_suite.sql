-- numval store, version 2: the permanent suite of promoted reproducers (issue 6,
-- docs/API.md "Suite"). Suite cases are never deleted (a trigger refuses it):
-- retiring one needs a reason and leaves a row in suite_audit.

CREATE TABLE suite_cases (
    id              INTEGER PRIMARY KEY,
    signature       TEXT NOT NULL UNIQUE,      -- sha256 hex of the failure signature
    signature_json  TEXT NOT NULL,             -- {kind, op, attrs, dtype, out_dtype, mode, failure_class}
    op              TEXT,
    dtype           TEXT,
    failure_class   TEXT,
    artifact        TEXT NOT NULL,             -- the minimized reproducer (artifacts.sha256)
    origin_artifact TEXT,                      -- the failing case's own artifact
    origin_job      INTEGER NOT NULL,          -- job whose failure was promoted
    origin_case     INTEGER NOT NULL,          -- its case index
    origin_build    TEXT,                      -- builds.hash of that job (NULL: none given)
    device          TEXT,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active','retired')),
    occurrences     INTEGER NOT NULL DEFAULT 1,
    created_at      INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    retired_at      INTEGER,
    retire_reason   TEXT
) STRICT;
CREATE INDEX suite_cases_state ON suite_cases(state, id);
CREATE TRIGGER suite_cases_keep BEFORE DELETE ON suite_cases
BEGIN SELECT RAISE(ABORT, 'suite cases are never deleted: retire them with a reason'); END;

-- Every failure that minimized to a known (or new) signature.
CREATE TABLE suite_occurrences (
    id          INTEGER PRIMARY KEY,
    suite_id    INTEGER NOT NULL REFERENCES suite_cases(id),
    job_id      INTEGER NOT NULL,
    case_idx    INTEGER NOT NULL,
    build_hash  TEXT,
    artifact    TEXT,
    created_at  INTEGER NOT NULL,
    UNIQUE (job_id, case_idx)                  -- a retried upload records nothing twice
) STRICT;
CREATE INDEX suite_occurrences_case ON suite_occurrences(suite_id, id);

-- Replays of suite cases by "suite" jobs: the history per case and build.
CREATE TABLE suite_runs (
    id          INTEGER PRIMARY KEY,
    suite_id    INTEGER NOT NULL REFERENCES suite_cases(id),
    job_id      INTEGER NOT NULL,
    build_hash  TEXT,
    device      TEXT,
    verdict     TEXT NOT NULL CHECK (verdict IN ('passed','failed','error')),
    created_at  INTEGER NOT NULL,
    UNIQUE (suite_id, job_id)
) STRICT;
CREATE INDEX suite_runs_case ON suite_runs(suite_id, id);

CREATE TABLE suite_audit (
    id          INTEGER PRIMARY KEY,
    suite_id    INTEGER NOT NULL REFERENCES suite_cases(id),
    action      TEXT NOT NULL CHECK (action IN ('promoted','retired')),
    reason      TEXT,
    actor       TEXT,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE TRIGGER suite_audit_immutable BEFORE UPDATE ON suite_audit
BEGIN SELECT RAISE(ABORT, 'the suite audit trail is append-only'); END;
CREATE TRIGGER suite_audit_keep BEFORE DELETE ON suite_audit
BEGIN SELECT RAISE(ABORT, 'the suite audit trail is append-only'); END;
