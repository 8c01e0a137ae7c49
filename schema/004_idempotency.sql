-- numval store, version 4: Idempotency-Key of POST /api/v1/jobs (docs/API.md
-- "Idempotent submission"). A key names one submission per caller (token
-- name, '' when anonymous) for a bounded time and count; the request body's
-- SHA-256 tells a retry (same body: the original job) from a reuse of the key
-- for another request (refused). Stored in the transaction that inserts the
-- job, so a key never names a job the disk does not have.

CREATE TABLE idempotency_keys (
    id          INTEGER PRIMARY KEY, -- insertion order: the count bound drops the lowest
    principal   TEXT NOT NULL,
    key         TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    job_id      INTEGER NOT NULL REFERENCES jobs(id),
    created_at  INTEGER NOT NULL,
    UNIQUE (principal, key)
) STRICT;
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
