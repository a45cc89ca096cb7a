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
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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

// Find returns the secrets in each text, each scanned on its own, on as
// many cores as the process may use (texts are taken in turn, the
// longest first: a megabyte of minified code taken last would leave the
// other cores idle while it is scanned). A panic
// inside gitleaks (texts are what a session wrote) is the error of this
// Find, not the process's end.
func (d *Detector) Find(ctx context.Context, texts []string) ([][]secretscan.Match, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := d.load()
	if err != nil {
		return nil, fmt.Errorf("gitleaks' default rules: %w", err)
	}
	found := make([][]secretscan.Match, len(texts))
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(texts[b]) - len(texts[a]) })
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(texts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					err := fmt.Errorf("gitleaks failed on a text: %v", r)
					failed.CompareAndSwap(nil, &err)
				}
			}()
			for k := int(next.Add(1) - 1); k < len(texts) && ctx.Err() == nil && failed.Load() == nil; k = int(next.Add(1) - 1) {
				i := order[k]
				found[i] = s.find(texts[i])
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return nil, *err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return found, nil
}
