-- Where a session's workspace layer lives: '' (a tmpfs) or 'disk' (the
-- state directory's file system; survives a reboot as it is).
ALTER TABLE sessions ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
-- Hibernate after that long idle, in ns (0: the engine's default; negative: never).
ALTER TABLE sessions ADD COLUMN hibernate_after INTEGER NOT NULL DEFAULT 0;
-- CPU time (ns) the session used in cgroups since removed (it hibernated):
-- added to what its cgroups count now.
ALTER TABLE sessions ADD COLUMN cpu_carried INTEGER NOT NULL DEFAULT 0;
