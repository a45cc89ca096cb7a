package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	"github.com/spf13/cobra"
)

func portCmd(g *globals) *cobra.Command {
	var req api.PortRequest
	var out *output
	cmd := &cobra.Command{
		Use:   "port ID PORT",
		Short: "Forward a session's port to the host (a dev server's preview) and print its URL",
		Long: "Forward a session's TCP port to the host: HTTP, WebSocket (hot reload) and plain TCP pass.\n" +
			"It listens on a free port of 127.0.0.1 unless --listen says otherwise; anything not on\n" +
			"loopback needs --auth: bearer prints a token, basic a user name and password. A connection\n" +
			"wakes a paused session. The session's network policy is not changed. Forwards end with the\n" +
			"session. `airlock port ls ID` also lists the ports the session listens on that are not forwarded.",
		Example: "  airlock port 3f2a 5173\n" +
			"  airlock port 3f2a 5173 --listen 0.0.0.0:8080 --auth bearer\n" +
			"  airlock port 3f2a 5173 --listen 0.0.0.0:8080 --auth basic --user me\n" +
			"  airlock port ls 3f2a\n" +
			"  airlock port rm 3f2a 5173",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := portArg(args[1])
			if err != nil {
				return err
			}
			req.Port = port
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			p, err := c.OpenPort(ctx, args[0], req)
			if err != nil {
				return err
			}
			return printOne(out, os.Stdout, p, func() error {
				fmt.Println(p.URL)
				if p.Auth == "basic" {
					fmt.Println("user: " + p.User)
					fmt.Println("password: " + p.Token)
					fmt.Fprintln(os.Stderr, "airlock: the browser asks for the user name and password (HTTP basic auth)")
				} else if p.Token != "" {
					fmt.Println("token: " + p.Token)
					fmt.Fprintf(os.Stderr, "airlock: open %s?token=%s once in a browser (a cookie keeps it), or send `Authorization: Bearer TOKEN`\n", p.URL, p.Token)
				}
				return nil
			})
		},
	}
	out = addOutputFlags(cmd, "the forward")
	cmd.Flags().StringVar(&req.Listen, "listen", "", "host address to listen on, HOST:PORT (default: a free port of 127.0.0.1; not loopback needs --auth)")
	cmd.Flags().StringVar(&req.Auth, "auth", "", "bearer: want a token (printed) from every client, as an Authorization header or a cookie set by ?token=;\nbasic: want HTTP basic auth, --user and a password (printed)")
	cmd.Flags().StringVar(&req.User, "user", "", "the user name of --auth basic (default airlock)")
	cmd.AddCommand(portLsCmd(g), portRmCmd(g))
	return cmd
}

func portLsCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "ls ID",
		Short: "List a session's forwarded ports, and the ports it listens on that are not forwarded",
		Long: "List a session's forwarded ports. The table also lists the TCP ports the session listens on\n" +
			"that are not forwarded (URL \"not forwarded\"; `airlock port ID PORT` forwards one); --json\n" +
			"and --format print the forwards only.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			list, err := c.Ports(ctx, args[0])
			if err != nil {
				return err
			}
			return printList(out, os.Stdout, list, func() error {
				listening, err := c.ListeningPorts(ctx, args[0])
				if err != nil && !errdefs.IsConflict(err) { // a stopped session listens on nothing
					fmt.Fprintf(os.Stderr, "airlock: the ports session %s listens on were not read: %v\n", args[0], err)
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PORT\tURL\tAUTH\tTOKEN")
				for _, p := range list {
					token := p.Token
					if p.User != "" {
						token = p.User + ":" + p.Token
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Port, p.URL, orDash(p.Auth), orDash(token))
				}
				for _, l := range listening {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", l.Port, "not forwarded (listening on "+strings.Join(l.Addresses, ", ")+")", "-", "-")
				}
				return tw.Flush()
			})
		},
	}
	out = addOutputFlags(cmd, "the forwards")
	return cmd
}

func portRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID PORT",
		Short: "End the forward of a session's port (its listener and connections)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := portArg(args[1])
			if err != nil {
				return err
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			return c.ClosePort(cmd.Context(), args[0], port)
		},
	}
}

// publishPorts forwards ports of a session just made (run --publish) and
// says where; a port that cannot be forwarded is said and skipped, the
// run goes on.
func publishPorts(ctx context.Context, c *client.Client, id string, ports []int) {
	for _, port := range ports {
		p, err := c.OpenPort(ctx, id, api.PortRequest{Port: port})
		if err != nil {
			fmt.Fprintf(os.Stderr, "airlock: port %d not forwarded: %v\n", port, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "airlock: session %s port %d: %s\n", id, port, p.URL)
	}
}

func portArg(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, usageErr("port %q: give the session's TCP port, 1-65535 (`airlock port ID PORT`, `airlock port ls ID`, `airlock port rm ID PORT`)", s)
	}
	return n, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
