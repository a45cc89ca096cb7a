package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/audit"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

// auditCmd writes a session's audit bundle.
func auditCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "audit ID",
		Short: "Write the session's audit bundle: commands, agent tool calls, connections with their decisions, secrets injected, snapshots, checkpoints, the patch and which turn and call produced each hunk (index.json, schema " + audit.Schema + ")",
		Example: "  airlock audit 3f2a -o run.tar.gz\n" +
			"  airlock audit 3f2a -o - | tar -xzO index.json | jq .connections",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			if file == "" {
				file = "airlock-audit-" + args[0] + ".tar.gz"
			}
			src := clientSource{c}
			if file == "-" {
				_, err := audit.Write(ctx, src, args[0], os.Stdout)
				return err
			}
			var ix *audit.Index
			if err := atomicfile.WriteFrom(file, 0o644, func(w io.Writer) error {
				ix, err = audit.Write(ctx, src, args[0], w)
				return err
			}); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s: %d commands, %d turns, %d connections, %d changed files\n", file, len(ix.Commands), len(ix.Turns),
				len(ix.Connections), len(ix.Patch.Files))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "output", "o", "", "the bundle's file (- for stdout; default airlock-audit-ID.tar.gz)")
	return cmd
}

// clientSource is the API client as the bundle's Source: the engine's
// names for the two calls the client names otherwise.
type clientSource struct{ *client.Client }

func (s clientSource) Get(ctx context.Context, id string) (api.Session, error) {
	return s.Session(ctx, id)
}

func (s clientSource) EgressLog(ctx context.Context, id string, blockedOnly bool, limit int) ([]api.EgressEntry, error) {
	return s.NetLog(ctx, id, blockedOnly, limit)
}
