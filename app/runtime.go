package app

import (
	"context"

	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// pickFolder is the one seam to the Wails runtime's dialogs.
func pickFolder(ctx context.Context, title string) (string, error) {
	return runtime.OpenDirectoryDialog(ctx, runtime.OpenDialogOptions{Title: title})
}

// wailsEvents sends events to the window.
type wailsEvents struct{ ctx context.Context }

func (w wailsEvents) emit(name string, data ...any) { runtime.EventsEmit(w.ctx, name, data...) }
