package fastexec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Where the init and its socket are inside a session's container.
const (
	InitPath   = "/.airlock/init"
	SocketDir  = "/.airlock/run"
	SocketName = "exec.sock"
)

// Request is a command for the init to run. Its standard streams travel
// beside it as descriptors.
type Request struct {
	Argv []string `json:"argv"`
	// Env is added to the container's environment, replacing variables
	// of the same name (as `docker exec --env` does).
	Env []string `json:"env,omitempty"`
	// Dir is the working directory, inside the container.
	Dir string `json:"dir"`
}

// Exit is how a command ended.
type Exit struct {
	// Code is the exit status, or 128+Signal when a signal ended it, as
	// Docker reports an exec's.
	Code int `json:"code"`
	// Signal is the signal that ended it, 0 if it exited.
	Signal int `json:"signal,omitempty"`
}

// signalMsg asks the init to deliver a signal to the command.
type signalMsg struct {
	Signal int `json:"signal"`
}

// A frame is a 4-byte big-endian length, a kind byte and a JSON body of
// that length.
const (
	kindRequest byte = 'R' // caller -> init, with the three descriptors
	kindSignal  byte = 'S' // caller -> init
	kindExit    byte = 'X' // init -> caller, the last frame
)

// Frame bounds: a request holds argv and environment (the kernel's own
// limit for both is a few MiB); what the caller reads from the session is
// small, and bounded tighter since the session may forge it.
const (
	maxRequest = 4 << 20
	maxReply   = 4 << 10
	headerLen  = 5
)

// ErrFrame is a frame that breaks the protocol.
var ErrFrame = errors.New("fastexec: malformed frame")

func encodeFrame(kind byte, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(body) > maxRequest {
		return nil, fmt.Errorf("fastexec: request of %d bytes is over the %d byte limit: pass less environment or shorter arguments", len(body), maxRequest)
	}
	b := make([]byte, headerLen, headerLen+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	b[4] = kind
	return append(b, body...), nil
}

// readFrame reads one frame of at most max bytes of body.
func readFrame(r io.Reader, max int) (byte, []byte, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if n > uint32(max) {
		return 0, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrFrame, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[4], body, nil
}

func decodeBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrFrame, err)
	}
	return nil
}
