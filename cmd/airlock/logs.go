package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func logsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show what ran in a session, with exit codes and output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			cmds, err := c.Commands(ctx, args[0], true)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(cmds)
			}
			// Pauses and resumes go between the commands, by time.
			life, _ := c.Lifecycle(ctx, args[0])
			showLife := func(before time.Time) {
				for len(life) > 0 && (before.IsZero() || life[0].Time.Before(before)) {
					fmt.Printf("-- %s %s (%s)\n", life[0].Time.Format("2006-01-02 15:04:05"), life[0].Kind, life[0].Reason)
					life = life[1:]
				}
			}
			for _, x := range cmds {
				showLife(x.Started)
				status := x.State
				if x.ExitCode != nil {
					status = fmt.Sprintf("exit %d", *x.ExitCode)
				}
				took := ""
				if x.Ended != nil {
					took = ", " + x.Ended.Sub(x.Started).Round(1e6).String()
				}
				if x.CPUSeconds > 0 {
					took += fmt.Sprintf(", cpu %.2fs", x.CPUSeconds)
				}
				fmt.Printf("#%d %s $ %s  (%s%s)\n", x.ID, x.Started.Format("2006-01-02 15:04:05"), shellQuote(x.Argv), status, took)
				if x.Output != "" {
					fmt.Print(x.Output)
					if !strings.HasSuffix(x.Output, "\n") {
						fmt.Println()
					}
				}
			}
			showLife(time.Time{})
			if len(cmds) == 0 {
				fmt.Fprintln(os.Stderr, "nothing has run in this session yet")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func shellQuote(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}!#~") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}
