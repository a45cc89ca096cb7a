CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    project      TEXT NOT NULL,
    image        TEXT NOT NULL,
    state        TEXT NOT NULL,
    created_at   INTEGER NOT NULL,          -- unix nanoseconds
    container_id TEXT NOT NULL DEFAULT '',
    dir          TEXT NOT NULL,             -- workspace directory (mounts live under it)
    user         TEXT NOT NULL DEFAULT '',
    limits       TEXT NOT NULL DEFAULT '{}', -- JSON api.Limits
    env          TEXT NOT NULL DEFAULT '[]', -- JSON []string
    ca_bundle    TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT ''
);

CREATE TABLE commands (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    argv        TEXT NOT NULL,              -- JSON []string
    tty         INTEGER NOT NULL DEFAULT 0,
    user        TEXT NOT NULL DEFAULT '',
    exec_id     TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,              -- running, exited, interrupted
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    exit_code   INTEGER,
    output      BLOB NOT NULL DEFAULT x'',
    truncated   INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX commands_session ON commands(session_id, id);
