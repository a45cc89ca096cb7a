package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
)

// TestServiceUnit: the unit runs the engine the way the options say, with
// the socket shared with the group, and sessions outliving a restart.
func TestServiceUnit(t *testing.T) {
	o := ServiceOptions{Group: "devs", Bin: "/opt/airlock/bin/airlock", Socket: "/run/a/a.sock", StateDir: "/srv/airlock"}.withDefaults()
	unit := string(o.unit())
	for _, want := range []string{
		"ExecStart=/opt/airlock/bin/airlock serve --engine /run/a/a.sock --state-dir /srv/airlock --socket-group devs\n",
		"After=docker.service", "Restart=on-failure", "KillMode=process", "WantedBy=multi-user.target",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
}

func TestServiceOptionDefaults(t *testing.T) {
	t.Setenv("SUDO_USER", "alice")
	o := ServiceOptions{}.withDefaults()
	if o.Group != "airlock" || o.Bin != "/usr/local/bin/airlock" || o.Root != "/" || o.Socket != DefaultSocket || o.StateDir != DefaultStateDir ||
		len(o.Users) != 1 || o.Users[0] != "alice" {
		t.Errorf("defaults %+v", o)
	}
	if o := (ServiceOptions{Users: []string{"bob"}}).withDefaults(); len(o.Users) != 1 || o.Users[0] != "bob" {
		t.Errorf("--user replaces $SUDO_USER: %v", o.Users)
	}
	t.Setenv("SUDO_USER", "root")
	if o := (ServiceOptions{}).withDefaults(); len(o.Users) != 0 {
		t.Errorf("root is never added to the group: %v", o.Users)
	}
}

// TestInstallServicePackaging installs into a packaging root: the binary
// and the unit, nothing else; a dry run writes nothing.
func TestInstallServicePackaging(t *testing.T) {
	root := t.TempDir()
	var out bytes.Buffer
	if err := InstallService(&out, ServiceOptions{Root: root, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	unitPath := filepath.Join(root, "etc/systemd/system/airlock.service")
	if !strings.Contains(out.String(), "would write "+unitPath) || !strings.Contains(out.String(), "ExecStart=/usr/local/bin/airlock serve") {
		t.Errorf("dry run:\n%s", out.String())
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("the dry run wrote %v", entries)
	}
	out.Reset()
	if err := InstallService(&out, ServiceOptions{Root: root, StateDir: "/srv/airlock"}); err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(unitPath)
	if err != nil || !strings.Contains(string(unit), "--state-dir /srv/airlock ") {
		t.Errorf("the unit: %v\n%s", err, unit)
	}
	bin := filepath.Join(root, "usr/local/bin/airlock")
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(bin)
	if fi, _ := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 || !bytes.Equal(got, want) {
		t.Errorf("the binary was not installed as this one, mode 0755: %v", err)
	}
	if strings.Contains(out.String(), "systemctl") || strings.Contains(out.String(), "group") {
		t.Errorf("packaging touched the system:\n%s", out.String())
	}
}

// TestInstallServiceRefuses what would make a broken or injected unit.
func TestInstallServiceRefuses(t *testing.T) {
	root := t.TempDir()
	for _, o := range []ServiceOptions{
		{Group: "bad group"},
		{Group: "a:b"},
		{Bin: "airlock"},
		{StateDir: "/var/lib/airlock\nExecStartPre=/bin/evil"},
		{Socket: "/run/my airlock.sock"},
	} {
		o.Root, o.DryRun = root, true
		if err := InstallService(&bytes.Buffer{}, o); err == nil || !errdefs.IsInvalid(err) {
			t.Errorf("%+v: %v, want an invalid-input error", o, err)
		}
	}
}
