// Package app is the desktop app's bridge to the engine: the methods the
// Wails frontend calls, each a thin call through the engine's API client.
// It is the only package besides the root main.go that imports Wails, and
// all Wails runtime calls go through runtime.go.
package app

import (
	"context"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
)

// App is bound to the frontend.
type App struct {
	ctx    context.Context
	client *client.Client
}

// New returns an app that talks to the engine on socket.
func New(socket string) *App {
	return &App{client: client.New(socket)}
}

// Startup is called by Wails when the window is ready.
func (a *App) Startup(ctx context.Context) { a.ctx = ctx }

// Sessions lists the engine's sessions.
func (a *App) Sessions() ([]api.Session, error) { return a.client.Sessions(a.ctx) }

// Diff returns a session's changes with hunks.
func (a *App) Diff(id string) (api.Diff, error) { return a.client.Diff(a.ctx, id, nil) }

// Accept writes the session's changes at paths (all when none) into the
// project.
func (a *App) Accept(id string, paths []string) (api.Outcomes, error) {
	return a.client.Accept(a.ctx, id, api.Selection{Paths: paths})
}

// Discard drops the session's changes at paths (all when none).
func (a *App) Discard(id string, paths []string) (api.Outcomes, error) {
	return a.client.Discard(a.ctx, id, api.Selection{Paths: paths})
}

// PickProject opens the native folder dialog.
func (a *App) PickProject() (string, error) { return pickFolder(a.ctx, "Choose a project") }
