package store

import (
	"context"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// AddLifecycle records a pause or resume of a session.
func (s *Store) AddLifecycle(ctx context.Context, session, kind, reason string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO lifecycle (session_id, at, kind, reason) VALUES (?, ?, ?, ?)`, session, at.UnixNano(), kind, reason)
	return err
}

// Lifecycle lists a session's pauses and resumes in order.
func (s *Store) Lifecycle(ctx context.Context, session string) ([]api.LifecycleEvent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, kind, reason FROM lifecycle WHERE session_id = ? ORDER BY id`, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.LifecycleEvent{}
	for rows.Next() {
		var e api.LifecycleEvent
		var at int64
		if err := rows.Scan(&at, &e.Kind, &e.Reason); err != nil {
			return nil, err
		}
		e.Time = time.Unix(0, at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// EgressBytes sums a session's logged traffic, out and in.
func (s *Store) EgressBytes(ctx context.Context, session string) (int64, int64, error) {
	var out, in int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes_out), 0), COALESCE(SUM(bytes_in), 0) FROM egress_log WHERE session_id = ?`, session).Scan(&out, &in)
	return out, in, err
}
