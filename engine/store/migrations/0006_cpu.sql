-- The session's CPU time (ns) while a command or agent turn ran.
ALTER TABLE commands ADD COLUMN cpu_ns INTEGER;
ALTER TABLE turns ADD COLUMN cpu_ns INTEGER;
