package engine

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
	"strings"

	"github.com/airlock/airlock/errdefs"
)

// Secrets are kept encrypted in the store (AES-256-GCM) under a key in the
// state directory (mode 0600, like the directory), so the database alone
// (a backup, a copy) gives none away. Values never reach a session: the
// egress proxy puts them into requests in transit.

const secretKeyFile = "secret.key"

func loadSecretKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, secretKeyFile)
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

func (e *Engine) aead() (cipher.AEAD, error) {
	block, err := aes.NewCipher(e.secretKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (e *Engine) seal(plain string) (string, error) {
	gcm, err := e.aead()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, gcm.NonceSize())
	rand.Read(nonce)
	return "v1:" + base64.StdEncoding.EncodeToString(gcm.Seal(nonce, nonce, []byte(plain), nil)), nil
}

func (e *Engine) open(sealed string) (string, error) {
	b64, ok := strings.CutPrefix(sealed, "v1:")
	if !ok {
		return sealed, nil // stored before encryption
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", err
	}
	gcm, err := e.aead()
	if err != nil {
		return "", err
	}
	if len(data) < gcm.NonceSize() {
		return "", errors.New("a stored secret is damaged")
	}
	plain, err := gcm.Open(nil, data[:gcm.NonceSize()], data[gcm.NonceSize():], nil)
	if err != nil {
		return "", errors.New("a stored secret does not decrypt: the key file changed; store the secret again")
	}
	return string(plain), nil
}

// secret returns a secret's value: one given for the session (an agent
// turn's key from the caller's environment), else the stored one.
func (e *Engine) secret(ctx context.Context, session, name string) (string, error) {
	e.mu.Lock()
	v, ok := e.sessionSecrets[session][name]
	e.mu.Unlock()
	if ok {
		return v, nil
	}
	sealed, err := e.store.Secret(ctx, name)
	if err != nil {
		return "", err
	}
	return e.open(sealed)
}

// setSessionSecret gives a session a secret value for its injections,
// kept in memory only.
func (e *Engine) setSessionSecret(session, name, value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sessionSecrets == nil {
		e.sessionSecrets = map[string]map[string]string{}
	}
	if e.sessionSecrets[session] == nil {
		e.sessionSecrets[session] = map[string]string{}
	}
	e.sessionSecrets[session][name] = value
}

func (e *Engine) secretExists(ctx context.Context, session, name string) error {
	if _, err := e.secret(ctx, session, name); err != nil {
		if errdefs.IsNotFound(err) {
			return errdefs.Invalidf("no secret %s: store it with `airlock secret set %s`", name, name)
		}
		return err
	}
	return nil
}
