// Package gitleaks is the secret detector: gitleaks' default rules, as a
// secretscan.Finder. It runs in cmd/airlock-scan, the engine's scanner
// child, and in the processes that link gitleaks anyway (the CLI's own
// engine, `airlock ci`, tests); the engine's binary never imports it
// (layout_test.go). It runs each rule only where the rule can match
// (scanner), and finds what gitleaks' own detector finds.
package gitleaks

import (
	"context"
	"fmt"
	"sync"

	"github.com/airlock/airlock/secretscan"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// Detector finds secrets with gitleaks' default rules. Its rules (some
// 200 regular expressions, megabytes of heap) are compiled on the first
// Find, once, however many Finds start together. Safe for concurrent use.
type Detector struct {
	load func() (*scanner, error)
}

// New returns a Detector; nothing is compiled yet.
func New() *Detector {
	return &Detector{load: sync.OnceValues(func() (*scanner, error) {
		det, err := detect.NewDetectorDefaultConfig()
		if err != nil {
			return nil, err
		}
		return newScanner(det), nil
	})}
}

// Warm compiles the rules in the background now, for a caller that
// knows it will scan soon (`airlock ci` reviews every run): the first
// Find then does not wait the ~30 ms they take.
func (d *Detector) Warm() { go d.load() }

// Find returns the secrets in each text, each scanned on its own. A
// panic inside gitleaks (texts are what a session wrote) is the error of
// this Find, not the process's end.
func (d *Detector) Find(ctx context.Context, texts []string) (found [][]secretscan.Match, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := d.load()
	if err != nil {
		return nil, fmt.Errorf("gitleaks' default rules: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			found, err = nil, fmt.Errorf("gitleaks failed on this text: %v", r)
		}
	}()
	found = make([][]secretscan.Match, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		found[i] = s.find(t)
	}
	return found, nil
}
