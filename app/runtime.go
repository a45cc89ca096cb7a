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

// wailsNotifier shows desktop notifications with the app's own
// notification API.
type wailsNotifier struct{ ctx context.Context }

func (w wailsNotifier) notify(title, body string) {
	runtime.SendNotification(w.ctx, runtime.NotificationOptions{ID: title + body, Title: title, Body: body})
}

// newNotifier starts the notification service; nil when the desktop has
// none.
func newNotifier(ctx context.Context) notifier {
	if !runtime.IsNotificationAvailable(ctx) || runtime.InitializeNotifications(ctx) != nil {
		return nil
	}
	if ok, err := runtime.RequestNotificationAuthorization(ctx); err != nil || !ok {
		return nil
	}
	return wailsNotifier{ctx}
}
