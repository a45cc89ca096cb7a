package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/docker/go-units"
	"gopkg.in/yaml.v3"
)

// config is the engine's config file (YAML). Every field is optional.
type config struct {
	Image         string  `yaml:"image"`
	WorkspaceSize string  `yaml:"workspace_size"`
	Memory        string  `yaml:"memory"`
	CPUs          float64 `yaml:"cpus"`
	Pids          int64   `yaml:"pids"`
	// CABundle is a PEM file of extra CAs every session trusts (for
	// intercepting proxies).
	CABundle string `yaml:"ca_bundle"`
	// Agents sets each agent's model and provider endpoint, by name.
	Agents map[string]agentConfig `yaml:"agents"`
	// Egress is the network policy of sessions that ask for none.
	Egress *egressConfig `yaml:"egress"`
	// IdleTimeout pauses sessions idle that long ("off": never).
	IdleTimeout string `yaml:"idle_timeout"`
	// HibernateAfter hibernates sessions idle that long (default 2h;
	// "off" or 0: never).
	HibernateAfter string `yaml:"hibernate_after"`
	// HibernateKeepProcesses keeps idle sessions' processes when they
	// hibernate, where Docker and CRIU can (off by default).
	HibernateKeepProcesses bool `yaml:"hibernate_keep_processes"`
	// Workspace is where sessions' writes live: tmpfs (default) or disk.
	Workspace string `yaml:"workspace"`
	// CostPerCoreHour prices active CPU.
	CostPerCoreHour float64 `yaml:"cost_per_core_hour"`
	// Checkpoints: how often a changing workspace is checkpointed
	// between turns ("off": never), how many checkpoints and how many
	// bytes of them each session keeps.
	CheckpointEvery   string `yaml:"checkpoint_every"`
	CheckpointKeep    int    `yaml:"checkpoint_keep"`
	CheckpointMaxSize string `yaml:"checkpoint_max_size"`
	// WarmPool is how many warm containers the engine keeps for each
	// of the two kinds of session asked for last (default 2; 0: none).
	WarmPool *int `yaml:"warm_pool"`
}

type egressConfig struct {
	Mode    string   `yaml:"mode"`
	Allow   []string `yaml:"allow"`
	Deny    []string `yaml:"deny"`
	Private bool     `yaml:"private"`
	Inspect []string `yaml:"inspect"`
	// AskTimeout is how long the ask mode holds a question (a duration
	// like 2m; default 60s).
	AskTimeout string `yaml:"ask_timeout"`
}

type agentConfig struct {
	Model   string `yaml:"model"`
	BaseURL string `yaml:"base_url"`
}

// LoadConfig reads the config file at path into the sessions' defaults.
// A missing file is an error only when required (the user named it);
// otherwise it means the built-in defaults.
func LoadConfig(path string, required bool) (engine.Defaults, error) {
	c, err := readConfig(path, required)
	if err != nil {
		return engine.Defaults{}, err
	}
	return c.defaults()
}

func readConfig(path string, required bool) (config, error) {
	var c config
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return c, nil
	}
	if err != nil {
		return c, errdefs.Invalidf("config %s: %v", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, errdefs.Invalidf("config %s: %v: see the README's configuration section", path, err)
	}
	return c, nil
}

