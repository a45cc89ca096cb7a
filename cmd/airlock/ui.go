package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
)

func uiCmd(g *globals) *cobra.Command {
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the user interface in a browser (served by the engine on localhost, behind a token)",
		Long: `Open the user interface in a browser: the engine serves it on a
loopback address with a token in the link (the page keeps it in a
cookie). The same interface is the desktop app's. The address stays valid
until the engine stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			u, err := c.StartUI(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Println(u)
			if noOpen || (os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "") {
				fmt.Fprintln(os.Stderr, "airlock: open that address in a browser on this machine")
				return nil
			}
			if p, err := exec.LookPath("xdg-open"); err == nil {
				if err := exec.Command(p, u).Start(); err == nil {
					return nil
				}
			}
			fmt.Fprintln(os.Stderr, "airlock: no browser could be started: open that address yourself")
			return nil
		},
	}
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "print the address only")
	return cmd
}
