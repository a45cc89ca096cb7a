package main_test

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// xvfb starts a virtual X display and returns its name.
func xvfb(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("Xvfb")
	if err != nil {
		if os.Getenv("AIRLOCK_REQUIRE_INTEGRATION") != "" {
			t.Fatal("no Xvfb: install it (`scripts/setup.sh desktop` does)")
		}
		t.Skip("no Xvfb")
	}
	for n := 90; n < 120; n++ {
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", n)); err == nil {
			continue
		}
		cmd := exec.Command(bin, fmt.Sprintf(":%d", n), "-screen", "0", "1400x900x24", "-nolisten", "tcp")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for i := 0; i < 50; i++ {
			if _, err := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", n)); err == nil {
				return fmt.Sprintf(":%d", n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("Xvfb :%d did not start", n)
	}
	t.Fatal("no free X display number")
	return ""
}

// grab takes a screenshot of the whole display.
func grab(display string) (*image.RGBA, error) {
	xgb.Logger = log.New(io.Discard, "", 0)
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := xproto.Setup(c).DefaultScreen(c)
	w, h := s.WidthInPixels, s.HeightInPixels
	r, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(s.Root), 0, 0, w, h, 0xffffffff).Reply()
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rect(0, 0, int(w), int(h)))
	for i := 0; i < int(w)*int(h) && i*4+3 < len(r.Data); i++ {
		img.Pix[i*4], img.Pix[i*4+1], img.Pix[i*4+2], img.Pix[i*4+3] = r.Data[i*4+2], r.Data[i*4+1], r.Data[i*4], 255
	}
	return img, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDesktopSmoke starts the real desktop app (Wails, WebKitGTK) under
// Xvfb against a real engine: the window's interface lists the sessions
// through the app's bindings, and a screenshot shows it.
func TestDesktopSmoke(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	c.ok("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo desktop > desktop.txt")
	display := xvfb(t)

	bin := filepath.Join(t.TempDir(), "airlock-desktop")
	build := exec.Command("go", "build", "-tags", "desktop,production", "-o", bin, ".")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the desktop app: %v\n%s", err, out)
	}
	app := exec.Command(bin)
	app.Env = append(os.Environ(), "DISPLAY="+display, "AIRLOCK_ENGINE="+c.socket, "AIRLOCK_APP_DEBUG=1", "WEBKIT_DISABLE_COMPOSITING_MODE=1")
	var logs lockedBuffer
	app.Stdout, app.Stderr = &logs, &logs
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Process.Kill(); app.Wait() })

	// The window follows the engine's events: the list comes as the
	// stream's first line (or, while the stream is down, from a read).
	listed := regexp.MustCompile(`app: GET /sessions: <nil>|app: GET /events: <nil> \(stream (\S+)\)`)
	got := func() bool {
		m := listed.FindStringSubmatch(logs.String())
		return m != nil && (m[1] == "" || strings.Contains(logs.String(), "app: stream "+m[1]+": its first line"))
	}
	deadline := time.Now().Add(60 * time.Second)
	for !got() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if !got() {
		t.Fatalf("the window never listed the sessions through the app:\n%s", logs.String())
	}
	time.Sleep(1500 * time.Millisecond) // the list painted
	img, err := grab(display)
	if err != nil {
		t.Fatal(err)
	}
	// The interface, not a blank or an error page: many colours, and the
	// accent of its buttons.
	colours := map[[3]uint8]bool{}
	accent := 0
	for i := 0; i+3 < len(img.Pix); i += 4 {
		r, g, b := img.Pix[i], img.Pix[i+1], img.Pix[i+2]
		colours[[3]uint8{r, g, b}] = true
		if r < 40 && g > 80 && g < 130 && b > 190 { // #0969da and its antialiasing
			accent++
		}
	}
	if len(colours) < 50 || accent < 500 {
		t.Errorf("the screenshot does not look like the interface: %d colours, %d accent pixels", len(colours), accent)
	}
	dir := os.Getenv("AIRLOCK_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	f, err := os.Create(filepath.Join(dir, "desktop.png"))
	if err != nil {
		t.Fatal(err)
	}
	png.Encode(f, img)
	f.Close()
	t.Logf("screenshot: %s", f.Name())
}
