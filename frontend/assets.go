// Package frontend holds the user interface (React, TypeScript, built by
// Vite into dist/), embedded for the desktop app and for the browser UI
// the engine serves (`airlock ui`). `make build` builds dist/ first; a
// binary built without it serves a page that says so.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built interface and whether it was built into this binary.
func Dist() (fs.FS, bool) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, false
	}
	_, err = fs.Stat(sub, "index.html")
	return sub, err == nil
}
