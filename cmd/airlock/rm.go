package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlock/airlock/names"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func rmCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm ID [ID...]",
		Short: "End sessions: remove the container, unmount the workspace, drop unaccepted changes",
		Long: "End sessions: stop and remove the container, unmount the workspace and drop the\n" +
			"changes not accepted. On a terminal, rm asks before dropping unaccepted changes;\n" +
			"elsewhere it says what it dropped. -f removes without asking or saying.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			ask := !force && term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
			in := bufio.NewReader(os.Stdin)
			var last error
			for _, id := range args {
				dropped := 0
				if !force {
					s, err := c.Session(ctx, id)
					if err != nil {
						fmt.Fprintln(os.Stderr, "airlock:", err)
						last = err
						continue
					}
					dropped = s.Changed
					if dropped > 0 && ask && !confirm(in, os.Stderr, fmt.Sprintf("session %s has %d unaccepted change(s) to %s; remove it and drop them?", s.ID, dropped, names.Quote(s.Project))) {
						fmt.Fprintf(os.Stderr, "airlock: kept %s (see `airlock diff %s`)\n", names.Quote(s.ID), names.Quote(s.ID))
						continue
					}
				}
				if err := c.Remove(ctx, id); err != nil {
					fmt.Fprintln(os.Stderr, "airlock:", err)
					last = err
					continue
				}
				fmt.Println("removed", names.Quote(id))
				if dropped > 0 && !ask {
					fmt.Fprintf(os.Stderr, "airlock: dropped %d unaccepted change(s) of %s\n", dropped, names.Quote(id))
				}
			}
			return last
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove without asking, even with unaccepted changes")
	return cmd
}

// confirm asks a yes/no question on w and reads the answer from in; only
// "y" or "yes" is a yes.
func confirm(in *bufio.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	answer, _ := in.ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes"
}
