package app

import (
	"context"

	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// pickFolder is the one seam to the Wails runtime's dialogs.
func pickFolder(ctx context.Context, title string) (string, error) {
	return runtime.OpenDirectoryDialog(ctx, runtime.OpenDialogOptions{Title: title})
}
