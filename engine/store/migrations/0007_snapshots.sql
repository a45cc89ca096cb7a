-- Snapshots: the OCI image in the snapshot store holds the layers; this
-- holds what the engine knows of each (api.Snapshot as JSON).
CREATE TABLE snapshots (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	data       TEXT NOT NULL
);
CREATE INDEX snapshots_name ON snapshots (name);
