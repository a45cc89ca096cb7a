package engine

import (
	"context"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/secrets"
	"github.com/airlock/airlock/engine/store"
)

// Secrets are engine/secrets's: the engine holds the store (e.secrets),
// egress asks it for values through each session's gateway, and a
// session's given values are forgotten when it is removed.

var _ secrets.Table = (*store.Store)(nil)

// secret returns a secret's value for a session: one given for the
// session (an agent turn's key from the caller's environment), else the
// stored one.
func (e *Engine) secret(ctx context.Context, session, name string) (string, error) {
	return e.secrets.Value(ctx, session, name)
}

// setSessionSecret gives a session a secret value for its injections,
// kept in memory only, until the session is removed.
func (e *Engine) setSessionSecret(session, name, value string) {
	e.secrets.Give(session, name, value)
}

// SetSecret stores a secret on the host.
func (e *Engine) SetSecret(ctx context.Context, name, value string) error {
	return e.secrets.Set(ctx, name, value)
}

// Secrets lists the stored secrets' names (the table holds no value
// readable, so the listing goes to it directly).
func (e *Engine) Secrets(ctx context.Context) ([]api.Secret, error) { return e.store.Secrets(ctx) }

// DeleteSecret removes a stored secret.
func (e *Engine) DeleteSecret(ctx context.Context, name string) error {
	return e.secrets.Delete(ctx, name)
}
