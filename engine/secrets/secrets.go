// Package secrets keeps the secrets sessions use without ever holding
// them: API keys stored on the host and values given for one session
// (an agent turn's key from the caller's environment). Stored values are
// sealed with AES-256-GCM under a key file in the engine's state
// directory, so the database alone (a backup, a copy) gives none away;
// values given for a session live in memory until the session is
// removed. The egress proxy asks for a value when a request goes out and
// puts it into the request in transit; nothing here reaches a session.
//
// It imports nothing of the engine: the table that holds sealed values
// is the small Table interface.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/airlock/airlock/errdefs"
)

// Table is where sealed values are kept (the engine's SQLite store),
// declared by its consumer. It sees only sealed values.
type Table interface {
	// SetSecret stores or replaces a secret's sealed value.
	SetSecret(ctx context.Context, name, sealed string) error
	// Secret returns a secret's sealed value, an errdefs not-found error
	// when there is none.
	Secret(ctx context.Context, name string) (string, error)
	// DeleteSecret removes a secret, an errdefs not-found error when
	// there is none.
	DeleteSecret(ctx context.Context, name string) error
}

// KeyFile is the name of the sealing key in the state directory.
const KeyFile = "secret.key"

// Store is the one owner of secrets. It is safe for concurrent use.
type Store struct {
	table Table
	aead  cipher.AEAD

	mu    sync.Mutex
	given map[string]map[string]string // session -> name -> value
}

// Open returns the store sealing into table under the key in dir
// (KeyFile, made with mode 0600 when there is none). A key file of the
// wrong size is an error that says what to do, never replaced.
func Open(dir string, table Table) (*Store, error) {
	key, err := loadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Store{table: table, aead: aead, given: map[string]map[string]string{}}, nil
}

func loadKey(p string) ([]byte, error) {
	k, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		k = make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, k, 0o600); err != nil {
			return nil, err
		}
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("%s is damaged (%d bytes, want 32): restore it, or remove it and store the secrets again", p, len(k))
	}
	return k, nil
}

// nameRE is a secret's name, at most maxName bytes long: the bound is
// checked apart because `{0,127}` compiles to a program of 128 copies,
// 104 KB allocated at every start of every binary that links this package.
var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const maxName = 128

// Set stores a secret on the host, sealed.
func (s *Store) Set(ctx context.Context, name, value string) error {
	if len(name) > maxName || !nameRE.MatchString(name) {
		return errdefs.Invalidf("secret name %q: use letters, digits and _, like ANTHROPIC_API_KEY", name)
	}
	if value == "" {
		return errdefs.Invalidf("secret %s: the value is empty", name)
	}
	return s.table.SetSecret(ctx, name, s.seal(value))
}

// Delete removes a stored secret.
func (s *Store) Delete(ctx context.Context, name string) error {
	return s.table.DeleteSecret(ctx, name)
}

// Value is a secret's value for session: the one given for the session,
// else the stored one (not found when neither exists).
func (s *Store) Value(ctx context.Context, session, name string) (string, error) {
	s.mu.Lock()
	v, ok := s.given[session][name]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	sealed, err := s.table.Secret(ctx, name)
	if err != nil {
		return "", err
	}
	return s.open(name, sealed)
}

// Check says, in words a user acts on, which of names session cannot
// have (an injection naming a secret nobody stored).
func (s *Store) Check(ctx context.Context, session string, names ...string) error {
	for _, name := range names {
		if _, err := s.Value(ctx, session, name); err != nil {
			if errdefs.IsNotFound(err) {
				return errdefs.Invalidf("no secret %s: store it with `airlock secret set %s`", name, name)
			}
			return err
		}
	}
	return nil
}

// Give gives session a value of its own for secret name, kept in memory
// only, until Forget.
func (s *Store) Give(session, name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.given[session] == nil {
		s.given[session] = map[string]string{}
	}
	s.given[session][name] = value
}

// Forget drops the values given for session (it is removed).
func (s *Store) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.given, session)
}

// sealed values are "v1:" and the base64 of nonce and ciphertext; a value
// without the prefix was stored before encryption and is read as it is.
const sealedPrefix = "v1:"

func (s *Store) seal(plain string) string {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return sealedPrefix + base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plain), nil))
}

func (s *Store) open(name, sealed string) (string, error) {
	b64, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return sealed, nil
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(data) < s.aead.NonceSize() {
		return "", fmt.Errorf("stored secret %s is damaged: store it again with `airlock secret set %s`", name, name)
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, data[:n], data[n:], nil)
	if err != nil {
		return "", fmt.Errorf("stored secret %s does not decrypt: the key file (%s) changed since it was stored; store it again with `airlock secret set %s`", name, KeyFile, name)
	}
	return string(plain), nil
}
