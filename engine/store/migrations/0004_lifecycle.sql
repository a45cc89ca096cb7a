-- Lifecycle: idle timeouts, and pause/resume events.
ALTER TABLE sessions ADD COLUMN idle_timeout INTEGER NOT NULL DEFAULT 0; -- ns; 0 = the engine's default, -1 = never

CREATE TABLE lifecycle (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,   -- paused, resumed
    reason     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX lifecycle_session ON lifecycle(session_id, id);
