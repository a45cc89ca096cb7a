//go:build !desktop && !dev && !bindings

// The Airlock desktop app builds from this package with the desktop tag:
// `go build -tags desktop,production .`. Without it (as in `go vet ./...`)
// this stub builds with no GUI libraries and points to the right command.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "this is the Airlock desktop app's package: build it with `make desktop` (go build -tags desktop,production .); the CLI is ./cmd/airlock")
	os.Exit(64)
}
