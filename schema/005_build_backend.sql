-- numval store, version 5: how a build obtains its backend (docs/API.md
-- "POST /api/v1/builds"). A registered build names the backend spec a worker
-- loads for a job of that build ("plugin:/path/lib.so", "exec:COMMAND",
-- "emu:..."); NULL for a build only seen in jobs, which runs on the worker's
-- own backend. Registration order is the builds' existing order (created_at,
-- then rowid), the order bisection walks.

ALTER TABLE builds ADD COLUMN backend TEXT;