func (c config) defaults() (engine.Defaults, error) {
	d := engine.Defaults{Image: c.Image, CABundle: c.CABundle}
	switch c.IdleTimeout {
	case "":
	case "off", "never":
		d.IdleTimeout = -1
	default:
		t, err := time.ParseDuration(c.IdleTimeout)
		if err != nil || t <= 0 {
			return d, errdefs.Invalidf("config idle_timeout %q: write a duration like 30m, or off", c.IdleTimeout)
		}
		d.IdleTimeout = t
	}
	switch c.HibernateAfter {
	case "":
	case "off", "never", "0":
		d.HibernateAfter = -1
	default:
		t, err := time.ParseDuration(c.HibernateAfter)
		if err != nil || t < 0 {
			return d, errdefs.Invalidf("config hibernate_after %q: write a duration like 2h, or off", c.HibernateAfter)
		}
		d.HibernateAfter = t
		if t == 0 {
			d.HibernateAfter = -1
		}
	}
	d.HibernateKeepProcesses = c.HibernateKeepProcesses
	switch c.Workspace {
	case "", api.WorkspaceTmpfs, api.WorkspaceDisk:
		d.Workspace = c.Workspace
	default:
		return d, errdefs.Invalidf("config workspace %q: write tmpfs (in memory) or disk", c.Workspace)
	}
	switch c.CheckpointEvery {
	case "":
	case "off", "never":
		d.CheckpointEvery = -1
	default:
		t, err := time.ParseDuration(c.CheckpointEvery)
		if err != nil || t <= 0 {
			return d, errdefs.Invalidf("config checkpoint_every %q: write a duration like 60s, or off", c.CheckpointEvery)
		}
		d.CheckpointEvery = t
	}
	if c.CheckpointKeep < 0 {
		return d, errdefs.Invalidf("config checkpoint_keep must be positive")
	}
	if c.WarmPool != nil {
		switch n := *c.WarmPool; {
		case n < 0:
			return d, errdefs.Invalidf("config warm_pool %d: give how many warm containers to keep, 0 for none", n)
		case n == 0:
			d.WarmPool = -1
		default:
			d.WarmPool = n
		}
	}
	d.CheckpointKeep = c.CheckpointKeep
	if c.CostPerCoreHour < 0 {
		return d, errdefs.Invalidf("config cost_per_core_hour must be positive")
	}
	d.CostPerCoreHour = c.CostPerCoreHour
	if c.Egress != nil {
		mode := c.Egress.Mode
		if mode == "" {
			mode = "custom"
		}
		var ask time.Duration
		if c.Egress.AskTimeout != "" {
			var err error
			if ask, err = time.ParseDuration(c.Egress.AskTimeout); err != nil || ask <= 0 {
				return d, errdefs.Invalidf("config egress ask_timeout %q: write a duration like 60s or 5m", c.Egress.AskTimeout)
			}
		}
		d.Egress = api.EgressPolicy{Mode: mode, Allow: c.Egress.Allow, Deny: c.Egress.Deny, Private: c.Egress.Private, Inspect: c.Egress.Inspect, AskTimeout: ask}
		if _, err := egress.Compile(egress.Spec{Mode: mode, Allow: c.Egress.Allow, Deny: c.Egress.Deny, Inspect: c.Egress.Inspect, AskTimeout: ask}); err != nil {
			return d, errdefs.Invalidf("config egress: %v", err)
		}
	}
	for name, a := range c.Agents {
		if _, err := harness.Lookup(name); err != nil {
			return d, errdefs.Invalidf("config agents: %v", err)
		}
		if d.Agents == nil {
			d.Agents = map[string]engine.AgentDefaults{}
		}
		d.Agents[name] = engine.AgentDefaults{Model: a.Model, BaseURL: a.BaseURL}
	}
	d.Limits.CPUs = c.CPUs
	d.Limits.Pids = c.Pids
	var err error
	if d.Limits.WorkspaceSize, err = ParseSize("workspace_size", c.WorkspaceSize); err != nil {
		return d, err
	}
	if d.Limits.Memory, err = ParseSize("memory", c.Memory); err != nil {
		return d, err
	}
	if d.CheckpointMaxBytes, err = ParseSize("checkpoint_max_size", c.CheckpointMaxSize); err != nil {
		return d, err
	}
	return d, nil
}

// ParseSize reads sizes like 512m or 2g for the setting name (named in
// the error); empty is zero (the default).
func ParseSize(name, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(s)
	if err != nil || n <= 0 {
		return 0, errdefs.Invalidf("%s %q is not a size: write it like 512m or 2g", name, s)
	}
	return n, nil
}
