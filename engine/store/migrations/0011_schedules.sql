-- Schedules (`airlock schedule add`): the schedule as api.Schedule JSON,
-- and the last occurrence the engine handled (ran or skipped), in Unix
-- nanoseconds (0: none yet), so that a restart neither misses nor repeats
-- one.
CREATE TABLE schedules (
	name       TEXT PRIMARY KEY,
	created_at INTEGER NOT NULL,
	last_due   INTEGER NOT NULL DEFAULT 0,
	data       TEXT NOT NULL
);
-- Their runs (`airlock schedule log`), api.ScheduleRun as JSON.
CREATE TABLE schedule_runs (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	schedule TEXT NOT NULL,
	outcome  TEXT NOT NULL,
	data     TEXT NOT NULL
);
CREATE INDEX schedule_runs_schedule ON schedule_runs (schedule, id);
