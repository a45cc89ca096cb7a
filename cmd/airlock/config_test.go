package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(p, []byte("idle_timeout: off\ncost_per_core_hour: 0.25\nmemory: 8g\negress:\n  allow: [example.org, \"*.example.com:443\"]\nagents:\n  claude: {model: m1, base_url: \"http://10.0.0.5:8080\"}\n"), 0o644)
	c, err := loadConfig(p, true)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.defaults()
	if err != nil {
		t.Fatal(err)
	}
	if d.IdleTimeout != -1 || d.CostPerCoreHour != 0.25 || d.Limits.Memory != 8<<30 || d.Egress.Mode != "custom" ||
		len(d.Egress.Allow) != 2 || d.Agents["claude"].Model != "m1" {
		t.Fatalf("defaults %+v", d)
	}
	for bad, says := range map[string]string{
		"idle_timeout: soon\n":                 "idle_timeout",
		"egress: {mode: open}\n":               "allow-all, deny-all or custom",
		"egress: {allow: [\"10.0.0.1/8\"]}\n":  "host bits",
		"agents: {gpt-engineer: {model: x}}\n": "unknown agent",
		"memory: lots\n":                       "not a size",
		"unknown_key: 1\n":                     "unknown_key",
		"cost_per_core_hour: -1\n":             "positive",
	} {
		os.WriteFile(p, []byte(bad), 0o644)
		c, err := loadConfig(p, true)
		if err == nil {
			_, err = c.defaults()
		}
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, says)
		}
	}
}
