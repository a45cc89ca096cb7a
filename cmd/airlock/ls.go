package main

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func lsCmd(g *globals) *cobra.Command {
	var quiet bool
	var out *output
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			list, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			if quiet && !out.custom() {
				for _, s := range list {
					fmt.Println(s.ID)
				}
				return nil
			}
			return printList(out, os.Stdout, list, func() error {
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tPROJECT\tIMAGE\tSTATE\tCREATED\tCHANGES")
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
				return tw.Flush()
			})
		},
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
