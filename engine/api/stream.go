package api

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Frame types of an exec stream. After the HTTP upgrade both sides write
// frames: a one-byte type, a four-byte big-endian length, the payload.
const (
	FrameStdin   byte = 0 // client: bytes for the command's stdin
	FrameStdout  byte = 1 // engine: command output (all output with a TTY)
	FrameStderr  byte = 2 // engine: command error output
	FrameExit    byte = 3 // engine: ExecExit; the last frame
	FrameError   byte = 4 // engine: Error; the last frame
	FrameStarted byte = 5 // engine: ExecStarted; the first frame
	FrameResize  byte = 6 // client: Resize of the TTY
	FrameEOF     byte = 7 // client: stdin is closed
	FrameSignal  byte = 8 // client: Signal to deliver to the command
	FrameSession byte = 9 // engine: Session made by a run; before FrameStarted
)

// MaxFrame bounds a frame's payload.
const MaxFrame = 1 << 20

// UpgradeProtocol is the Upgrade header value of exec streams.
const UpgradeProtocol = "airlock-stream"

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if len(payload) == 0 {
		_, err := w.Write(hdr[:])
		return err
	}
	_, err := w.Write(append(hdr[:], payload...))
	return err
}

// WriteJSONFrame writes v as a frame's JSON payload.
func WriteJSONFrame(w io.Writer, typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, typ, b)
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds the %d limit", n, MaxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}

// FrameWriter is an io.Writer that wraps each write in a frame of one type.
type FrameWriter struct {
	W    io.Writer
	Type byte
}

func (f FrameWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += MaxFrame {
		end := min(off+MaxFrame, len(p))
		if err := WriteFrame(f.W, f.Type, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}
