-- Egress: each session's network and policy, and its connection log.
ALTER TABLE sessions ADD COLUMN network TEXT NOT NULL DEFAULT '';  -- Docker network name ('' = none)
ALTER TABLE sessions ADD COLUMN egress TEXT NOT NULL DEFAULT '';   -- JSON egress.Spec

CREATE TABLE egress_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    at          INTEGER NOT NULL,             -- unix nanoseconds
    kind        TEXT NOT NULL,                -- http, connect, tcp, dns
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL DEFAULT 0,
    addr        TEXT NOT NULL DEFAULT '',
    bytes_out   INTEGER NOT NULL DEFAULT 0,
    bytes_in    INTEGER NOT NULL DEFAULT 0,
    allowed     INTEGER NOT NULL,
    rule        TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL DEFAULT '',
    duration_ns INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX egress_log_session ON egress_log(session_id, id);
