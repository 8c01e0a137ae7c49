-- numval store, version 6: registered builds and daemon-side bisections
-- (docs/API.md "POST /api/v1/builds", "Bisections").
--
-- A registered build names the backend spec a worker loads for a job of that
-- build ("plugin:/path/lib.so", "exec:COMMAND", "emu:..."); NULL for a build
-- only seen in jobs, which runs on the worker's own backend. Registration
-- order is the builds' existing order (created_at, then rowid), the order
-- bisection walks.

ALTER TABLE builds ADD COLUMN backend TEXT;

-- A bisection numvald drives itself: binary search for the first build of
-- `builds` (good to bad in registration order, fixed when it
-- starts) where suite case `suite_case` fails, one suite job per probe.
-- lo is the index of the last build known to pass, hi of the first known to
-- fail; the search is done when hi = lo + 1. `probes` and `result` are JSON
-- (the shape of `numvalctl bisect --json`). Kept like jobs: never deleted by
-- numvald, so every probe's verdict stays readable.
CREATE TABLE bisections (
    id          INTEGER PRIMARY KEY,
    suite_case  INTEGER NOT NULL REFERENCES suite_cases(id),
    device      TEXT,                    -- NULL: any device runs the probes
    builds      TEXT NOT NULL,           -- JSON [{id, identity, backend}], good .. bad
    lo          INTEGER NOT NULL,
    hi          INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'done', 'stopped')),
    current_job INTEGER REFERENCES jobs(id), -- the probe running now
    probes      TEXT NOT NULL DEFAULT '[]',
    result      TEXT,
    actor       TEXT,                    -- the token that started it
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
-- The driver's scan: only running bisections are indexed.
CREATE INDEX bisections_running ON bisections(id) WHERE state = 'running';
