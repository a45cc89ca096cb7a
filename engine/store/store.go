// Package store keeps the engine's state in SQLite: sessions and the
// commands run in them. Everything the engine needs to re-adopt its
// sessions after a crash is here or findable from what is here. Schema
// changes are numbered SQL migrations embedded in the binary.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	_ "github.com/mattn/go-sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the engine's database. It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	watch watchers // see Watch
}

// Open opens (creating if needed) the database at path and migrates it.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL")
	if err != nil {
		return nil, err
	}
	// One writer at a time is SQLite's model; a single connection also
	// keeps the daemon's memory small.
	db.SetMaxOpenConns(1)
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return err
	}
	var current int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with its number", base)
		}
		if v <= current {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version) VALUES (?)`, v); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Session is a stored session.
type Session struct {
	ID          string
	Project     string
	Image       string
	State       string
	Created     time.Time
	ContainerID string
	Dir         string
	User        string
	Limits      api.Limits
	Env         []string
	CABundle    string
	Error       string
	Network     string // the session's network ('' = none)
	Egress      string // its egress policy, JSON
	// IdleTimeout pauses the session after that long idle (0: the
	// engine's default; negative: never).
	IdleTimeout time.Duration
	// Budgets: CPU time and cost at which the session pauses (0: none).
	CPUBudget  time.Duration
	CostBudget float64
	// Workspace is where the workspace layer lives: "" (a tmpfs) or
	// "disk".
	Workspace string
	// HibernateAfter hibernates the session after that long idle (0:
	// the engine's default; negative: never).
	HibernateAfter time.Duration
}

// PutSession inserts or replaces a session.
func (s *Store) PutSession(ctx context.Context, x Session) error {
	limits, _ := json.Marshal(x.Limits)
	env, _ := json.Marshal(x.Env)
	if x.Env == nil {
		env = []byte("[]")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (id, project, image, state, created_at, container_id, dir, user, limits, env, ca_bundle, error, network, egress, idle_timeout, cpu_budget, cost_budget, workspace, hibernate_after)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET project=excluded.project, image=excluded.image, state=excluded.state,
		container_id=excluded.container_id, dir=excluded.dir, user=excluded.user, limits=excluded.limits,
		env=excluded.env, ca_bundle=excluded.ca_bundle, error=excluded.error, network=excluded.network, egress=excluded.egress, idle_timeout=excluded.idle_timeout,
		cpu_budget=excluded.cpu_budget, cost_budget=excluded.cost_budget, workspace=excluded.workspace, hibernate_after=excluded.hibernate_after`,
		x.ID, x.Project, x.Image, x.State, x.Created.UnixNano(), x.ContainerID, x.Dir, x.User, string(limits), string(env), x.CABundle, x.Error, x.Network, x.Egress, int64(x.IdleTimeout), int64(x.CPUBudget), x.CostBudget, x.Workspace, int64(x.HibernateAfter))
	return s.changed(x.ID, err)
}

// SetBudgets records a session's budgets.
func (s *Store) SetBudgets(ctx context.Context, id string, cpu time.Duration, cost float64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET cpu_budget = ?, cost_budget = ? WHERE id = ?`, int64(cpu), cost, id)
	return s.changed(id, err)
}

// SetCPUCarried records the CPU time a session used in cgroups that are
// gone (see the engine's hibernation).
func (s *Store) SetCPUCarried(ctx context.Context, id string, cpu time.Duration) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET cpu_carried = ? WHERE id = ?`, int64(cpu), id)
	return s.changed(id, err)
}

// CPUCarried is what SetCPUCarried recorded (0 when nothing, or no
// such session).
func (s *Store) CPUCarried(ctx context.Context, id string) time.Duration {
	var ns int64
	s.db.QueryRowContext(ctx, `SELECT cpu_carried FROM sessions WHERE id = ?`, id).Scan(&ns)
	return time.Duration(ns)
}

// SetEgress records a session's egress policy.
func (s *Store) SetEgress(ctx context.Context, id, egress string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET egress = ? WHERE id = ?`, egress, id)
	return s.changed(id, err)
}

// SetSessionState records a session's state and error text.
func (s *Store) SetSessionState(ctx context.Context, id, state, errText string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET state = ?, error = ? WHERE id = ?`, state, errText, id)
	return s.changed(id, err)
}

const sessionCols = `id, project, image, state, created_at, container_id, dir, user, limits, env, ca_bundle, error, network, egress, idle_timeout, cpu_budget, cost_budget, workspace, hibernate_after`

func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var x Session
	var created int64
	var limits, env string
	var idle, cpuBudget, hibernateAfter int64
	if err := row.Scan(&x.ID, &x.Project, &x.Image, &x.State, &created, &x.ContainerID, &x.Dir, &x.User, &limits, &env, &x.CABundle, &x.Error, &x.Network, &x.Egress, &idle, &cpuBudget, &x.CostBudget, &x.Workspace, &hibernateAfter); err != nil {
		return x, err
	}
	x.HibernateAfter = time.Duration(hibernateAfter)
	x.Created = time.Unix(0, created)
	x.IdleTimeout = time.Duration(idle)
	x.CPUBudget = time.Duration(cpuBudget)
	_ = json.Unmarshal([]byte(limits), &x.Limits)
	_ = json.Unmarshal([]byte(env), &x.Env)
	return x, nil
}

