package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

func lsCmd(g *globals) *cobra.Command {
	var quiet bool
	var out *output
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sessions",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, _ []string) ([]api.Session, error) {
			return c.Sessions(ctx)
		}, func(list []api.Session) error {
			if quiet {
				for _, s := range list {
					fmt.Println(s.ID)
				}
				return nil
			}
			return table("ID\tPROJECT\tIMAGE\tSTATE\tCREATED\tCHANGES", func(tw io.Writer) {
				for _, s := range list {
					changes := strconv.Itoa(s.Changed)
					if s.Changed < 0 {
						changes = "-"
					}
					if s.Workspace != nil && s.Workspace.Full {
						changes += " (workspace full)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Project, s.Image, stateText(s), ago(s.Created), changes)
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the sessions")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only session ids")
	return cmd
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
