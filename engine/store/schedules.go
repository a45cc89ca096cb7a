package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// AddSchedule records a new schedule: errdefs.Conflict if one has its
// name.
func (s *Store) AddSchedule(ctx context.Context, x api.Schedule) error {
	x.Next, x.Last = nil, nil
	data, err := json.Marshal(x)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedules (name, created_at, data) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		x.Name, x.Created.UnixNano(), string(data))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Conflictf("a schedule named %s exists", x.Name)
	}
	return nil
}

// Schedules lists the schedules by name.
func (s *Store) Schedules(ctx context.Context) ([]api.Schedule, error) {
	return queryJSON[api.Schedule](ctx, s.db, `SELECT data FROM schedules ORDER BY name`)
}

// DeleteSchedule forgets a schedule and its runs.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?`, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.NotFoundf("no schedule %q: `airlock schedule ls` lists them", name)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schedule_runs WHERE schedule = ?`, name); err != nil {
		return err
	}
	return tx.Commit()
}

// ScheduleDue is the last occurrence of a schedule the engine handled,
// zero if none.
func (s *Store) ScheduleDue(ctx context.Context, name string) (time.Time, error) {
	var ns int64
	err := s.db.QueryRowContext(ctx, `SELECT last_due FROM schedules WHERE name = ?`, name).Scan(&ns)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, errdefs.NotFoundf("no schedule %q", name)
	}
	if err != nil || ns == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}

// SetScheduleDue records the last occurrence of a schedule handled.
func (s *Store) SetScheduleDue(ctx context.Context, name string, due time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE schedules SET last_due = ? WHERE name = ?`, due.UnixNano(), name)
	return err
}

// AddScheduleRun records a run and returns its id.
func (s *Store) AddScheduleRun(ctx context.Context, run api.ScheduleRun) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO schedule_runs (schedule, outcome, data) VALUES (?, ?, '{}')`, run.Schedule, run.Outcome)
	if err != nil {
		return 0, err
	}
	if run.ID, err = res.LastInsertId(); err != nil {
		return 0, err
	}
	data, err := json.Marshal(run)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schedule_runs SET data = ? WHERE id = ?`, string(data), run.ID); err != nil {
		return 0, err
	}
	return run.ID, tx.Commit()
}

// EndScheduleRun records a run's session, outcome and end, by its id.
func (s *Store) EndScheduleRun(ctx context.Context, run api.ScheduleRun) error {
	data, err := json.Marshal(run)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE schedule_runs SET outcome = ?, data = ? WHERE id = ?`, run.Outcome, string(data), run.ID)
	return err
}

// ScheduleRuns lists a schedule's last limit runs, oldest first (all if
// limit <= 0).
func (s *Store) ScheduleRuns(ctx context.Context, name string, limit int) ([]api.ScheduleRun, error) {
	if limit <= 0 {
		limit = -1
	}
	return queryJSON[api.ScheduleRun](ctx, s.db, `SELECT data FROM (SELECT id, data FROM schedule_runs WHERE schedule = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, name, limit)
}

// InterruptScheduleRuns ends the runs still marked running with outcome
// error and msg: the engine that ran them stopped.
func (s *Store) InterruptScheduleRuns(ctx context.Context, msg string, at time.Time) error {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM schedule_runs WHERE outcome = ?`, api.RunRunning)
	if err != nil {
		return err
	}
	var runs []api.ScheduleRun
	for rows.Next() {
		var data string
		var run api.ScheduleRun
		if err := rows.Scan(&data); err == nil && json.Unmarshal([]byte(data), &run) == nil {
			runs = append(runs, run)
		}
	}
	rows.Close()
	for _, run := range runs {
		end := at.UTC()
		run.Outcome, run.Error, run.Ended = api.RunError, msg, &end
		if err := s.EndScheduleRun(ctx, run); err != nil {
			return err
		}
	}
	return nil
}
