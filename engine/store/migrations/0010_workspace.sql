-- Where a session's workspace layer lives: '' (a tmpfs) or 'disk' (the
-- state directory's file system; survives a reboot as it is).
ALTER TABLE sessions ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
