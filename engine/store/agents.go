package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
)

// StartTurn records a turn that starts, numbering it within its session.
func (s *Store) StartTurn(ctx context.Context, t api.Turn) (api.Turn, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return t, err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(n), 0) + 1 FROM turns WHERE session_id = ?`, t.Session).Scan(&t.N); err != nil {
		return t, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO turns (session_id, n, agent, prompt, model, agent_session, state, started_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)`,
		t.Session, t.N, t.Agent, t.Prompt, t.Model, t.AgentSession, t.Started.UnixNano()); err != nil {
		return t, err
	}
	t.State = "running"
	return t, s.changed(t.Session, tx.Commit())
}

// SetAgentSession records the agent's conversation id for a turn.
func (s *Store) SetAgentSession(ctx context.Context, session string, n int, agentSession string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE turns SET agent_session = ? WHERE session_id = ? AND n = ?`, agentSession, session, n)
	return err
}

// FinishTurn records how a turn ended.
func (s *Store) FinishTurn(ctx context.Context, t api.Turn) error {
	usage, _ := json.Marshal(t.Usage)
	var result any
	if len(t.Result) > 0 {
		result = string(t.Result)
	}
	var ended int64
	if t.Ended != nil {
		ended = t.Ended.UnixNano()
	}
	_, err := s.db.ExecContext(ctx, `UPDATE turns SET state = ?, ended_at = ?, exit_code = ?, final = ?, result = ?, usage = ?, error = ?, agent_session = ?, cpu_ns = ? WHERE session_id = ? AND n = ?`,
		t.State, ended, t.ExitCode, t.Final, result, string(usage), t.Error, t.AgentSession, int64(t.CPUSeconds*1e9), t.Session, t.N)
	return s.changed(t.Session, err)
}

// Turns lists a session's turns in order.
func (s *Store) Turns(ctx context.Context, session string) ([]api.Turn, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT n, agent, prompt, model, agent_session, state, started_at, ended_at, exit_code, final, result, usage, error, cpu_ns
		FROM turns WHERE session_id = ? ORDER BY n`, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []api.Turn
	for rows.Next() {
		t := api.Turn{Session: session}
		var started int64
		var ended sql.NullInt64
		var code sql.NullInt64
		var result sql.NullString
		var usage string
		var cpu sql.NullInt64
		if err := rows.Scan(&t.N, &t.Agent, &t.Prompt, &t.Model, &t.AgentSession, &t.State, &started, &ended, &code, &t.Final, &result, &usage, &t.Error, &cpu); err != nil {
			return nil, err
		}
		t.Started = time.Unix(0, started)
		if ended.Valid && ended.Int64 > 0 {
			e := time.Unix(0, ended.Int64)
			t.Ended = &e
		}
		if code.Valid {
			c := int(code.Int64)
			t.ExitCode = &c
		}
		if result.Valid {
			t.Result = json.RawMessage(result.String)
		}
		json.Unmarshal([]byte(usage), &t.Usage)
		if cpu.Valid {
			t.CPUSeconds = float64(cpu.Int64) / 1e9
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// InterruptTurns marks turns left running by a previous engine.
func (s *Store) InterruptTurns(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `UPDATE turns SET state = 'interrupted', error = 'the engine stopped during the turn', ended_at = ? WHERE state = 'running'`, time.Now().UnixNano())
	return err
}

// AddEvent stores one event of a turn.
func (s *Store) AddEvent(ctx context.Context, session string, e harness.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO events (session_id, turn, type, data) VALUES (?, ?, ?, ?)`, session, e.Turn, e.Type, string(data))
	return err
}

// Events lists a session's events in order, of one turn if turn > 0.
func (s *Store) Events(ctx context.Context, session string, turn int) ([]harness.Event, error) {
	return queryJSON[harness.Event](ctx, s.db, `SELECT data FROM events WHERE session_id = ? AND (? = 0 OR turn = ?) ORDER BY id`, session, turn, turn)
}

// SetSecret stores a secret's value.
func (s *Store) SetSecret(ctx context.Context, name, value string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, value, time.Now().UnixNano())
	return err
}

// Secret returns a secret's value.
func (s *Store) Secret(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errdefs.NotFoundf("no secret %s: store it with `airlock secret set %s`", name, name)
	}
	return v, err
}

// Secrets lists the names of the stored secrets.
func (s *Store) Secrets(ctx context.Context) ([]api.Secret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.Secret{}
	for rows.Next() {
		var sec api.Secret
		var at int64
		if err := rows.Scan(&sec.Name, &at); err != nil {
			return nil, err
		}
		sec.Updated = time.Unix(0, at)
		out = append(out, sec)
	}
	return out, rows.Err()
}

// DeleteSecret removes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.NotFoundf("no secret %s", name)
	}
	return nil
}

// LastAgent is the agent of a session's last turn ("" when none).
func (s *Store) LastAgent(ctx context.Context, session string) (string, error) {
	var agent string
	err := s.db.QueryRowContext(ctx, `SELECT agent FROM turns WHERE session_id = ? ORDER BY n DESC LIMIT 1`, session).Scan(&agent)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return agent, err
}
