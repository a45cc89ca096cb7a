//go:build desktop || dev || bindings

// The Airlock desktop app (Wails). Build it with `wails build` (wails.json)
// or `make desktop` (the same: `go build -tags desktop,production .`);
// `wails dev` runs it with the tag dev against Vite's dev server, and
// Wails's binding generator with the tag bindings. It is a
// client of the engine daemon, like the CLI, and shows the same interface
// the engine serves to browsers (frontend/).
package main

import (
	_ "embed"
	"log"
	"os"
	"testing/fstest"

	"github.com/airlock/airlock/app"
	"github.com/airlock/airlock/frontend"
	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
)

//go:embed build/appicon.png
var icon []byte

const notBuilt = `<!doctype html><title>Airlock</title><body style="font-family:sans-serif;padding:2em">
<h2>This build has no interface</h2><p>The frontend was not built into this binary: run <code>make desktop</code> (it runs npm in frontend/ first).</p>`

func main() {
	socket := os.Getenv("AIRLOCK_ENGINE")
	if socket == "" {
		socket = "/run/airlock/airlock.sock"
	}
	assets, built := frontend.Dist()
	if !built {
		assets = fstest.MapFS{"index.html": {Data: []byte(notBuilt)}}
	}
	a := app.New(socket)
	err := wails.Run(&options.App{
		Title:       "Airlock",
		Width:       1280,
		Height:      820,
		MinWidth:    900,
		MinHeight:   560,
		AssetServer: &assetserver.Options{Assets: assets},
		OnStartup:   a.Startup,
		OnShutdown:  a.Shutdown,
		Bind:        []any{a},
		Linux:       &linux.Options{ProgramName: "airlock-desktop", Icon: icon, WebviewGpuPolicy: linux.WebviewGpuPolicyOnDemand},
	})
	if err != nil {
		log.Fatal(err)
	}
}
