package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/airlock/airlock/engine/api"
	"github.com/spf13/cobra"
)

func acceptCmd(g *globals) *cobra.Command {
	return outcomeCmd(g, "accept", "Write a session's changes (all, or those at PATHs) into the project",
		"accepted", func(ctx context.Context, c clientAPI, id string, paths []string) (api.Outcomes, error) {
			return c.Accept(ctx, id, paths)
		})
}

func discardCmd(g *globals) *cobra.Command {
	return outcomeCmd(g, "discard", "Drop a session's changes (all, or those at PATHs); the project is not touched",
		"discarded", func(ctx context.Context, c clientAPI, id string, paths []string) (api.Outcomes, error) {
			return c.Discard(ctx, id, paths)
		})
}

type clientAPI interface {
	Accept(ctx context.Context, id string, paths []string) (api.Outcomes, error)
	Discard(ctx context.Context, id string, paths []string) (api.Outcomes, error)
}

func outcomeCmd(g *globals, verb, short, done string, do func(context.Context, clientAPI, string, []string) (api.Outcomes, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " ID [PATH...]",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			res, err := do(ctx, c, args[0], args[1:])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(res)
			}
			failed := 0
			for _, o := range res.Outcomes {
				if o.Applied {
					if !asJSON {
						fmt.Printf("%s %-8s %s\n", done, o.Kind, o.Path)
					}
					continue
				}
				failed++
				fmt.Fprintf(os.Stderr, "airlock: not %s: %s: %s\n", done, o.Path, o.Error)
			}
			if len(res.Outcomes) == 0 && !asJSON {
				fmt.Fprintf(os.Stderr, "nothing to %s: the session has no changes\n", verb)
			}
			if failed > 0 {
				fmt.Fprintf(os.Stderr, "airlock: %d of %d change(s) not %s; they stay in the session\n", failed, len(res.Outcomes), done)
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the per-path outcomes as JSON")
	return cmd
}
