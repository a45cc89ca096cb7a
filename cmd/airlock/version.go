package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

// versions is what `airlock version` reports. Engine is nil when no
// engine answers; EngineError then says why.
type versions struct {
	Client      clientVersion    `json:"client"`
	Engine      *api.VersionInfo `json:"engine"`
	EngineError string           `json:"engine_error,omitempty"`
}

type clientVersion struct {
	Version string `json:"version"`
	API     string `json:"api"`
	Level   int    `json:"level"`
	Go      string `json:"go"`
	OS      string `json:"os"`
}

// versionCmd prints the client's version and the engine's. Like `docker
// version`, it prints the client's part and exits non-zero (the
// unavailable code, 69) when no engine answers; it never starts one.
func versionCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the client's and the engine's versions and API levels",
		Long: "Show the versions and API levels of this client and of the engine it talks to.\n" +
			"When no engine answers, the client's part is printed and the exit status is 69;\n" +
			"version never starts an engine.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versions{Client: clientVersion{Version: version, API: api.Version, Level: api.Level, Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			info, err := client.New(g.engine).Ping(ctx)
			cancel()
			if err == nil {
				v.Engine = &info
			} else {
				v.EngineError = err.Error()
			}
			if perr := printOne(out, os.Stdout, v, func() error { printVersions(v); return nil }); perr != nil {
				return perr
			}
			return err
		},
	}
	out = addOutputFlags(cmd, "the versions")
	return cmd
}

func printVersions(v versions) {
	fmt.Printf("Client:\n Version:  %s\n API:      %s (level %d)\n Go:       %s\n OS/Arch:  %s\n", v.Client.Version, v.Client.API, v.Client.Level, v.Client.Go, v.Client.OS)
	e := v.Engine
	if e == nil {
		return
	}
	fmt.Printf("\nEngine:\n Version:  %s\n API:      %s (level %d)\n PID:      %d\n", e.Engine, e.API, e.Level, e.PID)
	if e.DockerVersion != "" {
		fmt.Printf(" Docker:   %s (API %s)\n", e.DockerVersion, e.DockerAPI)
	}
	if e.Level < v.Client.Level {
		fmt.Printf("\nThe engine's API level is below this client's: restart the engine with this version of airlock for everything this client offers.\n")
	}
}
