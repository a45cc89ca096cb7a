package main

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
	"github.com/spf13/cobra"
)

// The system service: the engine runs as root (it mounts workspaces) and
// lets the members of a group use its socket, so that the desktop app and
// the CLI run as a normal user.
const unitTemplate = `[Unit]
Description=Airlock engine: sandboxes for coding agents
Documentation=man:airlock(1) file://{{.Docs}}
After=docker.service network-online.target
Wants=docker.service network-online.target

[Service]
Type=simple
ExecStart={{.Bin}} serve --engine {{.Socket}} --state-dir {{.State}} --socket-group {{.Group}}
Restart=on-failure
RestartSec=2
# Sessions are Docker's containers and the host's mounts: they outlive the
# engine, which finds them again when it starts.
KillMode=process

[Install]
WantedBy=multi-user.target
`

type serviceOptions struct {
	group   string
	users   []string
	bin     string
	root    string
	dryRun  bool
	noStart bool
}

func installServiceCmd(g *globals) *cobra.Command {
	o := &serviceOptions{}
	cmd := &cobra.Command{
		Use:   "install-service",
		Short: "Run the engine as a system service (systemd) that a group's members can use without root",
		Long: `Run the engine as a systemd service, as root (it mounts the session
workspaces), with its socket usable by the members of a group (default
airlock), so that the desktop app and the CLI run as a normal user.

It copies this airlock binary to /usr/local/bin, creates the group, adds
the user who ran sudo (or --user) to it, writes
/etc/systemd/system/airlock.service and starts it. Log out and in again
for a new group membership to count. --dry-run shows what it would do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return installService(cmd.OutOrStdout(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.group, "group", "airlock", "the group whose members may use the engine")
	cmd.Flags().StringArrayVar(&o.users, "user", nil, "add this user to the group (default: $SUDO_USER)")
	cmd.Flags().StringVar(&o.bin, "bin", "/usr/local/bin/airlock", "where the service's binary goes")
	cmd.Flags().StringVar(&o.root, "root", "/", "install under this directory (for packaging and tests: no group, no systemctl)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be done, change nothing")
	cmd.Flags().BoolVar(&o.noStart, "no-start", false, "write the unit but do not enable or start it")
	return cmd
}

func installService(out io.Writer, g *globals, o *serviceOptions) error {
	packaging := o.root != "/"
	if os.Geteuid() != 0 && !o.dryRun && !packaging {
		return errdefs.Forbiddenf("installing the service needs root: run `sudo airlock install-service`")
	}
	if strings.ContainsAny(o.group, " :/\n") || o.group == "" {
		return errdefs.Invalidf("--group %q is not a group name", o.group)
	}
	users := o.users
	if len(users) == 0 {
		if u := os.Getenv("SUDO_USER"); u != "" && u != "root" {
			users = []string{u}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var unit bytes.Buffer
	template.Must(template.New("unit").Parse(unitTemplate)).Execute(&unit, map[string]string{
		"Bin": o.bin, "Socket": g.engine, "State": envOr("AIRLOCK_STATE_DIR", defaultStateDir), "Group": o.group,
		"Docs": "/usr/share/doc/airlock/README.md",
	})
	unitPath := filepath.Join(o.root, "etc/systemd/system/airlock.service")
	binPath := filepath.Join(o.root, o.bin)
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	var steps []string
	if self != binPath {
		steps = append(steps, fmt.Sprintf("copy %s to %s", self, binPath))
	}
	if !packaging {
		if _, err := user.LookupGroup(o.group); err != nil {
			steps = append(steps, "create the group "+o.group+" (groupadd --system)")
		}
		for _, u := range users {
			steps = append(steps, fmt.Sprintf("add %s to the group %s (usermod -aG)", u, o.group))
		}
	}
	steps = append(steps, "write "+unitPath)
	systemd := !packaging && !o.noStart && systemdRunning()
	if systemd {
		steps = append(steps, "systemctl daemon-reload; systemctl enable --now airlock")
	}
	if o.dryRun {
		for _, s := range steps {
			say("would %s", s)
		}
		say("\n%s:\n%s", unitPath, unit.String())
		return nil
	}

	if self != binPath {
		if err := copyFile(self, binPath, 0o755); err != nil {
			return fmt.Errorf("install the binary: %w", err)
		}
		say("installed %s", binPath)
	}
	if !packaging {
		if _, err := user.LookupGroup(o.group); err != nil {
			if out, err := exec.Command("groupadd", "--system", o.group).CombinedOutput(); err != nil {
				return fmt.Errorf("groupadd %s: %v: %s", o.group, err, out)
			}
			say("created the group %s", o.group)
		}
		for _, u := range users {
			if out, err := exec.Command("usermod", "-aG", o.group, u).CombinedOutput(); err != nil {
				return fmt.Errorf("add %s to %s: %v: %s", u, o.group, err, out)
			}
			say("added %s to %s (log out and in again for it to count)", u, o.group)
		}
	}
	if err := os.MkdirAll(filepath.Dir(unitPath), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(unitPath, unit.Bytes(), 0o644); err != nil {
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
		say("the engine runs as the service airlock (`systemctl status airlock`); members of %s can use it", o.group)
	case packaging || o.noStart:
	default:
		say("systemd is not running here: start the engine with `sudo %s serve --socket-group %s`", o.bin, o.group)
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