// Sessions lists all sessions, oldest first.
func (s *Store) Sessions(ctx context.Context) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		x, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Session returns the session whose id is id or starts with id. An
// ambiguous prefix is a conflict; no match is not found.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	if id == "" || strings.ContainsAny(id, "%_") {
		return Session{}, errdefs.Invalidf("%q is not a session id: `airlock ls` lists them", id)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ? OR id LIKE ? ORDER BY id = ? DESC LIMIT 3`, id, id+"%", id)
	if err != nil {
		return Session{}, err
	}
	defer rows.Close()
	var found []Session
	for rows.Next() {
		x, err := scanSession(rows)
		if err != nil {
			return Session{}, err
		}
		found = append(found, x)
	}
	switch {
	case len(found) == 0:
		return Session{}, errdefs.NotFoundf("no session %q: `airlock ls` lists the sessions", id)
	case found[0].ID == id || len(found) == 1:
		return found[0], nil
	}
	return Session{}, errdefs.Conflictf("session id %q is ambiguous: give more characters", id)
}

// DeleteSession removes a session and its commands.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	return s.changed(id, err)
}

// Command is a stored command.
type Command struct {
	api.Command
	ExecID string
}

// StartCommand records a command that started running.
func (s *Store) StartCommand(ctx context.Context, c Command) (int64, error) {
	argv, _ := json.Marshal(c.Argv)
	res, err := s.db.ExecContext(ctx, `INSERT INTO commands (session_id, argv, tty, user, exec_id, state, started_at) VALUES (?, ?, ?, ?, ?, 'running', ?)`,
		c.Session, string(argv), c.TTY, c.User, c.ExecID, c.Started.UnixNano())
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// SetOutput replaces a command's recorded output.
func (s *Store) SetOutput(ctx context.Context, id int64, output []byte, truncated bool) error {
	_, err := s.db.ExecContext(ctx, `UPDATE commands SET output = ?, truncated = ? WHERE id = ?`, output, truncated, id)
	return err
}

// SetCommandCPU records the session's CPU time while a command ran.
func (s *Store) SetCommandCPU(ctx context.Context, id int64, ns int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE commands SET cpu_ns = ? WHERE id = ?`, ns, id)
	return err
}

// FinishCommand records how a command ended. exitCode nil means unknown.
func (s *Store) FinishCommand(ctx context.Context, id int64, state string, exitCode *int, ended time.Time) error {
	var session string
	err := s.db.QueryRowContext(ctx, `UPDATE commands SET state = ?, exit_code = ?, ended_at = ? WHERE id = ? RETURNING session_id`, state, exitCode, ended.UnixNano(), id).Scan(&session)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return s.changed(session, err)
}

// Commands lists a session's commands in order; output only when asked.
func (s *Store) Commands(ctx context.Context, session string, withOutput bool) ([]Command, error) {
	return s.commands(ctx, `WHERE session_id = ? ORDER BY id`, withOutput, session)
}

// RunningCommands lists commands recorded as running, in any session.
func (s *Store) RunningCommands(ctx context.Context) ([]Command, error) {
	return s.commands(ctx, `WHERE state = 'running' ORDER BY id`, false)
}

func (s *Store) commands(ctx context.Context, where string, withOutput bool, args ...any) ([]Command, error) {
	out := "x''"
	if withOutput {
		out = "output"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, session_id, argv, tty, user, exec_id, state, started_at, ended_at, exit_code, `+out+`, truncated, cpu_ns FROM commands `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []Command
	for rows.Next() {
		var c Command
		var argv string
		var started int64
		var ended sql.NullInt64
		var exit sql.NullInt64
		var output []byte
		var cpu sql.NullInt64
		if err := rows.Scan(&c.ID, &c.Session, &argv, &c.TTY, &c.User, &c.ExecID, &c.State, &started, &ended, &exit, &output, &c.Truncated, &cpu); err != nil {
			return nil, err
		}
		_ = json.Unmarshal([]byte(argv), &c.Argv)
		c.Started = time.Unix(0, started)
		if ended.Valid {
			t := time.Unix(0, ended.Int64)
			c.Ended = &t
		}
		if exit.Valid {
			e := int(exit.Int64)
			c.ExitCode = &e
		}
		c.Output = string(output)
		if cpu.Valid {
			c.CPUSeconds = float64(cpu.Int64) / 1e9
		}
		list = append(list, c)
	}
	return list, rows.Err()
}

// queryJSON runs query, whose one column holds JSON, and decodes each
// row into a T: an empty list, never nil, when no row matches.
func queryJSON[T any](ctx context.Context, db *sql.DB, query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var x T
		if err := json.Unmarshal([]byte(data), &x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}
