package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/errdefs"
)

func TestConfigFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(p, []byte("idle_timeout: off\ncost_per_core_hour: 0.25\nmemory: 8g\nworkspace_size: 512m\ncpus: 1.5\npids: 200\nimage: my/image\nca_bundle: /etc/ca.pem\nhibernate_after: 4h\nhibernate_keep_processes: true\nworkspace: disk\ncheckpoint_every: 30s\ncheckpoint_keep: 50\ncheckpoint_max_size: 1g\nwarm_pool: 5\n"+
		"egress:\n  allow: [example.org, \"*.example.com:443\"]\n  private: true\n  ask_timeout: 2m\nagents:\n  claude: {model: m1, base_url: \"http://10.0.0.5:8080\"}\n"), 0o644)
	d, err := LoadConfig(p, true)
	if err != nil {
		t.Fatal(err)
	}
	if d.IdleTimeout != -1 || d.CostPerCoreHour != 0.25 || d.Limits.Memory != 8<<30 || d.Limits.WorkspaceSize != 512<<20 ||
		d.Limits.CPUs != 1.5 || d.Limits.Pids != 200 || d.Image != "my/image" || d.CABundle != "/etc/ca.pem" ||
		d.Egress.Mode != "custom" || len(d.Egress.Allow) != 2 || !d.Egress.Private || d.Egress.AskTimeout != 2*time.Minute ||
		d.Agents["claude"].Model != "m1" || d.Agents["claude"].BaseURL != "http://10.0.0.5:8080" ||
		d.HibernateAfter != 4*time.Hour || !d.HibernateKeepProcesses || d.Workspace != "disk" ||
		d.CheckpointEvery != 30*time.Second || d.CheckpointKeep != 50 || d.CheckpointMaxBytes != 1<<30 || d.WarmPool != 5 {
		t.Fatalf("defaults %+v", d)
	}
	for bad, says := range map[string]string{
		"idle_timeout: soon\n":                 "idle_timeout",
		"idle_timeout: -5m\n":                  "idle_timeout",
		"hibernate_after: later\n":             "hibernate_after",
		"workspace: ram\n":                     "tmpfs (in memory) or disk",
		"egress: {mode: open}\n":               "allow-all, deny-all or custom",
		"egress: {allow: [\"10.0.0.1/8\"]}\n":  "host bits",
		"egress: {ask_timeout: soon}\n":        "ask_timeout",
		"egress: {ask_timeout: 3h}\n":          "ask timeout",
		"agents: {gpt-engineer: {model: x}}\n": "unknown agent",
		"memory: lots\n":                       "not a size",
		"workspace_size: 0\n":                  "not a size",
		"unknown_key: 1\n":                     "unknown_key",
		"cost_per_core_hour: -1\n":             "positive",
		"checkpoint_every: often\n":            "checkpoint_every",
		"checkpoint_max_size: big\n":           "not a size",
		"memory: [1, 2]\n":                     "README",
		"warm_pool: -1\n":                      "warm_pool",
	} {
		os.WriteFile(p, []byte(bad), 0o644)
		_, err := LoadConfig(p, true)
		if err == nil || !strings.Contains(err.Error(), says) || !errdefs.IsInvalid(err) {
			t.Errorf("%q: %v, want an invalid-input error saying %q", bad, err, says)
		}
	}
}

// TestConfigWarmPoolOff: 0 turns the pool off (negative in the engine's
// defaults, where 0 is the built-in default).
func TestConfigWarmPoolOff(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(p, []byte("warm_pool: 0\n"), 0o644)
	if d, err := LoadConfig(p, true); err != nil || d.WarmPool >= 0 {
		t.Fatalf("warm_pool: 0 gives %d, %v: want the pool off", d.WarmPool, err)
	}
	os.WriteFile(p, []byte("image: x\n"), 0o644)
	if d, err := LoadConfig(p, true); err != nil || d.WarmPool != 0 {
		t.Fatalf("no warm_pool gives %d, %v: want the built-in default", d.WarmPool, err)
	}
}

// TestConfigMissingOrEmpty: the default file may be missing or empty (the
// built-in defaults); a file the user named must exist.
func TestConfigMissingOrEmpty(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.yaml")
	if d, err := LoadConfig(missing, false); err != nil || d.Image != "" || d.IdleTimeout != 0 || d.Agents != nil {
		t.Errorf("a missing default config: %+v, %v", d, err)
	}
	if _, err := LoadConfig(missing, true); err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing named config: %v, want an invalid-input error naming it", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	if d, err := LoadConfig(empty, true); err != nil || d.Image != "" || d.Limits.Memory != 0 {
		t.Errorf("an empty config: %+v, %v", d, err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "512m": 512 << 20, "2g": 2 << 30, "1024": 1024, "1.5g": 3 << 29} {
		if n, err := ParseSize("--memory", in); err != nil || n != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"lots", "-1g", "0"} {
		if _, err := ParseSize("--memory", bad); err == nil || !strings.Contains(err.Error(), "--memory") || !errdefs.IsInvalid(err) {
			t.Errorf("ParseSize(%q): %v, want an invalid-input error naming --memory", bad, err)
		}
	}
}
