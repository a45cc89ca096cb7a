package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

func snapshotCmd(g *globals) *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "snapshot ID",
		Short: "Capture a session (installed packages, the agent's home, the workspace) as OCI layers",
		Long: `Capture a session: the container's own changes (installed packages,
the agent's home) and the workspace's changes, each an OCI layer in the
engine's snapshot store. The session is frozen while its layers are read
and keeps running after. Restore or fork it into new sessions; export it
as an OCI image tar.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Snapshot(cmd.Context(), args[0], api.SnapshotRequest{Name: name})
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(s)
			}
			fmt.Println(s.ID)
			fmt.Fprintf(os.Stderr, "airlock: snapshot %s of session %s: %s; frozen %s, took %s\n",
				snapshotLabel(s), shortID(s.Session), layerSummary(s), roundDur(s.Frozen), roundDur(s.Took))
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name to find it by (restore NAME)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	cmd.AddCommand(snapshotsCmd(g, "ls"), snapshotRmCmd(g), snapshotExportCmd(g), snapshotImportCmd(g))
	return cmd
}

func snapshotLabel(s api.Snapshot) string {
	if s.Name != "" {
		return shortID(s.ID) + " (" + s.Name + ")"
	}
	return shortID(s.ID)
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Second:
		return d.Round(time.Second)
	case d > time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func layerSummary(s api.Snapshot) string {
	var parts []string
	for _, l := range s.Layers {
		part := fmt.Sprintf("%s %d files %s", l.What, l.Files, bytesText(l.Bytes)+"B")
		if l.Delete > 0 {
			part += fmt.Sprintf(", %d deletions", l.Delete)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func snapshotsCmd(g *globals, use string) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   use,
		Short: "List snapshots",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, _ []string) ([]api.Snapshot, error) {
			return c.Snapshots(ctx)
		}, func(list []api.Snapshot) error {
			return table("ID\tNAME\tSESSION\tPROJECT\tCONTAINER\tWORKSPACE\tCREATED", func(tw io.Writer) {
				for _, s := range list {
					sizes := map[string]string{}
					for _, l := range s.Layers {
						sizes[l.What] = fmt.Sprintf("%d files %s", l.Files, bytesText(l.Bytes)+"B")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortID(s.ID), dash(s.Name), dash(shortID(s.Session)), dash(s.Project),
						sizes["container"], sizes["workspace"], s.Created.Local().Format("2006-01-02 15:04"))
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the snapshots")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func snapshotRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm SNAPSHOT...",
		Short: "Delete snapshots (layers other snapshots share stay)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			for _, ref := range args {
				if err := c.RemoveSnapshot(cmd.Context(), ref); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func restoreCmd(g *globals) *cobra.Command {
	return forkish(g, "restore SNAPSHOT", "A new session from a snapshot", false)
}

func forkCmd(g *globals) *cobra.Command {
	return forkish(g, "fork SNAPSHOT | fork ID --turn N", "N new sessions from one snapshot (or a session's turn), made in parallel", true)
}

func forkish(g *globals, use, short string, fork bool) *cobra.Command {
	var n, turn int
	var checkpoint int64
	var project, image, user string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `. Each starts with the snapshot's installed packages, agent
home and workspace changes, over the project as it is now (the diff is
against the project now). Prints the new session ids.

A snapshot imported from an archive has no settings of its own (an
archive's are never used): give --project, and --image when the archive
did not carry its image; user, limits and network policy are then yours
(--user, or the engine's defaults).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			if project != "" {
				if project, err = filepath.Abs(project); err != nil {
					return err
				}
			}
			var out api.Restored
			if turn > 0 || checkpoint > 0 {
				if project != "" || image != "" || user != "" {
					return usageErr("a fork from a turn keeps the session's project, image and user: leave out --project, --image and --user")
				}
				out, err = c.Fork(cmd.Context(), args[0], api.ForkRequest{Turn: turn, Checkpoint: checkpoint, N: n})
			} else {
				out, err = c.Restore(cmd.Context(), args[0], api.RestoreRequest{N: n, Project: project, Image: image, User: user})
			}
			if err != nil {
				return err
			}
			for _, w := range out.Warnings {
				fmt.Fprintln(os.Stderr, "airlock: "+w)
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(out)
			}
			for _, s := range out.Sessions {
				fmt.Println(s.ID)
			}
			if fork && len(out.Sessions) < n {
				return fmt.Errorf("made %d of %d sessions", len(out.Sessions), n)
			}
			return nil
		},
	}
	if fork {
		cmd.Flags().IntVarP(&n, "n", "n", 2, "how many sessions")
		cmd.Flags().IntVar(&turn, "turn", 0, "fork session ID from the state after this agent turn (airlock turns ID lists them)")
		cmd.Flags().Int64Var(&checkpoint, "checkpoint", 0, "fork session ID from this checkpoint")
		cmd.MarkFlagsMutuallyExclusive("turn", "checkpoint")
		cmd.Long += "\n\nWith --turn N (or --checkpoint C) the argument is a session: the new sessions\nstart from its workspace as it was after that turn, with its settings."
	} else {
		n = 1
	}
	cmd.Flags().StringVar(&project, "project", "", "the project to put the workspace over (default: the snapshot's; required for an imported one)")
	cmd.Flags().StringVar(&image, "image", "", "the image to run (default: the snapshot's, or the one its archive carried)")
	cmd.Flags().StringVarP(&user, "user", "u", "", "uid:gid or name to run as (default: the snapshot's, or the project owner)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the sessions as JSON")
	return cmd
}

func snapshotExportCmd(g *globals) *cobra.Command {
	var out string
	var noBase bool
	cmd := &cobra.Command{
		Use:   "export SNAPSHOT -o FILE",
		Short: "Write a snapshot as an OCI image tar (readable by docker load, skopeo, crane)",
		Long: `Write a snapshot as an OCI image tar: an OCI image layout (oci-layout,
index.json, blobs) with the manifest.json that docker load reads. By
default the image the session ran on is included, so the tar is a whole
runnable image and imports on a machine without that image; --no-base
writes the snapshot's two layers alone. The file appears only once it is
complete.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("say where to write the tar: -o snap.tar (or -o - for standard output)")
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			body, err := c.ExportSnapshot(cmd.Context(), args[0], !noBase)
			if err != nil {
				return err
			}
			defer body.Close()
			if out == "-" {
				_, err := io.Copy(os.Stdout, body)
				return err
			}
			var n int64
			err = atomicfile.WriteFrom(out, 0o644, func(w io.Writer) (err error) {
				n, err = io.Copy(w, body)
				return err
			})
			if err != nil {
				return fmt.Errorf("write %s: %w (nothing was written there)", out, err)
			}
			fmt.Fprintf(os.Stderr, "airlock: wrote %s (%s)\n", out, bytesText(n)+"B")
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the tar to write (- for standard output)")
	cmd.Flags().BoolVar(&noBase, "no-base", false, "leave out the image the session ran on")
	return cmd
}

func snapshotImportCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Read a snapshot from an OCI image tar written by export (- for standard input)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			out, err := c.ImportSnapshot(cmd.Context(), in)
			if err != nil {
				return err
			}
			for _, w := range out.Warnings {
				fmt.Fprintln(os.Stderr, "airlock: "+w)
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(out.Snapshot)
			}
			fmt.Println(out.Snapshot.ID)
			fmt.Fprintf(os.Stderr, "airlock: imported snapshot %s: restore it with `airlock restore %s --project DIR` (an archive's settings are never used)\n",
				snapshotLabel(out.Snapshot), shortID(out.Snapshot.ID))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	return cmd
}
