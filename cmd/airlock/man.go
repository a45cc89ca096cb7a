package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCmd writes a man page per command into a directory (section 1),
// generated from the commands themselves; `make install` installs them.
// It is hidden: it is for packaging, not for users.
func manCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Title: "AIRLOCK", Section: "1", Source: "Airlock " + version, Manual: "Airlock Manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("write the man pages: %w", err)
			}
			return nil
		},
	}
}
