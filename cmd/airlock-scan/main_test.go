package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/secretscan"
)

// TestScannerBinary: the built airlock-scan answers the engine's Process
// (gitleaks' rules, through the wire), and refuses to be run by hand
// with arguments.
func TestScannerBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "airlock-scan")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	p := secretscan.NewProcess(secretscan.ProcessOptions{Path: bin})
	defer p.Close()
	for range 2 {
		all, err := p.Find(context.Background(), []string{"plain\n", "x\nstripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF\n"})
		if err != nil || len(all) != 2 || len(all[0]) != 0 {
			t.Fatalf("found %+v, %v; want an answer for each of 2 texts, nothing in the first", all, err)
		}
		if got := all[1]; len(got) != 1 || got[0].Line != 2 || got[0].Rule != "stripe-access-token" {
			t.Fatalf("found %+v; want the Stripe key on line 2", got)
		}
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "the engine runs it") {
		t.Fatalf("run by hand: %v: %s", err, out)
	}
}
