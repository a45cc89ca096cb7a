package daemon

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/errdefs"
)

// The system service: the engine runs as root (it mounts workspaces) and
// lets the members of a group use its socket, so that the desktop app and
// the CLI run as a normal user.
var unitTemplate = template.Must(template.New("unit").Parse(`[Unit]
Description=Airlock engine: sandboxes for coding agents
Documentation=man:airlock(1) file://{{.Docs}}
After=docker.service network-online.target
Wants=docker.service network-online.target

[Service]
Type=simple
ExecStart={{.Bin}} serve --engine {{.Socket}} --state-dir {{.StateDir}} --socket-group {{.Group}}
Restart=on-failure
RestartSec=2
# Sessions are Docker's containers and the host's mounts: they outlive the
# engine, which finds them again when it starts.
KillMode=process

[Install]
WantedBy=multi-user.target
`))

// ServiceOptions say how `airlock install-service` installs the engine.
type ServiceOptions struct {
	// Group's members may use the engine (default airlock).
	Group string
	// Users are added to Group (default: $SUDO_USER, unless root).
	Users []string
	// Bin is where the service's binary goes (default
	// /usr/local/bin/airlock); the running binary is copied there.
	Bin string
	// Root installs under this directory instead of / (packaging and
	// tests: no group, no systemctl).
	Root string
	// Socket and StateDir are the service's (defaults DefaultSocket and
	// DefaultStateDir).
	Socket   string
	StateDir string
	// DryRun prints what would be done and changes nothing.
	DryRun bool
	// NoStart writes the unit without enabling or starting it.
	NoStart bool
}

func (o ServiceOptions) withDefaults() ServiceOptions {
	if o.Group == "" {
		o.Group = "airlock"
	}
	if o.Bin == "" {
		o.Bin = "/usr/local/bin/airlock"
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if len(o.Users) == 0 {
		if u := os.Getenv("SUDO_USER"); u != "" && u != "root" {
			o.Users = []string{u}
		}
	}
	return o
}

// unit renders the systemd unit of the service.
func (o ServiceOptions) unit() []byte {
	var b bytes.Buffer
	unitTemplate.Execute(&b, map[string]string{
		"Bin": o.Bin, "Socket": o.Socket, "StateDir": o.StateDir, "Group": o.Group,
		"Docs": "/usr/share/doc/airlock/README.md",
	})
	return b.Bytes()
}

// InstallService installs the engine as the systemd service airlock: the
// binary, the group and its users, the unit; then enables and starts it.
// It reports each step on out.
func InstallService(out io.Writer, o ServiceOptions) error {
	o = o.withDefaults()
	packaging := o.Root != "/"
	if os.Geteuid() != 0 && !o.DryRun && !packaging {
		return errdefs.Forbiddenf("installing the service needs root: run `sudo airlock install-service`")
	}
	if strings.ContainsAny(o.Group, " :/\n") {
		return errdefs.Invalidf("--group %q is not a group name", o.Group)
	}
	for _, p := range []string{o.Bin, o.Socket, o.StateDir} {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, " \n") {
			return errdefs.Invalidf("%q: the service needs absolute paths without spaces", p)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	unit := o.unit()
	unitPath := filepath.Join(o.Root, "etc/systemd/system/airlock.service")
	binPath := filepath.Join(o.Root, o.Bin)
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	var steps []string
	if self != binPath {
		steps = append(steps, fmt.Sprintf("copy %s to %s", self, binPath))
	}
	if !packaging {
		if _, err := user.LookupGroup(o.Group); err != nil {
			steps = append(steps, "create the group "+o.Group+" (groupadd --system)")
		}
		for _, u := range o.Users {
			steps = append(steps, fmt.Sprintf("add %s to the group %s (usermod -aG)", u, o.Group))
		}
	}
	steps = append(steps, "write "+unitPath)
	systemd := !packaging && !o.NoStart && systemdRunning()
	if systemd {
		steps = append(steps, "systemctl daemon-reload; systemctl enable --now airlock")
	}
	if o.DryRun {
		for _, s := range steps {
			say("would %s", s)
		}
		say("\n%s:\n%s", unitPath, unit)
		return nil
	}

	if self != binPath {
		if err := copyFile(self, binPath, 0o755); err != nil {
			return fmt.Errorf("install the binary: %w", err)
		}
		say("installed %s", binPath)
	}
	if !packaging {
		if _, err := user.LookupGroup(o.Group); err != nil {
			if out, err := exec.Command("groupadd", "--system", o.Group).CombinedOutput(); err != nil {
				return fmt.Errorf("groupadd %s: %v: %s", o.Group, err, out)
			}
			say("created the group %s", o.Group)
		}
		for _, u := range o.Users {
			if out, err := exec.Command("usermod", "-aG", o.Group, u).CombinedOutput(); err != nil {
				return fmt.Errorf("add %s to %s: %v: %s", u, o.Group, err, out)
			}
			say("added %s to %s (log out and in again for it to count)", u, o.Group)
		}
	}
	if err := os.MkdirAll(filepath.Dir(unitPath), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(unitPath, unit, 0o644); err != nil {
		return err
	}
	say("wrote %s", unitPath)
	switch {
	case systemd:
		for _, args := range [][]string{{"daemon-reload"}, {"enable", "--now", "airlock"}} {
			if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
		say("the engine runs as the service airlock (`systemctl status airlock`); members of %s can use it", o.Group)
	case packaging || o.NoStart:
	default:
		say("systemd is not running here: start the engine with `sudo %s serve --socket-group %s`", o.Bin, o.Group)
	}
	return nil
}

func systemdRunning() bool {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return false
	}
	_, err := exec.LookPath("systemctl")
	return err == nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(dst, data, mode)
}
