package gitleaks

import (
	"github.com/airlock/airlock/secretscan"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// Reference is gitleaks' own detector on a text, and Windows the
// scanner on it: what the tests compare.
type Reference struct{ s *scanner }

func NewReference() *Reference {
	det, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		panic(err)
	}
	return &Reference{newScanner(det)}
}

func (r *Reference) Detector(text string) []secretscan.Match { return r.s.detector(text) }
func (r *Reference) Windows(text string) []secretscan.Match  { return r.s.find(text) }
