//go:build desktop

// The Airlock desktop app (Wails). Build it with
// `go build -tags desktop,production .` (or `make desktop`). It is a
// client of the engine daemon, like the CLI.
package main

import (
	"embed"
	"log"
	"os"

	"github.com/airlock/airlock/app"
	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
)

//go:embed all:frontend/dist
var assets embed.FS

func main() {
	socket := os.Getenv("AIRLOCK_ENGINE")
	if socket == "" {
		socket = "/run/airlock/airlock.sock"
	}
	a := app.New(socket)
	err := wails.Run(&options.App{
		Title:       "Airlock",
		Width:       1200,
		Height:      800,
		AssetServer: &assetserver.Options{Assets: assets},
		OnStartup:   a.Startup,
		Bind:        []any{a},
	})
	if err != nil {
		log.Fatal(err)
	}
}
