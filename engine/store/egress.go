package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// AddEgress records one connection of a session and returns its id.
func (s *Store) AddEgress(ctx context.Context, session string, c api.EgressEntry) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO egress_log (session_id, at, kind, host, port, addr, bytes_out, bytes_in, allowed, rule, reason, duration_ns, method, path)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		session, c.Time.UnixNano(), c.Kind, c.Host, c.Port, c.Addr, c.BytesOut, c.BytesIn, c.Allowed, c.Rule, c.Reason, int64(c.Duration), c.Method, c.Path)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// EgressLog lists a session's connections in order: the blocked ones
// only if asked, the last limit of them if limit > 0.
func (s *Store) EgressLog(ctx context.Context, session string, blockedOnly bool, limit int) ([]api.EgressEntry, error) {
	q := `SELECT id, at, kind, host, port, addr, bytes_out, bytes_in, allowed, rule, reason, duration_ns, method, path FROM egress_log WHERE session_id = ?`
	if blockedOnly {
		q += ` AND allowed = 0`
	}
	q += ` ORDER BY id DESC`
	if limit > 0 {
		q += ` LIMIT ?`
	} else {
		q += ` LIMIT -1 OFFSET ?`
	}
	rows, err := s.db.QueryContext(ctx, q, session, max(limit, 0))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.EgressEntry{}
	for rows.Next() {
		e, err := scanEgress(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}

// EgressEntry returns one connection of a session's log.
func (s *Store) EgressEntry(ctx context.Context, session string, id int64) (api.EgressEntry, error) {
	row := s.db.QueryRowContext(ctx, `SELECT id, at, kind, host, port, addr, bytes_out, bytes_in, allowed, rule, reason, duration_ns, method, path FROM egress_log WHERE session_id = ? AND id = ?`, session, id)
	e, err := scanEgress(row)
	if errors.Is(err, sql.ErrNoRows) {
		return e, errdefs.NotFoundf("session %s has no log entry %d: see `airlock net log %s`", session, id, session)
	}
	return e, err
}

func scanEgress(row interface{ Scan(...any) error }) (api.EgressEntry, error) {
	var e api.EgressEntry
	var at, dur int64
	err := row.Scan(&e.ID, &at, &e.Kind, &e.Host, &e.Port, &e.Addr, &e.BytesOut, &e.BytesIn, &e.Allowed, &e.Rule, &e.Reason, &dur, &e.Method, &e.Path)
	e.Time, e.Duration = time.Unix(0, at), time.Duration(dur)
	return e, err
}
