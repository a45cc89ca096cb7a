package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// settingsFile holds the defaults changed through the API (the desktop
// app's settings); they apply over the config file's.
const settingsFile = "settings.json"

// Settings are the engine's defaults for new sessions, as they are now.
func (e *Engine) Settings(ctx context.Context) api.Settings {
	d := e.defs()
	return api.Settings{Image: d.Image, IdleTimeout: d.IdleTimeout, CostPerCoreHour: d.CostPerCoreHour,
		CABundle: d.CABundle, Limits: d.Limits, Egress: d.Egress, Review: d.Review,
		HibernateAfter: d.HibernateAfter, Workspace: d.Workspace, WarmPool: d.WarmPool}
}

// SetSettings changes the defaults of new sessions (running ones keep
// theirs) and keeps them across restarts. Zero fields stay as they are.
func (e *Engine) SetSettings(ctx context.Context, s api.Settings) (api.Settings, error) {
	d := e.defs()
	next := d
	apply(&next, s)
	if err := checkLimits(next.Limits); err != nil {
		return api.Settings{}, err
	}
	if s.CostPerCoreHour < 0 {
		return api.Settings{}, errdefs.Invalidf("cost per core-hour must be 0 or more")
	}
	if err := checkReviewLimits(s.Review); err != nil {
		return api.Settings{}, err
	}
	if err := checkWorkspaceKind(s.Workspace); err != nil {
		return api.Settings{}, err
	}
	if s.CABundle != "" {
		if _, err := os.Stat(s.CABundle); err != nil {
			return api.Settings{}, errdefs.Invalidf("CA bundle %s: %v: give the path of a PEM file on the engine's host", s.CABundle, err)
		}
	}
	if s.Egress.Mode != "" || s.Egress.AskTimeout != 0 {
		if _, err := e.policyOf(&s.Egress); err != nil {
			return api.Settings{}, err
		}
	}
	// What was set through the API before, plus this change.
	var saved api.Settings
	path := filepath.Join(e.stateDir, settingsFile)
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &saved)
	}
	merge(&saved, s)
	b, _ := json.MarshalIndent(saved, "", "  ")
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return api.Settings{}, err
	}
	e.defaults.Store(&next)
	if e.warm != nil {
		e.warm.Refill() // the pool's size may have changed
	}
	e.log.Info("settings changed")
	return e.Settings(ctx), nil
}

// apply sets d's fields from the non-zero fields of s.
func apply(d *Defaults, s api.Settings) {
	if s.Image != "" {
		d.Image = s.Image
	}
	if s.IdleTimeout != 0 {
		d.IdleTimeout = s.IdleTimeout
	}
	if s.HibernateAfter != 0 {
		d.HibernateAfter = s.HibernateAfter
	}
	if s.Workspace != "" {
		d.Workspace = s.Workspace
	}
	if s.WarmPool != 0 {
		d.WarmPool = s.WarmPool
	}
	if s.CostPerCoreHour > 0 {
		d.CostPerCoreHour = s.CostPerCoreHour
	}
	if s.CABundle != "" {
		d.CABundle = s.CABundle
	}
	if s.Limits.CPUs > 0 {
		d.Limits.CPUs = s.Limits.CPUs
	}
	if s.Limits.Memory > 0 {
		d.Limits.Memory = s.Limits.Memory
	}
	if s.Limits.Pids > 0 {
		d.Limits.Pids = s.Limits.Pids
	}
	if s.Limits.WorkspaceSize > 0 {
		d.Limits.WorkspaceSize = s.Limits.WorkspaceSize
	}
	if s.Egress.Mode != "" {
		d.Egress = s.Egress
	} else if s.Egress.AskTimeout != 0 {
		d.Egress.AskTimeout = s.Egress.AskTimeout // alone, without a whole policy
	}
	if s.Review.MaxText > 0 {
		d.Review.MaxText = s.Review.MaxText
	}
	if s.Review.MaxLine > 0 {
		d.Review.MaxLine = s.Review.MaxLine
	}
	if s.Review.MaxTotalText > 0 {
		d.Review.MaxTotalText = s.Review.MaxTotalText
	}
}

// checkReviewLimits refuses review limits that would defeat their purpose:
// a text limit so large that one file's diff could take the engine's
// memory, or so small that nothing is diffed.
func checkReviewLimits(r api.ReviewLimits) error {
	switch {
	case r.MaxText < 0 || r.MaxText > 0 && (r.MaxText < 64<<10 || r.MaxText > 256<<20):
		return errdefs.Invalidf("review max_text must be between 64 KiB and 256 MiB (default 8 MiB)")
	case r.MaxLine < 0 || r.MaxLine > 0 && (r.MaxLine < 1<<10 || r.MaxLine > 16<<20):
		return errdefs.Invalidf("review max_line must be between 1 KiB and 16 MiB (default 64 KiB)")
	case r.MaxTotalText < 0 || r.MaxTotalText > 0 && (r.MaxTotalText < 1<<20 || r.MaxTotalText > 4<<30):
		return errdefs.Invalidf("review max_total_text must be between 1 MiB and 4 GiB (default 64 MiB)")
	}
	return nil
}

// merge is apply for the saved settings.
func merge(saved *api.Settings, s api.Settings) {
	d := Defaults{Image: saved.Image, IdleTimeout: saved.IdleTimeout, CostPerCoreHour: saved.CostPerCoreHour,
		CABundle: saved.CABundle, Limits: saved.Limits, Egress: saved.Egress, Review: saved.Review,
		HibernateAfter: saved.HibernateAfter, Workspace: saved.Workspace, WarmPool: saved.WarmPool}
	apply(&d, s)
	*saved = api.Settings{Image: d.Image, IdleTimeout: d.IdleTimeout, CostPerCoreHour: d.CostPerCoreHour,
		CABundle: d.CABundle, Limits: d.Limits, Egress: d.Egress, Review: d.Review,
		HibernateAfter: d.HibernateAfter, Workspace: d.Workspace, WarmPool: d.WarmPool}
}

// loadSettings applies the saved settings over d.
func loadSettings(stateDir string, d *Defaults) error {
	b, err := os.ReadFile(filepath.Join(stateDir, settingsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s api.Settings
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %v: fix or delete it (it holds the settings changed in the app)", filepath.Join(stateDir, settingsFile), err)
	}
	apply(d, s)
	return nil
}
