package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/airlock/airlock/mcp"
	"github.com/spf13/cobra"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func mcpCmd(g *globals) *cobra.Command {
	f := &createFlags{}
	var session string
	var allowAccept, debug bool
	cmd := &cobra.Command{
		Use:   "mcp [--project DIR | --session ID]",
		Short: "Serve MCP on standard input and output, so an agent client works inside an Airlock session",
		Long: "A Model Context Protocol server (stdio) for agent clients (Claude Code, Codex, Cursor, Claude Desktop):\n" +
			"its tools run commands, read, write and list files, show the diff and take snapshots in an Airlock session\n" +
			"over the project, made on first use (or with create_session), or the one --session names.\n" +
			"The project is untouched: review with `airlock diff ID` and accept with `airlock accept ID`.\n" +
			"With --allow-accept the client may accept too; what the project's policy holds or a scanner flags stays in the session.",
		Example: "  claude mcp add airlock -- airlock mcp --project .\n" +
			"  airlock mcp --project ~/src/app --image airlock/agents --net deny-all\n" +
			"  airlock mcp --session 3f2a",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			if session != "" && !cmd.Flags().Changed("project") {
				req.Project = "" // the session's own
			}
			var log *slog.Logger
			if debug {
				log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "mcp")
			}
			connect := func(ctx context.Context) (mcp.Engine, error) {
				c, err := g.connect(ctx)
				if err != nil {
					return nil, err
				}
				return c, nil
			}
			srv := mcp.New(connect, mcp.Options{Create: req, Session: session, AllowAccept: allowAccept, Version: version, Logger: log})
			return srv.Run(cmd.Context(), &sdk.StdioTransport{})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&session, "session", "", "work in this existing session instead of making one")
	cmd.Flags().BoolVar(&allowAccept, "allow-accept", false, "offer the accept tool (the project's policy and scanners still hold back what they hold)")
	cmd.Flags().BoolVar(&debug, "debug", false, "log the protocol on standard error")
	return cmd
}
