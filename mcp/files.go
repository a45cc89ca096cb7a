package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The file tools run small commands in the session (head, tee, mkdir, ls:
// in busybox and in Debian alike) with the path as one argument, never
// through a shell. Paths are confined to /workspace by name; what a name
// reaches inside the container (a symlink the agent made) is the
// container's own, which run_command can read anyway.
const workspace = "/workspace"

// Bounds of what the file tools carry in one call.
const (
	maxRead    = 1 << 20
	maxWrite   = 8 << 20
	maxEntries = 5000
)

// workspacePath turns a path the model gave (relative to /workspace, or
// absolute below it) into a clean absolute path below /workspace.
func workspacePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errdefs.Invalidf("the path %s holds a NUL byte", names.Quote(p))
	}
	if p == "" {
		return workspace, nil
	}
	abs := path.Clean(p)
	if !path.IsAbs(p) {
		abs = path.Join(workspace, p)
	}
	if abs != workspace && !strings.HasPrefix(abs, workspace+"/") {
		return "", errdefs.Invalidf("%s is outside the session's workspace: give a path relative to /workspace (or below it)", names.Quote(p))
	}
	return abs, nil
}

// projectPath is p relative to the workspace, as the diff names it.
func projectPath(p string) (string, error) {
	abs, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	if abs == workspace {
		return "", errdefs.Invalidf("%s names the whole workspace: leave paths out to mean everything", names.Quote(p))
	}
	return strings.TrimPrefix(abs, workspace+"/"), nil
}

type pathInput struct {
	Path string `json:"path" jsonschema:"the file, relative to /workspace (or absolute below it)"`
}

type writeInput struct {
	Path    string `json:"path" jsonschema:"the file, relative to /workspace (or absolute below it); missing directories are made"`
	Content string `json:"content" jsonschema:"the file's whole new content (text)"`
	Append  bool   `json:"append,omitempty" jsonschema:"add to the end of the file instead of replacing it"`
}

type listInput struct {
	Path string `json:"path,omitempty" jsonschema:"the directory, relative to /workspace (default: /workspace itself)"`
}

// FileContent is a file read from the session.
type FileContent struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"` // the file is longer than what Content holds
}

// Written says what write_file did.
type Written struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// Listing is a directory's entries; directories end with "/".
type Listing struct {
	Path      string   `json:"path"`
	Entries   []string `json:"entries"`
	Truncated bool     `json:"truncated,omitempty"`
}

func (s *server) addFileTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "read_file",
		Description: "Read a text file in the session (up to 1 MiB)."}, s.readFile)
	sdk.AddTool(srv, &sdk.Tool{Name: "write_file",
		Description: "Write a text file in the session (up to 8 MiB), making missing directories. The project is untouched: the change is in the session's diff for the human to review."},
		s.writeFile)
	sdk.AddTool(srv, &sdk.Tool{Name: "list_files",
		Description: "List a directory in the session, directories marked with a trailing /."}, s.listFiles)
}

// run runs argv in the session with stdin, returning its output; a command
// that fails is an error saying what could not be done (what), what the
// command said, and what to do (next).
func run(ctx context.Context, eng Engine, id, what, next string, argv []string, stdin []byte, stdout *bytes.Buffer, limit int) error {
	var stderr bytes.Buffer
	sio := client.ExecIO{Stdout: &capped{buf: stdout, limit: limit}, Stderr: &capped{buf: &stderr, limit: 4 << 10}}
	req := api.ExecRequest{Argv: argv}
	if stdin != nil {
		req.Stdin, sio.Stdin = true, bytes.NewReader(stdin)
	}
	code, err := eng.Exec(ctx, id, req, sio, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = fmt.Sprintf("%s exited %d", argv[0], code)
		}
		return errdefs.Invalidf("cannot %s in session %s: %s; %s", what, id, msg, next)
	}
	return nil
}

// capped keeps the first limit bytes written to it. Past them it says
// errFull (an exec's output is drained regardless; a patch stops).
type capped struct {
	buf interface {
		io.Writer
		Len() int
	}
	limit int
	full  bool
}

var errFull = errors.New("output limit reached")

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.full = true
	return len(p), errFull
}

func (s *server) readFile(ctx context.Context, _ *sdk.CallToolRequest, in pathInput) (*sdk.CallToolResult, FileContent, error) {
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, FileContent{}, err
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, FileContent{}, err
	}
	var out bytes.Buffer
	if err := run(ctx, eng, id, "read "+p, "list_files shows what is there", []string{"head", "-c", "1048577", "--", p}, nil, &out, maxRead+1); err != nil {
		return nil, FileContent{}, err
	}
	res := FileContent{Path: p}
	data := out.Bytes()
	if len(data) > maxRead {
		data, res.Truncated = data[:maxRead], true
	}
	if !utf8.Valid(data) && !(res.Truncated && utf8.Valid(trimPartialRune(data))) {
		return nil, FileContent{}, errdefs.Invalidf("%s is not a text file: look at it with run_command (e.g. [\"od\", \"-c\", %q])", names.Quote(p), p)
	}
	res.Content = string(data)
	if res.Truncated {
		return text("%s (the first %d bytes; the file is longer: run_command can read the rest)\n%s", p, maxRead, res.Content), res, nil
	}
	return text("%s", res.Content), res, nil
}

// trimPartialRune drops a rune cut at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			return b[:len(b)-i]
		}
	}
	return b
}

func (s *server) writeFile(ctx context.Context, _ *sdk.CallToolRequest, in writeInput) (*sdk.CallToolResult, Written, error) {
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, Written{}, err
	}
	if p == workspace {
		return nil, Written{}, errdefs.Invalidf("give the path of a file to write, relative to /workspace")
	}
	if len(in.Content) > maxWrite {
		return nil, Written{}, errdefs.Invalidf("%d bytes is more than write_file takes (%d): write the file in parts with append", len(in.Content), maxWrite)
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, Written{}, err
	}
	if dir := path.Dir(p); dir != workspace {
		if err := run(ctx, eng, id, "make "+dir, "list_files shows what is in the way", []string{"mkdir", "-p", "--", dir}, nil, &bytes.Buffer{}, 0); err != nil {
			return nil, Written{}, err
		}
	}
	argv := []string{"tee", "--", p}
	if in.Append {
		argv = []string{"tee", "-a", "--", p}
	}
	if err := run(ctx, eng, id, "write "+p, "list_files shows what is there", argv, []byte(in.Content), &bytes.Buffer{}, 0); err != nil {
		return nil, Written{}, err
	}
	out := Written{Path: p, Bytes: len(in.Content)}
	return text("wrote %d bytes to %s in session %s", out.Bytes, p, id), out, nil
}

func (s *server) listFiles(ctx context.Context, _ *sdk.CallToolRequest, in listInput) (*sdk.CallToolResult, Listing, error) {
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, Listing{}, err
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, Listing{}, err
	}
	var out bytes.Buffer
	if err := run(ctx, eng, id, "list "+p, "list its parent directory to see what is there", []string{"ls", "-1Ap", "--", p}, nil, &out, 1<<20); err != nil {
		return nil, Listing{}, err
	}
	res := Listing{Path: p, Entries: []string{}}
	for _, l := range strings.Split(out.String(), "\n") {
		if l == "" {
			continue
		}
		if len(res.Entries) == maxEntries {
			res.Truncated = true
			break
		}
		res.Entries = append(res.Entries, l)
	}
	more := ""
	if res.Truncated {
		more = "\n(more entries left out: list a subdirectory, or run_command with find)"
	}
	return text("%s:\n%s%s", p, strings.Join(res.Entries, "\n"), more), res, nil
}
