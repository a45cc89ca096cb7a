-- Agent turns, their events, and API keys kept on the host.
CREATE TABLE turns (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    n             INTEGER NOT NULL,            -- 1, 2, ... within the session
    agent         TEXT NOT NULL,
    prompt        TEXT NOT NULL,
    model         TEXT NOT NULL DEFAULT '',
    agent_session TEXT NOT NULL DEFAULT '',    -- the agent's conversation id
    state         TEXT NOT NULL,               -- running, done, failed, interrupted
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    exit_code     INTEGER,
    final         TEXT NOT NULL DEFAULT '',    -- the agent's last answer, raw
    result        TEXT,                        -- the validated JSON answer (--schema)
    usage         TEXT NOT NULL DEFAULT '{}',  -- JSON harness.Usage
    error         TEXT NOT NULL DEFAULT '',
    UNIQUE (session_id, n)
);

CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL                   -- JSON harness.Event
);

CREATE INDEX events_session ON events(session_id, turn, id);

CREATE TABLE secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
