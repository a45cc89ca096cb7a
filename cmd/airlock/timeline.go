package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

func turnsCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "turns ID",
		Short: "A session's timeline: a checkpoint after every turn and command that changed its workspace",
		Long: `List a session's checkpoints, oldest first: one at the end of every agent
turn, of every command that changed the workspace, periodically while it
changes (every 60 s by default), and of every undo. Each says what changed
since the checkpoint before its turn or command (files, +/- lines) and,
where recorded, the CPU, tokens and cost of its turn.

airlock diff ID --turn N shows a turn's changes, airlock undo puts the
workspace back to a checkpoint, airlock fork ID --turn N starts new
sessions from one.`,
		Args: cobra.ExactArgs(1),
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, args []string) ([]api.Checkpoint, error) {
			return c.Checkpoints(ctx, args[0])
		}, func(list []api.Checkpoint) error {
			if len(list) == 0 {
				fmt.Fprintln(os.Stderr, "no checkpoints yet: one is made at the end of each agent turn and of each command that changes the workspace")
				return nil
			}
			return table("CHECKPOINT\tWHAT\tTIME\tFILES\t+/-\tCPU\tTOKENS\tCOST", func(tw io.Writer) {
				for _, cp := range list {
					tokens, cost := "-", "-"
					if cp.Usage != nil {
						tokens = strconv.FormatInt(cp.Usage.InputTokens+cp.Usage.OutputTokens, 10)
						if cp.Usage.CostUSD > 0 {
							cost = fmt.Sprintf("$%.4f", cp.Usage.CostUSD)
						}
					}
					cpu := "-"
					if cp.CPUSeconds > 0 {
						cpu = fmt.Sprintf("%.1fs", cp.CPUSeconds)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t+%d -%d\t%s\t%s\t%s\n", cp.ID, checkpointWhat(cp), cp.Time.Local().Format("2006-01-02 15:04:05"),
						cp.Files, cp.Added, cp.Removed, cpu, tokens, cost)
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the checkpoints")
	return cmd
}

// checkpointWhat names what a checkpoint ended.
func checkpointWhat(cp api.Checkpoint) string {
	switch {
	case cp.Kind == api.CheckpointTurn:
		return fmt.Sprintf("turn %d", cp.Turn)
	case cp.Kind == api.CheckpointCommand && cp.Command > 0:
		return fmt.Sprintf("command %d", cp.Command)
	case cp.Kind == api.CheckpointUndo:
		return fmt.Sprintf("undo to %d", cp.UndoTo)
	}
	return cp.Kind
}

func undoCmd(g *globals) *cobra.Command {
	var req api.UndoRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "undo ID",
		Short: "Put a session's workspace back to before its last turn (or to a turn or checkpoint)",
		Long: `Put the session's workspace back to a checkpoint while the session keeps
running: by default to before its last agent turn; --to N to the state
after turn N; --checkpoint C to any checkpoint (airlock turns lists them).

The session's running processes (commands, the agent) are stopped first:
the workspace must not change while it is put back. The workspace as it was
is checkpointed first and the undo is a checkpoint too, so an undo can be
undone (airlock undo ID --checkpoint BEFORE, as printed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			out, err := c.Undo(ctx, args[0], req)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(os.Stdout, out, true)
			}
			if out.Stopped > 0 {
				fmt.Fprintf(os.Stderr, "airlock: stopped %d process(es) running in the session first\n", out.Stopped)
			}
			if out.Layers {
				fmt.Fprintln(os.Stderr, "airlock: the container layer and home went back too: the session's container was made again (processes running in it were stopped)")
			}
			fmt.Printf("workspace put back to checkpoint %d (%s): %d path(s) changed; this undo is checkpoint %d, the workspace before it checkpoint %d (airlock undo %s --checkpoint %d puts that back)\n",
				out.To.ID, checkpointWhat(out.To), out.Files, out.Checkpoint.ID, out.Before, args[0], out.Before)
			return nil
		},
	}
	cmd.Flags().IntVar(&req.Turn, "to", 0, "the turn to go back to (the state after it)")
	cmd.Flags().Int64Var(&req.Checkpoint, "checkpoint", 0, "the checkpoint to go back to")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what the undo did as JSON")
	cmd.MarkFlagsMutuallyExclusive("to", "checkpoint")
	return cmd
}
