package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func rmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID [ID...]",
		Short: "End sessions: remove the container, unmount the workspace, drop unaccepted changes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			var last error
			for _, id := range args {
				if err := c.Remove(ctx, id); err != nil {
					fmt.Fprintln(os.Stderr, "airlock:", err)
					last = err
					continue
				}
				fmt.Println("removed", id)
			}
			return last
		},
	}
}
