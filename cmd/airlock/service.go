package main

import (
	"github.com/airlock/airlock/daemon"
	"github.com/spf13/cobra"
)

func installServiceCmd(g *globals) *cobra.Command {
	var o daemon.ServiceOptions
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
			o.Socket = g.engine
			o.StateDir = envOr("AIRLOCK_STATE_DIR", daemon.DefaultStateDir)
			return daemon.InstallService(cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Group, "group", "airlock", "the group whose members may use the engine")
	cmd.Flags().StringArrayVar(&o.Users, "user", nil, "add this user to the group (default: $SUDO_USER)")
	cmd.Flags().StringVar(&o.Bin, "bin", "/usr/local/bin/airlock", "where the service's binary goes")
	cmd.Flags().StringVar(&o.Root, "root", "/", "install under this directory (for packaging and tests: no group, no systemctl)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print what would be done, change nothing")
	cmd.Flags().BoolVar(&o.NoStart, "no-start", false, "write the unit but do not enable or start it")
	return cmd
}
