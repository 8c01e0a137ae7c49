-- numval store, version 5: per-host worker tokens (docs/API.md "Tokens"). A
-- worker token may be bound to the devices its host serves; it can then claim
-- only for those devices, and heartbeat or post results only for jobs of them.
-- NULL: not bound (any device), the behaviour of every token made before.

ALTER TABLE tokens ADD COLUMN devices TEXT; -- comma list of device names, or NULL
