package store

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// PutSnapshot records a snapshot.
func (s *Store) PutSnapshot(ctx context.Context, x api.Snapshot) error {
	data, err := json.Marshal(x)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO snapshots (id, name, created_at, data) VALUES (?, ?, ?, ?)`, x.ID, x.Name, x.Created.UnixNano(), string(data))
	return err
}

// Snapshots lists the snapshots in the order they were recorded.
func (s *Store) Snapshots(ctx context.Context) ([]api.Snapshot, error) {
	return queryJSON[api.Snapshot](ctx, s.db, `SELECT data FROM snapshots ORDER BY rowid`)
}

// Snapshot finds a snapshot by id, id prefix or name (the one of that
// name recorded last).
func (s *Store) Snapshot(ctx context.Context, ref string) (api.Snapshot, error) {
	all, err := s.Snapshots(ctx)
	if err != nil {
		return api.Snapshot{}, err
	}
	var byName, byPrefix []api.Snapshot
	for _, x := range all {
		switch {
		case x.ID == ref:
			return x, nil
		case x.Name == ref:
			byName = append(byName, x)
		case ref != "" && strings.HasPrefix(x.ID, ref):
			byPrefix = append(byPrefix, x)
		}
	}
	switch {
	case len(byName) > 0:
		return byName[len(byName)-1], nil
	case len(byPrefix) == 1:
		return byPrefix[0], nil
	case len(byPrefix) > 1:
		return api.Snapshot{}, errdefs.Conflictf("snapshot id %q is ambiguous: give more characters", ref)
	}
	return api.Snapshot{}, errdefs.NotFoundf("no snapshot %q: `airlock snapshots` lists them", ref)
}

// DeleteSnapshot forgets a snapshot.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id)
	return err
}
